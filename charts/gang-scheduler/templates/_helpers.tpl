{{/* Chart name, truncated to the 63 characters of a DNS label. */}}
{{- define "gang-scheduler.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Fully qualified name: release name, plus the chart name unless already contained. */}}
{{- define "gang-scheduler.fullname" -}}
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

{{- define "gang-scheduler.selectorLabels" -}}
app.kubernetes.io/name: {{ include "gang-scheduler.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "gang-scheduler.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "gang-scheduler.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/part-of: gang-extender
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{- define "gang-scheduler.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "gang-scheduler.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "gang-scheduler.extenderServiceAccountName" -}}
{{- if .Values.extender.serviceAccount.create }}
{{- default (printf "%s-extender" (include "gang-scheduler.fullname" .)) .Values.extender.serviceAccount.name }}
{{- else }}
{{- required "extender.serviceAccount.name is required when extender.serviceAccount.create is false" .Values.extender.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* Go duration ("300s", "5m", "1h30m") to seconds, for the bind-hold check. */}}
{{- define "gang-scheduler.durationSeconds" -}}
{{- $d := toString . -}}
{{- $total := 0.0 -}}
{{- range $m := regexFindAll "[0-9.]+(h|ms|m|s)" $d -1 -}}
{{- $n := float64 (regexFind "^[0-9.]+" $m) -}}
{{- $u := trimPrefix (regexFind "^[0-9.]+" $m) $m -}}
{{- if eq $u "h" }}{{ $total = addf $total (mulf $n 3600) }}
{{- else if eq $u "m" }}{{ $total = addf $total (mulf $n 60) }}
{{- else if eq $u "s" }}{{ $total = addf $total $n }}
{{- else if eq $u "ms" }}{{ $total = addf $total (divf $n 1000) }}
{{- end -}}
{{- end -}}
{{- $total -}}
{{- end }}

{{/* extender.bindWaitLimit, or its deprecated old name extender.bindHoldLimit if set. */}}
{{- define "gang-scheduler.bindWaitLimit" -}}
{{- if hasKey .Values.extender "bindHoldLimit" -}}
{{- .Values.extender.bindHoldLimit -}}
{{- else -}}
{{- .Values.extender.bindWaitLimit -}}
{{- end -}}
{{- end }}

{{/* Values checks that would otherwise only fail at runtime. */}}
{{- define "gang-scheduler.validate" -}}
{{- $bind := include "gang-scheduler.durationSeconds" .Values.extender.bindTimeout | float64 -}}
{{- $wait := include "gang-scheduler.bindWaitLimit" . -}}
{{- if not (lt (float64 $wait) $bind) -}}
{{- fail (printf "extender.bindWaitLimit (%v s) must be below extender.bindTimeout (%v)" $wait .Values.extender.bindTimeout) -}}
{{- end -}}
{{- $filter := include "gang-scheduler.durationSeconds" .Values.extender.filterTimeout | float64 -}}
{{- if not (lt (float64 .Values.extender.assemblyWait) $filter) -}}
{{- fail (printf "extender.assemblyWait (%v s) must be below extender.filterTimeout (%v)" .Values.extender.assemblyWait .Values.extender.filterTimeout) -}}
{{- end -}}
{{- if not (lt (addf (float64 .Values.extender.assemblyWait) (float64 .Values.extender.commitWait)) $filter) -}}
{{- fail (printf "extender.assemblyWait + extender.commitWait (%v + %v s) must be below extender.filterTimeout (%v): one filter call may wait for both" .Values.extender.assemblyWait .Values.extender.commitWait .Values.extender.filterTimeout) -}}
{{- end -}}
{{- if eq .Values.scheduler.leaderElection.leaseName "kube-scheduler" -}}
{{- fail "scheduler.leaderElection.leaseName must differ from the main scheduler's lease (kube-scheduler)" -}}
{{- end -}}
{{- if and (gt (int .Values.replicaCount) 1) (not .Values.scheduler.leaderElection.enabled) -}}
{{- fail "replicaCount above 1 needs scheduler.leaderElection.enabled: without a lease every replica would schedule and bind" -}}
{{- end -}}
{{- if and .Values.networkPolicy.enabled (not .Values.networkPolicy.metricsFrom) -}}
{{- fail "networkPolicy.metricsFrom is empty: no scraper could reach /metrics; name who may, or set networkPolicy.enabled=false" -}}
{{- end -}}
{{- if eq .Values.schedulerName "default-scheduler" -}}
{{- fail "schedulerName must not be default-scheduler: the gang scheduler runs next to the main scheduler" -}}
{{- end -}}
{{- end }}
