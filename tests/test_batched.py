"""The batched cached pass: each sequence's rows and cache as if it had run alone."""

import numpy as np
import pytest

from speclib.lm.batched import batched_extend, batched_extend_logits
from speclib.lm.transformer import TransformerConfig, load_pair, random_transformer

CFG = TransformerConfig(vocab_size=11, block_size=16, d_model=16, n_layers=2, n_heads=2, tied=False)


def _state(cache):
    # What a cache holds that later passes read: tokens, window, and the window's keys/values.
    f = cache._filled
    return (cache.tokens, cache._start, f, cache._keys[:, :, :f].copy(), cache._values[:, :, :f].copy())


def _assert_same_cache(a, b):
    ta, sa, fa, ka, va = _state(a)
    tb, sb, fb, kb, vb = _state(b)
    np.testing.assert_array_equal(ta, tb)
    assert (sa, fa) == (sb, fb)
    np.testing.assert_allclose(ka, kb, atol=1e-5)
    np.testing.assert_allclose(va, vb, atol=1e-5)


@pytest.mark.parametrize("seed", range(4))
def test_each_sequence_gets_its_own_rows_and_cache(seed):
    # Ragged lengths, caches at different window offsets (block 16: windows move often, so
    # some sequences take their own path), rollbacks between passes, several rounds.
    rng = np.random.default_rng(seed)
    model = random_transformer(CFG, seed=seed)
    batch = 6
    caches = [model.cache() for _ in range(batch)]
    alone = [model.cache() for _ in range(batch)]
    for c, a in zip(caches, alone):
        prefix = rng.integers(0, CFG.vocab_size, rng.integers(1, 30))
        c.extend(prefix)
        a.extend(prefix)
    for _ in range(8):
        feeds = [rng.integers(0, CFG.vocab_size, rng.integers(0, 6)) for _ in range(batch)]
        rows = batched_extend_logits(caches, feeds)
        for c, a, t, r in zip(caches, alone, feeds, rows):
            assert r.shape == (t.size, CFG.vocab_size) and r.dtype == np.float32
            np.testing.assert_allclose(r, a.extend_logits(t), atol=2e-5, rtol=1e-4)
            _assert_same_cache(c, a)
            assert c.tokens_computed == a.tokens_computed  # the batched pass counts its tokens too
        for c, a in zip(caches, alone):  # a rejection: both roll back alike
            keep = int(rng.integers(max(1, len(c) - 4), len(c) + 1))
            c.rollback(keep)
            a.rollback(keep)


def test_rows_match_a_fresh_full_pass_on_the_books_pair():
    target, _ = load_pair()
    rng = np.random.default_rng(0)
    texts = [rng.integers(0, 97, n) for n in (5, 40, 63, 64, 120)]
    caches = [target.cache() for _ in texts]
    for c, t in zip(caches, texts):
        c.extend(t[:-4])
    rows = batched_extend(caches, [t[-4:] for t in texts])
    for t, r in zip(texts, rows):
        np.testing.assert_allclose(r, target(t)[-4:], atol=1e-5)
        np.testing.assert_allclose(r.sum(axis=1), 1.0)


def test_a_sequence_whose_window_moves_takes_its_own_path(monkeypatch):
    # A negative control for the join rule: with the check disabled, a sequence whose window
    # moves mid-pass is computed in the stale window and its rows go wrong.
    import speclib.lm.batched as batched

    model = random_transformer(CFG, seed=1)
    rng = np.random.default_rng(1)
    text = rng.integers(0, CFG.vocab_size, 20)
    def two():
        a, b = model.cache(), model.cache()
        a.extend(text[:14])  # window 0..15: 4 more tokens cross position 16
        b.extend(text[:3])
        return [a, b]

    good = batched_extend_logits(two(), [text[14:18], text[3:5]])
    np.testing.assert_allclose(good[0], model.logits(text[:18])[14:], atol=2e-5)
    monkeypatch.setattr(batched, "_joins_batch", lambda cache, n: True)
    with pytest.raises((AssertionError, ValueError, IndexError)):
        bad = batched_extend_logits(two(), [text[14:18], text[3:5]])
        np.testing.assert_allclose(bad[0], model.logits(text[:18])[14:], atol=2e-5)


