"""The numpy transformer: forward pass, key/value cache, rollback, cached decoding loops.

Every test uses small random models (no shipped weights); tests/test_neural_weights.py
checks the trained pair.
"""

import math

import numpy as np
import pytest

from speclib.lm.products import candidates

from speclib.book import checks
from speclib.core.decoding import autoregressive_generate, speculative_generate
from speclib.lm.transformer import (
    KVCache,
    Transformer,
    TransformerConfig,
    heldout_cross_entropy,
    blas_threads,
    load_transformer,
    pass_times,
    random_transformer,
    save_transformer,
    softmax_rows,
    speedup_with_costs,
    time_pass,
    window_start,
)

ATOL = 2e-5  # float32 arithmetic done in a different order

CONFIGS = [
    TransformerConfig(vocab_size=7, block_size=8, d_model=12, n_layers=2, n_heads=3, tied=False),
    TransformerConfig(vocab_size=5, block_size=6, d_model=8, n_layers=1, n_heads=2, tied=True),
    TransformerConfig(vocab_size=6, block_size=4, d_model=4, n_layers=0, n_heads=1, tied=False),
]


def tokens_for(cfg, n, seed=0):
    return np.random.default_rng(seed).integers(0, cfg.vocab_size, n)


# --------------------------------------------------------------------------- an independent reference


def reference_probs(model: Transformer, tokens: np.ndarray) -> np.ndarray:
    """The model's definition, one position at a time, in float64, without any cache.

    Row i: run the network on the window tokens[window_start(i) : i + 1] (positions
    numbered from 0 inside it), attending only to earlier positions, and take the last row.
    """
    cfg, P = model.config, {k: v.astype(np.float64) for k, v in model.params.items()}
    h, dh = cfg.n_heads, cfg.head_dim

    def ln(x, name):
        mu, var = x.mean(), x.var()
        return (x - mu) / math.sqrt(var + 1e-5) * P[name + ".g"] + P[name + ".b"]

    rows = []
    for i in range(len(tokens)):
        window = tokens[window_start(i, cfg.block_size): i + 1]
        xs = [P["wte"][t] + P["wpe"][j] for j, t in enumerate(window)]
        for layer in range(cfg.n_layers):
            p = f"h{layer}."
            qkv = [ln(x, p + "ln1") @ P[p + "attn.w_qkv"] + P[p + "attn.b_qkv"] for x in xs]
            new = []
            for j, x in enumerate(xs):
                heads = []
                for a in range(h):
                    q = qkv[j][a * dh:(a + 1) * dh]
                    ks = [qkv[m][cfg.d_model + a * dh: cfg.d_model + (a + 1) * dh] for m in range(j + 1)]
                    vs = [qkv[m][2 * cfg.d_model + a * dh: 2 * cfg.d_model + (a + 1) * dh] for m in range(j + 1)]
                    s = np.array([q @ kk for kk in ks]) / math.sqrt(dh)
                    w = np.exp(s - s.max())
                    heads.append(sum(wi * vv for wi, vv in zip(w / w.sum(), vs)))
                x = x + np.concatenate(heads) @ P[p + "attn.w_o"] + P[p + "attn.b_o"]
                u = ln(x, p + "ln2") @ P[p + "mlp.w_up"] + P[p + "mlp.b_up"]
                gelu = 0.5 * u * (1 + np.tanh(math.sqrt(2 / math.pi) * (u + 0.044715 * u**3)))
                new.append(x + gelu @ P[p + "mlp.w_down"] + P[p + "mlp.b_down"])
            xs = new
        w_out = P["wte"].T if cfg.tied else P["w_out"]
        z = ln(xs[-1], "ln_f") @ w_out
        e = np.exp(z - z.max())
        rows.append(e / e.sum())
    return np.array(rows)


