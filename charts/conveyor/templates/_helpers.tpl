{{/*
Name of the chart, or nameOverride.
*/}}
{{- define "conveyor.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
Full name of the release's objects: fullnameOverride, else <release>-<name>, or the release name
alone when it already contains the name. Truncated to 63 characters (a DNS label).
*/}}
{{- define "conveyor.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{/*
Chart name and version, for the helm.sh/chart label.
*/}}
{{- define "conveyor.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
Labels of every object of the operator.
*/}}
{{- define "conveyor.labels" -}}
helm.sh/chart: {{ include "conveyor.chart" . }}
{{ include "conveyor.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: conveyor
{{- end }}

{{/*
Labels of the Spark driver ClusterRole: the operator's, with the spark-driver component.
*/}}
{{- define "conveyor.sparkDriverLabels" -}}
helm.sh/chart: {{ include "conveyor.chart" . }}
app.kubernetes.io/name: {{ include "conveyor.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: spark-driver
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: conveyor
{{- end }}

{{/*
Labels of the metrics objects (PodMonitors, the Grafana dashboard ConfigMap): the operator's, with
the metrics component.
*/}}
{{- define "conveyor.metricsLabels" -}}
helm.sh/chart: {{ include "conveyor.chart" . }}
app.kubernetes.io/name: {{ include "conveyor.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: metrics
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: conveyor
{{- end }}

{{/*
Labels that select the operator pod (immutable in the Deployment's selector).
*/}}
{{- define "conveyor.selectorLabels" -}}
app.kubernetes.io/name: {{ include "conveyor.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: operator
{{- end }}

{{/*
Name of the operator's ServiceAccount.
*/}}
{{/*
The Secret with the operator's key (operatorKey.existingSecret, or the chart's own).
*/}}
{{- define "conveyor.operatorKeySecretName" -}}
{{- default (printf "%s-operator-key" (include "conveyor.fullname" .) | trunc 253) .Values.operatorKey.existingSecret }}
{{- end }}

{{- define "conveyor.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "conveyor.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/*
The operator image (the Dockerfile's `operator` target).
*/}}
{{- define "conveyor.image" -}}
{{- printf "%s:%s" .Values.image.repository (.Values.image.tag | default .Chart.AppVersion) }}
{{- end }}

{{/*
The image of drivers, executors and cleanup Jobs (the Dockerfile's `runtime` target).
*/}}
{{- define "conveyor.runtimeImage" -}}
{{- printf "%s:%s" .Values.runtimeImage.repository (.Values.runtimeImage.tag | default .Chart.AppVersion) }}
{{- end }}

{{/*
Name of the ClusterRole and ClusterRoleBinding: cluster-scoped, so the release namespace is part of
it and two releases of the same name in two namespaces do not collide.
*/}}
{{- define "conveyor.clusterRoleName" -}}
{{- printf "%s-%s" .Release.Namespace (include "conveyor.fullname" .) | trunc 253 }}
{{- end }}

{{/*
Name of the ClusterRole of the Spark drivers (see templates/spark-driver/clusterrole.yaml), when the
operator watches every namespace: cluster-scoped, so the release namespace is part of it.
*/}}
{{- define "conveyor.sparkDriverClusterRoleName" -}}
{{- printf "%s-%s-spark-driver" .Release.Namespace (include "conveyor.fullname" .) | trunc 253 }}
{{- end }}

{{/*
The Spark driver role each namespace's RoleBinding conveyor-spark refers to: the ClusterRole above
when the operator watches every namespace; with watchNamespaces a Role of this name in each of them
(no ClusterRole at all). Passed to the operator as CONVEYOR_OPERATOR_SPARK_DRIVER_CLUSTER_ROLE and
CONVEYOR_OPERATOR_SPARK_DRIVER_ROLE_KIND.
*/}}
{{- define "conveyor.sparkDriverRoleName" -}}
{{- if empty .Values.watchNamespaces }}
{{- include "conveyor.sparkDriverClusterRoleName" . }}
{{- else }}
{{- printf "%s-spark-driver" (include "conveyor.fullname" .) | trunc 253 }}
{{- end }}
{{- end }}

{{- define "conveyor.sparkDriverRoleKind" -}}
{{- if empty .Values.watchNamespaces }}ClusterRole{{ else }}Role{{ end }}
{{- end }}

{{/*
RBAC rules that are cluster-scoped by nature, only when the operator watches every namespace:
kopf scans CRDs and follows namespaces, and the operator may `bind` the Spark driver ClusterRole.
With watchNamespaces kopf needs neither (the operator disables kopf's scanning, the namespaces are
exact names and discovery is open to every authenticated user), and `bind` is of a Role.
*/}}
{{- define "conveyor.rbac.clusterRules" -}}
# kopf: find the Connector CRD and its versions.
- apiGroups: ["apiextensions.k8s.io"]
  resources: ["customresourcedefinitions"]
  verbs: ["get", "list", "watch"]
# kopf: follow namespaces.
- apiGroups: [""]
  resources: ["namespaces"]
  verbs: ["get", "list", "watch"]
{{- end }}

{{/*
`bind` of the Spark driver role, and of it only: each namespace's RoleBinding conveyor-spark refers
to it without the operator holding its permissions (RBAC's escalation check is then skipped).
*/}}
{{- define "conveyor.rbac.bindRule" -}}
- apiGroups: ["rbac.authorization.k8s.io"]
  resources: [{{ ternary "clusterroles" "roles" (empty .Values.watchNamespaces) | quote }}]
  verbs: ["bind"]
  resourceNames: [{{ include "conveyor.sparkDriverRoleName" . | quote }}]
{{- end }}

{{/*
RBAC rules in the namespaces of the Connectors: a ClusterRole cluster-wide, a Role per namespace
in watchNamespaces. The Spark driver's own permissions are not here: the chart's Spark driver
role holds them, and the operator only binds it (see conveyor.rbac.bindRule).
*/}}
{{- define "conveyor.rbac.namespacedRules" -}}
# The Connector resources: kopf watches them and patches finalizers, annotations and status.
- apiGroups: ["conveyor.dev"]
  resources: ["connectors"]
  verbs: ["get", "list", "watch", "patch", "update"]
- apiGroups: ["conveyor.dev"]
  resources: ["connectors/status"]
  verbs: ["get", "patch", "update"]
# Kubernetes Events about Connectors (kopf posts core v1 events).
- apiGroups: [""]
  resources: ["events"]
  verbs: ["create", "patch"]
- apiGroups: ["events.k8s.io"]
  resources: ["events"]
  verbs: ["create", "patch"]
# Driver Service, the ConfigMap with the manifest and executor pod template.
- apiGroups: [""]
  resources: ["configmaps", "services"]
  verbs: ["get", "list", "watch", "create", "patch", "update", "delete"]
# The namespace's ServiceAccounts, shared by its connectors: conveyor-spark (drivers) and
# conveyor-executor (executors and cleanup Jobs: no binding, no token).
- apiGroups: [""]
  resources: ["serviceaccounts"]
  verbs: ["get", "list", "watch", "create", "patch", "update", "delete"]
# Secrets are never read: each connector's <name>-control Secret is created with values the
# operator derives from its key, and deleted to be created anew when they change; that a
# referenced Secret exists is learnt from a dry-run create (409). The admission policy narrows
# both to <name>-control Secrets the operator labelled (and dry runs).
- apiGroups: [""]
  resources: ["secrets"]
  verbs: ["create", "delete"]
# Pods: the operator watches them (evictions become drains); only the Spark driver manages them.
- apiGroups: [""]
  resources: ["pods"]
  verbs: ["get", "list", "watch"]
# The driver Deployment; scaled to 0 through its scale subresource before a cleanup Job runs.
- apiGroups: ["apps"]
  resources: ["deployments"]
  verbs: ["get", "list", "watch", "create", "patch", "update", "delete"]
- apiGroups: ["apps"]
  resources: ["deployments/scale"]
  verbs: ["patch"]
# Listed only: a driver pod is called directly only if its owner chain leads through a ReplicaSet
# to the connector's driver Deployment (conveyor_operator.observe.driver_pods).
- apiGroups: ["apps"]
  resources: ["replicasets"]
  verbs: ["list"]
# The PodDisruptionBudget over each connector's driver and executor pods (one pod at a time).
- apiGroups: ["policy"]
  resources: ["poddisruptionbudgets"]
  verbs: ["get", "list", "watch", "create", "patch", "update", "delete"]
# The NetworkPolicies of each connector's driver and executor pods (conveyor_operator.reconcile.network_policy);
# deleted too when networkPolicy.enabled is false.
- apiGroups: ["networking.k8s.io"]
  resources: ["networkpolicies"]
  verbs: ["get", "list", "watch", "create", "patch", "update", "delete"]
# One-shot cleanup Jobs.
- apiGroups: ["batch"]
  resources: ["jobs"]
  verbs: ["get", "list", "watch", "create", "patch", "update", "delete"]
# The namespace's RoleBinding of the Spark driver role (the operator creates no Roles).
- apiGroups: ["rbac.authorization.k8s.io"]
  resources: ["rolebindings"]
  verbs: ["get", "list", "watch", "create", "patch", "update", "delete"]
{{- end }}

{{/*
RBAC rules of the Spark driver role: what Spark's driver does with the API in client mode, in its
own namespace: executor pods, OnDemand executor volume claims, and a dry-run ConfigMap create (the
namespace-deletion probe). No services, no secrets, no pods/exec or pods/log. The source of truth
is operator/conveyor_operator/render.py SPARK_ROLE_RULES; tests/kube/test_chart.py holds them equal.
*/}}
{{- define "conveyor.rbac.sparkDriverRules" -}}
- apiGroups: [""]
  resources: ["pods"]
  verbs: ["create", "get", "list", "watch", "delete", "deletecollection", "patch"]
- apiGroups: [""]
  resources: ["persistentvolumeclaims"]
  verbs: ["create", "get", "list", "delete", "deletecollection"]
- apiGroups: [""]
  resources: ["configmaps"]
  verbs: ["create"]
{{- end }}

{{/*
The operator pod's selector labels as a comma list of key=value, passed to the operator as
CONVEYOR_OPERATOR_NETWORK_POLICY_OPERATOR_LABELS: each connector's NetworkPolicy admits these pods.
*/}}
{{- define "conveyor.selectorLabelList" -}}
{{- $items := list }}
{{- range $key, $value := include "conveyor.selectorLabels" . | fromYaml }}
{{- $items = append $items (printf "%s=%s" $key $value) }}
{{- end }}
{{- join "," $items }}
{{- end }}

{{/*
Name of the Connector ValidatingAdmissionPolicy and its binding (templates/operator/
connector-admission-policy.yaml): cluster-scoped, so the release namespace is part of it.
*/}}
{{- define "conveyor.connectorPolicyName" -}}
{{- printf "%s-%s-connectors" .Release.Namespace (include "conveyor.fullname" .) | trunc 253 }}
{{- end }}

{{/*
connectors.allowedSparkConf as a CEL list of raw-string RE2 regular expressions, one per fnmatch
glob: the glob regexp-quoted, then * as .* (any characters, dots too) and ? as . , anchored; the
same as conveyor_operator.admission_policy.glob_regex. The values schema refuses the characters
this cannot carry ([ ] ' " \ , and spaces).
*/}}
{{- define "conveyor.allowedSparkConfRegexes" -}}
{{- $regexes := list }}
{{- range .Values.connectors.allowedSparkConf }}
{{- $regexes = append $regexes (printf "r'^(?s:%s)$'" (regexQuoteMeta . | replace "\\*" ".*" | replace "\\?" ".")) }}
{{- end }}
{{- printf "[%s]" (join ", " $regexes) }}
{{- end }}
