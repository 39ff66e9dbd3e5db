"""speclib.core.cost: the layer stack, the timing harness (its logic, never its timings), the fit."""

import itertools

import numpy as np
import pytest

from speclib.core.cost import (
    CountingModel,
    PassCostFit,
    PassTimes,
    fit_pass_cost,
    forward_pass,
    largest_cache_bytes,
    layer_stack,
    measure_pass_times,
    predicted_pass_time,
    stack_bytes,
    stack_params,
)
from speclib.core.decoding import autoregressive_generate, speculative_generate
from speclib.lm.models import markov_pair


def test_layer_stack_shapes_dtype_and_size():
    w = layer_stack(16, 3, rng=0)
    assert len(w) == 3 and all(m.shape == (16, 16) and m.dtype == np.float64 for m in w)
    assert stack_params(w) == 3 * 16 * 16
    assert stack_bytes(w) == 8 * 3 * 16 * 16
    w32 = layer_stack(16, 3, rng=0, dtype=np.float32)
    assert w32[0].dtype == np.float32 and stack_bytes(w32) == 4 * 3 * 16 * 16


def test_layer_stack_is_seeded():
    a, b, c = layer_stack(8, 2, rng=5), layer_stack(8, 2, rng=5), layer_stack(8, 2, rng=6)
    assert all(np.array_equal(x, y) for x, y in zip(a, b))
    assert not np.array_equal(a[0], c[0])


def test_layer_stack_scaling_keeps_activations_finite_and_nonzero():
    w = layer_stack(256, 12, rng=1)
    out = forward_pass(w, np.random.default_rng(0).standard_normal((4, 256)))
    rms = float(np.sqrt(np.mean(out.astype(float) ** 2)))
    # A ReLU halves the power per layer at most by a factor ~2; 12 layers stay within 2**-12 .. 10.
    assert np.all(np.isfinite(out)) and 2.0**-12 < rms < 10.0


def test_forward_pass_matches_hand_computation():
    w = layer_stack(3, 2, rng=0, dtype=np.float64)
    x = np.array([[1.0, -2.0, 0.5]])
    want = np.maximum(np.maximum(x @ w[0], 0) @ w[1], 0)
    np.testing.assert_allclose(forward_pass(w, x), want)


