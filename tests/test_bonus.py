"""speclib.book.bonus: tokens per step with the bonus token turned off."""

import numpy as np
import pytest

from speclib import expected_tokens_per_pass, fixed_pair, speculative_generate, tokens_per_step_pmf
from speclib.book.bonus import (bonus_share, expected_tokens_per_pass_without_bonus, tokens_per_full_step,
                           tokens_per_step_pmf_without_bonus)
from speclib.core.engine import run_streams
from speclib.core.sampling import acceptance_rate
from speclib.core.stats import chi_square_test, mean_confidence_interval

LEVEL = 1e-3  # a chi-square p-value below this rejects "the counts follow the formula"


def test_pmf_hand_computed():
    # alpha 0.5, k 2: one token if the first draft is rejected (1/2), else two (1/2).
    np.testing.assert_allclose(tokens_per_step_pmf_without_bonus(0.5, 2), [0.5, 0.5])
    np.testing.assert_allclose(tokens_per_step_pmf_without_bonus(0.4, 3), [0.6, 0.24, 0.16])


@pytest.mark.parametrize("alpha", [0.0, 0.2, 0.7, 1.0])
@pytest.mark.parametrize("k", [1, 2, 5])
def test_pmf_sums_to_one_and_has_the_right_mean(alpha, k):
    pmf = tokens_per_step_pmf_without_bonus(alpha, k)
    assert pmf.shape == (k,) and pmf.sum() == pytest.approx(1.0) and (pmf >= 0).all()
    assert pmf @ np.arange(1, k + 1) == pytest.approx(expected_tokens_per_pass_without_bonus(alpha, k))


@pytest.mark.parametrize("alpha", [0.0, 0.35, 0.9, 1.0])
@pytest.mark.parametrize("k", [1, 3, 8])
def test_bonus_is_worth_alpha_to_the_k(alpha, k):
    gap = expected_tokens_per_pass(alpha, k) - expected_tokens_per_pass_without_bonus(alpha, k)
    assert gap == pytest.approx(alpha**k)
    # The with-bonus pmf is the without-bonus one with mass alpha**k moved from k to k + 1.
    moved = np.append(tokens_per_step_pmf_without_bonus(alpha, k), 0.0)
    moved[k - 1] -= alpha**k
    moved[k] += alpha**k
    np.testing.assert_allclose(moved, tokens_per_step_pmf(alpha, k), atol=1e-15)


def test_edges_and_vectorised():
    assert expected_tokens_per_pass_without_bonus(0.99, 1) == 1.0
    assert expected_tokens_per_pass_without_bonus(1.0, 6) == 6.0
    np.testing.assert_allclose(expected_tokens_per_pass_without_bonus(np.array([0.0, 0.5, 1.0]), 3), [1, 1.75, 3])
    np.testing.assert_allclose(expected_tokens_per_pass_without_bonus(np.array([0.2, 0.5]), 1), [1, 1])
    assert bonus_share(1.0, 4) == pytest.approx(1 / 5)
    assert bonus_share(0.0, 4) == 0.0


def test_simulation_without_bonus_matches_and_with_bonus_formula_does_not():
    """Seeded: the 99 % interval for tokens per step (bonus off) covers the no-bonus formula
    and excludes the with-bonus one (the negative control: a test that can tell them apart)."""
    target, draft = fixed_pair(vocab_size=64, draft_noise=0.3, seed=0)
    alpha, k = acceptance_rate(draft.dist, target.dist), 4
    _, stats = speculative_generate(target, draft, [0], 6000, k=k, rng=12, bonus=False)
    ci = mean_confidence_interval(stats.tokens_per_step[:-1], level=0.99)  # last step is cut short
    assert ci.low < expected_tokens_per_pass_without_bonus(alpha, k) < ci.high
    assert not ci.low < expected_tokens_per_pass(alpha, k) < ci.high


def test_full_steps_are_the_steps_with_more_than_k_tokens_to_go():
    target, draft = fixed_pair(vocab_size=16, draft_noise=0.5, seed=1)
    run = run_streams(target, draft, k=3, n_streams=50, n_tokens=20, rng=0)
    steps = tokens_per_full_step(run)
    to_go = run.n_tokens - run.start
    assert steps.size == np.count_nonzero(to_go > 3) < run.emitted.size
    np.testing.assert_array_equal(steps, run.emitted[to_go > 3])
    assert (run.proposed[to_go > 3] == 3).all()  # every full step drafted the whole k
    assert steps.min() >= 1 and steps.max() <= 4


@pytest.mark.parametrize("bonus", [True, False])
def test_full_steps_follow_the_pmf_and_all_steps_do_not(bonus):
    """Seeded, threshold LEVEL. Short generations (12 tokens, k = 4) cut many steps short:
    the full steps pass the chi-square test against the formula; all steps together (the
    negative control) fail the same test."""
    target, draft = fixed_pair(vocab_size=64, draft_noise=0.3, seed=0)
    alpha, k = acceptance_rate(draft.dist, target.dist), 4
    run = run_streams(target, draft, k, n_streams=20_000, n_tokens=12, rng=5, bonus=bonus)
    pmf = tokens_per_step_pmf(alpha, k) if bonus else tokens_per_step_pmf_without_bonus(alpha, k)

    def pvalue(steps):
        return chi_square_test(np.bincount(steps, minlength=pmf.size + 1)[1:], pmf).pvalue

    assert pvalue(tokens_per_full_step(run)) > LEVEL
    assert pvalue(run.emitted) < LEVEL


def test_bad_input():
    with pytest.raises(ValueError, match=r"alpha: must lie in \[0, 1\]"):
        tokens_per_step_pmf_without_bonus(1.2, 3)
    with pytest.raises(ValueError, match="k: must be >= 1"):
        expected_tokens_per_pass_without_bonus(0.5, 0)
    with pytest.raises(TypeError, match="k: expected an integer"):
        bonus_share(0.5, 2.0)
    with pytest.raises(TypeError, match="result: expected the EngineResult"):
        tokens_per_full_step([1, 2, 3])
