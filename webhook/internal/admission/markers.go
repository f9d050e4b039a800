package admission

// The webhook configurations, one marker per webhook (controller-gen reads them from here; see
// admission.go for what they share).

// +kubebuilder:webhook:path=/validate-infra-exalsius-ai-v1-colony,mutating=false,failurePolicy=fail,sideEffects=None,timeoutSeconds=5,groups=infra.exalsius.ai,resources=colonies,verbs=create;update,versions=v1,name=vcolony.infra.exalsius.ai,admissionReviewVersions=v1,serviceName=exalsius-operator-webhook,serviceNamespace=exalsius-system,patch=`{"namespaceSelector":{"matchExpressions":[{"key":"kubernetes.io/metadata.name","operator":"NotIn","values":["kube-system","kube-public","kube-node-lease"]},{"key":"webhooks.exalsius.ai/ignore","operator":"DoesNotExist"}]}}`

// +kubebuilder:webhook:path=/validate-workspaces-exalsius-ai-v1-workspaceclass,mutating=false,failurePolicy=fail,sideEffects=None,timeoutSeconds=5,groups=workspaces.exalsius.ai,resources=workspaceclasses,verbs=create;update;delete,versions=v1,name=vworkspaceclass.workspaces.exalsius.ai,admissionReviewVersions=v1,serviceName=exalsius-operator-webhook,serviceNamespace=exalsius-system

// +kubebuilder:webhook:path=/validate-workspaces-exalsius-ai-v1-workspacedeployment,mutating=false,failurePolicy=fail,sideEffects=None,timeoutSeconds=5,groups=workspaces.exalsius.ai,resources=workspacedeployments,verbs=create;update,versions=v1,name=vworkspacedeployment.workspaces.exalsius.ai,admissionReviewVersions=v1,serviceName=exalsius-operator-webhook,serviceNamespace=exalsius-system,patch=`{"namespaceSelector":{"matchExpressions":[{"key":"kubernetes.io/metadata.name","operator":"NotIn","values":["kube-system","kube-public","kube-node-lease"]},{"key":"webhooks.exalsius.ai/ignore","operator":"DoesNotExist"}]}}`

// +kubebuilder:webhook:path=/mutate-workspaces-exalsius-ai-v1-workspacedeployment,mutating=true,failurePolicy=fail,sideEffects=None,timeoutSeconds=5,groups=workspaces.exalsius.ai,resources=workspacedeployments,verbs=create;update,versions=v1,name=mworkspacedeployment.workspaces.exalsius.ai,admissionReviewVersions=v1,serviceName=exalsius-operator-webhook,serviceNamespace=exalsius-system,patch=`{"namespaceSelector":{"matchExpressions":[{"key":"kubernetes.io/metadata.name","operator":"NotIn","values":["kube-system","kube-public","kube-node-lease"]},{"key":"webhooks.exalsius.ai/ignore","operator":"DoesNotExist"}]}}`
