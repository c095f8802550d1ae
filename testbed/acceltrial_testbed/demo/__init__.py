"""``acceltrial demo``: a complete trial on the local sandbox, a simulated fleet and a real
Prometheus, run from a scenario file (``scenario``), with live progress (``progress``),
orchestrated by ``runner``. The operator runs unchanged, as a separate ``kopf run`` process."""
