// Package report turns the status of WorkspaceDeployments and Colonies into what kubectl-exalsius
// prints: a workspace's state and its place in a queue, a Colony's GPUs per cluster and model, and
// why a workspace waits. It only reads the objects it is given; the commands list them.
package report
