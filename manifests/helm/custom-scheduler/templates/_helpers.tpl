{{/* Chart name, overridable. */}}
{{- define "custom-scheduler.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Object name prefix: the release name when it already contains the chart name. */}}
{{- define "custom-scheduler.fullname" -}}
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

{{- define "custom-scheduler.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Labels on every object. */}}
{{- define "custom-scheduler.labels" -}}
helm.sh/chart: {{ include "custom-scheduler.chart" . }}
{{ include "custom-scheduler.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: custom-scheduler
app.kubernetes.io/component: scheduler
{{- end }}

{{/* Labels that select the scheduler's pods. */}}
{{- define "custom-scheduler.selectorLabels" -}}
app.kubernetes.io/name: {{ include "custom-scheduler.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "custom-scheduler.serviceAccountName" -}}
{{ include "custom-scheduler.fullname" . }}
{{- end }}

{{- define "custom-scheduler.image" -}}
{{- printf "%s:%s" .Values.image.repository (.Values.image.tag | default (printf "v%s" .Chart.AppVersion)) }}
{{- end }}

{{/*
Whether an optional prometheus-operator object is rendered: value "auto" (when the cluster serves the
kind), true or false. Call with (list $ .Values.x.enabled "monitoring.coreos.com/v1/Kind").
*/}}
{{- define "custom-scheduler.monitoringEnabled" -}}
{{- $root := index . 0 }}
{{- $value := toString (index . 1) }}
{{- if eq $value "auto" }}
{{- if $root.Capabilities.APIVersions.Has (index . 2) }}true{{ end }}
{{- else if eq $value "true" }}true
{{- else if ne $value "false" }}
{{- fail (printf "%s: enabled must be auto, true or false, not %q" (index . 2) $value) }}
{{- end }}
{{- end }}

{{/* The KubeSchedulerConfiguration the scheduler runs with. */}}
{{- define "custom-scheduler.config" -}}
{{- $le := dict "leaderElect" .Values.leaderElection.enabled }}
{{- if .Values.leaderElection.enabled }}
{{- $_ := set $le "resourceName" .Values.leaderElection.resourceName }}
{{- $_ := set $le "resourceNamespace" .Release.Namespace }}
{{- range $k := list "leaseDuration" "renewDeadline" "retryPeriod" }}
{{- with index $.Values.leaderElection $k }}
{{- $_ := set $le $k . }}
{{- end }}
{{- end }}
{{- end }}
{{- $profile := dict "schedulerName" .Values.schedulerName }}
{{- with .Values.plugins }}
{{- $_ := set $profile "plugins" . }}
{{- end }}
{{- with .Values.pluginConfig }}
{{- $_ := set $profile "pluginConfig" . }}
{{- end }}
{{- $profiles := list $profile }}
{{- /* The alias: a copy of the profile with only its name changed (Coscheduling is the queue sort, whose
args must be the same in every profile), so whatever the profile gains the alias has too. */}}
{{- if .Values.schedulerPluginsAlias.enabled }}
{{- if eq .Values.schedulerPluginsAlias.schedulerName .Values.schedulerName }}
{{- fail (printf "schedulerPluginsAlias.schedulerName: %q is already the main profile's name" .Values.schedulerName) }}
{{- end }}
{{- $alias := deepCopy $profile }}
{{- $_ := set $alias "schedulerName" .Values.schedulerPluginsAlias.schedulerName }}
{{- $profiles = append $profiles $alias }}
{{- end }}
{{- $cfg := dict "apiVersion" "kubescheduler.config.k8s.io/v1" "kind" "KubeSchedulerConfiguration" "leaderElection" $le "profiles" $profiles }}
{{- range $k, $v := .Values.extraConfig }}
{{- if has $k (list "apiVersion" "kind" "leaderElection" "profiles" "clientConnection") }}
{{- fail (printf "extraConfig.%s: set it through the chart's own values" $k) }}
{{- end }}
{{- $_ := set $cfg $k $v }}
{{- end }}
{{- toYaml $cfg }}
{{- end }}

{{/* The label matcher of the alerts: this scheduler's scrape job. */}}
{{- define "custom-scheduler.alertSelector" -}}
{{- .Values.prometheusRule.selector | default (printf "job=%q" (include "custom-scheduler.fullname" .)) }}
{{- end }}
