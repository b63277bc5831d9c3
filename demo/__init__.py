"""The demo behind ``make demo``: the classic two-job gang deadlock on a local control
plane, once with the stock kube-scheduler and once with the gang scheduler.

A package of its own, outside ``e2e/``: it is what a newcomer runs first, not a test, and it
only borrows the e2e harness (``e2e.harness``, ``e2e.gang``) to start the control plane, the
fake kubelet and the gang stack. Run it from the repository root as ``python -m demo``.

One job per module:

* ``jobs``: the sizes (nodes, Jobs) and the check that they make the deadlock possible;
* ``scenario``: a run against the control plane (namespaces, submitting, watching);
* ``recorder``: when each pod was created, bound, running and finished;
* ``timeline``: the recorded times as per-Job summaries, events and ``timeline.json``;
* ``verdict``: whether each run showed what it should;
* ``story``: the timeline and summary printed on stdout;
* ``gantt``: the chart ``demo.png``;
* ``__main__``: the command line, the bound on the whole demo, cleanup.
"""
