"""The fake kubelet's parts: :mod:`.pod` (a pod as the kubelet sees it, from the
annotations tests set), :mod:`.loop` (LIST + WATCH of pods and fake nodes, and the
decision of what a pod needs next), :mod:`.life` (its run-time clock, rendezvous and
status writes; the loop holds one and calls it) and :mod:`.writes` (the API client those
writes go through, the part a measurement swaps). :mod:`e2e.harness.fakekubelet` runs
them, as a process or a thread, and is what tests and benchmarks hold; apart so that the
harness's top level lists the control plane's parts, and the kubelet's own machinery sits
in one place.
"""
