"""Detection benchmark of the quality check: how often each comparison method catches a degraded
Neuron build, and how often it refuses a healthy one, at prompt sets of 25, 100 and 400 prompts.

The models are the test bed's tiny language model (testbed/.../fleet/language_model.py): the
baseline answers in float32 (the GPU build), the candidate in bfloat16 (the Neuron build), so a
healthy candidate's drift is real rounding. Both are asked in process, through the operator's
own client and run (providers/quality: ``OpenAiClient``, ``QualityRun``), 64 tokens an answer,
and judged by the operator's own comparison (engine/quality/compare.py: ``judge_quality``) at
the trial's default ``analysis.alpha``. The candidates:

- degraded: ``tokenErrorRate`` 0.01, 0.05 and 0.2 on top of bfloat16 (that share of positions
  answers the runner-up); a wrong chat template (the candidate's server renders chat messages
  with ChatML's markers and generation prompt instead of the model's own "role: content" lines,
  as an image with another model's tokenizer config would), asked a set of chat prompts only
  and a set half of chat prompts (a completion never meets a template: pooled, the fault would
  be diluted, so the comparison also judges each kind of prompt alone);
- healthy: bfloat16 as compiled; bfloat16 with ``logprobNoise`` 0.02 (noise in nats on every
  log-probability it reports, more drift than the published BF16 tolerances admit for logits of
  order one: vllm-neuron's logit validation allows a top-5 relative error of 0.011, NxD
  Inference's logit matching a divergence difference of 0.001); bfloat16 with
  ``tokenErrorRate`` 0.001 (one extra flip in a thousand positions, rounding drift).

The comparison methods, each judged alone with a limit a user would start from, and all of them
together as the trial's verdict (any Fail fails the trial, else any Inconclusive pauses it):
``token_agreement`` min 0.98 (docs/quality.md's), ``logprob_divergence`` max 0.1 (nats),
``first_divergence`` min 0.5. A degraded candidate is caught when the verdict is Fail, a healthy
one refused when it is Fail; the Inconclusive share (the trial pauses for a person) is its own
column.

Runs share prompts from a finite pool: each case scores a pool of generated prompts once
(every prompt's ``PromptScore``, the baseline's greedy answer teacher-forced through the
candidate), then each run draws its prompt set from the pool, without replacement within a run
and independently across runs (a fixed seed; the same draws for every case), and judges it.
Scoring a prompt takes milliseconds, judging a set a few; the runs would be hours otherwise.
Runs of 400 prompts overlap heavily (400 of a 1,500-prompt pool; of 500 in ``--quick``), so
their shares vary less than fresh prompt sets' would. The prompts are random sequences of the
model's words (4 to 40; chat prompts: a user message of 3 to 30 words, a third of them after a
system message), half of them chat prompts but where the case says otherwise, from a fixed seed.

What the tiny model cannot show: it reads the last four tokens only, so a wrong template changes
the first few positions of a teacher-forced answer and no more (a real model reads the whole
prompt at every position); and a token error costs about 11 nats of ``logprob_divergence`` on
average (its runner-ups lie far below the top token), where on a real model it costs the margin
between two competing tokens, often far less: that column's catch rates do not carry over.

Teacher forcing, both ways the operator knows: the first 100 prompts of each pool are scored
again with the candidate unable to echo (``promptLogprobs: false``, so the run re-prompts at
each divergence), and the two ways' scores, verdicts and requests to the candidate compared.

    python -m bench.quality                 # 1,500-prompt pools, 200 runs a cell (2 min, 2 cores)
    python -m bench.quality --quick         # 500-prompt pools, 50 runs a cell (30 s)
    python -m bench.quality --alpha 0.05    # intervals at 95% (the default: analysis.alpha's)
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import sys
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field, replace
from typing import Any, Literal

import numpy as np

from acceltrial.api.spec import AnalysisSpec
from acceltrial.api.spec.quality import QualityCriterion
from acceltrial.engine.quality.compare import PromptScore, QualityVerdict, judge_quality
from acceltrial.engine.quality.prompts import Prompt
from acceltrial.providers.quality.check import QualityRun
from acceltrial.providers.quality.openai import OpenAiClient, Transport
from acceltrial_testbed.sandbox.fleet.language_model import VOCABULARY, Outputs, TinyModel
from acceltrial_testbed.sandbox.fleet.model_server import in_process

SIZES = (25, 100, 400)
"""Prompts a set."""
MAX_TOKENS = 64
ALPHA: float = AnalysisSpec.model_fields["alpha"].default
"""The trial's default ``analysis.alpha``, which the quality gate judges at."""
PARITY_PROMPTS = 100
"""Prompts scored both ways (echo and re-prompting)."""
SEED = 20261206
ACCEPT_CAUGHT, ACCEPT_REFUSED, ACCEPT_SIZE = 0.99, 0.01, 100
"""The issue's bar: at 100 prompts a 5% token error rate caught in at least 99% of runs, a
healthy compile refused in at most 1%."""
URL = "http://in-process"

