"""A window in which the candidate answered no request: chance, or no traffic reaching it.

Pure. A quiet step brings the candidate few requests: at 5% of 20 requests/s, a 3 s window
holds 3 on average and none one time in twenty. Such a window shows nothing, neither harm nor
parity: it is *thin* (engine/weighing.py), counts toward no limit, and the step ends on time.
Only when the requests the baseline served beside it make none implausible (its share should
have brought more than chance allows to miss, at ``analysis.alpha``) is the window
*inconclusive*: the candidate is probably not receiving traffic (a gateway that ignores
weights, a broken Service), which its inconclusive limit then stops.
(Flagger counts every "no values found" as a failed check, and its users file that as the
canary rolled back for a quiet hour.)
"""

from __future__ import annotations

import math
from dataclasses import replace

from acceltrial.engine.analysis import Judgement


def expected_requests(baseline_requests: float | None, weight: int, mirror: int) -> float | None:
    """How many requests the candidate's share should have brought beside the baseline's
    ``baseline_requests`` over the same span: ``weight`` percent of users' requests split
    (the baseline had the rest), or ``mirror`` percent of the baseline's copied. None when it
    cannot be said (no baseline count; at 100% the baseline serves nothing to compare)."""
    if baseline_requests is None or not math.isfinite(baseline_requests):
        return None
    if mirror and not weight:
        return baseline_requests * mirror / 100
    if not 0 < weight < 100:
        return None
    return baseline_requests * weight / (100 - weight)


def weigh_unserved(
    judgement: Judgement, expected: float | None, share: str, alpha: float
) -> Judgement:
    """An unserved judgement (``judgement.unserved``) as thin when none of the ``expected``
    requests may be chance (Poisson: e^-expected at least ``alpha``), else inconclusive with
    why; left inconclusive when nothing was expected to compare (``expected`` None)."""
    if not judgement.unserved:
        return judgement
    if expected is None:
        return judgement
    chance = math.exp(-expected)
    said = (
        f"{judgement.reason}; its {share} would bring {expected:.3g} beside the baseline's "
        f"requests (none with probability {chance:.2g})"
    )
    if chance < alpha:
        return replace(judgement, reason=f"{said}: is it receiving traffic?")
    return replace(judgement, thin=True, reason=f"thin: {said}, may be chance")
