{{/* The chart's name (app.kubernetes.io/name): nameOverride, or tether. */}}
{{- define "tether.name" -}}
{{- .Values.nameOverride | default .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* The name of every object of the release: fullnameOverride, or the
release's name when it holds the chart's, else <release>-<name>. */}}
{{- define "tether.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := include "tether.name" . -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* Selector labels: which pods are this release's tether. */}}
{{- define "tether.selectorLabels" -}}
app.kubernetes.io/name: {{ include "tether.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "tether.labels" -}}
{{ include "tether.selectorLabels" . }}
app.kubernetes.io/version: {{ .Values.image.tag | default .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{/* The ServiceAccount tether runs as: serviceAccount.name, else the
release's full name when the chart creates it, else the namespace's
default. */}}
{{- define "tether.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- .Values.serviceAccount.name | default (include "tether.fullname" .) -}}
{{- else -}}
{{- .Values.serviceAccount.name | default "default" -}}
{{- end -}}
{{- end -}}

{{/* The name of the RBAC objects that grant what tether needs: the full
name for a Role, and for a ClusterRole (cluster-scoped) the full name and
the release's namespace, so that releases of one name in two namespaces
do not share one. */}}
{{- define "tether.rbacName" -}}
{{- if .Values.watch.allNamespaces -}}
{{- printf "%s-%s" (include "tether.fullname" .) .Release.Namespace | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- include "tether.fullname" . -}}
{{- end -}}
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
