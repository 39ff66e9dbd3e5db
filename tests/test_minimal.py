"""The one-page algorithm of chapter 0 is the library's loop, token for token."""

from __future__ import annotations

import numpy as np
import pytest

from speclib.core.decoding import speculative_generate
from speclib.core.minimal import speculative_sample
from speclib.lm.models import markov_pair


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("k", [1, 3, 5])
def test_same_tokens_as_the_library_loop_for_the_same_seed(seed, k):
    target, draft = markov_pair(vocab_size=12, draft_noise=0.4, seed=seed)
    n = 37  # not a multiple of k + 1: the last step drafts fewer tokens
    mine = speculative_sample(target, draft, [seed % 12, 3], n, k, rng=seed)
    theirs, _ = speculative_generate(target, draft, [seed % 12, 3], n, k=k, rng=seed)
    assert mine.shape == (n,)
    np.testing.assert_array_equal(mine, theirs)


def test_a_different_seed_gives_different_tokens():
    # Negative control: the agreement above is not two loops that ignore the seed.
    target, draft = markov_pair(vocab_size=12, draft_noise=0.4, seed=0)
    a = speculative_sample(target, draft, [0], 60, 4, rng=1)
    b = speculative_generate(target, draft, [0], 60, k=4, rng=2)[0]
    assert not np.array_equal(a, b)


def test_a_perfect_draft_is_always_accepted():
    target, _ = markov_pair(vocab_size=8, seed=0)
    tokens = speculative_sample(target, target, [0], 50, 4, rng=0)
    assert tokens.shape == (50,) and tokens.min() >= 0 and tokens.max() < 8


@pytest.mark.parametrize("kwargs, message", [
    (dict(n=-1), "n"), (dict(k=0), "k"), (dict(prompt=[]), "prompt")])
def test_bad_arguments_name_the_argument(kwargs, message):
    target, draft = markov_pair(vocab_size=8, seed=0)
    args = dict(prompt=[0], n=5, k=2, rng=0) | kwargs
    with pytest.raises((ValueError, TypeError), match=message):
        speculative_sample(target, draft, **args)
