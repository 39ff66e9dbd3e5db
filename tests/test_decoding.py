"""Decoding loops and their statistics."""

import math

import numpy as np
import pytest

from speclib import (
    FixedContextModel,
    GenerationStats,
    autoregressive_generate,
    expected_tokens_per_pass,
    fixed_pair,
    markov_pair,
    speculative_generate,
)


def test_autoregressive_counts_one_pass_per_token():
    target, _ = markov_pair(vocab_size=6, seed=0)
    tokens, stats = autoregressive_generate(target, [1, 2], 17, rng=0)
    assert tokens.shape == (17,)
    assert stats.target_passes == 17 and stats.tokens_generated == 17
    assert stats.tokens_per_target_pass == 1.0
    assert math.isnan(stats.acceptance_rate)


def test_zero_new_tokens():
    target, draft = markov_pair(vocab_size=6, seed=0)
    tokens, stats = speculative_generate(target, draft, [1], 0, k=3, rng=0)
    assert tokens.size == 0 and stats.target_passes == 0


@pytest.mark.parametrize("n", [1, 2, 7, 50])
def test_speculative_generates_exactly_n_tokens(n):
    target, draft = markov_pair(vocab_size=6, draft_noise=0.3, seed=1)
    tokens, stats = speculative_generate(target, draft, [0], n, k=4, rng=n)
    assert tokens.shape == (n,)
    assert stats.tokens_generated == n == sum(stats.tokens_per_step)
    assert stats.target_passes == len(stats.tokens_per_step)
    assert all(1 <= t <= 5 for t in stats.tokens_per_step)


def test_stats_bookkeeping_is_consistent():
    target, draft = markov_pair(vocab_size=8, draft_noise=0.5, seed=2)
    _, s = speculative_generate(target, draft, [0], 400, k=4, rng=3)
    assert s.draft_passes == s.draft_proposed
    assert s.accepted <= s.draft_verified <= s.draft_proposed
    # every step verifies its accepted drafts plus at most one rejected one
    assert s.draft_verified - s.accepted <= s.target_passes
    assert s.acceptance_rate >= s.accepted_per_proposed


def test_perfect_draft_accepts_everything():
    target, _ = markov_pair(vocab_size=5, seed=4)
    tokens, s = speculative_generate(target, target, [0], 100, k=4, rng=0)
    assert s.acceptance_rate == 1.0
    assert s.target_passes == 20  # 5 tokens per pass


def test_same_seed_same_output():
    target, draft = markov_pair(vocab_size=8, seed=2)
    a, sa = speculative_generate(target, draft, [0], 60, k=3, rng=11)
    b, sb = speculative_generate(target, draft, [0], 60, k=3, rng=np.random.default_rng(11))
    np.testing.assert_array_equal(a, b)
    assert sa == sb


def test_acceptance_rate_estimates_alpha_for_every_k():
    """accepted / verified estimates alpha whatever k is; accepted / proposed does not."""
    target, draft = fixed_pair(vocab_size=64, draft_noise=0.3, seed=0)
    alpha = float(np.minimum(target.dist, draft.dist).sum())
    for k in (1, 4, 16):
        _, s = speculative_generate(target, draft, [0], 4000, k=k, rng=k)
        se = math.sqrt(alpha * (1 - alpha) / s.draft_verified)
        assert abs(s.acceptance_rate - alpha) < 4 * se
    assert s.accepted_per_proposed < alpha - 0.2  # the article's count at k = 16 is far off


def test_tokens_per_pass_matches_formula_for_fixed_context():
    target, draft = fixed_pair(vocab_size=64, draft_noise=0.5, seed=0)
    alpha = float(np.minimum(target.dist, draft.dist).sum())
    k = 4
    _, s = speculative_generate(target, draft, [0], 20000, k=k, rng=9)
    steps = np.array(s.tokens_per_step[:-1])  # the last step may be cut short
    se = steps.std() / math.sqrt(steps.size)
    assert abs(steps.mean() - expected_tokens_per_pass(alpha, k)) < 4 * se


def test_context_length_window_changes_nothing():
    """Passing only the recent window must give the same output as the full sequence."""

    class FullSequenceMarkov:
        def __init__(self, model):
            self.model = model
            self.vocab_size = model.vocab_size  # no context_length: sees everything

        def __call__(self, tokens):
            return self.model(tokens)

    target, draft = markov_pair(vocab_size=6, seed=3)
    a, _ = speculative_generate(target, draft, [0, 1, 2], 80, k=3, rng=5)
    b, _ = speculative_generate(FullSequenceMarkov(target), FullSequenceMarkov(draft), [0, 1, 2], 80, k=3, rng=5)
    np.testing.assert_array_equal(a, b)


