"""Benchmarks of gang-extender. They print numbers; they never fail on a timing.

* `bench/core/`: the in-process suite, `python -m bench.core` (kube-scheduler's calls
  through the ASGI app, no network); rerun on every change that may touch speed.
* `bench/e2e/`: the end-to-end suite, `python -m bench.e2e` (the local control plane,
  gang-extender against the stock kube-scheduler and the other gang schedulers).
* `bench/experiments/`: one-off measurements, each of which answered one question; the
  top of each module's docstring says which, and where in docs/ the answer is written.
  They are kept runnable so that an answer can be re-measured, not run routinely.
* `bench/common.py` (percentiles, process CPU and memory, writing results) and
  `bench/cpu_profile.py` (any of the above under a CPU-clock profiler) serve all three.
* `bench/results/`: what the suites and some experiments wrote, cited by docs/.
"""
