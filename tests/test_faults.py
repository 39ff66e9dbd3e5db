"""Faults that once left the whole suite green although their effect was visible (issue 24).

Each was put into speclib by hand and left every earlier test passing, because those tests
looked only at the output law, and these four faults keep it (or fool the check that looks
at it).  What they change is a count: target passes and acceptance, tokens per target pass,
tokens run through the model, and the law the enumerator reports for a faulty loop.  Each
test here pins that count against a value derived independently of the code under test, and
fails when its fault is put back (each was, by hand, when the test was written, on
2026-12-02):

1. greedy-match verification comparing the drafts with the target's *least* likely token
   (``argmin`` for ``argmax`` in ``speclib.core.variants._greedy_match_step``: 200 passes);
2. the multi-draft verifier keeping only the winning sequence alive (below a kept node, only
   the first sequence through it tested: 2.868 tokens per pass where 3.000 are expected);
3. ``KVCache.rollback`` leaving the window's filled count stale (kept as it was: the next
   pass now fails; reset to 0 instead: the window is re-read, 526 tokens run through the
   model for 96 fed);
4. the exact enumerator merging paths without comparing the target cache's contents
   (``run.target_cache.tokens`` left out of ``speclib.core.exact._state_key``).
"""

from __future__ import annotations

import functools
import itertools
import math

import numpy as np
import pytest

from speclib.book import broken
from speclib.core.audit import audit
from speclib.core.decoding import speculative_generate
from speclib.core.exact import step_distribution
from speclib.core.proposers import MultiDraft
from speclib.core.sampling import _residual
from speclib.core.variants import greedy_match_verify
from speclib.core.warping import greedy_generate, warp
from speclib.lm import transformer as transformer_module
from speclib.lm.models import FixedContextModel, markov_pair
from speclib.lm.transformer import TransformerConfig, random_transformer


# --- 1. greedy match compares with the target's most likely token ------------------------------

def test_greedy_match_keeps_every_draft_of_an_identical_greedy_draft():
    """A greedy draft equal to the greedy target: every draft matches, so each pass emits k + 1.

    200 tokens at k = 4 take exactly ceil(200 / 5) = 40 target passes and the acceptance is 1.
    Comparing with the least likely token instead rejects every draft: 200 passes, acceptance 0,
    and yet the output is still the greedy text (the correction is the target's one-hot row).
    """
    target, _ = markov_pair(vocab_size=8, seed=3)
    greedy = warp(target, temperature=0)
    tokens, stats = speculative_generate(greedy, greedy, [0], 200, 4, 0, verifier=greedy_match_verify)
    np.testing.assert_array_equal(tokens, greedy_generate(target, [0], 200)[0])
    assert stats.target_passes == math.ceil(200 / 5)
    assert stats.acceptance_rate == 1.0 and stats.accepted == 4 * 40


# --- 2. multi-draft: every sequence through the kept prefix stays alive --------------------------

def _expected_tokens(p: np.ndarray, q: np.ndarray, m: int, k: int, merge: bool = True) -> float:
    """Expected tokens of one step of recursive rejection over ``m`` independent sequences of ``k`` drafts.

    Rows that do not depend on the context (``p`` the draft's, ``q`` the target's), so every
    sequence's next token is a fresh draw from ``p`` whatever came before.  At a node with ``c``
    candidates (one per sequence through it, in draw order) candidate ``j`` with token ``x`` is
    kept with probability ``min(1, r(x)/p(x))``, ``r`` starting at ``q`` and becoming the
    residual ``max(r - p, 0)/Z`` after each rejection; a kept token moves the step to the node
    of every sequence that drew it (``merge``; without it, only the winning sequence), and when
    all are rejected the correction ends the step.  A kept leaf adds the bonus token.
    Enumerated over every draw, independently of the loop's code.
    """
    vocab = p.size

    @functools.lru_cache(maxsize=None)
    def tokens_from(c: int, d: int) -> float:
        if d == 0:
            return 1.0  # the bonus
        total = 0.0
        for xs in itertools.product(range(vocab), repeat=c):
            prob = float(np.prod(p[list(xs)]))
            if prob == 0.0:
                continue
            r, alive, value = q, 1.0, 0.0
            for x in xs:
                keep = min(1.0, r[x] / p[x])
                alive_next = xs.count(x) if merge else 1
                value += alive * keep * (1.0 + tokens_from(alive_next, d - 1))
                alive *= 1.0 - keep
                r = _residual(p, r)
            value += alive * 1.0  # every candidate rejected: the correction
            total += prob * value
        return total

    return tokens_from(m, k)


