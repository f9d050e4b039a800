package admission

import (
	"context"

	admissionv1 "k8s.io/api/admission/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
)

// preflight runs a raw-object check before the wrapped handler. The mutating webhook runs before the
// API server's schema and CEL validation, so a denial here names every field the check finds at once,
// where the API server would stop at the first undecodable value or name a CEL error `<nil>`.
type preflight struct {
	kind  schema.GroupKind
	check func(raw []byte) field.ErrorList
	// decodes reports whether the object decodes into its Go type; one that does not is passed on
	// unchanged.
	decodes func(raw []byte) bool
	next    admission.Handler
}

// Handle implements admission.Handler.
func (p preflight) Handle(ctx context.Context, req admission.Request) admission.Response {
	if req.Operation == admissionv1.Create || req.Operation == admissionv1.Update {
		if errs := p.check(req.Object.Raw); len(errs) > 0 {
			st := apierrors.NewInvalid(p.kind, req.Name, errs).ErrStatus
			return admission.Response{AdmissionResponse: admissionv1.AdmissionResponse{Allowed: false, Result: &st}}
		}
		if p.decodes != nil && !p.decodes(req.Object.Raw) {
			// Not defaulted: the API server's schema validation, which runs next, names every field
			// of the wrong type, where a decode error here would name none.
			return admission.Allowed("left to the schema validation: the object does not decode")
		}
	}
	return p.next.Handle(ctx, req)
}
