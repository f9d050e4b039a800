package routing

// Mirror Services: the route backends on the regional cluster.

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// ensureServices makes the selector-less mirror Services: one per backend Service name, with the
// ports of every endpoint it serves, and the mesh mode's Service labels (istio.io/global).
func (g *Gateway) ensureServices(ctx context.Context, t *target, ws Workspace, ns string) error {
	want := map[string][]corev1.ServicePort{}
	for _, ep := range ws.Endpoints {
		name := BackendService(ws.Release, ep)
		dup := false
		for _, p := range want[name] {
			dup = dup || p.Port == ep.Port
		}
		if !dup {
			want[name] = append(want[name], corev1.ServicePort{Name: ep.Name, Port: ep.Port, TargetPort: intstr.FromInt32(ep.Port), Protocol: corev1.ProtocolTCP})
		}
	}
	meshLabels := g.Options.Mesh.ServiceLabels()
	for name, ports := range want {
		svc := &corev1.Service{}
		err := t.c.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, svc)
		if apierrors.IsNotFound(err) {
			labels := workspaceLabels(ws)
			for k, v := range meshLabels {
				labels[k] = v
			}
			svc = &corev1.Service{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels},
				Spec:       corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, Ports: ports},
			}
			if err := t.c.Create(ctx, svc); err != nil && !apierrors.IsAlreadyExists(err) {
				return fmt.Errorf("creating mirror Service %s/%s on regional cluster %s: %w", ns, name, t.key, err)
			}
			continue
		}
		if err != nil {
			return fmt.Errorf("reading mirror Service %s/%s on regional cluster %s: %w", ns, name, t.key, err)
		}
		if samePorts(svc.Spec.Ports, ports) && len(svc.Spec.Selector) == 0 && hasLabels(svc.Labels, meshLabels) {
			continue
		}
		base := svc.DeepCopy()
		svc.Spec.Ports, svc.Spec.Selector = ports, nil
		if svc.Labels == nil {
			svc.Labels = map[string]string{}
		}
		for k, v := range meshLabels {
			svc.Labels[k] = v
		}
		if err := t.c.Patch(ctx, svc, client.MergeFrom(base)); err != nil {
			return fmt.Errorf("updating mirror Service %s/%s on regional cluster %s: %w", ns, name, t.key, err)
		}
	}
	return nil
}

func samePorts(have, want []corev1.ServicePort) bool {
	if len(have) != len(want) {
		return false
	}
	for i := range want {
		if have[i].Name != want[i].Name || have[i].Port != want[i].Port || have[i].TargetPort != want[i].TargetPort {
			return false
		}
	}
	return true
}
