{{/* Labels on every object. */}}
{{- define "somm.labels" -}}
app.kubernetes.io/name: somm
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/part-of: somm
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end }}

{{/* The labels that selectors use; each object adds app.kubernetes.io/component. */}}
{{- define "somm.selectorLabels" -}}
app.kubernetes.io/name: somm
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{/* The somm image; its entrypoint is `somm`, so args start with the subcommand. */}}
{{- define "somm.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end }}

{{/* Redis as host:port, for --redis. */}}
{{- define "somm.redis" -}}
{{ .Release.Name }}-redis:6379
{{- end }}
