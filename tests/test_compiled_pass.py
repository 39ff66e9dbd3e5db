"""The compiled pass (speclib.lm.kernel.CompiledPass, ``Transformer.compiled``): the same rows.

Every comparison is against the numpy pass, the reference, on random transformers (tied and
untied output, several widths and head counts) and on the shipped pair: chains of one to
sixteen tokens after a cached prefix, token trees, the final hidden states, generation past
the window (the cache re-reads a moved window through the compiled pass), and rollbacks.
The negative control is a compiled pass built with a wrong GELU constant, which must give
other rows.  Tolerance: float32 rounding of sums taken in another order, relative to the
largest logit.
"""

from __future__ import annotations

import numpy as np
import pytest

from speclib.lm import kernel
from speclib.lm.transformer import LN_EPS, TransformerConfig, _GELU_C, load_pair, random_transformer

needs_numba = pytest.mark.skipif(not kernel.available(), reason="the compiled pass needs numba")
#: Largest difference allowed between the two passes' logits, relative to the largest logit.
REL_TOL = 2e-5

CONFIGS = [
    TransformerConfig(vocab_size=11, block_size=16, d_model=16, n_layers=2, n_heads=2),
    TransformerConfig(vocab_size=7, block_size=8, d_model=24, n_layers=1, n_heads=3, tied=False),
    TransformerConfig(vocab_size=97, block_size=32, d_model=64, n_layers=3, n_heads=4),
]


def _close(a: np.ndarray, b: np.ndarray) -> bool:
    return float(np.abs(a - b).max()) <= REL_TOL * max(1.0, float(np.abs(b).max()))


def _two_caches(config, seed: int, prefix: int):
    """A random model's numpy cache and its compiled copy's, both after the same random prefix."""
    model = random_transformer(config, seed=seed)
    rng = np.random.default_rng(seed)
    caches = model.cache(features=True), model.with_compiled().cache(features=True)
    start = rng.integers(0, config.vocab_size, prefix)
    rows = [c.extend_logits(start) for c in caches]
    return caches, rows, rng


@needs_numba
@pytest.mark.parametrize("config", CONFIGS, ids=str)
@pytest.mark.parametrize("n", [1, 2, 3, 4, 5, 7, 9, 16])
def test_a_chain_after_a_prefix_gives_the_numpy_rows(config, n):
    (want, got), rows, rng = _two_caches(config, n, max(1, config.block_size // 2 - n // 2))
    assert _close(rows[1], rows[0])
    tokens = rng.integers(0, config.vocab_size, n)
    assert _close(got.extend_logits(tokens), want.extend_logits(tokens))
    assert _close(got.features, want.features)


@needs_numba
@pytest.mark.parametrize("config", CONFIGS, ids=str)
def test_generation_past_the_window_and_rollbacks_match(config):
    model = random_transformer(config, seed=3)
    fast = model.with_compiled()
    rng = np.random.default_rng(3)
    text = rng.integers(0, config.vocab_size, 3 * config.block_size + 5)
    want, got = model.cache(), fast.cache()
    i = 0
    while i < text.size:
        chunk = text[i:i + int(rng.integers(1, 6))]
        assert _close(got.extend_logits(chunk), want.extend_logits(chunk))
        i += chunk.size
        back = max(1, i - int(rng.integers(0, chunk.size)))  # roll back some, as a rejected draft does
        want.rollback(back)
        got.rollback(back)
        i = back


@needs_numba
@pytest.mark.parametrize("config", CONFIGS, ids=str)
def test_a_token_tree_gives_the_numpy_rows(config):
    (want, got), _, rng = _two_caches(config, 5, 5)
    parents = np.array([-1, -1, 0, 0, 1, 2, 2])
    tokens = rng.integers(0, config.vocab_size, parents.size)
    assert _close(got.extend_tree_logits(tokens, parents), want.extend_tree_logits(tokens, parents))


@needs_numba
def test_the_shipped_pair_gives_the_numpy_rows():
    for model in load_pair():
        fast = model.with_compiled()
        ids = np.random.default_rng(0).integers(0, model.vocab_size, 150)  # past the 128-token window
        assert _close(fast.logits(ids), model.logits(ids))
        assert not model.compiled and fast.compiled  # with_compiled leaves the original alone


@needs_numba
def test_a_wrong_compiled_pass_is_caught():
    """Negative control: a GELU constant off by 1% moves the rows by far more than the tolerance."""
    model = random_transformer(CONFIGS[0], seed=1)
    wrong = kernel.CompiledPass(model.params, model.config.n_layers, model.config.n_heads, model._w_out,
                                LN_EPS, _GELU_C * 1.01)
    fast = model.with_compiled()
    fast._compiled_pass = wrong
    ids = np.arange(12) % model.vocab_size
    assert not _close(fast.logits(ids), model.logits(ids))


def test_compiled_needs_numba_and_a_boolean(monkeypatch):
    model = random_transformer(CONFIGS[0], seed=0)
    with pytest.raises(TypeError, match="compiled"):
        model.compiled = "yes"
    monkeypatch.setattr(kernel, "_NUMBA", False)
    with pytest.raises(ValueError, match="compiled: the compiled pass needs numba"):
        model.with_compiled()


@needs_numba
def test_eagles_compiled_pass_gives_the_numpy_states(eagle_state_error):
    """EAGLE's pass, compiled, predicts the states the numpy pass predicts, for one entry and
    several, past its attention window too (the shipped drafter attends to 127 entries)."""
    from speclib.lm.drafters import load_drafter

    num, fast = load_drafter("eagle"), load_drafter("eagle", compiled=True)
    assert fast.target.model.compiled and not num.target.model.compiled
    assert eagle_state_error(fast, num) <= REL_TOL


@needs_numba
def test_the_compiled_pass_is_timed_beside_the_products_in_a_run_of_its_own(monkeypatch):
    from speclib.lm import transformer

    model = random_transformer(CONFIGS[0], seed=0)
    calls = []
    real = transformer.strategy_pass_times

    def spy(m, strategies=None, *args, **kw):
        calls.append(list(strategies))
        return real(m, strategies, *args, **kw)

    monkeypatch.setattr(transformer, "strategy_pass_times", spy)
    times = transformer.strategy_pass_times(model, [None, "compiled", "full"], (1, 2), repeats=2, prefix_length=3)
    assert list(times) == [None, "compiled", "full"] and times["compiled"].seconds.shape == (2, 2)
    assert calls == [[None, "compiled", "full"], [None, "full"], ["compiled"]]
    assert not model.compiled and model.products is None  # the model's own setting restored
