"""A tiny language model the simulated fleet answers with: the same weights in float32 (the GPU
build, the reference) and in bfloat16 (the Neuron build, as neuronx-cc's auto-cast computes it).

So a healthy compile's drift is real rounding, not noise the test bed dialled in: the bfloat16
run differs from the float32 one only where two next tokens are nearly tied, as a real model's
does. On top of it, a variant's ``outputs`` knobs add a broken compile's errors:
``tokenErrorRate`` (the share of generated positions whose top-1 is made the runner-up),
``logprobNoise`` (noise on the log-probabilities it reports) and ``promptLogprobs`` (whether it
can score a given continuation: ``echo`` with ``logprobs``).

The model: a vocabulary of 512 made-up words (a token is " word"), a context of the last four
tokens embedded and weighted by position, one tanh layer, plus each token's preferred
continuation (strong or weak, as training leaves them), scaled so that the top token takes
most of the probability as a trained model's does. Weights come from a fixed seed.
Deterministic: the same prompt gets the same answer, and the knobs draw from a hash of the
prompt and the position. Pure numpy; ``ml_dtypes`` gives bfloat16.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass
from typing import Literal

import numpy as np
import numpy.typing as npt

Precision = Literal["float32", "bfloat16"]
VOCABULARY_SIZE = 512
CONTEXT = 4
EMBEDDING = 48
HIDDEN = 96
LOGIT_SCALE = 4.0
PREFERENCE = 4.0
"""How peaked the next-token distributions are: the top token takes about 0.6 of the
probability on average, and bfloat16 flips about one greedy position in 300 (measured in
tests/demo/test_language_model.py)."""
MODEL_SEED = 20261206
SEEN_CONTEXTS = 100_000
_Array = npt.NDArray[np.float32]


def _vocabulary() -> tuple[str, ...]:
    consonants, vowels = "bdfgklmnprstvz", "aeiou"
    syllables = [c + v for c in consonants for v in vowels]
    words = [a + b for a in syllables for b in syllables]
    order = np.random.default_rng(MODEL_SEED).permutation(len(words))[:VOCABULARY_SIZE]
    return tuple(" " + words[i] for i in order)


VOCABULARY = _vocabulary()
_INDEX = {token.strip(): i for i, token in enumerate(VOCABULARY)}


def tokenize(text: str) -> list[int]:
    """Token ids of ``text``: each whitespace-separated word, by the vocabulary or its hash."""
    return [_INDEX.get(word, zlib.crc32(word.encode()) % VOCABULARY_SIZE) for word in text.split()]


@dataclass(frozen=True)
class Outputs:
    """A variant's deviation from a healthy compile (the scenario's ``outputs``)."""

    token_error_rate: float = 0.0
    logprob_noise: float = 0.0
    prompt_logprobs: bool = True


@dataclass(frozen=True)
class Step:
    """One position: the token there, its log-probability, and the model's top-1 there."""

    token: str
    logprob: float
    top_token: str
    top_logprob: float


