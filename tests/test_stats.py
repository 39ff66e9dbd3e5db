"""speclib.core.stats: total variation, the chi-square test, sequence counts, confidence intervals."""

import numpy as np
import pytest
from scipy import stats as scipy_stats

from speclib import acceptance_rate, markov_pair
from speclib.book import broken
from speclib.core.exact import target_sequence_distribution
from speclib.core.stats import chi_square_test, mean_confidence_interval, sequence_counts, total_variation_distance

LEVEL = 1e-3  # the chi-square tests below reject "follows the target" when p < LEVEL


def test_total_variation_hand_computed_and_batch():
    assert total_variation_distance([1.0, 0.0], [0.0, 1.0]) == 1.0
    assert total_variation_distance([0.2, 0.8], [0.2, 0.8]) == 0.0
    rng = np.random.default_rng(0)
    a, b = rng.dirichlet(np.ones(5), size=(2, 20))
    tv = total_variation_distance(a, b)
    assert tv.shape == (20,)
    np.testing.assert_allclose(tv, 1 - acceptance_rate(a, b), atol=1e-12)


def test_total_variation_rejects_mismatched_shapes():
    with pytest.raises(ValueError, match="same shape"):
        total_variation_distance([0.5, 0.5], [1 / 3] * 3)


def test_chi_square_matches_scipy():
    counts = np.array([30, 50, 20])
    probs = np.array([0.25, 0.5, 0.25])
    ours = chi_square_test(counts, probs)
    ref = scipy_stats.chisquare(counts, probs * counts.sum())
    assert ours.statistic == pytest.approx(ref.statistic)
    assert ours.pvalue == pytest.approx(ref.pvalue)
    assert ours.dof == 2 and ours.impossible == 0 and ours.min_expected == pytest.approx(25.0)


def test_chi_square_ignores_zero_probability_cells_unless_hit():
    ok = chi_square_test(np.array([[40, 0], [60, 0]]), np.array([[0.4, 0.0], [0.6, 0.0]]))
    assert ok.dof == 1 and ok.pvalue == pytest.approx(1.0)
    bad = chi_square_test([40, 59, 1], [0.4, 0.6, 0.0])
    assert bad.pvalue == 0.0 and bad.impossible == 1 and bad.statistic == np.inf


def test_chi_square_pools_rare_outcomes():
    probs = np.array([0.5, 0.49, 0.004, 0.003, 0.003])
    counts = np.array([50, 48, 1, 1, 0])
    pooled = chi_square_test(counts, probs)  # expected 50, 49 and 0.4 + 0.3 + 0.3 = 1 pooled
    assert pooled.dof == 2 and pooled.min_expected == pytest.approx(1.0)
    ref = scipy_stats.chisquare([50, 48, 2], [50, 49, 1])
    assert pooled.pvalue == pytest.approx(ref.pvalue)
    assert chi_square_test(counts, probs, pool_below=0).dof == 4


def test_chi_square_is_calibrated_under_the_null():
    """Under the null, p < 0.05 should happen about 5 % of the time (seeded; band 2-9 %)."""
    rng = np.random.default_rng(2024)
    probs = np.array([0.1, 0.2, 0.3, 0.4])
    pvalues = [chi_square_test(rng.multinomial(500, probs), probs).pvalue for _ in range(600)]
    assert 0.02 < np.mean(np.array(pvalues) < 0.05) < 0.09


@pytest.mark.parametrize(
    "counts, probs, error, message",
    [
        ([1, -1], [0.5, 0.5], ValueError, "counts: must be non-negative"),
        ([1.5, 2], [0.5, 0.5], ValueError, "counts: must be non-negative whole"),
        ([0, 0], [0.5, 0.5], ValueError, "counts: no draw"),
        (["a", "b"], [0.5, 0.5], TypeError, "counts: expected an array"),
        ([1, 2], [0.5, 0.3, 0.2], ValueError, "probs: shape"),
        ([1, 2], [0.5, 0.6], ValueError, "probs: row 0 sums"),
        ([3, 0], [1.0, 0.0], ValueError, "fewer than two cells"),
        ([3, 1], [0.99, 0.01], ValueError, "fewer than two cells"),
    ],
)
def test_chi_square_bad_input(counts, probs, error, message):
    with pytest.raises(error, match=message):
        chi_square_test(counts, probs)


def small_pair():
    return markov_pair(vocab_size=3, draft_noise=0.7, seed=5)


def test_sequence_counts_shape_and_total():
    target, draft = small_pair()
    counts = sequence_counts(target, draft, [0], 2, k=2, n_samples=50, rng=0)
    assert counts.shape == (3, 3) and counts.sum() == 50 and counts.dtype.kind == "i"


def test_sequence_counts_is_reproducible():
    target, draft = small_pair()
    a = sequence_counts(target, draft, [1], 3, k=2, n_samples=200, rng=9)
    b = sequence_counts(target, draft, [1], 3, k=2, n_samples=200, rng=9)
    np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("bonus", [True, False])
def test_correct_decoder_passes_and_resample_from_q_fails(bonus):
    """The claim of chapters 4 and 5, by sampling: the correct rule passes at LEVEL, the
    resample-from-q rule (negative control) fails the very same test."""
    target, draft = small_pair()
    probs = target_sequence_distribution(target, [0], 3)
    good = sequence_counts(target, draft, [0], 3, k=2, n_samples=4000, rng=31, bonus=bonus)
    wrong = sequence_counts(target, draft, [0], 3, k=2, n_samples=4000, rng=31, bonus=bonus,
                            verifier=broken.RESAMPLE_FROM_TARGET.verifier)
    assert chi_square_test(good, probs).pvalue > LEVEL
    assert chi_square_test(wrong, probs).pvalue < LEVEL


def test_sequence_counts_bad_input():
    target, draft = small_pair()
    with pytest.raises(ValueError, match="n_samples: must be >= 1"):
        sequence_counts(target, draft, [0], 2, k=2, n_samples=0, rng=0)
    with pytest.raises(ValueError, match="too many"):
        sequence_counts(target, draft, [0], 20, k=2, n_samples=1, rng=0)
    with pytest.raises(TypeError, match="rng"):
        sequence_counts(target, draft, [0], 2, k=2, n_samples=1, rng="seed")


def test_confidence_interval_hand_computed():
    ci = mean_confidence_interval([2.0, 4.0])
    # mean 3, sd sqrt(2), sem 1, t(0.975, 1 dof) = 12.706
    assert ci.mean == 3.0
    assert ci.high - 3.0 == pytest.approx(scipy_stats.t.ppf(0.975, 1))
    assert mean_confidence_interval([5, 5, 5]).low == 5.0


def test_confidence_interval_coverage():
    """A 90 % interval should cover the true mean about 90 % of the time (seeded; band 86-94 %)."""
    rng = np.random.default_rng(7)
    hits = 0
    for _ in range(800):
        ci = mean_confidence_interval(rng.exponential(2.0, size=60), level=0.9)
        hits += ci.low <= 2.0 <= ci.high
    assert 0.86 < hits / 800 < 0.94


@pytest.mark.parametrize(
    "samples, level, message",
    [([1.0], 0.95, "at least 2"), ([1.0, np.nan], 0.95, "NaN"), ([[1, 2], [3, 4]], 0.95, "1-D"),
     ([1, 2], 1.0, "strictly between"), ([1, 2], 1.5, "level: must be <= 1")],
)
def test_confidence_interval_bad_input(samples, level, message):
    with pytest.raises(ValueError, match=message):
        mean_confidence_interval(samples, level)