Kind = Literal["degraded", "healthy"]


@dataclass(frozen=True)
class Case:
    """One candidate, compared with the float32 baseline."""

    name: str
    kind: Kind
    outputs: Outputs = field(default_factory=Outputs)
    wrong_template: bool = False
    """The candidate's server renders chat messages with another template."""
    chat_share: float = 0.5
    """The share of the pool's prompts that are chat prompts."""


CASES = (
    Case("tokenErrorRate 0.01", "degraded", Outputs(token_error_rate=0.01)),
    Case("tokenErrorRate 0.05", "degraded", Outputs(token_error_rate=0.05)),
    Case("tokenErrorRate 0.2", "degraded", Outputs(token_error_rate=0.2)),
    Case("wrong chat template", "degraded", wrong_template=True, chat_share=1.0),
    Case("wrong template, half chat", "degraded", wrong_template=True),
    Case("bfloat16", "healthy"),
    Case("logprobNoise 0.02", "healthy", Outputs(logprob_noise=0.02)),
    Case("tokenErrorRate 0.001", "healthy", Outputs(token_error_rate=0.001)),
)
ACCEPTANCE_CASE = "tokenErrorRate 0.05"


def _criterion(metric: str, limit: Mapping[str, float]) -> QualityCriterion:
    name = metric.replace("_", "-")
    return QualityCriterion.model_validate({"name": name, "metric": metric, "absolute": limit})


CRITERIA = (
    _criterion("token_agreement", {"min": 0.98}),
    _criterion("logprob_divergence", {"max": 0.1}),
    _criterion("first_divergence", {"min": 0.5}),
)
TOGETHER = "all (trial)"
METHODS = (*(c.metric for c in CRITERIA), TOGETHER)


@dataclass(frozen=True)
class Profile:
    pool: int
    """Prompts scored per case; a run's set is drawn from them."""
    runs: int
    """Runs (drawn prompt sets) per case and size."""


PROFILES = {"quick": Profile(pool=500, runs=50), "full": Profile(pool=1500, runs=200)}


# -- prompts and servers ---------------------------------------------------------------------


def prompt_pool(size: int, chat_share: float, seed: int = SEED) -> list[Prompt]:
    """``size`` prompts of random words of the model's vocabulary, ``chat_share`` of them chat
    (a user message, a third of them after a system message)."""
    rng = np.random.default_rng(seed)

    def words(low: int, high: int) -> str:
        picked = rng.integers(0, len(VOCABULARY), int(rng.integers(low, high + 1)))
        return " ".join(VOCABULARY[i].strip() for i in picked)

    prompts = []
    for line in range(1, size + 1):
        if rng.random() >= chat_share:
            prompts.append(Prompt(line, text=words(4, 40)))
            continue
        system = (("system", words(5, 15)),) if rng.random() < 1 / 3 else ()
        prompts.append(Prompt(line, messages=(*system, ("user", words(3, 30)))))
    return prompts


