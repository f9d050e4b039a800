// Command kubectl-exalsius is the kubectl plugin of the exalsius-operator: installed on PATH, it runs
// as `kubectl exalsius`. It only wires the standard streams to the commands of internal/cmd.
package main

import (
	"context"
	"fmt"
	"os"

	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/exalsius/exalsius-operator/kubectl-exalsius/internal/cmd"
)

func main() {
	root := cmd.NewRoot(genericiooptions.IOStreams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr})
	if err := root.ExecuteContext(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}
