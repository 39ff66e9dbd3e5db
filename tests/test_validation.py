"""Bad input gets a clear error that names the argument and the problem."""

import numpy as np
import pytest

from speclib import (
    acceptance_rate,
    autoregressive_generate,
    expected_tokens_per_pass,
    markov_pair,
    optimal_k,
    residual_distribution,
    speculative_generate,
    tokens_per_step_pmf,
    verify,
    speedup_in_passes,
)

P2 = np.full((2, 3), 1 / 3)
Q3 = np.full((3, 3), 1 / 3)


@pytest.mark.parametrize(
    "call, error, message",
    [
        (lambda: acceptance_rate([0.5, np.nan, 0.5], [0.5, 0.25, 0.25]), ValueError, r"p: row 0 contains NaN"),
        (lambda: acceptance_rate([1.2, -0.2], [0.5, 0.5]), ValueError, r"p: negative probability"),
        (lambda: acceptance_rate([0.5, 0.5], [0.5, 0.6]), ValueError, r"q: row 0 sums to 1.1, not 1"),
        (lambda: acceptance_rate([0.5, 0.5], [1 / 3] * 3), ValueError, r"same shape"),
        (lambda: acceptance_rate("abc", [1.0]), TypeError, r"p: expected an array of probabilities"),
        (lambda: residual_distribution(P2, P2), ValueError, r"p: expected a 1-D distribution"),
        (lambda: verify([0, 1, 2], P2, Q3, 0), ValueError, r"draft_tokens: expected 2 tokens"),
        (lambda: verify([0, 1], P2, P2, 0), ValueError, r"q_target: expected shape \(3, 3\)"),
        (lambda: verify([0, 5], P2, Q3, 0), ValueError, r"draft_tokens: token 5 at position 1 is out of range"),
        (lambda: verify([0, -1], P2, Q3, 0), ValueError, r"draft_tokens: token -1"),
        (lambda: verify([0.5, 1], P2, Q3, 0), TypeError, r"draft_tokens: token ids must be integers"),
        (lambda: verify([1, 1], [[1, 0, 0], [1 / 3] * 3], Q3, 0), ValueError, r"probability 0 under p_draft"),
        (lambda: verify([0, 1], P2, Q3, None), TypeError, r"rng: expected a numpy.random.Generator"),
        (lambda: verify([0, 1], P2, Q3, 1.5), TypeError, r"rng: expected"),
        (lambda: expected_tokens_per_pass(1.5, 4), ValueError, r"alpha: must lie in \[0, 1\]"),
        (lambda: expected_tokens_per_pass(np.nan, 4), ValueError, r"alpha: contains NaN"),
        (lambda: expected_tokens_per_pass(0.5, 0), ValueError, r"k: must be >= 1"),
        (lambda: expected_tokens_per_pass(0.5, 2.0), TypeError, r"k: expected an integer"),
        (lambda: tokens_per_step_pmf(-0.1, 3), ValueError, r"alpha"),
        (lambda: speedup_in_passes(0.5, 3, -1.0), ValueError, r"c: must be >= 0"),
        (lambda: speedup_in_passes(0.5, 3, np.inf), ValueError, r"c: must be finite"),
        (lambda: optimal_k(0.5, 0.1, k_max=0), ValueError, r"k_max: must be >= 1"),
    ],
)
def test_error_names_argument_and_problem(call, error, message):
    with pytest.raises(error, match=message):
        call()


def test_generation_argument_errors():
    target, draft = markov_pair(vocab_size=4, seed=0)
    other, _ = markov_pair(vocab_size=5, seed=0)
    with pytest.raises(ValueError, match=r"k: must be >= 1"):
        speculative_generate(target, draft, [0], 5, k=0, rng=0)
    with pytest.raises(ValueError, match=r"max_new_tokens: must be >= 0"):
        speculative_generate(target, draft, [0], -1, k=2, rng=0)
    with pytest.raises(ValueError, match=r"max_new_tokens: must be >= 0"):
        autoregressive_generate(target, [0], -3, rng=0)
    with pytest.raises(ValueError, match=r"prompt: must contain at least one token"):
        autoregressive_generate(target, [], 3, rng=0)
    with pytest.raises(ValueError, match=r"prompt: token 9 at position 1 is out of range"):
        speculative_generate(target, draft, [0, 9], 3, k=2, rng=0)
    with pytest.raises(ValueError, match=r"draft: vocabulary of 5 tokens differs"):
        speculative_generate(target, other, [0], 3, k=2, rng=0)
    with pytest.raises(TypeError, match=r"target: expected a model"):
        speculative_generate("gpt", draft, [0], 3, k=2, rng=0)


def test_model_returning_wrong_shape_is_reported():
    class Broken:
        vocab_size = 4

        def __call__(self, tokens):
            return np.full((len(tokens), 3), 1 / 3)

    with pytest.raises(ValueError, match=r"model: a model must map tokens of shape \(n,\)"):
        autoregressive_generate(Broken(), [0], 2, rng=0)


def test_markov_table_must_be_square_and_normalised():
    from speclib import MarkovModel

    with pytest.raises(ValueError, match=r"transition: expected a square"):
        MarkovModel(np.full((2, 3), 1 / 3))
    with pytest.raises(ValueError, match=r"transition: row 1 sums to"):
        MarkovModel([[0.5, 0.5], [0.5, 0.4]])
