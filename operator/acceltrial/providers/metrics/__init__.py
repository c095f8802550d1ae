"""The metrics port (``port.py``: a source that answers instant and range queries, and
``collect`` running a planned set once) and its Prometheus adapter (``prometheus.py``, built by
``factory.py`` from ``analysis.prometheus`` and the secret values the handler resolved)."""
