"""Pure domain logic: plain values in (spec, status, observations, the time), decisions out.

No I/O and no Kubernetes, AWS or Prometheus client here; the handlers feed it and apply what it
returns: the state machine (``lifecycle``) and what a tick exchanges with the handlers
(``ticks``), the rules whose verdicts it applies (``gates``, ``route_guard``, ``verdict``), where a
trial stands on its steps (``schedule``), what undoes a trial (``undo``), its preflight rules
(``preflight``), a measurement's windows and judging (``measurement``), admission of a trial's
spec, conditions bookkeeping and the kstatus conditions of a phase (``conditions``),
the metric requests a measurement makes in the domain's terms (``metrics``: never a query
language), the analysis judge and its statistics, the cost model (``costing``,
``economics``), promotion sizing, routing arithmetic, the candidate's manifests and the report.
"""
