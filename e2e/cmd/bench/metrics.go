package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/exalsius/exalsius-operator/common/testing/testenv"
)

// requests counts an API server's requests by "resource[/subresource] VERB", from
// apiserver_request_total.
type requests map[string]float64

// writeVerbs are the verbs that change an object.
var writeVerbs = map[string]bool{"POST": true, "PUT": true, "PATCH": true, "DELETE": true, "DELETECOLLECTION": true, "APPLY": true}

// scrapeRequests reads apiserver_request_total from an API server.
func scrapeRequests(ctx context.Context, cfg *rest.Config) (requests, error) {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	raw, err := cs.Discovery().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading the API server's metrics: %w", err)
	}
	out := requests{}
	sc := bufio.NewScanner(strings.NewReader(string(raw)))
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "apiserver_request_total{") {
			continue
		}
		labels, value, ok := parseSample(line)
		if !ok {
			continue
		}
		key := labels["resource"]
		if sub := labels["subresource"]; sub != "" {
			key += "/" + sub
		}
		out[key+" "+labels["verb"]] += value
	}
	return out, sc.Err()
}

// processCPU reads process_cpu_seconds_total, the CPU seconds of the process behind a Prometheus
// metrics text (kube-apiserver and etcd both export it); ok is false when the text has none.
func processCPU(text string) (float64, bool) {
	for line := range strings.SplitSeq(text, "\n") {
		if v, found := strings.CutPrefix(line, "process_cpu_seconds_total "); found {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			return f, err == nil
		}
	}
	return 0, false
}

// serverCPU reads the CPU seconds an API server has spent, from its own metrics.
func serverCPU(ctx context.Context, cfg *rest.Config) (float64, error) {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return 0, err
	}
	raw, err := cs.Discovery().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return 0, fmt.Errorf("reading the API server's metrics: %w", err)
	}
	v, ok := processCPU(string(raw))
	if !ok {
		return 0, fmt.Errorf("the API server's metrics have no process_cpu_seconds_total")
	}
	return v, nil
}

// etcdCPU reads the CPU seconds an etcd has spent, from the metrics it serves on its client URL.
func etcdCPU(ctx context.Context, clientURL string) (float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(clientURL, "/")+"/metrics", nil)
	if err != nil {
		return 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, fmt.Errorf("reading etcd's metrics: %w", err)
	}
	defer func() { _ = resp.Body.Close() }()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, fmt.Errorf("reading etcd's metrics: %w", err)
	}
	v, ok := processCPU(string(raw))
	if !ok {
		return 0, fmt.Errorf("etcd's metrics at %s have no process_cpu_seconds_total", clientURL)
	}
	return v, nil
}

// serverCPUs are the CPU seconds spent by the API servers and etcds of a scenario: the management
// cluster's, and all its children's together.
type serverCPUs struct {
	api, etcd           float64
	childAPI, childEtcd float64
}

func (c serverCPUs) minus(base serverCPUs) serverCPUs {
	return serverCPUs{api: c.api - base.api, etcd: c.etcd - base.etcd, childAPI: c.childAPI - base.childAPI, childEtcd: c.childEtcd - base.childEtcd}
}

// readServerCPUs reads the CPU seconds of the management API server and etcd and, when children are
// given, of theirs.
func readServerCPUs(ctx context.Context, m *testenv.Management, children []*testenv.Child) (serverCPUs, error) {
	var out serverCPUs
	var err error
	if out.api, err = serverCPU(ctx, m.Config); err != nil {
		return out, err
	}
	if out.etcd, err = etcdCPU(ctx, m.Env.ControlPlane.Etcd.URL.String()); err != nil {
		return out, err
	}
	for _, ch := range children {
		api, err := serverCPU(ctx, ch.Config)
		if err != nil {
			return out, fmt.Errorf("child %s: %w", ch.Name, err)
		}
		e, err := etcdCPU(ctx, ch.Env.ControlPlane.Etcd.URL.String())
		if err != nil {
			return out, fmt.Errorf("child %s: %w", ch.Name, err)
		}
		out.childAPI += api
		out.childEtcd += e
	}
	return out, nil
}