def test_bad_batches_are_refused():
    model = random_transformer(CFG, seed=0)
    other = random_transformer(CFG, seed=1)
    c = model.cache()
    with pytest.raises(TypeError, match="caches"):
        batched_extend_logits(c, [[1]])
    with pytest.raises(ValueError, match="feeds"):
        batched_extend_logits([c], [[1], [2]])
    with pytest.raises(ValueError, match=r"caches\[1\]"):
        batched_extend_logits([c, other.cache()], [[1], [2]])
    with pytest.raises(ValueError, match="twice"):
        batched_extend_logits([c, c], [[1], [2]])
    with pytest.raises(ValueError, match=r"feeds\[0\]"):
        batched_extend_logits([c], [[99]])


# --- the batch driver: one batched target pass per step ------------------------------------------

from speclib.core.decoding import autoregressive_generate, speculative_generate  # noqa: E402
from speclib.core.variants import batch_generate  # noqa: E402


def _pair():
    target = random_transformer(CFG, seed=3)
    small = TransformerConfig(vocab_size=11, block_size=16, d_model=8, n_layers=1, n_heads=1)
    return target, random_transformer(small, seed=4)


class _CountingPass:
    """``batched_extend`` that counts its calls and the caches it served."""

    def __init__(self):
        self.calls, self.sizes = 0, []

    def __call__(self, caches, feeds):
        self.calls += 1
        self.sizes.append(len(caches))
        return batched_extend(caches, feeds)


@pytest.mark.parametrize("k", [0, 1, 3])
def test_batch_gives_each_sequence_the_tokens_it_gets_alone(k):
    target, draft = _pair()
    prompts = [[1], [2, 3, 4], [5] * 9, [0, 7]]
    seeds = [11, 12, 13, 14]
    count = _CountingPass()
    outs, st = batch_generate(target, draft, prompts, 40, k, rng=seeds, target_pass=count)
    for prompt, seed, out in zip(prompts, seeds, outs):
        if k:
            alone, _ = speculative_generate(target, draft, prompt, 40, k, rng=seed)
        else:
            alone, _ = autoregressive_generate(target, prompt, 40, rng=seed)
        np.testing.assert_array_equal(out, alone)
    # One target pass per batch step, and it served every live sequence.
    assert count.calls == st.target_passes == len(st.block_lengths)
    assert count.sizes == [len(lengths) for lengths in st.block_lengths]
    assert count.sizes[0] == len(prompts)
    assert st.tokens_generated == 40 * len(prompts)


def test_the_default_pass_gives_the_same_tokens_and_a_shared_generator_stays_reproducible():
    target, draft = _pair()
    prompts = [[1], [2, 3]]
    a, _ = batch_generate(target, draft, prompts, 25, 2, rng=[0, 1])
    b, _ = batch_generate(target, draft, prompts, 25, 2, rng=[0, 1], target_pass=batched_extend)
    assert all(np.array_equal(x, y) for x, y in zip(a, b))
    c, _ = batch_generate(target, draft, prompts, 25, 2, rng=5, target_pass=batched_extend)
    d, _ = batch_generate(target, draft, prompts, 25, 2, rng=5)
    assert all(np.array_equal(x, y) for x, y in zip(c, d))


def test_batch_driver_refuses_a_wrong_pass_or_rng_list():
    target, draft = _pair()
    with pytest.raises(ValueError, match="rng"):
        batch_generate(target, draft, [[1], [2]], 5, 2, rng=[0])
    with pytest.raises(TypeError, match="target_pass"):
        batch_generate(target, draft, [[1]], 5, 2, rng=0, target_pass=3)
    with pytest.raises(ValueError, match="target_pass"):
        batch_generate(target, draft, [[1], [2]], 5, 2, rng=0,
                       target_pass=lambda caches, feeds: batched_extend(caches, feeds)[:1])
    with pytest.raises(ValueError, match="target_pass"):
        batch_generate(target, draft, [[1]], 5, 2, rng=0,
                       target_pass=lambda caches, feeds: [r[1:] for r in batched_extend(caches, feeds)])


# --- what the batched pass promises beyond the rows: temperature, features, who joins ----------


@pytest.mark.parametrize("temperature", [0.5, 0.0])
def test_batched_rows_are_at_the_models_temperature(temperature):
    model = random_transformer(CFG, seed=2).with_temperature(temperature)
    rng = np.random.default_rng(5)
    texts = [rng.integers(0, CFG.vocab_size, n) for n in (3, 7, 12)]
    caches = [model.cache() for _ in texts]
    rows = batched_extend(caches, [t for t in texts])
    for t, r in zip(texts, rows):
        alone = model.cache().extend(t)  # what the cache's own pass returns, at the model's temperature
        np.testing.assert_allclose(r, alone, atol=1e-5)
    assert not np.allclose(rows[0], random_transformer(CFG, seed=2).cache().extend(texts[0]), atol=1e-3)


