package gpu

import (
	"fmt"
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"

	workspacesv1 "github.com/exalsius/exalsius-operator/common/api/workspaces/v1"
)

// byteReader hands out fuzz bytes, returning zero once they run out.
type byteReader struct {
	b []byte
	i int
}

func (r *byteReader) next() byte {
	if r.i >= len(r.b) {
		return 0
	}
	r.i++
	return r.b[r.i-1]
}

func (r *byteReader) pick(options ...string) string { return options[int(r.next())%len(options)] }

// randomCluster builds up to 16 nodes and 48 pods from fuzz bytes.
func randomCluster(data []byte) ([]corev1.Node, []corev1.Pod) {
	r := &byteReader{b: data}
	nNodes := int(r.next() % 17)
	nodes := make([]corev1.Node, 0, nNodes)
	for i := range nNodes {
		opts := []nodeOpt{}
		flags := r.next()
		if flags&1 != 0 {
			opts = append(opts, gpus(ResourceNVIDIA, int64(int8(r.next()))))
		}
		if flags&2 != 0 {
			opts = append(opts, gpus(ResourceAMD, int64(int8(r.next()))))
		}
		if flags&4 != 0 {
			opts = append(opts, cordoned)
		}
		if flags&8 != 0 {
			opts = append(opts, notReady)
		}
		if flags&16 != 0 {
			opts = append(opts, labels(LabelGPUModel, r.pick("A100", "H100", "")))
		}
		if flags&32 != 0 {
			opts = append(opts, labels(LabelNVIDIAProduct, r.pick("P1", "P2"), "nvidia.com/x", r.pick("1", "2")))
		}
		if flags&64 != 0 {
			opts = append(opts, labels(LabelAMDProductName, r.pick("M1", "M2")))
		}
		// Duplicate names now and then.
		nodes = append(nodes, node(fmt.Sprintf("n%d", i%13), opts...))
	}
	nPods := int(r.next() % 49)
	pods := make([]corev1.Pod, 0, nPods)
	for i := range nPods {
		nodeName := ""
		if b := r.next(); b%8 != 0 {
			nodeName = fmt.Sprintf("n%d", int(b)%15)
		}
		opts := []podOpt{
			phase(corev1.PodPhase(r.pick("Running", "Pending", "Succeeded", "Failed", ""))),
			container(gpuReq(ResourceName(r.pick("nvidia.com/gpu", "amd.com/gpu")), int64(int8(r.next())))),
		}
		if f := r.next(); f&1 != 0 {
			opts = append(opts, initContainer(gpuReq(ResourceNVIDIA, int64(r.next()%9)), f&2 != 0))
		}
		pods = append(pods, pod(fmt.Sprintf("p%d", i), nodeName, opts...))
	}
	return nodes, pods
}

// ResourceName converts a string, for the fuzz tables.
func ResourceName(s string) corev1.ResourceName { return corev1.ResourceName(s) }

func FuzzOfferings(f *testing.F) {
	f.Add([]byte{3, 17, 8, 0, 1, 4, 0, 2, 5, 1, 2, 3, 4})
	f.Add([]byte{16, 255, 127, 127, 0, 0, 1, 1, 48, 1, 0, 0, 200, 3, 1, 4})
	f.Fuzz(func(t *testing.T, data []byte) {
		nodes, pods := randomCluster(data)
		got := Offerings(nodes, pods)
		if again := Offerings(nodes, pods); !reflect.DeepEqual(got, again) {
			t.Fatalf("not deterministic")
		}
		var requested int64
		for i := range pods {
			if pods[i].Spec.NodeName != "" && !IsTerminal(&pods[i]) {
				requested += PodRequest(&pods[i], ResourceNVIDIA) + PodRequest(&pods[i], ResourceAMD)
			}
		}
		var allocated int64
		for i, o := range got {
			if o.Total <= 0 || o.Nodes <= 0 || o.Allocated < 0 {
				t.Fatalf("offering %d has non-positive totals: %+v", i, o)
			}
			if len(o.Selector) > 1 || (o.Model == "") != (len(o.Selector) == 0) {
				t.Fatalf("selector must be the one model label: %+v", o)
			}
			if i > 0 && !lessOffering(&got[i-1], &got[i]) {
				t.Fatalf("offerings not sorted or not unique at %d: %+v", i, got)
			}
			allocated += o.Allocated
		}
		if allocated > requested {
			t.Fatalf("allocated %d exceeds the %d requested by bound, live pods", allocated, requested)
		}
	})
}

