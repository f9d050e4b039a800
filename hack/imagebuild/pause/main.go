// Command pause is the local world's pod sandbox ("pause") program: it holds a pod's namespaces open,
// reaps orphaned children (it is PID 1 of the pod when the pod shares its PID namespace) and exits on
// SIGINT or SIGTERM. It is what registry.k8s.io/pause does, written in Go so that the project builds
// it itself (nothing can be pulled where the local world runs).
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGCHLD)
	for s := range sigs {
		if s != syscall.SIGCHLD {
			os.Exit(0)
		}
		for {
			var ws syscall.WaitStatus
			pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
			if pid <= 0 || err != nil {
				break
			}
		}
	}
}