def wrong_template(transport: Transport) -> Transport:
    """``transport`` whose chat requests are rendered with ChatML's markers (``<|im_start|>role
    ... <|im_end|>``) and its generation prompt (``<|im_start|>assistant``) on top of the
    model's own lines: the prompt the model sees ends differently, as with another model's
    template. A continuation (``continue_final_message``) opens the assistant turn the same
    way, so answers and re-prompts agree with each other."""

    def answer(path: str, payload: dict[str, Any]) -> Mapping[str, Any]:
        if path != "/v1/chat/completions":
            return transport(path, payload)
        messages = [dict(m) for m in payload.get("messages") or []]
        opened = messages.pop() if payload.get("continue_final_message") else None
        rendered = [
            {"role": m["role"], "content": f"<|im_start|>{m['role']} {m['content']} <|im_end|>"}
            for m in messages
        ]
        generation = " <|im_start|>assistant"
        if opened is None:
            rendered[-1]["content"] += generation
        else:
            rendered.append({"role": "assistant", "content": generation + opened["content"]})
        return transport(path, {**payload, "messages": rendered})

    return answer


@dataclass
class Counted:
    """A transport that counts the requests it carries and the tokens the server generated."""

    transport: Transport
    requests: int = 0
    generated: int = 0

    def __call__(self, path: str, payload: dict[str, Any]) -> Mapping[str, Any]:
        body = self.transport(path, payload)
        self.requests += 1
        self.generated += int((body.get("usage") or {}).get("completion_tokens") or 0)
        return body


@functools.cache
def _baseline() -> Transport:
    """The float32 model, its answers kept: every case of a process asks the same prompts of the
    same baseline, and its answers are a function of the request."""
    transport = in_process(TinyModel("float32"))
    answered: dict[str, Mapping[str, Any]] = {}

    def answer(path: str, payload: dict[str, Any]) -> Mapping[str, Any]:
        key = path + json.dumps(payload, sort_keys=True)
        if key not in answered:
            answered[key] = transport(path, payload)
        return answered[key]

    return answer


@dataclass(frozen=True)
class Scored:
    """A prompt set scored once: each prompt's score, and what the scoring cost."""

    scores: tuple[PromptScore, ...]
    requests: int
    """Requests to the candidate."""
    generated: int
    """Tokens the candidate generated."""


def scored(case: Case, prompts: Sequence[Prompt], prompt_logprobs: bool = True) -> Scored:
    """``prompts`` answered by the baseline and ``case``'s candidate, scored by ``QualityRun``."""
    model = TinyModel("bfloat16", replace(case.outputs, prompt_logprobs=prompt_logprobs))
    transport = in_process(model)
    candidate = Counted(wrong_template(transport) if case.wrong_template else transport)
    run = QualityRun(
        OpenAiClient(URL, transport=_baseline()),
        OpenAiClient(URL, transport=candidate),
        max_tokens=MAX_TOKENS,
        concurrency=1,
    )
    check = run.run(prompts)
    if check.problem or check.unreachable or len(check.scores) != len(prompts):
        raise RuntimeError(f"{case.name}: the run did not score every prompt: {check}")
    return Scored(check.scores, candidate.requests, candidate.generated)


# -- runs --------------------------------------------------------------------------------------


def draws(pool: int, size: int, runs: int, seed: int = SEED) -> list[np.ndarray]:
    """Each run's prompt set: ``size`` indices into the pool, without replacement."""
    rng = np.random.default_rng([seed, size])
    return [rng.choice(pool, size, replace=False) for _ in range(runs)]


def verdicts(scores: Sequence[PromptScore], alpha: float) -> dict[str, QualityVerdict]:
    """Each method's verdict on one prompt set, and the trial's (any Fail, else any
    Inconclusive, else Pass)."""
    judged = judge_quality(CRITERIA, scores, MAX_TOKENS, alpha)
    found: dict[str, QualityVerdict] = {j.metric: j.verdict for j in judged}
    together = found.values()
    found[TOGETHER] = (
        "Fail" if "Fail" in together else "Inconclusive" if "Inconclusive" in together else "Pass"
    )
    return found


@dataclass(frozen=True)
class Parity:
    """The same prompts scored by echo and by re-prompting."""

    prompts: int
    same_scores: int
    """Prompts whose scores agree (positions, agreement, first divergence; gap within 1e-6)."""
    positions: tuple[int, int]
    """Positions scored: echo, re-prompting."""
    same_verdicts: tuple[str, ...]
    """The methods whose verdict on these prompts is the same both ways."""
    requests: tuple[int, int]
    """Requests to the candidate: echo, re-prompting."""
    generated: tuple[int, int]
    """Tokens the candidate generated: echo, re-prompting."""


