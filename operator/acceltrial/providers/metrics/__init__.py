"""The metrics port (``port.py``: a source that answers the analysis' requests in the domain's
terms, and ``collect`` running a measurement's requests once) and its Prometheus adapter
(``prometheus/``: the HTTP client, the presets' PromQL and the reader), built by ``factory.py``
from the trial's ``analysis`` and the secret values the handler resolved."""
