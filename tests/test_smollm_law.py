"""The statistical law test on the real model: speculative sampling draws what plain sampling draws.

SmolLM2-135M-Instruct at temperature 1, fixed prompts.  Plain sampling draws the first token
from one target row, ``q1 = q(. | prompt)``, and the second, given the first ``x``, from another,
``q2 = q(. | prompt, x)``: both rows are computed exactly here.  speclib's speculative loop draws
``N`` first tokens with the trained EAGLE draft (:mod:`speclib.lm.smollm_draft`: its row over
the draft vocabulary, zero elsewhere, verified over the whole vocabulary) after a chat prompt,
and ``N`` continuations of two tokens with prompt lookup (``k = 2``: both usually come from one
verification) after a prompt that repeats itself.  Pearson's chi-square test
(:func:`speclib.core.stats.chi_square_test`, outcomes expected fewer than 5 times pooled into one
cell) compares the counts of the first token with ``q1`` and those of the second token after
the most frequent first token with ``q2``.  (The draft's later drafts, drawn on its own
predicted states, are checked exactly, by enumeration on a small Llama, in
tests/test_smollm_draft.py.)

Threshold: the law holds unless a p-value falls below ``ALPHA_LEVEL`` = 1e-3.  Seeded, so each
outcome is fixed; over seeds, a correct loop would fail about 2e-3 of the time (two p-values).  Negative
controls, the same test on the same machinery: a verifier that draws the replacement after a
rejection from ``q`` instead of the residual ``max(0, q - p)/Z``, and one that accepts every
draft; each must be rejected (a p-value below ``ALPHA_LEVEL``).

Each run starts from the prompt already read (``FeatureTarget.reuse``: a rollback to the
prompt, not a new pass over it), and the target's passes go through :class:`_RememberedCache`,
which runs each distinct pass once and remembers its rows and features (the rows of a pass
depend only on the tokens read, so the law is unchanged; the runs' verification passes differ
only by the drafted tokens, and repeat).  The drafts and every random choice are the loop's own.
"""

from __future__ import annotations

import numpy as np
import pytest

from speclib.book.broken import RESAMPLE_FROM_TARGET, Variant
from speclib.core.decoding import speculative_generate
from speclib.core.proposers import PromptLookup
from speclib.core.stats import chi_square_test
from speclib.lm.drafters import FeatureTarget

pytestmark = pytest.mark.law

#: Reject "the loop draws from the target" when a p-value falls below this.
ALPHA_LEVEL = 1e-3
#: Runs per test (most share their verification pass with an earlier run: see _RememberedCache).
N_EAGLE = 2000
N_LOOKUP = 1500
#: Runs of each negative control.
N_CONTROL = {"resample from q": 1000, "accept every draft": 300}
#: The fewest draws of the second token (after the most frequent first one) a test counts on.
MIN_SECOND = 100
#: The chat question of the draft's test: its first answer token is neither certain nor flat.
QUESTION = "What is 2 + 2?"
#: Prompt lookup's prompt: its tail occurs earlier in it, so prompt lookup proposes a token the
#: target might well write.
LOOKUP_PROMPT = "red, green, blue; red, green, blue; red, green,"

ACCEPT_ALL = Variant("accept every draft", "keep every drafted token", accept=lambda p_x, q_x: 1.0)


class _RememberedCache:
    """A features-keeping cache of the real model that runs each distinct pass once.

    It holds a sequence of tokens, as a cache does (``extend``, ``rollback``, ``features``);
    ``extend(tokens)`` after a sequence ``s`` returns the rows the model's cache returns for
    ``tokens`` after ``s``, computed by the real cache the first time ``(s, tokens)`` is asked
    for and remembered afterwards.
    """

    keep_features = True
    trusted_rows = True

    def __init__(self, cache) -> None:
        self.real, self.model = cache, cache.model
        self._tokens = [int(t) for t in cache.tokens]
        self._features = [row for row in cache.features.copy()]
        self._base = len(cache)
        self._memo: dict = {}
        self.passes = self.calls = 0

    def __len__(self) -> int:
        return len(self._tokens)

    @property
    def tokens(self) -> np.ndarray:
        return np.array(self._tokens, dtype=np.int64)

    @property
    def features(self) -> np.ndarray:
        return np.array(self._features, dtype=np.float32).reshape(len(self._tokens), -1)

    def extend(self, tokens) -> np.ndarray:
        tokens = [int(t) for t in np.asarray(tokens).reshape(-1)]
        key = (tuple(self._tokens[self._base:]), tuple(tokens))
        self.calls += 1
        if key not in self._memo:
            self.passes += 1
            real = self.real
            have = real.tokens.tolist()
            same = 0
            while same < min(len(have), len(self._tokens)) and have[same] == self._tokens[same]:
                same += 1
            real.rollback(same)
            if same < len(self._tokens):
                real.extend(self._tokens[same:])
            rows = real.extend(tokens)
            self._memo[key] = (rows, real.features[-len(tokens):].copy())
        rows, feats = self._memo[key]
        self._tokens += tokens
        self._features += list(feats)
        return rows

    def rollback(self, length: int) -> None:
        del self._tokens[length:]
        del self._features[length:]


