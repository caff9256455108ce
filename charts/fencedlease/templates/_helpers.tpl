{{/* The operator's service account; the admission policies' parameter names it. */}}
{{- define "fencedlease.serviceAccountName" -}}
{{- required "serviceAccount.name is required" .Values.serviceAccount.name -}}
{{- end -}}

{{- define "fencedlease.image" -}}
{{- .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion -}}
{{- end -}}

{{- define "fencedlease.agentImage" -}}
{{- .Values.agentImage.repository }}:{{ .Values.agentImage.tag | default .Values.image.tag | default .Chart.AppVersion -}}
{{- end -}}

{{- define "fencedlease.metricsBindAddress" -}}
{{- if .Values.metrics.enabled }}:8443{{ else }}0{{ end -}}
{{- end -}}

{{/* With cert-manager, it injects the CA into the webhook configuration. */}}
{{- define "fencedlease.webhookAnnotations" -}}
{{- if .Values.certManager.enabled -}}
cert-manager.io/inject-ca-from: {{ .Release.Namespace }}/fencedlease-serving-cert
{{- else -}}
{}
{{- end -}}
{{- end -}}