def test_fixed_context_model_ignores_tokens():
    m = FixedContextModel([0.25, 0.75])
    np.testing.assert_array_equal(m([0, 1, 1]), [[0.25, 0.75]] * 3)


def test_summary_mentions_key_figures():
    s = GenerationStats(tokens_generated=10, target_passes=4, draft_passes=12, draft_proposed=12,
                        draft_verified=9, accepted=6, tokens_per_step=[3, 3, 2, 2])
    text = s.summary()
    assert "tokens/pass=2.50" in text and "acceptance=0.667" in text


def test_record_step_counts_the_first_rejection_only():
    s = GenerationStats()
    s.record_step(proposed=4, accepted=1, emitted=2)  # drafts 3 and 4 were never judged
    s.record_step(proposed=4, accepted=4, emitted=5)  # all kept, plus the bonus
    s.record_step(proposed=0, accepted=0, emitted=1)  # a plain step
    assert (s.target_passes, s.draft_passes, s.draft_proposed) == (3, 8, 8)
    assert (s.draft_verified, s.accepted, s.tokens_generated) == (6, 5, 8)
    assert s.tokens_per_step == [2, 5, 1]
    s.record_step(proposed=3, accepted=0, emitted=1, draft_passes=0)  # prompt lookup: no draft pass
    assert s.draft_passes == 8 and s.draft_verified == 7


# --- the one loop's parts: caches, row checks, counters, timings ------------------------------

from speclib import _validate  # noqa: E402
from speclib.core import cache as cache_module  # noqa: E402
from speclib.core.cache import ModelCache, RecomputeCache, checked_rows, model_cache  # noqa: E402
from speclib.core.decoding import autoregressive_generate  # noqa: E402
from speclib.core.policies import FallbackMonitor, FixedK  # noqa: E402
from speclib.core.proposers import MultiDraft, PromptLookup  # noqa: E402
from speclib.core.sampling import verify  # noqa: E402
from speclib.lm.models import MarkovModel  # noqa: E402


class _Rows:
    """A model that returns whatever rows it is told to (to test the loop's checks)."""

    context_length = None

    def __init__(self, vocab, row):
        self.vocab_size, self.row = vocab, np.asarray(row, dtype=float)

    def __call__(self, tokens):
        return np.tile(self.row, (len(tokens), 1))


def test_generic_cache_follows_the_protocol_and_equals_a_fresh_computation():
    target, _ = markov_pair(vocab_size=5, seed=2)
    cache = model_cache(target)
    assert isinstance(cache, RecomputeCache) and isinstance(cache, ModelCache)
    text = np.array([0, 3, 1, 4, 2, 2])
    rows = cache.extend(text[:4])
    np.testing.assert_allclose(rows, target(text[:4]))
    cache.rollback(2)
    np.testing.assert_array_equal(cache.tokens, text[:2])
    np.testing.assert_allclose(cache.extend(text[2:]), target(text)[2:])
    with pytest.raises(ValueError, match="cannot roll forward"):
        cache.rollback(len(cache) + 1)
    with pytest.raises(ValueError, match="out of range"):
        cache.extend(np.array([7]))


@pytest.mark.parametrize("row, what", [([np.nan, 0.5, 0.5], "NaN"), ([-0.1, 0.6, 0.5], "negative"),
                                       ([0.3, 0.3, 0.3], "sums to")])
def test_bad_model_rows_are_refused_naming_the_model(row, what):
    good, _ = markov_pair(vocab_size=3, seed=0)
    bad = _Rows(3, row)
    with pytest.raises(ValueError, match=f"target: .*{what}"):
        speculative_generate(bad, good, [0], 5, 2, rng=0)
    with pytest.raises(ValueError, match=f"draft: .*{what}"):
        speculative_generate(good, bad, [0], 5, 2, rng=0)
    with pytest.raises(ValueError, match=f"model: .*{what}"):
        autoregressive_generate(bad, [0], 5, rng=0)


def test_row_sum_tolerance_is_the_named_constant_and_small():
    """Rows off by more than _validate.SUM_TOLERANCE are refused; the constant stays below 1e-3."""
    tol = _validate.SUM_TOLERANCE
    assert 0 < tol <= 1e-3
    for off in (2 * tol, 1e-3, 1e-2):
        row = np.array([0.5, 0.5 + off])
        with pytest.raises(ValueError, match="sums to"):
            checked_rows(row[None, :], "target")
        with pytest.raises(ValueError, match="sums to"):
            verify([0], [[0.5, 0.5]], [row, [0.5, 0.5]], rng=0)
    checked_rows(np.array([[0.5, 0.5 + tol / 2]]), "target")  # rounding-sized: accepted
    assert cache_module.SUM_TOLERANCE is tol  # one constant, not a copy