@pytest.mark.parametrize("cfg", CONFIGS)
def test_forward_matches_reference_across_window_moves(cfg):
    model = random_transformer(cfg, seed=1)
    tokens = tokens_for(cfg, 3 * cfg.block_size + 3)
    probs = model(tokens)
    assert probs.shape == (tokens.size, cfg.vocab_size)
    np.testing.assert_allclose(probs.sum(axis=1), 1.0, atol=1e-12)
    np.testing.assert_allclose(probs, reference_probs(model, tokens), atol=ATOL)


def test_reference_catches_a_wrong_position_numbering():
    """Negative control: a model reading absolute positions past the window disagrees."""
    cfg = CONFIGS[0]
    model = random_transformer(cfg, seed=1)
    tokens = tokens_for(cfg, 12)
    # Reading tokens 4.. as a fresh sequence numbers them from 0 (a window starting at 4),
    # which is not the rule for positions 4..7, so it must differ from the reference there.
    assert not np.allclose(model(tokens[4:])[:4], reference_probs(model, tokens)[4:8], atol=1e-3)


# --------------------------------------------------------------------------- cache, rollback, causality


@pytest.mark.parametrize("cfg", CONFIGS)
def test_cached_path_equals_full_recomputation(cfg):
    model = random_transformer(cfg, seed=2)
    tokens = tokens_for(cfg, 4 * cfg.block_size + 1, seed=3)
    full = model(tokens)
    one_at_a_time = model.cache()
    rows = np.concatenate([one_at_a_time.extend(tokens[i:i + 1]) for i in range(tokens.size)])
    np.testing.assert_allclose(rows, full, atol=ATOL)
    rng, chunked, pieces, i = np.random.default_rng(4), model.cache(), [], 0
    while i < tokens.size:
        n = int(rng.integers(1, 2 * cfg.block_size))
        pieces.append(chunked.extend(tokens[i:i + n]))
        i += n
    np.testing.assert_allclose(np.concatenate(pieces), full, atol=ATOL)
    assert len(chunked) == tokens.size and (chunked.tokens == tokens).all()


@pytest.mark.parametrize("cfg", CONFIGS)
def test_rollback_then_extend_equals_fresh_computation(cfg):
    model = random_transformer(cfg, seed=5)
    rng = np.random.default_rng(6)
    cache, seq = model.cache(), np.zeros(0, dtype=np.int64)
    for _ in range(60):
        if seq.size and rng.random() < 0.4:
            length = int(rng.integers(0, seq.size + 1))
            cache.rollback(length)
            seq = seq[:length]
        new = rng.integers(0, cfg.vocab_size, int(rng.integers(1, 6)))
        got = cache.extend(new)
        seq = np.concatenate([seq, new])
        np.testing.assert_allclose(got, model(seq)[-new.size:], atol=ATOL)
        assert len(cache) == seq.size


def test_rollback_to_zero_and_restart():
    model = random_transformer(CONFIGS[0], seed=7)
    cache = model.cache()
    cache.extend(tokens_for(CONFIGS[0], 20))
    cache.rollback(0)
    fresh = tokens_for(CONFIGS[0], 5, seed=9)
    np.testing.assert_allclose(cache.extend(fresh), model(fresh), atol=ATOL)


def causality_gap(model, tokens) -> float:
    """Largest change in an earlier position's row when tokens are appended."""
    full = model(tokens)
    return max(float(np.abs(model(tokens[:m]) - full[:m]).max()) for m in range(1, tokens.size))


class LookAhead:
    """Negative control: row i peeks at token i + 1 (what a missing causal mask does)."""

    def __init__(self, model):
        self.model, self.vocab_size = model, model.vocab_size

    def __call__(self, tokens):
        probs = self.model(tokens)
        probs[:-1] = 0.5 * probs[:-1] + 0.5 * probs[1:]
        return probs


@pytest.mark.parametrize("cfg", CONFIGS)
def test_causality_appending_never_changes_earlier_rows(cfg):
    model = random_transformer(cfg, seed=8)
    tokens = tokens_for(cfg, 2 * cfg.block_size + 2, seed=1)
    assert causality_gap(model, tokens) < ATOL
    assert causality_gap(LookAhead(model), tokens) > 1e-3  # the same check catches a leak