def test_multi_draft_tokens_per_target_pass_are_the_enumerated_expectation():
    """m = 3 sequences of k = 3 drafts: the loop's exact expected tokens per pass, from its own step.

    The loop's first step, enumerated over every random choice (``step_distribution``), must emit
    on average exactly what recursive rejection over the merged tree emits.  Keeping only the
    winning sequence alive changes it by more than 0.02 tokens on this pair (checked below), far
    above the 1e-9 the comparison allows.
    """
    q, p = np.array([0.6, 0.4]), np.array([0.3, 0.7])
    target, draft = FixedContextModel(q), FixedContextModel(p)
    law = step_distribution(target, MultiDraft(draft, 3), [0], 3)
    emitted = sum(len(tokens) * prob for (tokens, _), prob in law.items())
    want, winner_only = _expected_tokens(p, q, 3, 3), _expected_tokens(p, q, 3, 3, merge=False)
    assert abs(want - winner_only) > 0.02  # the test can tell the two apart
    assert emitted == pytest.approx(want, abs=1e-9)


# --- 3. a rollback leaves nothing to re-read ------------------------------------------------------

def test_the_transformer_cache_runs_each_fed_token_through_the_model_once(monkeypatch):
    """While the text fits the model's window, a token fed to the cache is run through the model once.

    Every pass of the loop is logged (``timings["passes"]``: tokens fed per pass), and every call
    of the model's forward is counted.  The two totals must be equal: a rollback that leaves the
    window's filled count stale makes the next pass re-read the whole window.
    """
    cfg = TransformerConfig(vocab_size=6, block_size=64, d_model=8, n_layers=1, n_heads=2)
    target, draft = random_transformer(cfg, seed=0), random_transformer(cfg, seed=1)
    run_tokens = {}
    real_run = transformer_module.Transformer._run

    def counting_run(self, tokens, *args, **kwargs):
        run_tokens[id(self)] = run_tokens.get(id(self), 0) + len(tokens)
        return real_run(self, tokens, *args, **kwargs)

    monkeypatch.setattr(transformer_module.Transformer, "_run", counting_run)
    timings = {"passes": []}
    _, stats = speculative_generate(target, draft, [0, 1, 2], 40, 4, 0, timings=timings)
    assert stats.accepted < stats.draft_verified  # rejections happened, so the caches were rolled back
    for model, name in ((target, "target"), (draft, "draft")):
        fed = sum(n for who, n, _ in timings["passes"] if who == name)
        assert run_tokens[id(model)] == fed, name


# --- 4. the enumerator tells apart states whose target caches differ ---------------------------

def test_the_enumerated_law_of_the_stale_cache_loop_is_the_law_of_its_samples():
    """The stale-cache loop's own samples follow the law the enumerator computes for that loop.

    Two paths with the same text but different stale entries in the target's cache have
    different futures; merging them (comparing the text only) gives a wrong law, which the
    loop's own samples reject (p-value 3e-15 with the fault put in).  A seeded audit
    (chi-square at the level speclib.core.audit fixes) of 2000 three-token outputs, without
    the sampling controls: under the zoo's controls this audit did not see the fault.
    """
    target, draft = broken.zoo_pair()
    law = broken.distribution(target, draft, [0], 3, 2, broken.STALE_CACHE)
    assert 0.5 * abs(law - broken.distribution(target, draft, [0], 3, 2)).sum() > 0.01  # a real bug

    def decode(n, rng):
        return broken.generate(target, draft, [0], n, 2, rng, broken.STALE_CACHE)

    assert audit(decode, law, 2000, rng=11).passed
