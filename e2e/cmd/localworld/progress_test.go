package main

import (
	"errors"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	workspacesv1 "github.com/exalsius/exalsius-operator/common/api/workspaces/v1"
)

// TestProgressLinesKeepWholeMessages: `make run` prints the workspace's whole status message and a
// whole error, however long: the reason a newcomer needs is often past the 80th character.
func TestProgressLinesKeepWholeMessages(t *testing.T) {
	msg := "Waiting: " + strings.Repeat("the GPU gate found 0 free nvidia.com/gpu on demo-gpu after reservations, ", 3) + "the end"
	ws := &workspacesv1.WorkspaceDeployment{ObjectMeta: metav1.ObjectMeta{Name: "my-notebook"}}
	ws.Status.Phase, ws.Status.Message = workspacesv1.PhaseWaiting, msg
	part, done := workspacePart(ws)
	if !strings.HasSuffix(part, msg) || done {
		t.Errorf("the progress line cuts or changes the message (done=%t):\n%s", done, part)
	}

	ws.Status.Phase, ws.Status.Message = workspacesv1.PhaseRunning, "running"
	if part, done := workspacePart(ws); done || !strings.HasSuffix(part, "routes pending") {
		t.Errorf("a Running workspace without a served URL: %q done=%t", part, done)
	}
	ws.Status.Access = []workspacesv1.AccessStatus{{Name: "http", Ready: true}}
	if _, done := workspacePart(ws); !done {
		t.Error("a Running workspace with a served URL is not done")
	}

	long := "Get \"https://127.0.0.1:40000/apis/infra.exalsius.ai/v1/namespaces/demo/colonies/demo\": dial tcp 127.0.0.1:40000: connect: connection refused"
	if got := shortErr(errors.New(long + "\n")); got != long {
		t.Errorf("shortErr = %q, want the whole error on one line", got)
	}
}
