{{/*
RE2 patterns of what connectors.allowedImages allows (fnmatch `*` and `?` only), or of the
runtime image's repository with any tag or digest when it is empty (the operator's rule,
conveyor_operator.settings.default_allowed_images), as a CEL list of raw strings.
*/}}
{{- define "conveyor.admission.imagePatterns" -}}
{{- $patterns := list }}
{{- if empty .Values.connectors.allowedImages }}
{{- $patterns = append $patterns (printf "^%s([:@].*)?$" (regexQuoteMeta .Values.runtimeImage.repository)) }}
{{- else }}
{{- range .Values.connectors.allowedImages }}
{{- $patterns = append $patterns (printf "^%s$" (regexQuoteMeta . | replace "\\*" ".*" | replace "\\?" ".")) }}
{{- end }}
{{- end }}
{{- $quoted := list }}
{{- range $patterns }}{{ $quoted = append $quoted (printf "r'%s'" .) }}{{ end }}
{{- printf "[%s]" (join ", " $quoted) }}
{{- end }}

{{/*
RE2 patterns of the ServiceAccounts a driver may run as: the namespace's conveyor-spark and
connectors.allowedServiceAccounts (fnmatch `*` and `?` only), as a CEL list of raw strings.
*/}}
{{- define "conveyor.admission.driverAccountPatterns" -}}
{{- $quoted := list "r'^conveyor-spark$'" }}
{{- range .Values.connectors.allowedServiceAccounts }}
{{- $quoted = append $quoted (printf "r'^%s$'" (regexQuoteMeta . | replace "\\*" ".*" | replace "\\?" ".")) }}
{{- end }}
{{- printf "[%s]" (join ", " $quoted) }}
{{- end }}

{{/* Whether the chart installs its ValidatingAdmissionPolicies. */}}
{{- define "conveyor.admission.enabled" -}}
{{- if and .Values.admissionPolicy.enabled (.Capabilities.APIVersions.Has "admissionregistration.k8s.io/v1/ValidatingAdmissionPolicy") }}true{{ end }}
{{- end }}
