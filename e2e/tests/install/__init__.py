"""The install story as a user meets it: deploy/ and the Helm chart, external mode
(any cluster), the examples and the demo."""
