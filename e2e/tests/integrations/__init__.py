"""The gang scheduler beside other projects, each run unchanged: the MPI and Training
Operators, Kueue, the Cluster Autoscaler (ProvisioningRequests), the peers the benchmark
compares with, the in-tree gang scheduling and the upstream Workload API, Job-made gangs."""
