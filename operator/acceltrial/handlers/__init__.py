"""Thin kopf handlers: the top layer. ``kopf run -m acceltrial.handlers`` registers them all.

Handlers read the object into plain values, call the engine and apply what it decides; no
decision is made here. One tick's parts: ``world`` (the tick), ``freshness`` (whether kopf's
copy of the trial holds the last status written), ``snapshot`` (each object read once),
``preflight``, ``measure`` and ``metrics_source``, ``executor`` (the engine's actions),
``report_writer``. ``training`` runs TrainingTrials.
"""

from acceltrial.handlers import lifecycle, startup, training, trials

__all__ = ["lifecycle", "startup", "training", "trials"]
