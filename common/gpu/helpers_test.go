package gpu

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// nodeOpt changes a test node.
type nodeOpt func(*corev1.Node)

func labels(kv ...string) nodeOpt {
	return func(n *corev1.Node) {
		for i := 0; i+1 < len(kv); i += 2 {
			n.Labels[kv[i]] = kv[i+1]
		}
	}
}

func alloc(name corev1.ResourceName, v string) nodeOpt {
	return func(n *corev1.Node) { n.Status.Allocatable[name] = resource.MustParse(v) }
}

func gpus(name corev1.ResourceName, v int64) nodeOpt {
	return func(n *corev1.Node) { n.Status.Allocatable[name] = *resource.NewQuantity(v, resource.DecimalSI) }
}

func cordoned(n *corev1.Node) { n.Spec.Unschedulable = true }

func notReady(n *corev1.Node) { n.Status.Conditions[0].Status = corev1.ConditionFalse }

func noReadyCondition(n *corev1.Node) { n.Status.Conditions = nil }

func node(name string, opts ...nodeOpt) corev1.Node {
	n := corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{}},
		Status: corev1.NodeStatus{
			Allocatable: corev1.ResourceList{},
			Conditions:  []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}},
		},
	}
	for _, o := range opts {
		o(&n)
	}
	return n
}

// podOpt changes a test pod.
type podOpt func(*corev1.Pod)

func phase(p corev1.PodPhase) podOpt { return func(pod *corev1.Pod) { pod.Status.Phase = p } }

func container(reqs corev1.ResourceList) podOpt {
	return func(p *corev1.Pod) {
		p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: "c", Resources: corev1.ResourceRequirements{Requests: reqs}})
	}
}

func limitOnly(lims corev1.ResourceList) podOpt {
	return func(p *corev1.Pod) {
		p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: "l", Resources: corev1.ResourceRequirements{Limits: lims}})
	}
}

func initContainer(reqs corev1.ResourceList, sidecar bool) podOpt {
	return func(p *corev1.Pod) {
		c := corev1.Container{Name: "i", Resources: corev1.ResourceRequirements{Requests: reqs}}
		if sidecar {
			always := corev1.ContainerRestartPolicyAlways
			c.RestartPolicy = &always
		}
		p.Spec.InitContainers = append(p.Spec.InitContainers, c)
	}
}

func pod(name, nodeName string, opts ...podOpt) corev1.Pod {
	p := corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec:       corev1.PodSpec{NodeName: nodeName},
		Status:     corev1.PodStatus{Phase: corev1.PodRunning},
	}
	for _, o := range opts {
		o(&p)
	}
	return p
}

func gpuReq(name corev1.ResourceName, v int64) corev1.ResourceList {
	return corev1.ResourceList{name: *resource.NewQuantity(v, resource.DecimalSI)}
}

func gpuPod(name, nodeName string, v int64, opts ...podOpt) corev1.Pod {
	return pod(name, nodeName, append([]podOpt{container(gpuReq(ResourceNVIDIA, v))}, opts...)...)
}
