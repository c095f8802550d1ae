"""Pure domain logic: plain values in (spec, status, observations, the time), decisions out.

No I/O and no Kubernetes, AWS or Prometheus client here; the handlers feed it and apply what it
returns. So far: conditions bookkeeping, admission of a trial's spec, query templates, the
analysis judge and its statistics, and the cost model (``economics``).
"""
