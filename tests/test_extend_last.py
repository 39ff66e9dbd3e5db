"""The optional ``extend_last`` of the cache protocol: the rows of the last fed tokens only."""

import numpy as np
import pytest

from speclib.core.cache import RecomputeCache, extend_checked
from speclib.core.decoding import speculative_generate
from speclib.core.proposers import PromptLookup
from speclib.lm.llama import LlamaConfig, random_llama
from speclib.lm.models import markov_pair

CONFIG = LlamaConfig(vocab_size=11, d_model=16, n_layers=2, n_heads=4, n_kv_heads=2, d_ff=24)


@pytest.mark.parametrize("compiled", [False, True])
def test_llama_extend_last_is_the_tail_of_extend(compiled):
    model = random_llama(CONFIG, seed=0)
    model = model.with_compiled() if compiled else model
    tokens = np.array([1, 2, 3, 4, 5])
    full = model.cache().extend(tokens)
    for last in range(6):
        cache = model.cache(features=True)
        rows = cache.extend_last(tokens, last)
        assert rows.shape == (last, CONFIG.vocab_size)
        assert np.allclose(rows, full[5 - last:], atol=1e-6)
        assert len(cache) == 5 and cache.features.shape == (5, CONFIG.d_model)  # every token was read
    with pytest.raises(ValueError, match="last"):
        model.cache().extend_last(tokens, 6)


def test_extend_checked_reads_the_tail_of_any_cache():
    target, _ = markov_pair(vocab_size=5, seed=0)
    tokens = np.array([0, 1, 2, 3])
    full = RecomputeCache(target).extend(tokens)
    timings = {"passes": []}
    rows = extend_checked(RecomputeCache(target), tokens, "target", timings, last=2)
    assert np.array_equal(rows, full[2:]) and timings["passes"][0][1] == 4


def test_the_loop_gives_the_same_tokens_with_or_without_it():
    model = random_llama(CONFIG, seed=1)

    class Plain:  # the same model, read through extend only
        vocab_size, trusted_rows, context_length = CONFIG.vocab_size, True, None

        def __call__(self, tokens):
            return model(tokens)

        def cache(self):
            inner = model.cache()
            inner.extend_last = None
            return inner

    prompt = np.array([1, 2, 3, 1, 2, 3, 1])
    a, _ = speculative_generate(model, PromptLookup(), prompt, 12, 3, 5)
    b, _ = speculative_generate(Plain(), PromptLookup(), prompt, 12, 3, 5)
    assert np.array_equal(a, b)
