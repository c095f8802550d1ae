"""The only code that talks to the Kubernetes API (the official ``kubernetes`` client)."""
