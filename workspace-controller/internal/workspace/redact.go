package workspace

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/exalsius/exalsius-operator/common/text"
	"github.com/exalsius/exalsius-operator/workspace-controller/internal/helmvalues"
	"github.com/exalsius/exalsius-operator/workspace-controller/internal/owned"
)

// redactSecrets removes the workspace's secret values from what its status is about to say: the
// message, every condition message and the failure context. k0rdent's failure message, the
// ServiceSet status and child events can quote a value (a Helm template error does), and the status is
// readable by whoever may read the workspace; the Events of the pass are derived from the conditions,
// so they are clean too. The secret values are the pass's own (values step) or, in a pass that did not
// compute them (a stop), those stored in the workspace's values Secret.
func (r *Reconciler) redactSecrets(ctx context.Context, s *scope) {
	doc := s.secretValues
	if doc == "" {
		doc = r.storedSecretValues(ctx, s)
	}
	secrets := helmvalues.SecretLeaves(doc)
	if len(secrets) == 0 {
		return
	}
	st := &s.ws.Status
	st.Message = text.Redact(st.Message, secrets)
	for i := range st.Conditions {
		st.Conditions[i].Message = text.Redact(st.Conditions[i].Message, secrets)
	}
	if fc := st.FailureContext; fc != nil {
		if fc.ServiceSetStatus != nil {
			fc.ServiceSetStatus.Raw = []byte(text.Redact(string(fc.ServiceSetStatus.Raw), secrets))
		}
		for i := range fc.RecentEvents {
			fc.RecentEvents[i] = text.Redact(fc.RecentEvents[i], secrets)
		}
	}
}

// storedSecretValues reads the values Secret of a workspace whose ServiceSet says it has one (it
// carries the values hash), or returns "".
func (r *Reconciler) storedSecretValues(ctx context.Context, s *scope) string {
	ss := s.svcSet
	if ss == nil {
		ss = s.claimed
	}
	if ss == nil || ss.Annotations[owned.AnnotationValuesHash] == "" || r.APIReader == nil {
		return ""
	}
	sec := &corev1.Secret{}
	key := types.NamespacedName{Namespace: ss.Namespace, Name: owned.ValuesSecretName(s.ws)}
	if err := r.APIReader.Get(ctx, key, sec); err != nil || !owned.OwnValuesSecret(sec, s.ws) {
		if err != nil {
			log.FromContext(ctx).V(1).Info("values Secret not read for redaction", "secret", key.String(), "error", fmt.Sprint(err))
		}
		return ""
	}
	return string(sec.Data[owned.ValuesSecretKey])
}
