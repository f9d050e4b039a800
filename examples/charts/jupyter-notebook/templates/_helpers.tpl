{{- define "jupyter-notebook.labels" -}}
app.kubernetes.io/name: jupyter-notebook
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{/*
Per-replica resources from the operator's _exalsius block:
  _exalsius.resources: {cpu, memory, storage, <gpuResourceName>: <count>}
  _exalsius.gpuResourceName: nvidia.com/gpu | amd.com/gpu (empty without GPUs)
*/}}
{{- define "jupyter-notebook.resources" -}}
{{- $r := .Values._exalsius.resources | default dict -}}
{{- $gpuName := .Values._exalsius.gpuResourceName | default "" -}}
{{- $gpu := 0 -}}
{{- if $gpuName }}{{ $gpu = int (index $r $gpuName | default 0) }}{{ end -}}
requests:
  cpu: {{ $r.cpu | default "100m" | quote }}
  memory: {{ $r.memory | default "256Mi" | quote }}
  {{- if gt $gpu 0 }}
  {{ $gpuName }}: {{ $gpu | quote }}
  {{- end }}
limits:
  {{- if $r.memory }}
  memory: {{ $r.memory | quote }}
  {{- end }}
  {{- if gt $gpu 0 }}
  {{ $gpuName }}: {{ $gpu | quote }}
  {{- end }}
{{- end }}