class TinyModel:
    """The weights at one precision, with the variant's ``outputs`` knobs."""

    def __init__(self, precision: Precision = "float32", outputs: Outputs | None = None) -> None:
        rng = np.random.default_rng(MODEL_SEED)
        weights = {
            "embedding": rng.normal(0, 1, (VOCABULARY_SIZE, EMBEDDING)),
            "position": np.linspace(1.0, 0.4, CONTEXT)[:, None],
            "hidden": rng.normal(0, 1 / np.sqrt(EMBEDDING), (EMBEDDING, HIDDEN)),
            "bias": rng.normal(0, 0.1, HIDDEN),
            "out": rng.normal(0, 1 / np.sqrt(HIDDEN), (HIDDEN, VOCABULARY_SIZE)),
            # What training leaves: after each token, a continuation it prefers, some strongly,
            # some barely (exponential strengths): near-ties are where rounding flips a token.
            "prefers": np.eye(VOCABULARY_SIZE)[rng.permutation(VOCABULARY_SIZE)]
            * rng.exponential(PREFERENCE, VOCABULARY_SIZE)[:, None],
        }
        self.precision = precision
        self.outputs = outputs or Outputs()
        self._w = {name: self._cast(np.asarray(w, dtype=np.float32)) for name, w in weights.items()}
        self._seen: dict[tuple[int, ...], _Array] = {}
        """Log-probabilities by context: answering, scoring and re-prompting revisit the same
        contexts, and the model is a function of them."""

    def _cast(self, values: _Array) -> _Array:
        """Rounded to bfloat16 (and computed on in float32, as a matmul accumulates) when the
        precision is bfloat16."""
        if self.precision == "float32":
            return values
        import ml_dtypes  # noqa: PLC0415 (1-3 CPU-seconds to import; only quality needs it)

        return np.asarray(values.astype(ml_dtypes.bfloat16).astype(np.float32))

    def log_probabilities(self, context: list[int]) -> _Array:
        """log P(next token | the last CONTEXT tokens of ``context``)."""
        ids = ([0] * CONTEXT + context)[-CONTEXT:]
        key = tuple(ids)
        known = self._seen.get(key)
        if known is None:
            if len(self._seen) > SEEN_CONTEXTS:  # a long run's memory stays bounded
                self._seen.clear()
            known = self._seen[key] = self._computed(ids)
        return known

    def _computed(self, ids: list[int]) -> _Array:
        w = self._w
        x = self._cast((w["embedding"][ids] * w["position"]).sum(axis=0))
        h = self._cast(np.tanh(self._cast(x @ w["hidden"]) + w["bias"]))
        logits = (self._cast(h @ w["out"]) + w["prefers"][ids[-1]]) * LOGIT_SCALE
        shifted = logits - logits.max()
        return np.asarray(shifted - np.log(np.exp(shifted).sum()), dtype=np.float32)

    def generate(self, prompt: str, max_tokens: int) -> list[Step]:
        """The greedy answer to ``prompt``, ``max_tokens`` long, with the knobs applied."""
        context, steps = tokenize(prompt), []
        for _ in range(max_tokens):
            step = self._next(context)
            steps.append(step)
            context.append(_INDEX[step.token.strip()])
        return steps

    def score(self, text: str) -> list[Step | None]:
        """Each token of ``text`` with its log-probability and the model's own top-1 there
        (teacher forcing); None for the first, which nothing precedes. Scoring its own answer
        gives back its own tokens: the knobs draw from the context, not from the request."""
        ids = tokenize(text)
        scored: list[Step | None] = [None]
        for position in range(1, len(ids)):
            context = ids[:position]
            top = self._next(context)
            actual = float(self.log_probabilities(context)[ids[position]])
            actual += self._noise(context)
            scored.append(Step(VOCABULARY[ids[position]], actual, top.token, top.logprob))
        return scored

    def _next(self, context: list[int]) -> Step:
        """The greedy next token after ``context`` (the runner-up where a token error is drawn)
        with its log-probability as reported (noise included)."""
        logprobs = self.log_probabilities(context)
        ranked = np.argsort(-logprobs, kind="stable")
        wrong = _draw(context, "error") < self.outputs.token_error_rate
        chosen = int(ranked[1] if wrong else ranked[0])
        value = float(logprobs[chosen]) + self._noise(context)
        return Step(VOCABULARY[chosen], value, VOCABULARY[chosen], value)

    def _noise(self, context: list[int]) -> float:
        if not self.outputs.logprob_noise:
            return 0.0
        seed = zlib.crc32(_key(context, "noise"))
        return float(np.random.default_rng(seed).normal(0, self.outputs.logprob_noise))


def _key(context: list[int], what: str) -> bytes:
    return what.encode() + np.asarray(context, dtype=np.int32).tobytes()


def _draw(context: list[int], what: str) -> float:
    """A uniform draw in [0, 1) fixed by the context: the same prompt draws the same."""
    return zlib.crc32(_key(context, what)) / 2**32
