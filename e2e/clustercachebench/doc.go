// Package clustercachebench measures the project's child-cluster cache (common/childcluster) against
// Cluster API's ClusterCache (sigs.k8s.io/cluster-api/controllers/clustercache) on the same real API
// servers: one management server holding the `<name>-kubeconfig` Secrets and CAPI Cluster objects of
// N clusters, and three child servers with M GPU nodes each that the clusters reach (10% of the
// clusters point at black holes instead). docs/design/child-cluster-cache.md holds the figures and
// the decision they support.
//
// The package is a module of its own, outside go.work, so that Cluster API's main module is a
// dependency of nothing the project ships (which uses only its types module) and does not move the
// versions the workspace's modules are tested with. Run it from this folder with GOWORK=off, one configuration per process so that the
// process's resident set belongs to one cache (`make bench-clustercache` runs all four):
//
//	GOWORK=off go test -run '^$' -bench 'BenchmarkCaches/childcluster/shared$' -benchtime 1x -timeout 30m .
//
// The benchmark itself is in bench_test.go.
package clustercachebench
