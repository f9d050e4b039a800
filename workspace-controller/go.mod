module github.com/exalsius/exalsius-operator/workspace-controller

go 1.26.0

require (
	github.com/exalsius/exalsius-operator/common v0.0.0
	k8s.io/api v0.37.2
	k8s.io/apimachinery v0.37.2
	k8s.io/client-go v0.37.2
	sigs.k8s.io/controller-runtime v0.25.2
)

require (
	github.com/Masterminds/semver/v3 v3.5.0 // indirect
	github.com/prometheus/client_golang v1.24.0 // indirect
	go.yaml.in/yaml/v2 v2.4.4 // indirect
	sigs.k8s.io/yaml v1.6.0 // indirect
)

replace github.com/exalsius/exalsius-operator/common => ../common
