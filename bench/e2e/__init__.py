"""The end-to-end suite, `python -m bench.e2e` (driver: bench/e2e/main.py): the systems
compared (systems), one run of one system (run) observed without touching it (watch,
apiserver_pprof), and the numbers, tables and picture (report, plot)."""
