"""Local Kubernetes control plane for end-to-end tests of gang-extender.

* :mod:`.cluster`: ``ControlPlane`` (etcd, kube-apiserver, kube-controller-manager and
  kube-schedulers on 127.0.0.1, started in about 4 s with cached binaries), whose flags
  are in :mod:`.components`; :mod:`.clusterbase`: ``Cluster`` and ``ExternalCluster``
  (``$E2E_KUBECONFIG``, e.g. kind); :mod:`.binaries`: finding the binaries; :mod:`.crds`:
  installing CRDs; :mod:`.readiness`: ready checks; :mod:`.base`: ``HarnessError``,
  ``REPO_ROOT``.
* :mod:`.fakekubelet`: fake nodes and a kubelet that runs pods by annotation, as a process
  or a thread; its parts: :mod:`.fakenodes` (Node objects and node CRUD),
  and the subpackage :mod:`.kubelet`: :mod:`.kubelet.pod` (the annotations),
  :mod:`.kubelet.loop` (LIST + WATCH, decisions), :mod:`.kubelet.life` (timers, status
  writes), :mod:`.kubelet.writes` (the client they go through).
* :mod:`.fixtures`: pytest fixtures; the helpers, free of pytest: :mod:`.target` (the
  cluster they talk to, ``use_cluster``, ``kube``), :mod:`.objects` (``create_pod``,
  ``create_job``, ``create_podgroup``), :mod:`.queries` (``get_pod``, ``list_pods``...),
  :mod:`.waiting` (``wait_for``, ``NotYet``).
* :mod:`.process`: child processes stopped by pid, with logs; :mod:`.pki`: certificates.

Nothing is imported here so ``python -m e2e.harness.fakekubelet`` stays light.
"""
