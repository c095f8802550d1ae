"""The metrics port and its Prometheus adapter."""
