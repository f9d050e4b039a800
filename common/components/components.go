// Package components lists the operator's components: one word each (colony-controller,
// workspace-controller, inventory-collector, webhook) that names its folder, binary, image, chart
// values block, metrics prefix, logger and field manager.
//
// The list lives in the file names next to this one, one component a line; the Makefile and the
// scripts under hack/ read that file, Go code reads Names.
package components

import (
	_ "embed"
	"strings"
)

//go:embed names
var names string

// Names returns the components, in the order of the names file.
func Names() []string { return strings.Fields(names) }

// Plugin is the kubectl plugin's folder and binary: a module with a main package that is no
// component (no image, no chart values, not deployed); releases ship it as archives.
const Plugin = "kubectl-exalsius"
