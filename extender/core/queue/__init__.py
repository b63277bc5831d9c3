"""The gang queue: the order capacity is granted in, backoff after timeouts, how fast
gangs are arriving, and the pass that grants reservations in that order."""