def test_counters_of_every_variant_on_full_and_last_steps():
    """proposed / verified / passes per step: 10 tokens with k = 4 end with a step of 2 drafts."""
    target, draft = markov_pair(vocab_size=4, draft_noise=0.0, seed=1)  # draft == target: all accepted
    _, st = speculative_generate(target, draft, [0], 10, 4, rng=0)
    assert st.k_per_step == [4, 4] and st.tokens_per_step == [5, 5]
    _, st = speculative_generate(target, draft, [0], 11, 4, rng=0)
    assert st.k_per_step == [4, 4, 1]  # the last step drafts only what is still needed
    assert (st.draft_proposed, st.draft_verified, st.draft_passes) == (9, 9, 9)
    _, st = speculative_generate(target, MultiDraft(draft, 3), [0], 11, 4, rng=0)
    assert st.k_per_step == [4, 4, 1]
    assert (st.draft_proposed, st.draft_passes, st.draft_verified) == (27, 27, 9)  # every sequence proposed
    cycle = MarkovModel(np.roll(np.eye(4), 1, axis=1))  # writes 0 1 2 3 0 1 ...: lookup always right
    _, st = speculative_generate(cycle, PromptLookup(), [0, 1, 2, 3, 0], 11, 4, rng=0)
    assert st.k_per_step == [4, 4, 1] and st.tokens_per_step == [5, 5, 1]  # the last step: 1 draft, not 4
    assert (st.draft_proposed, st.draft_verified, st.draft_passes) == (9, 9, 0)
    wrong = MarkovModel(np.roll(np.eye(4), 2, axis=1))  # proposes 2 ahead: every draft rejected
    _, st = speculative_generate(cycle, wrong, [0], 6, 3, rng=0)
    assert st.accepted == 0 and st.draft_verified == st.target_passes  # one judged per step
    assert st.draft_proposed == sum(st.k_per_step)


def test_fallback_monitor_counts_only_judged_drafts():
    mon = FallbackMonitor(FixedK(4), c=0.3, window=40, min_samples=1)
    for drafted, accepted in [(4, 1), (4, 0), (4, 4), (4, 2)]:
        mon.draft_length()
        mon.update(drafted, accepted)
    # judged: 1 + 1 rejection, 0 + 1, 4 + 0, 2 + 1 -> 7 accepted of 10 judged (unjudged ones not counted)
    assert mon.alpha_estimate == pytest.approx(7 / 10)
    assert mon.speculating


def test_timings_record_the_forward_passes():
    target, draft = markov_pair(vocab_size=5, seed=0)
    timings = {}
    speculative_generate(target, draft, [0], 30, 3, rng=0, timings=timings)
    assert set(timings) == {"target", "draft", "total"}
    assert 0 < timings["target"] + timings["draft"] < timings["total"]
    with pytest.raises(TypeError, match="timings"):
        speculative_generate(target, draft, [0], 3, 3, rng=0, timings=[])


class _WrongShape:
    """A model whose rows have one token too many: the loops must say which model it is."""

    vocab_size = 4
    context_length = None

    def __call__(self, tokens):
        return np.full((len(tokens), 5), 0.2)


def test_a_bad_model_is_named_as_the_loop_calls_it_and_huge_runs_are_refused_at_once():
    import time

    from speclib._validate import MAX_NEW_TOKENS
    from speclib.lm.models import markov_pair

    target, draft = markov_pair(vocab_size=4, seed=0)
    for call, name in [(lambda: speculative_generate(_WrongShape(), draft, [0], 5, 2, 0), "target"),
                       (lambda: speculative_generate(target, _WrongShape(), [0], 5, 2, 0), "draft"),
                       (lambda: autoregressive_generate(_WrongShape(), [0], 5, 0), "model")]:
        with pytest.raises(ValueError, match=f"^{name}: a model must map"):
            call()
    for call in (lambda: speculative_generate(target, draft, [0], 10**12, 2, 0),
                 lambda: autoregressive_generate(target, [0], 10**12, 0)):
        start = time.perf_counter()
        with pytest.raises(ValueError, match=f"max_new_tokens: must be <= {MAX_NEW_TOKENS}"):
            call()
        assert time.perf_counter() - start < 0.1
