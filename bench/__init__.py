"""Benchmarks of gang-extender: `python -m bench.core` (in-process) and `python -m bench.e2e`
(local control plane). They print numbers; they never fail on a timing."""