@dataclass(frozen=True)
class CaseResult:
    case: Case
    cells: dict[int, dict[str, Counter[str]]]
    """{prompts a set: {method: Counter of verdicts over the runs}}."""
    parity: Parity | None


def measure(
    case: Case,
    profile: Profile,
    alpha: float = ALPHA,
    sizes: Sequence[int] = SIZES,
    parity_prompts: int = PARITY_PROMPTS,
) -> CaseResult:
    """One case: its pool scored, every size's runs judged, and the parity of the two ways."""
    pool = prompt_pool(profile.pool, case.chat_share)
    head = min(parity_prompts, len(pool))
    first = scored(case, pool[:head]) if head else None
    rest = scored(case, pool[head:]) if head < len(pool) else None
    scores = (first.scores if first else ()) + (rest.scores if rest else ())
    cells: dict[int, dict[str, Counter[str]]] = {}
    for size in sizes:
        counts: dict[str, Counter[str]] = {m: Counter() for m in METHODS}
        for picked in draws(len(pool), size, profile.runs):
            for method, verdict in verdicts([scores[i] for i in picked], alpha).items():
                counts[method][verdict] += 1
        cells[size] = counts
    parity = None
    if first is not None:
        again = scored(case, pool[:head], prompt_logprobs=False)
        echo_verdicts = verdicts(first.scores, alpha)
        again_verdicts = verdicts(again.scores, alpha)
        parity = Parity(
            prompts=head,
            same_scores=sum(_same(a, b) for a, b in zip(first.scores, again.scores, strict=True)),
            positions=(
                sum(s.positions for s in first.scores),
                sum(s.positions for s in again.scores),
            ),
            same_verdicts=tuple(m for m in METHODS if echo_verdicts[m] == again_verdicts[m]),
            requests=(first.requests, again.requests),
            generated=(first.generated, again.generated),
        )
    return CaseResult(case, cells, parity)


def _same(a: PromptScore, b: PromptScore) -> bool:
    counted = (a.positions, a.agreed, a.first_divergence)
    return counted == (b.positions, b.agreed, b.first_divergence) and (
        abs(a.logprob_gap - b.logprob_gap) <= 1e-6
    )


def benchmark(
    profile: Profile,
    alpha: float = ALPHA,
    cases: Sequence[Case] = CASES,
    workers: int | None = None,
) -> list[CaseResult]:
    """Every case, ``workers`` processes at once (one a core by default; 1: in this process)."""
    workers = workers or min(len(cases), os.cpu_count() or 1)
    if workers == 1:
        return [measure(case, profile, alpha) for case in cases]
    with ProcessPoolExecutor(workers) as pool:
        return list(pool.map(measure, cases, [profile] * len(cases), [alpha] * len(cases)))


# -- the table -------------------------------------------------------------------------------


def share(counts: Counter[str], verdict: str) -> float:
    return counts[verdict] / max(1, sum(counts.values()))


def print_table(results: Sequence[CaseResult], profile: Profile, alpha: float) -> None:
    print(
        f"{MAX_TOKENS} tokens an answer, {profile.runs} runs a cell drawn from a pool of "
        f"{profile.pool} prompts a case, intervals at {1 - alpha:.0%} (analysis.alpha {alpha:g})"
    )
    print(
        "each cell: Fail share (degraded: caught; healthy: refused) / Inconclusive share (the "
        "trial pauses); the rest passed"
    )
    limits = {
        "token_agreement": ">= 0.98",
        "logprob_divergence": "<= 0.1",
        "first_divergence": ">= 0.5",
        TOGETHER: "any Fail",
    }
    width = max(len(r.case.name) for r in results)
    head = f"{'candidate':<{width}}  {'kind':<8} {'prompts':>7}"
    print(head + "".join(f"  {m:>19}" for m in METHODS))
    print(" " * len(head) + "".join(f"  {limits[m]:>19}" for m in METHODS))
    for result in results:
        for size, counts in result.cells.items():
            cells = "".join(f"  {_cell(counts[m]):>19}" for m in METHODS)
            print(f"{result.case.name:<{width}}  {result.case.kind:<8} {size:>7}{cells}")


