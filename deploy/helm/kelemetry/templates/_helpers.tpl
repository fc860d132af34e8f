{{/* The chart's name, or nameOverride. */}}
{{- define "kelemetry.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* The release's full name (fullnameOverride, or the release and chart names), at most 63 characters. */}}
{{- define "kelemetry.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := include "kelemetry.name" . -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "kelemetry.selectorLabels" -}}
app.kubernetes.io/name: {{ include "kelemetry.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{/* The pod template's labels: the selector's, the component's, and podLabels. dict "root" $ "component" NAME. */}}
{{- define "kelemetry.podLabels" -}}
{{ include "kelemetry.selectorLabels" .root }}
app.kubernetes.io/component: {{ .component }}
{{- with .root.Values.podLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{- define "kelemetry.labels" -}}
{{ include "kelemetry.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "kelemetry.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "kelemetry.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "kelemetry.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}

{{/* Where the pods find their files. */}}
{{- define "kelemetry.configDir" -}}/etc/kelemetry{{- end -}}

{{/*
The Secrets of the listeners' certificates and of the tokens they accept: the ones the values
name, else the chart's own (tls.source, auth.generateTokens; templates/credentials.yaml), else
none.
*/}}
{{- define "kelemetry.webhookTLSSecret" -}}
{{- if .Values.webhook.tlsSecret -}}{{ .Values.webhook.tlsSecret }}{{- else if ne .Values.tls.source "none" -}}{{ include "kelemetry.fullname" . }}-tls{{- end -}}
{{- end -}}
{{- define "kelemetry.apiTLSSecret" -}}
{{- if .Values.api.tlsSecret -}}{{ .Values.api.tlsSecret }}{{- else if ne .Values.tls.source "none" -}}{{ include "kelemetry.fullname" . }}-tls{{- end -}}
{{- end -}}
{{- define "kelemetry.webhookTokenSecret" -}}
{{- if .Values.webhook.tokenSecret -}}{{ .Values.webhook.tokenSecret }}{{- else if and .Values.auth.generateTokens (not .Values.webhook.clientCASecret) -}}{{ include "kelemetry.fullname" . }}-webhook-token{{- end -}}
{{- end -}}
{{- define "kelemetry.apiTokenSecret" -}}
{{- if .Values.api.tokenSecret -}}{{ .Values.api.tokenSecret }}{{- else if .Values.auth.generateTokens -}}{{ include "kelemetry.fullname" . }}-api-token{{- end -}}
{{- end -}}

{{/*
kelemetry.config renders Kelemetry's configuration file for one role ("all", "ingest", "query",
"events"): dict "root" $ "role" ROLE.
*/}}
{{- define "kelemetry.config" -}}
{{- $v := .root.Values -}}
{{- $webhookTLS := include "kelemetry.webhookTLSSecret" .root -}}
{{- $apiTLS := include "kelemetry.apiTLSSecret" .root -}}
{{- $webhookToken := include "kelemetry.webhookTokenSecret" .root -}}
{{- $apiToken := include "kelemetry.apiTokenSecret" .root -}}
{{- $role := .role -}}
{{- $dir := include "kelemetry.configDir" .root -}}
{{- $c := dict "cluster" $v.cluster "window" $v.window "auditAddr" (printf ":%d" (int $v.webhook.port)) "httpAddr" (printf ":%d" (int $v.api.port)) -}}
{{- $_ := set $c "kubeconfig" (printf "%s/kubeconfig/kubeconfig" $dir) -}}
{{- if eq $role "all" -}}
{{- $_ := set $c "role" "all" -}}
{{- $_ := set $c "dataDir" "/data" -}}
{{- $_ := set $c "store" (dict "maxAge" $v.allinone.store.maxAge "maxBytes" (include "kelemetry.bytes" $v.allinone.store.maxBytes | int64)) -}}
{{- else -}}
{{- $_ := set $c "role" (ternary "query" "ingest" (eq $role "query")) -}}
{{- $_ := set $c "dataDir" (ternary "" "/data" (eq $role "query")) -}}
{{- $_ := set $c "storeBackend" "jaeger" -}}
{{- $jaeger := dict "endpoint" $v.scaled.jaeger.endpoint -}}
{{- if and (ne $role "query") $v.scaled.jaeger.otlpEndpoint -}}
{{- $_ := set $jaeger "otlp" (dict "endpoint" $v.scaled.jaeger.otlpEndpoint) -}}
{{- end -}}
{{- $_ := set $c "jaeger" $jaeger -}}
{{- if and (eq $role "ingest") $v.scaled.nats.urls -}}
{{- $nats := dict "urls" $v.scaled.nats.urls -}}
{{- if $v.scaled.nats.stream -}}{{- $_ := set $nats "stream" $v.scaled.nats.stream -}}{{- end -}}
{{- $_ := set $c "audit" (dict "queue" (dict "nats" $nats)) -}}
{{- end -}}
{{- end -}}
{{- $otlp := and (or $v.apiserverTraces.enabled $v.otlpLogs.enabled) (ne $role "query") -}}
{{- if $otlp -}}
{{- $_ := set $c "otlpAddr" (printf ":%d" (int $v.otlp.port)) -}}
{{- end -}}
{{- if and $otlp $v.apiserverTraces.enabled -}}
{{- $_ := set $c "apiserverTraces" (dict "enabled" true) -}}
{{- end -}}
{{- if and $otlp $v.otlpLogs.enabled -}}
{{- $audit := $c.audit | default dict -}}
{{- $_ := set $audit "otlpLogs" (dict "enabled" true "format" $v.otlpLogs.format) -}}
{{- $_ := set $c "audit" $audit -}}
{{- end -}}
{{- if $webhookTLS -}}
{{- $_ := set $c "auditTLS" (dict "certFile" (printf "%s/tls/webhook/tls.crt" $dir) "keyFile" (printf "%s/tls/webhook/tls.key" $dir)) -}}
{{- end -}}
{{- $auditAuth := dict -}}
{{- if $v.webhook.clientCASecret -}}{{- $_ := set $auditAuth "clientCAFile" (printf "%s/tls/webhook-client-ca/ca.crt" $dir) -}}{{- end -}}
{{- if $webhookToken -}}{{- $_ := set $auditAuth "tokenFiles" (list (printf "%s/tokens/webhook/tokens" $dir)) -}}{{- end -}}
{{- if $auditAuth -}}{{- $_ := set $c "auditAuth" $auditAuth -}}{{- end -}}
{{- /* Audit events as OTLP logs come with the webhook's TLS and credentials. */ -}}
{{- if and $otlp $v.otlpLogs.enabled -}}
{{- if $c.auditTLS -}}{{- $_ := set $c "otlpTLS" $c.auditTLS -}}{{- end -}}
{{- if $auditAuth -}}{{- $_ := set $c "otlpAuth" $auditAuth -}}{{- end -}}
{{- end -}}
{{- if $apiTLS -}}
{{- $_ := set $c "httpTLS" (dict "certFile" (printf "%s/tls/api/tls.crt" $dir) "keyFile" (printf "%s/tls/api/tls.key" $dir)) -}}
{{- end -}}
{{- if $apiToken -}}
{{- $_ := set $c "httpAuth" (dict "tokenFiles" (list (printf "%s/tokens/api/tokens" $dir))) -}}
{{- end -}}
{{- /* Events: the all-in-one watches them; scaled, only the events Deployment does. */ -}}
{{- $ev := dict "watch" (and $v.events.watch (or (eq $role "all") (eq $role "events"))) -}}
{{- if $ev.watch -}}
{{- $src := dict "api" $v.events.api -}}
{{- if eq $role "all" -}}
{{- $_ := set $src "checkpointFile" "/data/event-checkpoint.json" -}}
{{- else -}}
{{- $_ := set $src "checkpointConfigMap" (printf "%s/%s-event-checkpoint" .root.Release.Namespace (include "kelemetry.fullname" .root)) -}}
{{- end -}}
{{- $_ := set $ev "source" $src -}}
{{- end -}}
{{- $_ := set $c "event" $ev -}}
{{- $inf := dict "enabled" (and $v.informerDiff.enabled (or (eq $role "all") (eq $role "ingest"))) -}}
{{- if $inf.enabled -}}
{{- $_ := set $inf "informer" (dict "resources" $v.watchedResources) -}}
{{- $_ := set $inf "leaderElection" (dict "enabled" true "leaseNamespace" .root.Release.Namespace "leaseName" $v.informerDiff.leaseName) -}}
{{- end -}}
{{- $_ := set $c "informerDiff" $inf -}}
{{- $_ := set $c "linkRules" (dict "disableWatch" (not (and $v.linkRules.watch (ne $role "query")))) -}}
{{- if and $v.auditCollector.enabled (eq $role "all") -}}
{{- $_ := set $c "audit" (dict "follow" (list "/var/log/kelemetry-audit/audit.log")) -}}
{{- end -}}
{{- toYaml (mustMergeOverwrite $c (deepCopy $v.config)) -}}
{{- end -}}

{{/* kelemetry.bytes turns a quantity ("16Gi", "500M", 1024) into bytes. */}}
{{- define "kelemetry.bytes" -}}
{{- $s := toString . -}}
{{- $units := dict "Ki" 1024 "Mi" 1048576 "Gi" 1073741824 "Ti" 1099511627776 "K" 1000 "M" 1000000 "G" 1000000000 "T" 1000000000000 -}}
{{- $n := regexFind "^[0-9]+" $s -}}
{{- $u := trimPrefix $n $s -}}
{{- if $u -}}{{- mul (int64 $n) (get $units $u) -}}{{- else -}}{{- $n -}}{{- end -}}
{{- end -}}

{{/* The in-cluster kubeconfig: the pod's ServiceAccount token, re-read when rotated. */}}
{{- define "kelemetry.kubeconfig" -}}
apiVersion: v1
kind: Config
clusters:
- name: in-cluster
  cluster:
    server: https://kubernetes.default.svc
    certificate-authority: /var/run/secrets/kubernetes.io/serviceaccount/ca.crt
contexts:
- name: in-cluster
  context:
    cluster: in-cluster
    user: kelemetry
current-context: in-cluster
users:
- name: kelemetry
  user:
    tokenFile: /var/run/secrets/kubernetes.io/serviceaccount/token
{{- end -}}

{{/* The container of a role: dict "root" $ "role" ROLE "resources" RESOURCES. */}}
{{- define "kelemetry.container" -}}
{{- $v := .root.Values -}}
{{- $webhookTLS := include "kelemetry.webhookTLSSecret" .root -}}
{{- $apiTLS := include "kelemetry.apiTLSSecret" .root -}}
{{- $webhookToken := include "kelemetry.webhookTokenSecret" .root -}}
{{- $apiToken := include "kelemetry.apiTokenSecret" .root -}}
{{- $dir := include "kelemetry.configDir" .root -}}
{{- $scheme := ternary "HTTPS" "HTTP" (ne $apiTLS "") -}}
- name: kelemetry
  image: {{ include "kelemetry.image" .root }}
  imagePullPolicy: {{ $v.image.pullPolicy }}
  args:
    - --config={{ $dir }}/config/{{ .role }}.yaml
    - --log-level={{ $v.logLevel }}
    {{- range $v.extraArgs }}
    - {{ . | quote }}
    {{- end }}
  {{- with $v.extraEnv }}
  env:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with $v.extraEnvFrom }}
  envFrom:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  ports:
    {{- if ne .role "query" }}
    - {name: webhook, containerPort: {{ $v.webhook.port }}, protocol: TCP}
    {{- if or $v.apiserverTraces.enabled $v.otlpLogs.enabled }}
    - {name: otlp, containerPort: {{ $v.otlp.port }}, protocol: TCP}
    {{- end }}
    {{- end }}
    - {name: http, containerPort: {{ $v.api.port }}, protocol: TCP}
  startupProbe:
    httpGet: {path: /healthz, port: http, scheme: {{ $scheme }}}
    periodSeconds: 5
    failureThreshold: 60
  readinessProbe:
    # /readyz: the named readiness checks (sinks, audit-queue); unauthenticated probes get the
    # outcome of each, which /healthz does not give them when the API requires a token.
    httpGet: {path: /readyz, port: http, scheme: {{ $scheme }}}
    periodSeconds: 10
  livenessProbe:
    # /livez: the process serves. /healthz answers 503 while a full disk or a failed queue write
    # keeps writes out; the process recovers from those by itself, and a restart would not help.
    httpGet: {path: /livez, port: http, scheme: {{ $scheme }}}
    periodSeconds: 20
    failureThreshold: 6
  resources:
    {{- toYaml .resources | nindent 4 }}
  securityContext:
    {{- toYaml $v.securityContext | nindent 4 }}
  volumeMounts:
    - {name: config, mountPath: {{ $dir }}/config, readOnly: true}
    - {name: kubeconfig, mountPath: {{ $dir }}/kubeconfig, readOnly: true}
    {{- if ne .role "query" }}
    - {name: data, mountPath: /data}
    {{- end }}
    - {name: tmp, mountPath: /tmp}
    {{- if $webhookTLS }}
    - {name: webhook-tls, mountPath: {{ $dir }}/tls/webhook, readOnly: true}
    {{- end }}
    {{- if $v.webhook.clientCASecret }}
    - {name: webhook-client-ca, mountPath: {{ $dir }}/tls/webhook-client-ca, readOnly: true}
    {{- end }}
    {{- if $webhookToken }}
    - {name: webhook-tokens, mountPath: {{ $dir }}/tokens/webhook, readOnly: true}
    {{- end }}
    {{- if $apiTLS }}
    - {name: api-tls, mountPath: {{ $dir }}/tls/api, readOnly: true}
    {{- end }}
    {{- if $apiToken }}
    - {name: api-tokens, mountPath: {{ $dir }}/tokens/api, readOnly: true}
    {{- end }}
    {{- if and $v.auditCollector.enabled (eq .role "all") }}
    - {name: audit-log, mountPath: /var/log/kelemetry-audit, readOnly: true}
    {{- end }}
    {{- with $v.extraVolumeMounts }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
{{- end -}}

{{/* The pod's volumes but data (the StatefulSet's claim, or an emptyDir in Deployments), then extraVolumes. */}}
{{- define "kelemetry.volumes" -}}
{{- $v := .Values -}}
{{- $webhookTLS := include "kelemetry.webhookTLSSecret" . -}}
{{- $apiTLS := include "kelemetry.apiTLSSecret" . -}}
{{- $webhookToken := include "kelemetry.webhookTokenSecret" . -}}
{{- $apiToken := include "kelemetry.apiTokenSecret" . -}}
- name: config
  configMap: {name: {{ include "kelemetry.fullname" . }}}
- name: kubeconfig
  configMap: {name: {{ include "kelemetry.fullname" . }}-kubeconfig}
- name: tmp
  emptyDir: {sizeLimit: 64Mi}
{{- if $webhookTLS }}
- name: webhook-tls
  secret: {secretName: {{ $webhookTLS }}}
{{- end }}
{{- if $v.webhook.clientCASecret }}
- name: webhook-client-ca
  secret: {secretName: {{ $v.webhook.clientCASecret }}}
{{- end }}
{{- if $webhookToken }}
- name: webhook-tokens
  secret: {secretName: {{ $webhookToken }}}
{{- end }}
{{- if $apiTLS }}
- name: api-tls
  secret: {secretName: {{ $apiTLS }}}
{{- end }}
{{- if $apiToken }}
- name: api-tokens
  secret: {secretName: {{ $apiToken }}}
{{- end }}
{{- with $v.extraVolumes }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* Pod spec fields shared by every workload. */}}
{{- define "kelemetry.podCommon" -}}
serviceAccountName: {{ include "kelemetry.serviceAccountName" . }}
automountServiceAccountToken: true
terminationGracePeriodSeconds: 45
securityContext:
  {{- toYaml .Values.podSecurityContext | nindent 2 }}
{{- with .Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.affinity }}
affinity:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.priorityClassName }}
priorityClassName: {{ . }}
{{- end }}
{{- with .Values.topologySpreadConstraints }}
topologySpreadConstraints:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}
