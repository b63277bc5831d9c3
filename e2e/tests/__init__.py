"""End-to-end tests; they need a control plane (see ``e2e/harness``)."""