def _cell(counts: Counter[str]) -> str:
    return f"{share(counts, 'Fail'):6.1%} / {share(counts, 'Inconclusive'):6.1%}"


def print_parity(results: Sequence[CaseResult]) -> None:
    print()
    print("teacher forcing both ways on the first prompts of each pool: echo (promptLogprobs)")
    print("and re-prompting at each divergence (the candidate cannot echo; chat prompts re-prompt")
    print("both ways); requests to the candidate (its answer included) and tokens it generated,")
    print("per prompt: echo / re-prompting")
    width = max(len(r.case.name) for r in results)
    print(
        f"{'candidate':<{width}}  {'prompts':>7}  {'same scores':>11}  {'positions scored':>16}  "
        f"{'same verdicts':>13}  {'requests':>13}  {'tokens generated':>16}"
    )
    for result in results:
        p = result.parity
        if p is None:
            continue
        requests = f"{p.requests[0] / p.prompts:.2f} / {p.requests[1] / p.prompts:.2f}"
        generated = f"{p.generated[0] / p.prompts:.1f} / {p.generated[1] / p.prompts:.1f}"
        print(
            f"{result.case.name:<{width}}  {p.prompts:>7}  {p.same_scores:>11}  "
            f"{f'{p.positions[0]} / {p.positions[1]}':>16}  "
            f"{f'{len(p.same_verdicts)} of {len(METHODS)}':>13}  {requests:>13}  {generated:>16}"
        )


def acceptance(results: Sequence[CaseResult]) -> list[tuple[str, bool, str]]:
    """Per method, at ``ACCEPT_SIZE`` prompts: whether 5% token errors are caught in at least
    99% of runs and no healthy case is refused in more than 1%, with the figures."""
    degraded = next(r for r in results if r.case.name == ACCEPTANCE_CASE)
    healthy = [r for r in results if r.case.kind == "healthy"]
    lines = []
    for method in METHODS:
        counts = degraded.cells[ACCEPT_SIZE][method]
        caught = share(counts, "Fail")
        unsure = share(counts, "Inconclusive")
        refused = max(share(r.cells[ACCEPT_SIZE][method], "Fail") for r in healthy)
        worst = max(healthy, key=lambda r: share(r.cells[ACCEPT_SIZE][method], "Fail"))
        ok = caught >= ACCEPT_CAUGHT and refused <= ACCEPT_REFUSED
        said = f"5% token errors caught {caught:.1%} (>= {ACCEPT_CAUGHT:.0%})"
        if caught < ACCEPT_CAUGHT:
            said += f", short by {ACCEPT_CAUGHT - caught:.1%} ({unsure:.1%} inconclusive)"
        said += f"; healthy refused at most {refused:.1%} (<= {ACCEPT_REFUSED:.0%})"
        if refused > ACCEPT_REFUSED:
            said += f", over by {refused - ACCEPT_REFUSED:.1%} ({worst.case.name})"
        lines.append((method, ok, said))
    return lines


def print_acceptance(results: Sequence[CaseResult]) -> None:
    print()
    print(f"acceptance at {ACCEPT_SIZE} prompts:")
    width = max(len(m) for m in METHODS)
    for method, ok, said in acceptance(results):
        print(f"  {method:<{width}}  {'PASS' if ok else 'SHORT'}: {said}")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="smaller pools, fewer runs: < 1 min")
    parser.add_argument(
        "--alpha", type=float, default=ALPHA,
        help=f"the intervals' 1 - confidence (analysis.alpha; default {ALPHA:g})",
    )  # fmt: skip
    parser.add_argument("--workers", type=int, help="processes (default: one a core)")
    args = parser.parse_args(argv)
    profile = PROFILES["quick" if args.quick else "full"]
    started = time.monotonic()
    results = benchmark(profile, args.alpha, workers=args.workers)
    print_table(results, profile, args.alpha)
    print_parity(results)
    print_acceptance(results)
    print(f"\n{time.monotonic() - started:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
