module github.com/exalsius/exalsius-operator/e2e

go 1.26.0

require (
	github.com/exalsius/exalsius-operator/common v0.0.0
	k8s.io/api v0.37.2
	k8s.io/apimachinery v0.37.2
	k8s.io/client-go v0.37.2
	sigs.k8s.io/controller-runtime v0.25.2
)

replace github.com/exalsius/exalsius-operator/common => ../common
