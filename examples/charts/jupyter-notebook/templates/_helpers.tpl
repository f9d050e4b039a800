{{- define "jupyter-notebook.labels" -}}
app.kubernetes.io/name: jupyter-notebook
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{/*
The operator's _exalsius contract, read with fallbacks so a plain `helm install` works:
  _exalsius.resources.perReplica.{cpu,memory}                -> container requests and limits
  _exalsius.resources.perReplica.{gpuResourceName,gpuCount}  -> GPU request and limit (count > 0)
  _exalsius.resources.perReplica.gpuVendor                   -> NVIDIA runtimeClassName, when configured
  _exalsius.scheduling.nodeSelector                          -> pod nodeSelector, verbatim
No GPU resource name or node label is hardcoded.
*/}}
{{- define "jupyter-notebook.perReplica" -}}
{{- $ex := .Values._exalsius | default dict -}}
{{- (($ex.resources | default dict).perReplica | default dict) | toYaml -}}
{{- end }}

{{- define "jupyter-notebook.resources" -}}
{{- $per := include "jupyter-notebook.perReplica" . | fromYaml -}}
{{- $cpu := $per.cpu | default .Values.fallback.cpu -}}
{{- $memory := $per.memory | default .Values.fallback.memory -}}
{{- $gpuName := $per.gpuResourceName | default "" -}}
{{- $gpuCount := int ($per.gpuCount | default 0) -}}
requests:
  cpu: {{ $cpu | quote }}
  memory: {{ $memory | quote }}
  {{- if and $gpuName (gt $gpuCount 0) }}
  {{ $gpuName }}: {{ $gpuCount }}
  {{- end }}
limits:
  cpu: {{ $cpu | quote }}
  memory: {{ $memory | quote }}
  {{- if and $gpuName (gt $gpuCount 0) }}
  {{ $gpuName }}: {{ $gpuCount }}
  {{- end }}
{{- end }}
