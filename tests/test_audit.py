"""The black-box audit: counting sampled sequences and a chi-square test with rare outcomes pooled."""

import numpy as np
import pytest

from speclib import autoregressive_generate, markov_pair, speculative_generate
from speclib.book import broken
from speclib.core.audit import AUDIT_LEVEL, audit, pooled_chi_square, sequence_counts
from speclib.core.exact import target_sequence_distribution


def test_sequence_counts_shape_and_total():
    target, _ = markov_pair(vocab_size=3, seed=0)
    counts = sequence_counts(lambda n, rng: autoregressive_generate(target, [0], n, rng), 3, 2, 200, rng=1)
    assert counts.shape == (3, 3) and counts.sum() == 200
    # Plain tokens (no stats) are accepted too.
    counts = sequence_counts(lambda n, rng: rng.integers(0, 3, size=n), 3, 2, 50, rng=1)
    assert counts.sum() == 50


def test_sequence_counts_rejects_bad_decoders_and_arguments():
    with pytest.raises(TypeError, match="decode: expected a callable"):
        sequence_counts("not a decoder", 3, 2, 10, rng=0)
    with pytest.raises(ValueError, match="decode: returned"):
        sequence_counts(lambda n, rng: np.zeros(n + 1, dtype=int), 3, 2, 10, rng=0)
    with pytest.raises(ValueError, match="n_samples: must be >= 1"):
        sequence_counts(lambda n, rng: np.zeros(n, dtype=int), 3, 2, 0, rng=0)


def test_pooling_merges_rare_outcomes_only():
    result = pooled_chi_square([500, 480, 15, 5], [0.5, 0.49, 0.008, 0.002])
    assert result.dof == 2  # the two rare outcomes became one bin
    result = pooled_chi_square([500, 500], [0.5, 0.5])
    assert result.dof == 1 and result.pvalue == pytest.approx(1.0)


def test_one_draw_of_a_rare_outcome_does_not_reject_when_pooled():
    probs = np.array([0.5, 0.49999, 0.00001])
    counts = np.array([500, 499, 1])
    from speclib.core.stats import chi_square_test

    assert chi_square_test(counts, probs).pvalue < AUDIT_LEVEL  # why pooling is needed
    assert pooled_chi_square(counts, probs).pvalue > AUDIT_LEVEL


def test_impossible_outcomes_still_fail():
    result = pooled_chi_square([500, 499, 1], [0.5, 0.5, 0.0])
    assert result.pvalue == 0.0 and result.impossible == 1


def test_pooled_chi_square_errors():
    with pytest.raises(ValueError, match="probs: 2 outcomes, but counts has 3"):
        pooled_chi_square([1, 2, 3], [0.5, 0.5])
    with pytest.raises(ValueError, match="too few"):
        pooled_chi_square([1, 1], [0.5, 0.5])


def test_audit_passes_a_correct_decoder_and_fails_a_faulty_one():
    target, draft = markov_pair(vocab_size=3, draft_noise=0.7, seed=5)
    reference = target_sequence_distribution(target, [0], 3)
    good = audit(lambda n, rng: speculative_generate(target, draft, [0], n, 2, rng), reference, 2000, rng=3)
    bad = audit(lambda n, rng: speculative_generate(target, draft, [0], n, 2, rng,
                                                    verifier=broken.INVERTED_RATIO.verifier), reference, 2000, rng=3)
    assert good.passed and good.pvalue > AUDIT_LEVEL
    assert not bad.passed and bad.pvalue < AUDIT_LEVEL
    assert good.counts.sum() == 2000


def test_audit_validates_the_reference():
    with pytest.raises(ValueError, match="reference: expected shape"):
        audit(lambda n, rng: np.zeros(n, dtype=int), np.full((2, 3), 1 / 6), 10, rng=0)
