"""The in-process suite, `python -m bench.core` (driver: bench/core/main.py): the cluster
and gangs (workload), kube-scheduler's loop (run) with its own fit check (simulator), the
extender wired and timed at its seams (inprocess), and the tables (report)."""
