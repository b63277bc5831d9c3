"""Tests of the soak's own parts that need no cluster: the checker on synthetic events,
the watch cuts' proxy and timeline, the tally of reports."""
