// Package status writes a controller's status the one way every component does: server-side apply
// on the status subresource, with the component word as field manager, forcing ownership.
package status

import (
	"context"
	"fmt"
	"reflect"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/exalsius/exalsius-operator/common/conditions"
)

// Option tunes Apply.
type Option func(*options)

type options struct {
	explicit    []string
	conditional bool
}

// Explicit names top-level status fields (by their JSON name) that are sent even when they hold their
// zero value, which their omitempty tag would drop: a count of 0 is then stored as 0 rather than
// removed. Only scalar fields (numbers, strings, booleans) can be named.
func Explicit(jsonNames ...string) Option {
	return func(o *options) { o.explicit = append(o.explicit, jsonNames...) }
}

// IfUnchanged sends obj's resourceVersion with the apply, so that it fails with a Conflict when the
// object changed since obj was read. For a field whose whole value one manager owns but that several
// workers compute from what they read (a map filled by shards), this keeps a worker from writing back
// a value another one has replaced in the meantime; the caller reads again and retries.
func IfUnchanged() Option {
	return func(o *options) { o.conditional = true }
}

// Apply writes obj's status with server-side apply on the status subresource, as fieldManager (the
// component word), forcing ownership of what it sends. obj is a typed object: its kind, name,
// namespace and status are sent, nothing of its metadata or spec. The status is sent as its JSON form
// is, so a field left at its zero value with omitempty is not sent, and a field this manager sent
// before and no longer sends is removed (server-side apply's rule), unless another manager owns it
// too; fields other managers own are never touched. Callers compare first and apply only a status
// that changed: an unchanged status is never written. On success obj holds the object the API server
// returned (its new resourceVersion included). Condition messages are sent cut to
// conditions.MaxMessageBytes, so that a long one never fails the write. Because a field another
// manager also owns survives, a status that other writers may have filled and that must be cleared
// whoever wrote it is better written as a merge patch of the change (the workspace-controller's
// WorkspaceDeployment status).
func Apply(ctx context.Context, c client.Client, obj client.Object, fieldManager string, opts ...Option) error {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	gvk, err := c.GroupVersionKindFor(obj)
	if err != nil {
		return fmt.Errorf("status apply: %w", err)
	}
	u, err := body(gvk, obj, o)
	if err != nil {
		return err
	}
	if err := c.Status().Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(fieldManager), client.ForceOwnership); err != nil {
		return err
	}
	out := reflect.New(reflect.TypeOf(obj).Elem()).Interface()
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, out); err != nil {
		return fmt.Errorf("reading the applied %s: %w", u.GetKind(), err)
	}
	reflect.ValueOf(obj).Elem().Set(reflect.ValueOf(out).Elem())
	return nil
}

// body renders the apply configuration: apiVersion, kind, name, namespace (and resourceVersion with
// IfUnchanged) and status.
func body(gvk schema.GroupVersionKind, obj client.Object, o options) (*unstructured.Unstructured, error) {
	full, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, fmt.Errorf("rendering the status of %s %s: %w", gvk.Kind, obj.GetName(), err)
	}
	st, _ := full["status"].(map[string]any)
	if st == nil {
		st = map[string]any{}
	}
	for _, name := range o.explicit {
		if _, ok := st[name]; ok {
			continue
		}
		v, err := zeroOf(obj, name)
		if err != nil {
			return nil, err
		}
		st[name] = v
	}
	u := &unstructured.Unstructured{Object: map[string]any{"status": st}}
	conditions.CutUnstructured(u.Object) // a copy: obj keeps its messages
	u.SetGroupVersionKind(gvk)
	u.SetName(obj.GetName())
	if ns := obj.GetNamespace(); ns != "" {
		u.SetNamespace(ns)
	}
	if o.conditional {
		u.SetResourceVersion(obj.GetResourceVersion())
	}
	return u, nil
}

// zeroOf returns the unstructured zero value of the status field of obj with the given JSON name.
func zeroOf(obj client.Object, jsonName string) (any, error) {
	v := reflect.ValueOf(obj).Elem().FieldByName("Status")
	if !v.IsValid() || v.Kind() != reflect.Struct {
		return nil, fmt.Errorf("status apply: %T has no status struct", obj)
	}
	for i := range v.NumField() {
		f := v.Type().Field(i)
		if name, _, _ := strings.Cut(f.Tag.Get("json"), ","); name != jsonName {
			continue
		}
		switch f.Type.Kind() {
		case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
			reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
			return int64(0), nil
		case reflect.Float32, reflect.Float64:
			return float64(0), nil
		case reflect.String:
			return "", nil
		case reflect.Bool:
			return false, nil
		}
		return nil, fmt.Errorf("status apply: status.%s of %T is not a scalar and cannot be sent explicitly", jsonName, obj)
	}
	return nil, fmt.Errorf("status apply: %T has no status.%s", obj, jsonName)
}
