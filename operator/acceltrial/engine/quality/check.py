"""What one run of the prompt set brought back (``QualityCheck``), as the handlers hand it to
the state machine, and when a run is due. Pure values: the provider (providers/quality) asks
the servers and fills it in."""

from __future__ import annotations

from dataclasses import dataclass

from acceltrial.api.quality import QualityExample, Scoring
from acceltrial.api.spec import TrialSpec
from acceltrial.api.status import TrialStatus
from acceltrial.engine.quality.compare import PromptScore


@dataclass(frozen=True)
class QualityCheck:
    """Both variants' answers to the prompt set, compared."""

    scores: tuple[PromptScore, ...] = ()
    """The prompts both variants answered, each scored."""
    unanswered: int = 0
    """Prompts either variant left unanswered after retries."""
    scoring: Scoring | None = None
    reprompted: int = 0
    """Prompts teacher-forced by re-prompting (chat prompts, and all once echo failed)."""
    examples: tuple[QualityExample, ...] = ()
    """The prompts where the candidate agreed least."""
    problem: str | None = None
    """Why the check cannot run at all, for good: a missing ConfigMap or key, an unreadable
    line, a server that refuses the API or its log-probabilities. The trial ends."""
    unreachable: str | None = None
    """Why no prompt got an answer from a variant, for now (its Service has no ready endpoints
    yet, say): the check is asked again on the next tick, within progressDeadline."""


def quality_due(spec: TrialSpec, status: TrialStatus, candidate_available: bool) -> bool:
    """Whether this tick runs the prompt set: once the candidate is Available before step 1,
    and with ``quality.everyStep`` once per step after, while the trial progresses."""
    if spec.quality is None or status.phase != "Progressing" or status.step is None:
        return False
    checked = status.quality
    if status.step == 0:
        return candidate_available and checked is None
    return spec.quality.every_step and (checked is None or checked.step < status.step)