// parseSample splits `name{a="x",b="y"} 12` into its labels and value.
func parseSample(line string) (map[string]string, float64, bool) {
	open, closing := strings.IndexByte(line, '{'), strings.LastIndexByte(line, '}')
	if open < 0 || closing < open {
		return nil, 0, false
	}
	v, err := strconv.ParseFloat(strings.TrimSpace(line[closing+1:]), 64)
	if err != nil {
		return nil, 0, false
	}
	labels := map[string]string{}
	for _, part := range strings.Split(line[open+1:closing], "\",") {
		k, val, ok := strings.Cut(part, "=\"")
		if !ok {
			continue
		}
		labels[k] = strings.TrimSuffix(val, "\"")
	}
	return labels, v, true
}

// minus returns r - base.
func (r requests) minus(base requests) requests {
	out := requests{}
	for k, v := range r {
		if d := v - base[k]; d != 0 {
			out[k] = d
		}
	}
	return out
}

func (r requests) add(o requests) {
	for k, v := range o {
		r[k] += v
	}
}

// writes sums the write requests, leaving out the keys skip reports.
func (r requests) writes(skip func(string) bool) float64 {
	var n float64
	for k, v := range r {
		_, verb, _ := strings.Cut(k, " ")
		if writeVerbs[verb] && (skip == nil || !skip(k)) {
			n += v
		}
	}
	return n
}

// byVerb sums the requests per verb.
func (r requests) byVerb() map[string]float64 {
	out := map[string]float64{}
	for k, v := range r {
		_, verb, _ := strings.Cut(k, " ")
		out[verb] += v
	}
	return out
}

// reconciles reads controller_runtime_reconcile_total of one controller from a metrics endpoint,
// in total and by result (success, error, requeue, requeue_after).
func reconciles(ctx context.Context, addr, controller string) (float64, map[string]float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/metrics", nil)
	if err != nil {
		return 0, nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, nil, err
	}
	var n float64
	by := map[string]float64{}
	for _, line := range strings.Split(string(body), "\n") {
		if !strings.HasPrefix(line, "controller_runtime_reconcile_total{") {
			continue
		}
		if labels, v, ok := parseSample(line); ok && labels["controller"] == controller {
			n += v
			by[labels["result"]] += v
		}
	}
	return n, by, nil
}

// apiServerOwn reports the API server's own writes: the identity Lease each kube-apiserver renews
// every 10 s (the bench runs the controller without leader election, so it writes no Lease).
func apiServerOwn(key string) bool { return strings.HasPrefix(key, "leases ") }

// procStats are a process's resident memory (now and peak, MiB) and CPU seconds.
type procStats struct {
	rssMiB, peakMiB float64
	cpuSeconds      float64
}

// readProc reads /proc/<pid>/status and /proc/<pid>/stat.
func readProc(pid int) (procStats, error) {
	var st procStats
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return st, err
	}
	for _, line := range strings.Split(string(status), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		kb, _ := strconv.ParseFloat(f[1], 64)
		switch f[0] {
		case "VmRSS:":
			st.rssMiB = kb / 1024
		case "VmHWM:":
			st.peakMiB = kb / 1024
		}
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return st, err
	}
	// The command name may hold spaces; the fields after its closing parenthesis are fixed.
	s := string(stat)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	if len(f) > 12 {
		utime, _ := strconv.ParseFloat(f[11], 64)
		stime, _ := strconv.ParseFloat(f[12], 64)
		st.cpuSeconds = (utime + stime) / 100 // USER_HZ is 100 on Linux
	}
	return st, nil
}

// quiet polls f until its value stays the same for settle, or max passes.
func quiet(ctx context.Context, settle, maxWait time.Duration, f func() float64) {
	deadline := time.Now().Add(maxWait)
	last, since := f(), time.Now()
	for time.Now().Before(deadline) && ctx.Err() == nil {
		time.Sleep(500 * time.Millisecond)
		if v := f(); v != last {
			last, since = v, time.Now()
		} else if time.Since(since) >= settle {
			return
		}
	}
}
