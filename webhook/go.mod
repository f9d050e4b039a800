module github.com/exalsius/exalsius-operator/webhook

go 1.26.0

require (
	github.com/exalsius/exalsius-operator/common v0.0.0
	k8s.io/api v0.37.2
	k8s.io/apimachinery v0.37.2
	k8s.io/client-go v0.37.2
	sigs.k8s.io/controller-runtime v0.25.2
)

require github.com/Masterminds/semver/v3 v3.5.0 // indirect

replace github.com/exalsius/exalsius-operator/common => ../common
