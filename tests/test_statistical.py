"""The theorem, checked by sampling: chi-square tests on blocks from speculative_generate.

Each test draws N_SAMPLES independent three-token continuations with a fixed seed and
compares their frequencies with the target's exact distribution (from speclib.core.exact).
The correct decoder must not be rejected at level ALPHA_LEVEL; every faulty verifier that
changes the sampled output must be rejected at that level by the same test.
"""

import numpy as np
import pytest
from scipy import stats

from speclib import markov_pair, speculative_generate
from speclib.book import broken
from speclib.core.exact import target_sequence_distribution

N_SAMPLES = 6000
LENGTH = 3
ALPHA_LEVEL = 1e-3  # reject "output follows the target" when the p-value is below this
PROMPT = [0]


def pair():
    return markov_pair(vocab_size=3, draft_noise=0.7, seed=5)


def chi_square_pvalue(verifier, seed, k=2):
    target, draft = pair()
    rng = np.random.default_rng(seed)
    vocab = target.vocab_size
    counts = np.zeros(vocab**LENGTH)
    for _ in range(N_SAMPLES):
        tokens, _ = speculative_generate(target, draft, PROMPT, LENGTH, k=k, rng=rng, verifier=verifier)
        counts[np.ravel_multi_index(tuple(tokens), (vocab,) * LENGTH)] += 1
    expected = target_sequence_distribution(target, PROMPT, LENGTH).ravel() * N_SAMPLES
    keep = expected > 0
    assert counts[~keep].sum() == 0, "sampled a sequence the target gives probability 0"
    return stats.chisquare(counts[keep], expected[keep]).pvalue


@pytest.mark.parametrize("k", [1, 2, 3])
def test_correct_verifier_passes_chi_square(k):
    assert chi_square_pvalue(broken.CORRECT.verifier, seed=100 + k, k=k) > ALPHA_LEVEL


@pytest.mark.parametrize(
    "variant", [broken.RESAMPLE_FROM_TARGET, broken.INVERTED_RATIO, broken.MISREPORTED_DRAFT], ids=lambda v: v.name
)
def test_faulty_verifiers_fail_chi_square(variant):
    assert chi_square_pvalue(variant.verifier, seed=7) < ALPHA_LEVEL


def test_ratio_without_min_is_refused_by_the_sampling_loop():
    """`u < q/p` and `u < min(1, q/p)` are the same event for u in [0, 1).

    The uncapped ratio is wrong as a *probability*, yet a sampler that took it would draw
    exactly the tokens of the correct rule, so no statistical test could flag it.  The loop
    refuses it instead: every coin's probability must lie in [0, 1] (issue 24).
    """
    target, draft = pair()
    with pytest.raises(ValueError, match=r"coin: asked for a coin that falls heads with probability 1\.\d+"):
        for seed in range(30):
            speculative_generate(target, draft, PROMPT, 12, k=3, rng=seed, verifier=broken.RATIO_WITHOUT_MIN.verifier)
