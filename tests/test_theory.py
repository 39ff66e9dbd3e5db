"""Closed-form theory: hand-computed values, Leviathan et al.'s Table 1, edge cases."""

import numpy as np
import pytest

from speclib import (
    expected_tokens_per_pass,
    operations_factor,
    optimal_k,
    tokens_per_step_pmf,
    tokens_per_step_variance,
    speedup_in_passes,
)


def test_expected_tokens_hand_computed():
    assert expected_tokens_per_pass(0.5, 1) == pytest.approx(1.5)
    assert expected_tokens_per_pass(0.5, 3) == pytest.approx(1 + 0.5 + 0.25 + 0.125)
    # The closed form (1 - a^(k+1)) / (1 - a):
    assert expected_tokens_per_pass(0.85, 4) == pytest.approx((1 - 0.85**5) / 0.15)


@pytest.mark.parametrize("k", [1, 2, 5, 16])
def test_expected_tokens_edges(k):
    assert expected_tokens_per_pass(1.0, k) == k + 1
    assert expected_tokens_per_pass(0.0, k) == 1.0
    # Continuous at alpha -> 1 (no 0/0 blow-up near the edge)
    assert expected_tokens_per_pass(1 - 1e-12, k) == pytest.approx(k + 1, rel=1e-9)


def test_expected_tokens_vectorised():
    alphas = np.array([0.0, 0.5, 1.0])
    np.testing.assert_allclose(expected_tokens_per_pass(alphas, 2), [1.0, 1.75, 3.0])


# Leviathan et al. (2023), Table 1, c = c_hat = 0: (alpha, gamma) -> (operations x, speed x).
TABLE_1 = [
    (0.6, 2, 1.53, 1.96),
    (0.7, 3, 1.58, 2.53),
    (0.8, 2, 1.23, 2.44),
    (0.8, 5, 1.63, 3.69),
    (0.9, 2, 1.11, 2.71),
    (0.9, 10, 1.60, 6.86),
]


@pytest.mark.parametrize("alpha, k, ops, speed", TABLE_1)
def test_leviathan_table_1(alpha, k, ops, speed):
    assert round(speedup_in_passes(alpha, k, 0.0), 2) == speed
    assert round(operations_factor(alpha, k, 0.0), 2) == ops


def test_pmf_hand_computed_and_sums_to_one():
    np.testing.assert_allclose(tokens_per_step_pmf(0.5, 2), [0.5, 0.25, 0.25])
    for alpha in [0.0, 0.3, 0.9, 1.0]:
        pmf = tokens_per_step_pmf(alpha, 6)
        assert pmf.sum() == pytest.approx(1.0)
        assert (pmf >= 0).all()


def test_pmf_edges():
    np.testing.assert_array_equal(tokens_per_step_pmf(0.0, 3), [1, 0, 0, 0])
    np.testing.assert_array_equal(tokens_per_step_pmf(1.0, 3), [0, 0, 0, 1])


@pytest.mark.parametrize("alpha, k", [(0.0, 3), (0.4, 1), (0.8, 5), (1.0, 4)])
def test_pmf_mean_is_expected_tokens(alpha, k):
    n = np.arange(1, k + 2)
    assert tokens_per_step_pmf(alpha, k) @ n == pytest.approx(expected_tokens_per_pass(alpha, k))


def test_variance_hand_computed():
    # alpha = 0.5, k = 1: 1 or 2 tokens with probability 1/2 each -> variance 1/4.
    assert tokens_per_step_variance(0.5, 1) == pytest.approx(0.25)
    assert tokens_per_step_variance(1.0, 4) == 0.0


def test_speedup_in_passes_hand_computed():
    # alpha 0.8, k 2, c 0.1: (1 + 0.8 + 0.64) / 1.2
    assert speedup_in_passes(0.8, 2, 0.1) == pytest.approx(2.44 / 1.2)
    assert speedup_in_passes(0.5, 0, 0.3) == 1.0


def test_the_former_name_still_runs_and_says_what_it_is_now():
    """``walltime_speedup`` was the name of a speed-up counted in target passes: code that calls
    it keeps working, with a warning that names ``speedup_in_passes``."""
    import speclib
    from speclib.core.theory import walltime_speedup

    with pytest.warns(DeprecationWarning, match="speedup_in_passes"):
        assert walltime_speedup(0.8, 2, 0.1) == speedup_in_passes(0.8, 2, 0.1)
    with pytest.warns(DeprecationWarning):
        assert speclib.walltime_speedup(0.7, 3, 0.05) == speclib.speedup_in_passes(0.7, 3, 0.05)


def test_optimal_k_matches_brute_force():
    for alpha in [0.5, 0.7, 0.8, 0.9, 0.95]:
        for c in [0.0, 0.01, 0.05, 0.2]:
            ks = range(1, 33)
            best = max(ks, key=lambda k: (speedup_in_passes(alpha, k, c), -k))
            assert optimal_k(alpha, c, k_max=32) == best


def test_optimal_k_zero_exactly_when_alpha_at_most_c():
    for alpha, c in [(0.3, 0.3), (0.2, 0.5), (0.0, 0.0), (0.5, 0.6)]:
        assert optimal_k(alpha, c) == 0
    for alpha, c in [(0.31, 0.3), (0.6, 0.5), (0.1, 0.05)]:
        assert optimal_k(alpha, c) >= 1
        assert speedup_in_passes(alpha, optimal_k(alpha, c), c) > 1


def test_optimal_k_perfect_draft_free_is_k_max():
    assert optimal_k(1.0, 0.0, k_max=10) == 10