@pytest.mark.parametrize("strategy", [None, *candidates()])
def test_every_product_strategy_gives_the_same_pass(strategy):
    # 9 tokens after 16: the verification pass that the strategies exist for, and a 25-token
    # pass (beyond the measured row counts) and a token tree, against numpy's own product.
    cfg = TransformerConfig(vocab_size=11, block_size=32, d_model=256, n_layers=1, n_heads=4)
    model = random_transformer(cfg, seed=0)
    tokens = tokens_for(cfg, 25)

    def run():
        cache = model.cache()
        cache.extend(tokens[:16])
        rows = cache.extend_logits(tokens[16:])
        cache.rollback(16)
        tree = cache.extend_tree_logits(tokens[16:21], [-1, 0, 0, 1, 2])
        return rows, tree, model.logits(tokens)

    model.products = "full"
    want = run()
    model.products = strategy
    for got, expected in zip(run(), want):
        np.testing.assert_allclose(got, expected, atol=1e-4)


def test_products_setting_is_checked():
    model = random_transformer(CONFIGS[0], seed=0)
    with pytest.raises(ValueError, match="products: expected None or one of"):
        model.products = "fastest"
    assert model.products is None


def test_temperature_and_greedy():
    model = random_transformer(CONFIGS[0], seed=3, scale=2.0)
    tokens = tokens_for(CONFIGS[0], 9)
    z = model.logits(tokens).astype(np.float64)
    hot = model.with_temperature(0.5)
    assert hot.params is model.params and model.temperature == 1.0
    expected = np.exp(2 * z) / np.exp(2 * z).sum(axis=1, keepdims=True)
    np.testing.assert_allclose(hot(tokens), expected, rtol=1e-10)
    greedy = model.with_temperature(0)(tokens)
    assert (greedy.sum(axis=1) == 1).all() and (greedy.argmax(axis=1) == z.argmax(axis=1)).all()
    np.testing.assert_allclose(softmax_rows(np.zeros((2, 4))), 0.25)


