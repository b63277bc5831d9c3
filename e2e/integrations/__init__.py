"""Other projects, unchanged, as local processes beside the gang scheduler: the Kubeflow
MPI and Training Operators (:mod:`.mpi_operator`, :mod:`.training_operator`, what their
tests share in :mod:`.operators`), Kueue (:mod:`.kueue`, its objects in
:mod:`.kueue_objects`) and the Cluster Autoscaler (:mod:`.autoscaler`; where it cannot be
built, :mod:`.autoscaler_standin` and its pure decisions :mod:`.autoscaler_standin_plan`;
the ProvisioningRequests both answer: :mod:`.provisioning_objects`).

Apart from the harness because each one is an integration users run, with a version
pinned and built by e2e/build-operator.sh, not part of the control plane every test
needs; their tests are in e2e/tests/integrations.
"""
