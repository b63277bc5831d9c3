"""Other projects, unchanged, as local processes beside the gang scheduler: the Kubeflow
MPI and Training Operators (:mod:`.mpi_operator`, :mod:`.training_operator`, what their
tests share in :mod:`.operators`) and Kueue (:mod:`.kueue`, its objects in
:mod:`.kueue_objects`). Apart from the harness because each one is an integration users
run, with a version pinned and built by e2e/build-operator.sh, not part of the control
plane every test needs; their tests are in e2e/tests/integrations.
"""