def test_window_start_keeps_windows_between_half_and_full_block():
    for block in (2, 4, 8, 10):
        for i in range(60):
            s = window_start(i, block)
            assert s <= i and i - s < block and (i < block or i - s >= block // 2)
            assert s % (block // 2) == 0


# --------------------------------------------------------------------------- decoding through the cache


class Uncached:
    """The same transformer without its cache: the loops then recompute every pass from the text."""

    def __init__(self, model):
        self.model, self.vocab_size = model, model.vocab_size

    def __call__(self, tokens):
        return self.model(tokens)


@pytest.mark.parametrize("seed", range(4))
def test_autoregressive_through_the_cache_draws_the_same_tokens(seed):
    model = random_transformer(CONFIGS[0], seed=seed)
    prompt = tokens_for(CONFIGS[0], 3, seed=seed)
    a, sa = autoregressive_generate(Uncached(model), prompt, 30, rng=seed)
    b, sb = autoregressive_generate(model, prompt, 30, rng=seed)
    assert a.tolist() == b.tolist() and sa == sb


@pytest.mark.parametrize("k", [1, 3, 5])
@pytest.mark.parametrize("bonus", [True, False])
def test_cached_speculative_draws_the_same_tokens(k, bonus):
    """Same seed, same random numbers in the same order: the same tokens and counters.

    The uncached loop's output follows the target's distribution (tests/test_statistical.py
    and tests/test_exact.py), so the cached loop's does too.  30 tokens with block_size 8
    cross several window moves, with rollbacks on both sides of them.
    """
    cfg = CONFIGS[0]
    target, draft = random_transformer(cfg, seed=10), random_transformer(cfg, seed=11, scale=0.3)
    for seed in range(2):
        prompt = tokens_for(cfg, 1 + seed, seed=seed)
        a, sa = speculative_generate(Uncached(target), Uncached(draft), prompt, 30, k=k, rng=seed, bonus=bonus)
        b, sb = speculative_generate(target, draft, prompt, 30, k=k, rng=seed, bonus=bonus)
        assert a.tolist() == b.tolist()
        assert sa == sb


def test_cached_speculative_with_the_target_as_draft_accepts_everything():
    target = random_transformer(CONFIGS[1], seed=0)
    tokens, stats = speculative_generate(target, target, [0], 40, k=4, rng=0)
    assert stats.acceptance_rate == 1.0 and stats.target_passes == 8


def test_heldout_cross_entropy_is_the_mean_log_loss():
    cfg = CONFIGS[1]
    model = random_transformer(cfg, seed=4)
    ids = tokens_for(cfg, 2 * cfg.block_size + 3)
    expected = []
    for start in range(0, ids.size - 1, cfg.block_size):
        window = ids[start:start + cfg.block_size + 1]
        probs = model(window[:-1])
        expected += list(-np.log2(probs[np.arange(window.size - 1), window[1:]]))
    assert heldout_cross_entropy(model, ids) == pytest.approx(np.mean(expected), rel=1e-6)


def test_save_and_load_round_trip(tmp_path):
    model = random_transformer(CONFIGS[0], seed=0)
    path = tmp_path / "m.npz"
    save_transformer(model, path, vocabulary="abcdefg", role="test")
    back = load_transformer(path)
    assert back.config == model.config and back.vocabulary == "abcdefg" and back.metadata == {"role": "test"}
    for name, value in model.params.items():
        np.testing.assert_array_equal(back.params[name], value.astype(np.float16).astype(np.float32))
    tokens = tokens_for(CONFIGS[0], 10)
    np.testing.assert_allclose(back(tokens), model(tokens), atol=2e-2)


# --------------------------------------------------------------------------- timing helpers and cost model


def test_time_pass_returns_positive_seconds_and_leaves_no_trace():
    model = random_transformer(CONFIGS[0], seed=0)
    times = time_pass(model, n_tokens=3, prefix_length=5, reps=4, seed=0)
    assert times.shape == (4,) and (times > 0).all()


def test_speedup_with_costs_reduces_to_the_theory():
    from speclib.core.theory import speedup_in_passes

    for alpha, k, c in [(0.6, 2, 0.1), (0.9, 5, 0.02), (0.0, 1, 0.5)]:
        assert speedup_with_costs(alpha, k, c, verify_ratio=1.0) == pytest.approx(speedup_in_passes(alpha, k, c))
    # a verification pass costing twice a single pass halves the k = 1 gain at c = 0
    assert speedup_with_costs(1.0, 1, 0.0, verify_ratio=2.0) == pytest.approx(1.0)


# --------------------------------------------------------------------------- bad input


def test_bad_input_names_the_argument():
    model = random_transformer(CONFIGS[0], seed=0)
    with pytest.raises(ValueError, match="tokens"):
        model(np.array([0, 99]))
    with pytest.raises(ValueError, match="tokens"):
        model(np.zeros((2, 2), dtype=int))
    cache = model.cache()
    cache.extend([1, 2])
    with pytest.raises(ValueError, match="length"):
        cache.rollback(3)
    with pytest.raises(ValueError, match="length"):
        cache.rollback(-1)
    with pytest.raises(ValueError, match="d_model"):
        TransformerConfig(vocab_size=5, block_size=8, d_model=10, n_layers=1, n_heads=3)
    with pytest.raises(ValueError, match="block_size"):
        TransformerConfig(vocab_size=5, block_size=7, d_model=8, n_layers=1, n_heads=2)
    with pytest.raises(ValueError, match="temperature"):
        model.with_temperature(-1.0)
    with pytest.raises(ValueError, match="params"):
        Transformer(CONFIGS[0], {"wte": np.zeros((7, 12))})
    bad = dict(model.params)
    bad["wpe"] = np.zeros((3, 3))
    with pytest.raises(ValueError, match="wpe"):
        Transformer(CONFIGS[0], bad)
    with pytest.raises(TypeError, match="target"):
        speculative_generate(lambda t: t, model, [0], 5, k=2, rng=0)
    with pytest.raises(ValueError, match="draft"):
        speculative_generate(model, random_transformer(CONFIGS[1]), [0], 5, k=2, rng=0)
    with pytest.raises(ValueError, match="prompt"):
        autoregressive_generate(model, [], 5, rng=0)
    with pytest.raises(TypeError, match="model"):
        KVCache("not a model")
    with pytest.raises(FileNotFoundError, match="path"):
        load_transformer("/nonexistent/model.npz")


def test_pass_times_shapes():
    cfg = CONFIGS[0]
    target, draft = random_transformer(cfg, seed=0), random_transformer(cfg, seed=1)
    times = pass_times(target, (1, 3, 2), repeats=3, prefix_length=2)
    assert times.n_tokens.tolist() == [1, 2, 3] and times.seconds.shape == (3, 3) and (times.seconds > 0).all()
    with pytest.raises(ValueError, match="block"):
        pass_times(target, (1, 8), prefix_length=4)


def test_blas_threads_restores_the_setting():
    with blas_threads(1) as ctl:
        inner = ctl.active
    with blas_threads(1) as again:
        assert again.active == inner
    with pytest.raises(ValueError, match="n"):
        blas_threads(0)


# --------------------------------------------------------------------------- the chapter's self-checks


def test_check_predicted_speedup():
    from speclib.core.theory import speedup_in_passes

    checks.check_predicted_speedup(lambda a, k, c, r: speedup_with_costs(a, k, c, r))
    with pytest.raises(checks.ExerciseError, match="textbook"):
        checks.check_predicted_speedup(lambda a, k, c, r: speedup_in_passes(a, k, c))
    with pytest.raises(checks.ExerciseError, match="draft passes"):
        checks.check_predicted_speedup(lambda a, k, c, r: sum(a**j for j in range(k + 1)) / ((k + 1) * c + r))


def test_window_start_and_softmax_rows_refuse_bad_input_by_name():
    from speclib.lm.transformer import softmax_rows, window_start

    for position, block_size, match in [(5, 0, "block_size: must be >= 2"), (5, 1, "block_size: must be >= 2"),
                                        (-1, 8, "position: must be >= 0"), (2.5, 8, "position: expected an integer"),
                                        (True, 8, "position: expected an integer"),
                                        (5, float("nan"), "block_size: expected an integer")]:
        with pytest.raises((TypeError, ValueError), match=match):
            window_start(position, block_size)
    assert window_start(np.int64(11), 8) == 4  # numpy integers take the slow path, same answer
    for logits, match in [(np.array([[0.0, np.nan]]), "logits: contains NaN"), (None, "logits: expected"),
                          (np.array([["0", "1"]]), "logits: expected"), (np.array([[1j, 0]]), "logits: expected")]:
        with pytest.raises((TypeError, ValueError), match=match):
            softmax_rows(logits)
    assert softmax_rows(np.array([[0.0, -np.inf]])).tolist() == [[1.0, 0.0]]  # a masked token is fine


def test_cache_features_are_the_final_hidden_states():
    """features=True keeps, per fed token, the state the output projection reads (and only then)."""
    cfg = TransformerConfig(vocab_size=7, block_size=8, d_model=8, n_layers=2, n_heads=2)
    model = random_transformer(cfg, seed=3)
    tokens = np.array([1, 2, 3, 4, 5, 6, 0, 1, 2, 3, 4])  # crosses a window move
    cache = model.cache(features=True)
    logits = np.concatenate([cache.extend_logits(tokens[:3]), cache.extend_logits(tokens[3:])])
    feats = cache.features
    assert feats.shape == (tokens.size, cfg.d_model)
    np.testing.assert_allclose(feats @ model._w_out, logits, atol=1e-5)
    cache.rollback(5)
    assert cache.features.shape == (5, cfg.d_model)
    cache.extend_logits(tokens[5:6])
    np.testing.assert_allclose(cache.features[5] @ model._w_out, logits[5], atol=1e-5)
    with pytest.raises(ValueError, match="features=True"):
        model.cache().features