def test_a_batched_pass_writes_the_features_a_lone_pass_writes():
    # Caches that keep hidden states (Medusa's and EAGLE's target): the stacked pass writes them
    # as each cache's own pass would, across window moves (block 16) and rollbacks.
    from speclib.lm.transformer import KVCache

    model = random_transformer(CFG, seed=6)
    rng = np.random.default_rng(6)
    caches = [KVCache(model, features=True) for _ in range(4)]
    alone = [KVCache(model, features=True) for _ in range(4)]
    for _ in range(6):
        feeds = [rng.integers(0, CFG.vocab_size, rng.integers(1, 6)) for _ in caches]
        batched_extend_logits(caches, feeds)
        for c, a, t in zip(caches, alone, feeds):
            a.extend_logits(t)
            assert c.features.shape == a.features.shape == (len(a), CFG.d_model)
            np.testing.assert_allclose(c.features, a.features, atol=2e-5)
        for c, a in zip(caches, alone):
            keep = int(rng.integers(max(1, len(c) - 3), len(c) + 1))
            c.rollback(keep)
            a.rollback(keep)


def test_a_cache_that_exactly_fills_its_window_joins_the_stacked_pass(monkeypatch):
    # Block 16: a cache at 12 tokens fed 4 ends exactly on its window's last position and joins
    # the stacked pass; fed 5 it would cross into the next window and takes its own path.
    import speclib.lm.batched as batched

    model = random_transformer(CFG, seed=1)
    stacked = []
    inner = batched._run_stacked
    monkeypatch.setattr(batched, "_run_stacked", lambda m, caches, feeds: stacked.append(
        [c.tokens.size for c in caches]) or inner(m, caches, feeds))
    text = np.arange(20) % CFG.vocab_size
    for n, joins in ((4, True), (5, False)):
        full, other = model.cache(), model.cache()
        full.extend(text[:12])
        other.extend(text[:2])
        stacked.clear()
        rows = batched_extend_logits([full, other], [text[12:12 + n], text[2:4]])
        assert stacked == [[12, 2] if joins else [2]]
        np.testing.assert_allclose(rows[0], model.logits(text[:12 + n])[12:], atol=2e-5)


# --- the batch driver: its counters, and what it refuses ----------------------------------------


def test_batch_counters_are_the_sums_of_the_lone_runs():
    target, draft = _pair()
    prompts, seeds, k = [[1], [2, 3, 4], [5] * 9], [21, 22, 23], 3
    _, st = batch_generate(target, draft, prompts, 30, k, rng=seeds)
    lone = [speculative_generate(target, draft, p, 30, k, rng=s)[1] for p, s in zip(prompts, seeds)]
    assert st.draft_passes == sum(s.draft_passes for s in lone)
    # a draft model spends one pass per draft; every step drafts k, or what is still needed
    assert st.draft_passes == sum(sum(s.k_per_step) for s in lone)
    assert st.accepted == sum(s.accepted for s in lone) and st.draft_verified == sum(s.draft_verified for s in lone)
    assert st.tokens_generated == 90 and st.target_passes == max(s.target_passes for s in lone)
    # the first pass reads every prompt and its k drafts
    assert st.pass_tokens[0] == sum(len(p) + k for p in prompts)


class _CallableTree:
    """A proposer that is also a model: what once slipped a token tree into the batch driver."""

    def __init__(self, draft):
        from speclib.core.proposers import TreeDraft

        self.tree, self.vocab_size = TreeDraft(draft, (2, 2)), draft.vocab_size

    def __call__(self, tokens):
        return self.tree.draft.model(tokens)

    def __getattr__(self, name):
        return getattr(self.__dict__["tree"], name)


def test_the_batch_driver_refuses_a_proposer():
    from speclib.core.proposers import PromptLookup, TreeDraft

    target, draft = _pair()
    for proposer in (TreeDraft(draft, (2, 2)), PromptLookup(), _CallableTree(draft)):
        with pytest.raises(TypeError, match=r"draft: batch_generate drafts with a model .* proposer"):
            batch_generate(target, proposer, [[1], [2, 3]], 5, 2, rng=[0, 1])
    outs, _ = batch_generate(target, draft, [[1], [2, 3]], 5, 2, rng=[0, 1])  # the control: a model
    assert [o.size for o in outs] == [5, 5]
