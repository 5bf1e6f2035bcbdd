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

{{/*
Redis as a URL, for --redis: TLS checked against the cluster CA (the
certificate must name <release>-redis), with the pod's client certificate;
the password comes from SOMM_REDIS_PASSWORD_FILE.
*/}}
{{- define "somm.redis" -}}
rediss://{{ .Release.Name }}-redis:6379?ca=/etc/somm/tls/ca.pem&cert=/etc/somm/tls/server.pem&key=/etc/somm/tls/server.key
{{- end }}

{{/* The Secrets the pods mount (NOTES.txt names each). */}}
{{- define "somm.apiKeysSecret" -}}
{{ .Values.auth.existingSecret | default (printf "%s-api-keys" .Release.Name) }}
{{- end }}
{{- define "somm.tlsSecret" -}}
{{ .Values.tls.existingSecret | default (printf "%s-cluster-tls" .Release.Name) }}
{{- end }}
{{- define "somm.redisSecret" -}}
{{ .Values.redis.auth.existingSecret | default (printf "%s-redis-auth" .Release.Name) }}
{{- end }}
{{- define "somm.metricsTokenSecret" -}}
{{ .Values.metrics.podMonitor.tokenSecret.name | default (printf "%s-metrics-token" .Release.Name) }}
{{- end }}
{{- define "somm.routerTlsSecret" -}}
{{ .Values.router.tls.existingSecret | default (include "somm.tlsSecret" .) }}
{{- end }}

{{/* A restricted pod: non-root (the image's user 10001), seccomp RuntimeDefault. */}}
{{- define "somm.podSecurityContext" -}}
runAsNonRoot: true
runAsUser: {{ .uid }}
runAsGroup: {{ .uid }}
fsGroup: {{ .uid }}
seccompProfile:
  type: RuntimeDefault
{{- end }}

{{/* A restricted container: read-only root, no privilege escalation, no capabilities. */}}
{{- define "somm.containerSecurityContext" -}}
runAsNonRoot: true
runAsUser: {{ .uid }}
runAsGroup: {{ .uid }}
readOnlyRootFilesystem: true
allowPrivilegeEscalation: false
capabilities:
  drop: ["ALL"]
seccompProfile:
  type: RuntimeDefault
{{- end }}

{{/* Env of every somm container: Redis's password, read from a file. */}}
{{- define "somm.redisPasswordEnv" -}}
- name: SOMM_REDIS_PASSWORD_FILE
  value: /etc/somm/redis/password
{{- end }}

{{/* The Secret volumes every somm pod mounts (keys, cluster TLS, Redis password) and /tmp. */}}
{{- define "somm.secretVolumes" -}}
- name: api-keys
  secret:
    secretName: {{ include "somm.apiKeysSecret" . }}
    defaultMode: 0440
- name: cluster-tls
  secret:
    secretName: {{ include "somm.tlsSecret" . }}
    defaultMode: 0440
- name: redis-auth
  secret:
    secretName: {{ include "somm.redisSecret" . }}
    defaultMode: 0440
    items:
      - key: password
        path: password
{{- end }}

{{- define "somm.secretVolumeMounts" -}}
- name: api-keys
  mountPath: /etc/somm/keys
  readOnly: true
- name: cluster-tls
  mountPath: /etc/somm/tls
  readOnly: true
- name: redis-auth
  mountPath: /etc/somm/redis
  readOnly: true
- name: tmp
  mountPath: /tmp
{{- end }}

{{/* nodeSelector, tolerations and affinity of a component's values. */}}
{{- define "somm.placement" -}}
{{- with .nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .affinity }}
affinity:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end }}