func FuzzGate(f *testing.F) {
	f.Add([]byte{3, 17, 8, 0, 1, 4, 0, 2, 5, 1, 2, 3, 4}, uint8(2), uint8(1), uint8(0), uint8(1))
	f.Add([]byte{16, 255, 127, 127, 0, 0, 1, 1, 48, 1, 0, 0, 200, 3, 1, 4}, uint8(0), uint8(3), uint8(9), uint8(2))
	f.Fuzz(func(t *testing.T, data []byte, perReplica, replicas, model, vendor uint8) {
		nodes, pods := randomCluster(data)
		req := Request{
			Vendor:         []workspacesv1.GPUVendor{"", "NVIDIA", "AMD", "Other"}[vendor%4],
			GPUType:        []string{"", "A100", "H100"}[model%3],
			GPUsPerReplica: int64(int8(perReplica)),
			Replicas:       int32(int8(replicas)),
		}
		res := []Reservation{
			{Key: "a", GPUsPerReplica: int64(perReplica % 5), Replicas: int32(replicas % 4)},
			{Key: "b", Vendor: req.Vendor, Selector: Selector(req), GPUsPerReplica: 1, Replicas: int32(model % 3)},
		}
		free := Gate(req, nodes, pods, nil)
		d := Gate(req, nodes, pods, res)
		if d.FreeGPUs < 0 || d.FreeGPUs > free.FreeGPUs || d.FittingReplicas > free.FittingReplicas {
			t.Fatalf("reservations must only take: without %+v, with %+v", free, d)
		}
		if d.FittingReplicas > max(req.Replicas, 1) || d.FittingReplicas < 0 {
			t.Fatalf("fitting replicas out of range: %+v", d)
		}
		switch d.Outcome {
		case Admit:
			if req.GPUsPerReplica > 0 && d.FittingReplicas < max(req.Replicas, 1) {
				t.Fatalf("admitted without room: %+v", d)
			}
			var placed int32
			for _, p := range d.Placement {
				placed += p.Replicas
			}
			if req.GPUsPerReplica > 0 && placed != max(req.Replicas, 1) {
				t.Fatalf("placement %+v does not hold the %d replica(s)", d.Placement, max(req.Replicas, 1))
			}
		case Wait:
			if d.Reason == ReasonWaitingForGpuNodes {
				// Waiting for nodes that cannot take pods now: no schedulable node holds a replica.
				if d.FittingReplicas != 0 {
					t.Fatalf("waiting for held-back nodes while a replica fits: %+v", d)
				}
				break
			}
			if d.MatchingNodes == 0 || d.FittingReplicas >= max(req.Replicas, 1) {
				t.Fatalf("wait must mean matching nodes without room: %+v", d)
			}
		case Unavailable:
			if d.Reason == ReasonGpuOfferingUnavailable && d.MatchingNodes != 0 {
				t.Fatalf("unavailable with matching nodes: %+v", d)
			}
			if d.Reason == ReasonGpuRequestNeverFits && (d.MatchingNodes == 0 || free.FittingReplicas != 0) {
				t.Fatalf("never fits, yet a replica fits without reservations or no node matches: %+v / %+v", d, free)
			}
		default:
			t.Fatalf("unknown outcome %q", d.Outcome)
		}
		if d.Message == "" || d.Reason == "" {
			t.Fatalf("a decision always explains itself: %+v", d)
		}
		// Without a model or selector and without reservations, the gate sees what the offerings show.
		if req.GPUType == "" && req.GPUsPerReplica > 0 && free.ResourceName != "" {
			var total, allocated int64
			for _, o := range Offerings(nodes, pods) {
				if o.ResourceName == string(free.ResourceName) {
					total += o.Total
					allocated += o.Allocated
				}
			}
			if free.FreeGPUs > total || free.FreeGPUs < total-allocated {
				t.Fatalf("gate free %d outside offerings' [%d, %d]", free.FreeGPUs, total-allocated, total)
			}
		}
	})
}
