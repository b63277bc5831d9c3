"""What every other e2e test takes for granted from the harness: the fake kubelet and
fake nodes, the rendezvous, a plain Job running to completion."""
