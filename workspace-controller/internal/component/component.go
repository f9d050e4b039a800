// Package component holds the workspace-controller's component word, the one spelling of its logger
// name, metrics prefix, leader-election lease, field manager, event reporter and user agent. It is a
// leaf package so that every package of the component (workspace, workspaceclass, routing) can use it.
package component

// Name is the component word.
const Name = "workspace-controller"