def test_tokens_at_once_give_the_same_rows_as_one_at_a_time():
    # The physical point of chapter 1 relies on this: a pass over n tokens is n independent rows.
    w = layer_stack(32, 4, rng=2, dtype=np.float64)
    x = np.random.default_rng(3).standard_normal((5, 32))
    together = forward_pass(w, x)
    for i in range(5):
        np.testing.assert_allclose(together[i], forward_pass(w, x[i : i + 1])[0], rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize(
    "call, error, message",
    [
        (lambda: layer_stack(0, 2, rng=0), ValueError, r"d_model: must be >= 1"),
        (lambda: layer_stack(4, 2.0, rng=0), TypeError, r"n_layers: expected an integer"),
        (lambda: layer_stack(4, 2, rng=0, dtype=np.int32), ValueError, r"dtype: expected float32 or float64"),
        (lambda: layer_stack(4, 2, rng=None), TypeError, r"rng: expected"),
        (lambda: forward_pass([], np.ones((1, 4))), TypeError, r"weights: expected a non-empty list"),
        (lambda: forward_pass(np.ones((4, 4)), np.ones((1, 4))), TypeError, r"weights: expected"),
        (lambda: forward_pass([np.ones((4, 3))], np.ones((1, 4))), ValueError, r"layer 0 must be a square"),
        (lambda: forward_pass([np.ones((4, 4)), np.ones((3, 3))], np.ones((1, 4))), ValueError, r"layer 1 has size 3"),
        (lambda: forward_pass(layer_stack(4, 1, rng=0), np.ones((2, 5))), ValueError, r"x: expected token vectors of shape \(n, 4\)"),
        (lambda: forward_pass(layer_stack(4, 1, rng=0), np.ones(4)), ValueError, r"x: expected"),
        (lambda: measure_pass_times(layer_stack(4, 1, rng=0), [1, 1]), ValueError, r"n_tokens: counts must be distinct"),
        (lambda: measure_pass_times(layer_stack(4, 1, rng=0), [0, 2]), ValueError, r"n_tokens: must be >= 1"),
        (lambda: measure_pass_times(layer_stack(4, 1, rng=0), [1.5]), TypeError, r"n_tokens: expected an integer"),
        (lambda: measure_pass_times(layer_stack(4, 1, rng=0), [], ), ValueError, r"n_tokens: expected at least one"),
        (lambda: measure_pass_times(layer_stack(4, 1, rng=0), [1], repeats=0), ValueError, r"repeats: must be >= 1"),
        (lambda: measure_pass_times(layer_stack(4, 1, rng=0), [1], max_seconds=-1), ValueError, r"max_seconds"),
        (lambda: fit_pass_cost([1, 1], [0.1, 0.2]), ValueError, r"two distinct token counts"),
        (lambda: fit_pass_cost([1, 2], [0.1]), ValueError, r"seconds: expected one time per token count"),
        (lambda: fit_pass_cost([1, 2], [0.1, np.nan]), ValueError, r"seconds: times must be finite and positive"),
        (lambda: fit_pass_cost([1, 2], [0.1, 0.0]), ValueError, r"finite and positive"),
        (lambda: fit_pass_cost([0, 2], [0.1, 0.2]), ValueError, r"n_tokens: counts must be at least 1"),
        (lambda: predicted_pass_time(1, 1e6, 4, 0.0, 1e9), ValueError, r"bandwidth: must be >="),
        (lambda: predicted_pass_time(-1, 1e6, 4, 1e9, 1e9), ValueError, r"n_tokens: must be non-negative"),
        (lambda: predicted_pass_time(1, "big", 4, 1e9, 1e9), TypeError, r"n_params: expected a real number"),
        (lambda: CountingModel(np.ones(3)), TypeError, r"model: expected a model"),
    ],
)
def test_bad_input_is_named(call, error, message):
    with pytest.raises(error, match=message):
        call()


class FakeClock:
    """Advances by a fixed step each time it is read: timings become predictable counts."""

    def __init__(self, step=0.5):
        self.now, self.step = 0.0, step

    def __call__(self):
        self.now += self.step
        return self.now


def test_measure_pass_times_shapes_order_and_bookkeeping():
    w = layer_stack(8, 2, rng=0)
    times = measure_pass_times(w, n_tokens=(4, 1, 2), repeats=5, rng=0, clock=FakeClock())
    assert isinstance(times, PassTimes)
    np.testing.assert_array_equal(times.n_tokens, [1, 2, 4])  # sorted
    assert times.seconds.shape == (5, 3)
    np.testing.assert_allclose(times.seconds, 0.5)  # one clock step between start and stop
    assert times.n_bytes == stack_bytes(w) and times.n_params == stack_params(w)
    np.testing.assert_allclose(times.relative, 1.0)


def test_measure_pass_times_stops_at_the_time_budget_but_keeps_three_repeats():
    w = layer_stack(8, 1, rng=0)
    times = measure_pass_times(w, n_tokens=(1, 2), repeats=50, max_seconds=0.0, clock=FakeClock())
    assert times.seconds.shape == (3, 2)
    times = measure_pass_times(w, n_tokens=(1, 2), repeats=4, max_seconds=1e9, clock=FakeClock())
    assert times.seconds.shape == (4, 2)


def test_measure_pass_times_with_the_real_clock_returns_positive_times():
    times = measure_pass_times(layer_stack(16, 2, rng=0), n_tokens=(1, 3), repeats=3)
    assert times.seconds.shape == (3, 2) and (times.seconds > 0).all()


def test_pass_times_median_and_relative():
    t = PassTimes(np.array([1, 2]), np.array([[1.0, 4.0], [3.0, 2.0], [2.0, 100.0]]), 0, 0)
    np.testing.assert_allclose(t.median, [2.0, 4.0])
    np.testing.assert_allclose(t.relative, [1.0, 2.0])


@pytest.mark.parametrize("fixed, per_token", [(0.02, 0.001), (0.005, 0.0), (0.01, 0.01)])
def test_fit_recovers_an_exact_line(fixed, per_token):
    n = np.array([1, 2, 4, 8, 16, 64])
    fit = fit_pass_cost(n, fixed + per_token * n)
    assert fit.fixed == pytest.approx(fixed, rel=1e-9)
    assert fit.per_token == pytest.approx(per_token, rel=1e-9, abs=1e-15)


def test_fit_never_returns_a_negative_coefficient():
    # Times that fall with n would give a negative slope; the fit pins it at zero.
    fit = fit_pass_cost([1, 2, 4], [0.3, 0.2, 0.1])
    assert fit.per_token == 0.0 and fit.fixed > 0
    # Times proportional to n with noise that pushes the intercept below zero.
    fit = fit_pass_cost([1, 2, 4, 8], [0.9, 2.1, 4.0, 8.2])
    assert fit.fixed == 0.0 and fit.per_token == pytest.approx(1.0, rel=0.05)


def test_fit_properties():
    fit = PassCostFit(0.01, 0.001)
    assert fit.crossover == pytest.approx(10.0)
    assert fit.predict(10) == pytest.approx(0.02)
    assert fit.relative(1) == pytest.approx(1.0)
    assert fit.relative(5) == pytest.approx(0.015 / 0.011)
    assert PassCostFit(0.01, 0.0).crossover == float("inf")


def test_predicted_pass_time_parts_are_equal_at_the_crossover():
    for n_params, bpp, bw, fl in itertools.product([1e6, 7e9], [2, 4], [1e10, 3e12], [1e11, 1e15]):
        crossover = bpp * fl / (2 * bw)
        t = predicted_pass_time(crossover, n_params, bpp, bw, fl)
        assert t == pytest.approx(2 * n_params * bpp / bw)  # weights part + equal arithmetic part
        assert predicted_pass_time(0, n_params, bpp, bw, fl) == pytest.approx(n_params * bpp / bw)


def test_largest_cache_bytes_reads_sysfs(tmp_path):
    for i, size in enumerate(["48K", "2048K", "300M"]):
        (tmp_path / f"index{i}").mkdir()
        (tmp_path / f"index{i}" / "size").write_text(size + "\n")
    assert largest_cache_bytes(tmp_path) == 300 * 2**20
    assert largest_cache_bytes(tmp_path / "missing") is None


def test_counting_model_counts_passes_and_changes_nothing():
    target, draft = markov_pair(vocab_size=8, draft_noise=0.3, seed=0)
    counted = CountingModel(target)
    tokens, stats = autoregressive_generate(counted, [0], 30, rng=4)
    plain, _ = autoregressive_generate(target, [0], 30, rng=4)
    np.testing.assert_array_equal(tokens, plain)
    assert counted.calls == stats.target_passes == 30
    counted.reset()
    _, stats = speculative_generate(counted, draft, [0], 30, k=4, rng=4)
    assert counted.calls == stats.target_passes < 30
    assert counted.context_length == target.context_length and counted.vocab_size == 8
    assert "calls=" in repr(counted)