@pytest.fixture(scope="module")
def model():
    from speclib.lm.kernel import available
    from speclib.lm.smollm import load_smollm2

    return load_smollm2("q8", temperature=1.0).with_compiled(available())


@pytest.fixture(scope="module")
def chat(model):
    """The chat prompt and the target's exact row after it."""
    prompt = model.tokenizer.encode_chat([{"role": "user", "content": QUESTION}])
    return prompt, model(prompt)[-1]


@pytest.fixture(scope="module")
def repeating(model):
    """Prompt lookup's prompt and the target's exact row after it."""
    prompt = model.tokenizer.encode(LOOKUP_PROMPT)
    return prompt, model(prompt)[-1]


def _cache(model, prompt) -> _RememberedCache:
    cache = model.cache(features=True)
    cache.extend(prompt[:-1])
    return _RememberedCache(cache)


def _draws(target: FeatureTarget, proposer, prompt, n: int, length: int, k: int, seed: int, verifier=None):
    """``n`` runs of the loop from ``prompt``: the tokens of each, ``(n, length)``; and the cache used."""
    cache = _cache(target.model, prompt)
    target.reuse(cache)
    rng = np.random.default_rng(seed)
    try:
        out = np.array([speculative_generate(target, proposer, prompt, length, k, rng=rng, verifier=verifier)[0]
                        for _ in range(n)])
    finally:
        target.reuse(None)
    return out, cache


def _pvalues(model, prompt, draws: np.ndarray, q1: np.ndarray) -> tuple[float, float]:
    """The chi-square p-values of the first tokens against ``q1`` and of the second tokens after the
    most frequent first token ``x`` against ``q(. | prompt, x)`` (NaN where fewer than ``MIN_SECOND``
    draws, or fewer than two cells after pooling, leave nothing to test)."""
    first = chi_square_test(np.bincount(draws[:, 0], minlength=q1.size), q1).pvalue
    x = int(np.bincount(draws[:, 0]).argmax())
    after = draws[draws[:, 0] == x, 1]
    if after.size < MIN_SECOND:
        return first, float("nan")
    q2 = model(np.append(prompt, x))[-1]
    try:
        second = chi_square_test(np.bincount(after, minlength=q2.size), q2).pvalue
    except ValueError:
        second = float("nan")
    return first, second


def _passes(pvalues: tuple[float, float]) -> bool:
    """The test: both p-values computed, neither below ALPHA_LEVEL."""
    return all(p > ALPHA_LEVEL for p in pvalues)  # NaN fails


def _rejects(pvalues: tuple[float, float]) -> bool:
    """What a negative control must show: a p-value computed and below ALPHA_LEVEL."""
    return np.nanmin(pvalues) < ALPHA_LEVEL


# --------------------------------------------------------------------------- the trained draft


@pytest.fixture(scope="module")
def eagle(model):
    from speclib.lm.smollm_draft import DRAFT_FILE, load_draft

    if not DRAFT_FILE.is_file():
        pytest.skip("the draft is not trained yet (training/train_smollm_draft.py)")
    return load_draft(model)


def test_the_trained_draft_draws_the_first_token_from_the_target(model, chat, eagle):
    prompt, q1 = chat
    draws, cache = _draws(eagle.target, eagle, prompt, N_EAGLE, 1, 1, seed=3)
    assert cache.passes < cache.calls / 4  # the runs shared most verification passes
    counts = np.bincount(draws[:, 0], minlength=q1.size)
    assert np.isin(np.flatnonzero(counts), eagle.vocab).mean() < 1  # the target wrote a token the draft cannot
    assert chi_square_test(counts, q1).pvalue > ALPHA_LEVEL


@pytest.mark.parametrize("variant", [RESAMPLE_FROM_TARGET, ACCEPT_ALL], ids=lambda v: v.name)
def test_the_trained_draft_with_a_faulty_verifier_fails_the_same_test(model, chat, eagle, variant):
    prompt, q1 = chat
    draws, _ = _draws(eagle.target, eagle, prompt, N_CONTROL[variant.name], 1, 1, seed=4,
                      verifier=variant.verifier)
    assert chi_square_test(np.bincount(draws[:, 0], minlength=q1.size), q1).pvalue < ALPHA_LEVEL


# --------------------------------------------------------------------------- prompt lookup


def test_prompt_lookup_draws_the_first_two_tokens_from_the_target(model, repeating):
    prompt, q1 = repeating
    lookup = PromptLookup()
    lookup.start(prompt, model.vocab_size)
    drafted = int(lookup.propose(prompt, 1, None, None, None).tokens[0])
    assert 0.05 < q1[drafted] < 0.995  # a draft the target may accept or reject: both paths are exercised
    draws, cache = _draws(FeatureTarget(model), PromptLookup(), prompt, N_LOOKUP, 2, 2, seed=1)
    assert cache.passes < cache.calls / 4
    assert _passes(_pvalues(model, prompt, draws, q1))


def test_prompt_lookup_with_a_faulty_verifier_fails_the_same_test(model, repeating):
    prompt, q1 = repeating
    draws, _ = _draws(FeatureTarget(model), PromptLookup(), prompt, 200, 2, 2, seed=2,
                      verifier=RESAMPLE_FROM_TARGET.verifier)
    assert _rejects(_pvalues(model, prompt, draws, q1))
