{{/* Names and labels shared by every template. */}}

{{- define "stencil.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "stencil.serviceAccountName" -}}
{{- default (include "stencil.fullname" .) .Values.serviceAccount.name -}}
{{- end -}}

{{- define "stencil.selectorLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "stencil.labels" -}}
{{ include "stencil.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "stencil.leaderElection" -}}
{{- if or .Values.leaderElection.enabled .Values.sharding.enabled (gt (int .Values.replicas) 1) -}}true{{- end -}}
{{- end -}}

{{- define "stencil.hasDefinitions" -}}
{{- if or .Values.bundledOperators .Values.definitions -}}true{{- end -}}
{{- end -}}

{{/* Stencil's own needs: events, its Lease, and OperatorDefinitions. */}}
{{- define "stencil.ownRules" -}}
- apiGroups: ["events.k8s.io"]
  resources: [events]
  verbs: [create, patch]
{{- if .Values.clusterDefinitions }}
- apiGroups: [stencil.dev]
  resources: [operatordefinitions]
  verbs: [list, watch]
- apiGroups: [stencil.dev]
  resources: [operatordefinitions/status]
  verbs: [get, patch]
{{- end }}
{{- if .Values.compat.metacontroller.enabled }}
- apiGroups: [metacontroller.k8s.io]
  resources: [compositecontrollers, decoratorcontrollers]
  verbs: [list, watch]
- apiGroups: [metacontroller.k8s.io]
  resources: [compositecontrollers/status, decoratorcontrollers/status]
  verbs: [patch]
{{- end }}
{{- end -}}

{{- define "stencil.leaseRules" -}}
- apiGroups: [coordination.k8s.io]
  resources: [leases]
  {{- if .Values.sharding.enabled }}
  {{- /* The sharder deletes the Lease of a member that stopped renewing it. */}}
  verbs: [get, list, watch, create, update, patch, delete]
  {{- else }}
  verbs: [get, list, watch, create, update, patch]
  {{- end }}
{{- end -}}

{{- define "stencil.certManager" -}}
{{- if and .Values.webhook.enabled .Values.webhook.certManager.enabled -}}true{{- end -}}
{{- end -}}
