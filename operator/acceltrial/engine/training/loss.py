"""Loss parity: the candidate's loss against the baseline's at the steps both logged, after the
warm-up. Pure.

Neuron publishes no tolerance between a GPU and a Trainium loss curve (the NxD tutorial says
only that the curves "should match"), so the tolerance is the user's criterion (``loss_gap``)
and the figure carries its uncertainty. The gap is judged where a run ends, which is what a
training run is for: over the last quarter of the matched steps (at least
:data:`MIN_FINAL_STEPS`), each step's gap is the candidate's loss minus the baseline's over the
baseline's (0.05: 5% higher), and the figure is their mean with a 95% interval (Student's t, a
floor on the uncertainty: neighbouring steps are not independent). Fewer matched steps than
:data:`MIN_MATCHED_STEPS` cannot be judged. A loss that is not finite (NaN, inf) on a variant
is divergence, judged at once.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from acceltrial.api.training.status import MAX_LOSS_POINTS, LossPoint
from acceltrial.engine.training.runs import Interval, mean_interval

MIN_MATCHED_STEPS = 8
"""Matched steps after the warm-up below which loss parity is not judged."""
MIN_FINAL_STEPS = 4
"""Steps the final gap is averaged over, at least."""


@dataclass(frozen=True)
class LossGap:
    """The final loss gap, or why it cannot be judged (``problem``)."""

    gap: Interval | None
    matched_steps: int
    final_steps: tuple[int, ...] = ()
    baseline_final: float | None = None
    candidate_final: float | None = None
    problem: str | None = None
    diverged: str | None = None
    """The variant whose loss is not finite at a matched step, when one is."""


def loss_gap(
    baseline: Mapping[int, float], candidate: Mapping[int, float], warmup_steps: int
) -> LossGap:
    """The candidate's final loss gap to the baseline's at matched steps after the warm-up."""
    steps = sorted(s for s in baseline.keys() & candidate.keys() if s > warmup_steps)
    for variant, losses in (("candidate", candidate), ("baseline", baseline)):
        broken = [s for s in steps if not math.isfinite(losses[s])]
        if broken:
            return LossGap(None, len(steps), diverged=variant, problem=(
                f"the {variant}'s loss is {losses[broken[0]]} at step {broken[0]}"
            ))  # fmt: skip
    if len(steps) < MIN_MATCHED_STEPS:
        return LossGap(None, len(steps), problem=(
            f"{len(steps)} steps after the warm-up ({warmup_steps}) logged a loss on both "
            f"variants; loss parity needs {MIN_MATCHED_STEPS}"
        ))  # fmt: skip
    final = steps[-max(MIN_FINAL_STEPS, len(steps) // 4) :]
    gaps = [(candidate[s] - baseline[s]) / baseline[s] for s in final if baseline[s] != 0]
    if not gaps:
        return LossGap(None, len(steps), problem="the baseline's final loss is 0")
    return LossGap(
        gap=mean_interval(gaps),
        matched_steps=len(steps),
        final_steps=tuple(final),
        baseline_final=sum(baseline[s] for s in final) / len(final),
        candidate_final=sum(candidate[s] for s in final) / len(final),
    )


def loss_curve(losses: dict[int, float], keep_last: int = 256) -> list[LossPoint]:
    """The loss curve the status keeps, at most MAX_LOSS_POINTS points: the last ``keep_last``
    steps whole, the earlier ones evenly thinned; points that are not finite kept as they are
    (divergence is a finding)."""
    steps = sorted(losses)
    head, tail = steps[:-keep_last], steps[-keep_last:]
    room = MAX_LOSS_POINTS - len(tail)
    if len(head) > room:
        head = [head[round(i * (len(head) - 1) / max(1, room - 1))] for i in range(room)]
    points = [LossPoint(step=s, loss=losses[s]) for s in [*head, *tail]]
    return [p for p in points if math.isfinite(p.loss)] + [
        p for p in points if not math.isfinite(p.loss)
    ][:1]
