"""speclib.lm.quant: the GGUF block formats decoded as the file defines them, and the products."""

import numpy as np
import pytest

from speclib.lm import kernel
from speclib.lm.quant import BLOCK, Linear


def q4_1_blocks(d: np.ndarray, m: np.ndarray, codes: np.ndarray) -> np.ndarray:
    """Raw Q4_1 bytes, written by hand from the format's definition (not by speclib's reader):
    per block a float16 scale, a float16 offset, then 16 bytes whose low nibbles are weights
    0..15 and high nibbles weights 16..31."""
    out, nb = d.shape
    raw = np.zeros((out, nb, 20), dtype=np.uint8)
    raw[..., 0:2] = d.astype(np.float16)[..., None].view(np.uint8)
    raw[..., 2:4] = m.astype(np.float16)[..., None].view(np.uint8)
    c = codes.reshape(out, nb, BLOCK).astype(np.uint8)
    raw[..., 4:] = c[..., :16] | (c[..., 16:] << 4)
    return raw.reshape(out, -1)


def q8_0_blocks(d: np.ndarray, codes: np.ndarray) -> np.ndarray:
    out, nb = d.shape
    raw = np.zeros((out, nb, 34), dtype=np.uint8)
    raw[..., 0:2] = d.astype(np.float16)[..., None].view(np.uint8)
    raw[..., 2:] = codes.reshape(out, nb, BLOCK).astype(np.int8).view(np.uint8)
    return raw.reshape(out, -1)


def example(out=7, inner=64, seed=0):
    rng = np.random.default_rng(seed)
    d = rng.uniform(0.01, 0.1, (out, inner // BLOCK)).astype(np.float16).astype(np.float32)
    m = rng.uniform(-0.5, 0.0, (out, inner // BLOCK)).astype(np.float16).astype(np.float32)
    codes = rng.integers(0, 16, (out, inner))
    weights = np.repeat(d, BLOCK, axis=1) * codes + np.repeat(m, BLOCK, axis=1)
    return q4_1_blocks(d, m, codes), weights.astype(np.float32)


def test_q4_1_decodes_the_format_exactly():
    raw, weights = example()
    for layout in ("q8", "f32"):
        linear = Linear.from_q4_1(raw, weights.shape, layout=layout)
        assert np.array_equal(linear.dequantize(), weights), layout
    linear = Linear.from_q4_1(raw, weights.shape)
    assert linear.codes.dtype == np.uint8 and linear.codes.max() <= 15 and linear.nbytes < weights.nbytes / 3


def test_swapped_nibbles_are_a_different_matrix():
    # Negative control for the test above: reading the high nibble first gives other weights.
    raw, weights = example()
    blocks = raw.reshape(weights.shape[0], -1, 20).copy()
    blocks[..., 4:] = (blocks[..., 4:] >> 4) | (blocks[..., 4:] << 4)
    assert not np.array_equal(Linear.from_q4_1(blocks.reshape(raw.shape), weights.shape).dequantize(), weights)


def test_q8_0_decodes_signed_codes():
    rng = np.random.default_rng(1)
    d = rng.uniform(0.001, 0.01, (5, 3)).astype(np.float16).astype(np.float32)
    codes = rng.integers(-128, 128, (5, 96))
    weights = (np.repeat(d, BLOCK, axis=1) * codes).astype(np.float32)
    linear = Linear.from_q8_0(q8_0_blocks(d, codes), weights.shape)
    assert linear.offset is None and linear.codes.dtype == np.int8
    assert np.array_equal(linear.dequantize(), weights)
    assert np.array_equal(linear.rows(np.array([4, 0])), weights[[4, 0]])


@pytest.mark.parametrize("layout", ["q8", "f32"])
@pytest.mark.parametrize("out", [1, 2, 3, 7, 50])
def test_products_match_numpy_for_every_row_count(layout, out):
    raw, weights = example(out=out, inner=96, seed=out)
    linear = Linear.from_q4_1(raw, weights.shape, layout=layout)
    rng = np.random.default_rng(2)
    for n in range(1, 18):
        x = rng.standard_normal((n, 96)).astype(np.float32)
        want = x.astype(np.float64) @ weights.T.astype(np.float64)
        got = linear(x)
        assert got.dtype == np.float32 and got.shape == (n, out)
        assert np.abs(got - want).max() < 1e-4 * max(1.0, np.abs(want).max()), (layout, n)
        assert np.abs(linear.reference(x) - want).max() < 1e-4 * max(1.0, np.abs(want).max())


def test_int8_codes_without_offset_through_the_kernel():
    rng = np.random.default_rng(3)
    d = rng.uniform(0.001, 0.01, (10, 2)).astype(np.float16).astype(np.float32)
    codes = rng.integers(-128, 128, (10, 64))
    weights = np.repeat(d, BLOCK, axis=1) * codes
    linear = Linear.from_q8_0(q8_0_blocks(d, codes), weights.shape)
    x = rng.standard_normal((5, 64)).astype(np.float32)
    out = np.full((5, 10), np.nan, dtype=np.float32)
    assert linear(x, out) is out
    assert np.allclose(out, x @ weights.T, atol=1e-4)


@pytest.mark.skipif(not kernel.available(), reason="numba is not installed")
def test_every_row_of_the_output_is_written():
    # A kernel that skipped the last rows of a matrix whose height is not a multiple of the
    # tile (3) would leave them as they were: start from NaN.
    raw, weights = example(out=8, inner=32)
    linear = Linear.from_q4_1(raw, weights.shape)
    x = np.ones((6, 32), dtype=np.float32)
    out = np.full((6, 8), np.nan, dtype=np.float32)
    linear(x, out)
    assert np.isfinite(out).all() and np.allclose(out, x @ weights.T, atol=1e-4)


def test_bad_blocks_are_refused_by_name():
    raw, weights = example()
    with pytest.raises(ValueError, match="up_proj: expected 280 bytes"):
        Linear.from_q4_1(raw[:, :-1], weights.shape, name="up_proj")
    with pytest.raises(ValueError, match="not whole blocks of 32"):
        Linear.from_q4_1(raw, (7, 48))
    with pytest.raises(ValueError, match="layout: expected one of 'f32', 'q8', got 'int4'"):
        Linear.from_q4_1(raw, weights.shape, layout="int4")
