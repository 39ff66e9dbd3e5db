"""speclib.correction: the split of q and the exact distribution of one emitted token."""

import numpy as np
import pytest

from speclib import broken, residual_distribution
from speclib.correction import emitted_distribution, split_target
from speclib.exact import speculative_block_distribution
from speclib.models import FixedContextModel
from speclib.stats import total_variation_distance


def random_pairs(n=30, vocab=6, seed=0):
    rng = np.random.default_rng(seed)
    for _ in range(n):
        yield rng.dirichlet(np.full(vocab, 0.7)), rng.dirichlet(np.full(vocab, 0.7))


def test_split_adds_up_to_q():
    for p, q in random_pairs():
        s = split_target(p, q)
        np.testing.assert_allclose(s.overlap + s.missing, q, atol=1e-15)
        assert s.missing.sum() == pytest.approx(1 - s.alpha, abs=1e-12)
        np.testing.assert_allclose(s.residual, residual_distribution(p, q))


def test_emitted_distribution_is_q_for_the_residual():
    """The one-position theorem of chapter 4, on random pairs."""
    for p, q in random_pairs(seed=1):
        np.testing.assert_allclose(emitted_distribution(p, q), q, atol=1e-12)


def test_resample_from_q_closed_form():
    # emitted = min(p, q) + (1 - alpha) q, so its TV from q is (1 - alpha) TV(q, residual)
    for p, q in random_pairs(seed=2):
        s = split_target(p, q)
        wrong = emitted_distribution(p, q, correct=broken.RESAMPLE_FROM_TARGET.correct)
        np.testing.assert_allclose(wrong, s.overlap + (1 - s.alpha) * q, atol=1e-12)
        assert total_variation_distance(wrong, q) == pytest.approx(
            (1 - s.alpha) * total_variation_distance(q, s.residual), abs=1e-12)


@pytest.mark.parametrize("variant", [broken.CORRECT, broken.RESAMPLE_FROM_TARGET], ids=lambda v: v.name)
def test_agrees_with_exact_enumeration(variant):
    """k = 1 with context-free models: the first emitted token of the enumerated step."""
    for p, q in random_pairs(n=5, vocab=4, seed=3):
        blocks = speculative_block_distribution(FixedContextModel(q), FixedContextModel(p), [0], 1, **variant.hooks)
        first = np.zeros(4)
        for block, prob in blocks.items():
            first[block[0]] += prob
        np.testing.assert_allclose(emitted_distribution(p, q, correct=variant.correct), first, atol=1e-12)


def test_perfect_draft_needs_no_correction():
    q = np.array([0.1, 0.6, 0.3])
    s = split_target(q, q)
    assert s.alpha == pytest.approx(1.0) and not s.missing.any()
    np.testing.assert_allclose(emitted_distribution(q, q, correct=lambda p, q: q), q)


def test_bad_input():
    with pytest.raises(ValueError, match="same shape"):
        split_target([0.5, 0.5], [1 / 3] * 3)
    with pytest.raises(ValueError, match="q: row 0 sums"):
        emitted_distribution([0.5, 0.5], [0.5, 0.6])
    with pytest.raises(ValueError, match=r"correct\(p, q\): negative probability"):
        emitted_distribution([0.5, 0.5], [0.2, 0.8], correct=lambda p, q: q - p)
    with pytest.raises(ValueError, match=r"correct\(p, q\): expected shape"):
        emitted_distribution([0.5, 0.5], [0.2, 0.8], correct=lambda p, q: np.array([0.5, 0.25, 0.25]))
