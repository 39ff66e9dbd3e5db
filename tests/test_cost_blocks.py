"""Column-block products: the same numbers as the plain product, by the route that only reads the weights."""

import numpy as np
import pytest

from speclib.core import cost
from speclib.core.cost import (SMALL_PRODUCT, SPLIT_MAX_TOKENS, column_blocks, forward_pass, layer_stack,
                               measure_pass_times, product)


@pytest.mark.parametrize("shape", [(512, 640), (2048, 2048), (4096, 100)])
def test_blocks_tile_the_matrix_and_fit_the_direct_kernel(shape):
    w = np.random.default_rng(0).standard_normal(shape)
    blocks = column_blocks(w)
    assert blocks is not None
    np.testing.assert_array_equal(np.concatenate(blocks, axis=1), w)
    widths = [b.shape[1] for b in blocks]
    assert all(width % 16 == 0 for width in widths[:-1]) and len(set(widths[:-1])) <= 1
    assert widths[0] == 16 or SPLIT_MAX_TOKENS * shape[0] * widths[0] <= SMALL_PRODUCT
    assert all(b.flags.c_contiguous and not np.shares_memory(b, w) for b in blocks)


def test_nothing_to_split_in_a_narrow_matrix():
    assert column_blocks(np.zeros((64, 16))) is None


@pytest.mark.parametrize("n", [1, 2, 5, SPLIT_MAX_TOKENS, SPLIT_MAX_TOKENS + 1, 40])
def test_product_is_the_matrix_product(n):
    rng = np.random.default_rng(n)
    w, x = rng.standard_normal((1024, 1024)), rng.standard_normal((n, 1024))
    np.testing.assert_allclose(product(x, w, column_blocks(w)), x @ w, rtol=1e-12, atol=1e-10)
    np.testing.assert_array_equal(product(x, w, None), x @ w)


def test_blocked_pass_equals_plain_pass():
    weights = layer_stack(512, 3, rng=1)
    blocks = [column_blocks(w) for w in weights]
    x = np.random.default_rng(2).standard_normal((7, 512))
    np.testing.assert_allclose(forward_pass(weights, x, blocks), forward_pass(weights, x), rtol=1e-10, atol=1e-12)


def test_measure_uses_the_blocks_only_when_asked(monkeypatch):
    routes = []
    real = cost.product
    monkeypatch.setattr(cost, "product", lambda x, w, b=None: routes.append(b is not None) or real(x, w, b))
    weights = layer_stack(1024, 2, rng=0)
    plain = measure_pass_times(weights, [1, 4], repeats=1)
    assert not plain.blocked and routes == []
    blocked = measure_pass_times(weights, [1, 4], repeats=1, blocked=True)
    assert blocked.blocked and routes and all(routes)


@pytest.mark.parametrize("call, error, message", [
    (lambda: column_blocks(np.zeros(8)), ValueError, r"w: expected a 2-D weight matrix"),
    (lambda: column_blocks(np.zeros((8, 8)), max_tokens=0), ValueError, r"max_tokens"),
    (lambda: forward_pass(layer_stack(4, 2, rng=0), np.ones((1, 4)), [None]), ValueError,
     r"blocks: expected one entry per layer \(2\), got 1"),
    (lambda: measure_pass_times(layer_stack(4, 1, rng=0), [1, 2], blocked="yes"), TypeError,
     r"blocked: expected True or False"),
])
def test_bad_arguments_are_named(call, error, message):
    with pytest.raises(error, match=message):
        call()
