package workspaceclass

import (
	"strings"

	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
)

// createOrDelete passes only creations and deletions: the count of a class's workspaces changes on
// nothing else (spec.workspaceClassRef is immutable).
type createOrDelete struct {
	predicate.Funcs
}

// Create passes.
func (createOrDelete) Create(event.CreateEvent) bool { return true }

// Delete passes.
func (createOrDelete) Delete(event.DeleteEvent) bool { return true }

// Update drops.
func (createOrDelete) Update(event.UpdateEvent) bool { return false }

// Generic drops.
func (createOrDelete) Generic(event.GenericEvent) bool { return false }

// isIndexConflict reports whether IndexField failed because the index already exists.
func isIndexConflict(err error) bool {
	return err != nil && strings.Contains(err.Error(), "conflict")
}
