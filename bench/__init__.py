"""Benchmarks of gang-extender. They print numbers; they never fail on a timing.

* `bench/core/`: the in-process suite, `python -m bench.core` (kube-scheduler's calls
  through the ASGI app, no network); rerun on every change that may touch speed.
* `bench/e2e/`: the end-to-end suite, `python -m bench.e2e` (the local control plane,
  gang-extender against the stock kube-scheduler and the other gang schedulers).
* `bench/common.py` (percentiles, process CPU and memory, writing results) and
  `bench/cpu_profile.py` (either suite's extender under a CPU-clock profiler) serve both.
* `bench/results/`: the latest results of the suites, which docs/performance.md cites.

One-off experiments and the results of earlier runs are in lab/ (lab/README.md), outside
the package and its tests.
"""
