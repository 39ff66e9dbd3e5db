"""speclib.book.correction: the split of q and the exact distribution of one emitted token."""

import numpy as np
import pytest

from speclib import residual_distribution
from speclib.book import broken
from speclib.book.correction import emitted_distribution, split_target
from speclib.core.exact import output_distribution
from speclib.lm.models import FixedContextModel
from speclib.core.stats import total_variation_distance


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
    """k = 1 with context-free models: the first emitted token of the loop, enumerated."""
    for p, q in random_pairs(n=5, vocab=4, seed=3):
        first = output_distribution(FixedContextModel(q), FixedContextModel(p), [0], 1, 1, verifier=variant.verifier)
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


def test_resample_from_q_emits_too_often_exactly_where_p_exceeds_alpha_q():
    """Chapter 4's claim: the faulty rule over-emits y exactly when p(y) > alpha q(y), which
    includes under-proposed tokens the draft nearly covers (not only p(y) >= q(y))."""
    found_near = False
    for p, q in random_pairs(n=60, vocab=8, seed=4):
        s = split_target(p, q)
        wrong = emitted_distribution(p, q, correct=broken.RESAMPLE_FROM_TARGET.correct)
        clear = np.abs(p - s.alpha * q) > 1e-9  # ties are rounding-sensitive
        np.testing.assert_array_equal((wrong > q)[clear], (p > s.alpha * q)[clear])
        found_near |= bool(((wrong > q) & (p < q)).any())
    assert found_near, "no under-proposed token came out too often: the claim's second half is untested"


@pytest.mark.parametrize("bonus", [True, False])
def test_exactness_grid_separates_correct_from_faulty(bonus):
    from speclib.book.correction import exactness_grid

    for variant in broken.FAULTY:
        rows = exactness_grid(variant, bonus=bonus, vocab_sizes=(2, 3), ks=(1, 2))
        assert [(r.vocab_size, r.k) for r in rows] == [(2, 1), (2, 2), (3, 1), (3, 2)]
        assert max(r.max_error for r in rows) < 1e-12
        assert min(r.faulty_tv for r in rows) > 1e-3, f"{variant.name} slipped through"


def test_exactness_grid_negative_control_is_the_correct_rule():
    """With the correct rule in the 'faulty' slot the distance column is rounding error, so
    the column measures the variant and nothing else."""
    from speclib.book.correction import exactness_grid

    rows = exactness_grid(broken.CORRECT, vocab_sizes=(2, 3), ks=(1, 2))
    assert max(r.faulty_tv for r in rows) < 1e-12


def test_exactness_grid_bad_input():
    from speclib.book.correction import exactness_grid

    with pytest.raises(TypeError, match="faulty: expected a speclib.book.broken.Variant"):
        exactness_grid("resample from q")
    with pytest.raises(ValueError, match="changes the decoding loop"):
        exactness_grid(broken.STALE_CACHE)
    with pytest.raises(ValueError, match="vocab_sizes"):
        exactness_grid(broken.RESAMPLE_FROM_TARGET, vocab_sizes=(1,))
    with pytest.raises(ValueError, match="draft_noise"):
        exactness_grid(broken.RESAMPLE_FROM_TARGET, draft_noise=1.5)
