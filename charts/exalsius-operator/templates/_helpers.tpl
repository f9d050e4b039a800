{{/* The components, in a fixed order. */}}
{{- define "eo.components" -}}
colony-controller workspace-controller inventory-collector webhook
{{- end -}}

{{/* Prefix of every object name. */}}
{{- define "eo.fullname" -}}
{{- default "exalsius-operator" .Values.fullnameOverride | trunc 40 | trimSuffix "-" -}}
{{- end -}}

{{/* Name of a component's objects: <fullname>-<component>. Call with (dict "root" $ "component" $c). */}}
{{- define "eo.name" -}}
{{- printf "%s-%s" (include "eo.fullname" .root) .component | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* A component's values block. */}}
{{- define "eo.values" -}}
{{- toYaml (index .root.Values .component) -}}
{{- end -}}

{{- define "eo.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Labels of every object; pass (dict "root" $ "component" $c), component may be "". */}}
{{- define "eo.labels" -}}
helm.sh/chart: {{ include "eo.chart" .root }}
app.kubernetes.io/name: exalsius-operator
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/part-of: exalsius-operator
app.kubernetes.io/managed-by: {{ .root.Release.Service }}
app.kubernetes.io/version: {{ .root.Chart.AppVersion | quote }}
{{- if .component }}
app.kubernetes.io/component: {{ .component }}
{{- end }}
{{- with .root.Values.global.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* Selector labels of a component's pods. */}}
{{- define "eo.selectorLabels" -}}
app.kubernetes.io/name: exalsius-operator
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{/* ServiceAccount name of a component: serviceAccount.name, or <fullname>-<component> when the chart
creates it. Rendering fails when the chart creates none and no name is given, instead of running
and binding the namespace's default ServiceAccount. */}}
{{- define "eo.serviceAccountName" -}}
{{- $v := index .root.Values .component -}}
{{- if $v.serviceAccount.create -}}
{{- default (include "eo.name" .) $v.serviceAccount.name -}}
{{- else -}}
{{- required (printf "%s.serviceAccount.name must name an existing ServiceAccount when %s.serviceAccount.create is false: the chart never binds the namespace's default ServiceAccount" .component .component) $v.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/* Image reference: [registry/]repository(@digest|:tag). */}}
{{- define "eo.image" -}}
{{- $v := index .root.Values .component -}}
{{- $repo := $v.image.repository -}}
{{- with .root.Values.global.imageRegistry -}}
{{- $repo = printf "%s/%s" (trimSuffix "/" .) $repo -}}
{{- end -}}
{{- if $v.image.digest -}}
{{- printf "%s@%s" $repo $v.image.digest -}}
{{- else -}}
{{- printf "%s:%s" $repo (default .root.Chart.AppVersion $v.image.tag) -}}
{{- end -}}
{{- end -}}

{{/* Name of the webhook's TLS Secret: <fullname>-webhook-tls (its RBAC rule names it). */}}
{{- define "eo.webhookSecretName" -}}
{{- printf "%s-webhook-tls" (include "eo.fullname" .) -}}
{{- end -}}

{{/* Name of the webhook Service and configurations. */}}
{{- define "eo.webhookName" -}}
{{- include "eo.name" (dict "root" . "component" "webhook") -}}
{{- end -}}

{{/* Name of the webhook configurations: <fullname>-webhook, like the Service (the webhook's RBAC
rule names them). */}}
{{- define "eo.webhookConfigName" -}}
{{- include "eo.webhookName" . -}}
{{- end -}}

{{/* The watched namespaces as a JSON list (empty: every namespace). */}}
{{- define "eo.watchNamespaces" -}}
{{- $out := list -}}
{{- range splitList "," (default "" .Values.global.watchNamespace) -}}
{{- if trim . -}}{{- $out = append $out (trim .) -}}{{- end -}}
{{- end -}}
{{- toJson $out -}}
{{- end -}}

{{/* Resources of the components' rules that are cluster-scoped: they stay in a ClusterRole when the
controllers are limited to watched namespaces (k0rdent's Region is cluster-scoped). A chart test
checks this list against the API server's discovery. */}}
{{- define "eo.clusterScopedResources" -}}
namespaces nodes regions workspaceclasses workspaceclasses/status workspaceclasses/finalizers validatingwebhookconfigurations mutatingwebhookconfigurations tokenreviews subjectaccessreviews customresourcedefinitions
{{- end -}}

{{/* Labels of a component's pods: no chart or app version, so a chart upgrade that leaves a
component's image and settings alone does not restart its pods. */}}
{{- define "eo.podLabels" -}}
{{ include "eo.selectorLabels" . }}
app.kubernetes.io/part-of: exalsius-operator
{{- with .root.Values.global.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}
