{{/*
The KubeSchedulerConfiguration; same content as deploy/scheduler-config.yaml (see the
comments there for the reasons behind each setting).
*/}}
{{- define "gang-scheduler.schedulerConfig" -}}
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
leaderElection:
  leaderElect: {{ .Values.scheduler.leaderElection.enabled }}
  resourceLock: leases
  resourceNamespace: {{ .Release.Namespace }}
  resourceName: {{ .Values.scheduler.leaderElection.leaseName }}
podInitialBackoffSeconds: {{ .Values.scheduler.podInitialBackoffSeconds }}
podMaxBackoffSeconds: {{ .Values.scheduler.podMaxBackoffSeconds }}
profiles:
- schedulerName: {{ .Values.schedulerName }}
  plugins:
    postFilter:
      disabled:
      - name: DefaultPreemption
extenders:
- urlPrefix: http://127.0.0.1:{{ .Values.extender.port }}
  filterVerb: filter
  prioritizeVerb: prioritize
  weight: 1
  nodeCacheCapable: true
  ignorable: false
  httpTimeout: {{ .Values.extender.filterTimeout }}
- urlPrefix: http://127.0.0.1:{{ .Values.extender.port }}
  bindVerb: bind
  nodeCacheCapable: true
  ignorable: false
  httpTimeout: {{ .Values.extender.bindTimeout }}
{{- end }}
