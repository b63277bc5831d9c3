"""The gang queue: the order capacity is granted in, backoff after timeouts, how fast
gangs are arriving, the pass that grants reservations in that order, and what the end of
a reservation means for its gang (`timeouts`: bound, or timed out and backing off)."""
