package report

import (
	"k8s.io/apimachinery/pkg/api/meta"

	workspacesv1 "github.com/exalsius/exalsius-operator/common/api/workspaces/v1"
)

// WorkspaceStatus is what `kubectl exalsius status` prints for one workspace.
type WorkspaceStatus struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// Phase is status.phase.
	Phase string `json:"phase"`
	// Ready, Reason and Message are the Ready condition's; Message falls back to status.message.
	Ready   string `json:"ready"`
	Reason  string `json:"reason,omitempty"`
	Message string `json:"message,omitempty"`
	// Cluster is the ClusterDeployment (namespace/name) named or placed on; empty while unplaced.
	Cluster string `json:"cluster,omitempty"`
	// GPUs is what the GPU gate admitted (status.admission.gpus); Requested what the workspace asks.
	GPUs      int64 `json:"gpus"`
	Requested int64 `json:"requestedGPUs"`
	// URL is the first URL of status.access; URLs are all of them.
	URL  string   `json:"url,omitempty"`
	URLs []string `json:"urls,omitempty"`
	// Queue is where the workspace waits, when it does.
	Queue *QueuePosition `json:"queue,omitempty"`
}

// Status reports ws; all are the workspaces its queue is derived from.
func Status(ws *workspacesv1.WorkspaceDeployment, all []workspacesv1.WorkspaceDeployment, caps PriorityCaps) WorkspaceStatus {
	s := WorkspaceStatus{Namespace: ws.Namespace, Name: ws.Name, Phase: string(ws.Status.Phase), Ready: "Unknown",
		Cluster: ClusterOf(ws), Requested: RequestedGPUs(ws), Message: ws.Status.Message}
	if c := meta.FindStatusCondition(ws.Status.Conditions, workspacesv1.ReadyCondition); c != nil {
		s.Ready, s.Reason = string(c.Status), c.Reason
		if c.Message != "" {
			s.Message = c.Message
		}
	}
	if a := ws.Status.Admission; a != nil {
		s.GPUs = a.GPUs
	}
	s.URLs = URLs(ws)
	if len(s.URLs) > 0 {
		s.URL = s.URLs[0]
	}
	s.Queue = Queue(ws, all, caps)
	return s
}

// URLs are the workspace's URLs, in status.access order, without the empty ones.
func URLs(ws *workspacesv1.WorkspaceDeployment) []string {
	var out []string
	for _, a := range ws.Status.Access {
		if a.URL != "" {
			out = append(out, a.URL)
		}
	}
	return out
}
