{{/* The name of every object of the release. */}}
{{- define "tether.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{/* Selector labels: which pods are this release's tether. */}}
{{- define "tether.selectorLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "tether.labels" -}}
{{ include "tether.selectorLabels" . }}
app.kubernetes.io/version: {{ .Values.image.tag | default .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "tether.serviceAccountName" -}}
{{- .Values.serviceAccount.name | default (include "tether.fullname" .) -}}
{{- end -}}

{{/* The namespace whose McpConnections tether watches (one namespace). */}}
{{- define "tether.watchNamespace" -}}
{{- .Values.watch.namespace | default .Release.Namespace -}}
{{- end -}}

{{- define "tether.tokenSecretName" -}}
{{- .Values.gateway.auth.existingSecret | default (printf "%s-gateway-token" (include "tether.fullname" .)) -}}
{{- end -}}

{{/* Whether the Prometheus Operator's API is served. */}}
{{- define "tether.prometheusOperator" -}}
{{- if .Capabilities.APIVersions.Has "monitoring.coreos.com/v1" -}}true{{- end -}}
{{- end -}}
