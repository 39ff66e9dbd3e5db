"""The matrix-product strategies and the compiled kernels (speclib.lm.products, speclib.lm.kernel).

Every strategy must compute ``x @ w`` up to float32 rounding, on every weight shape the book's
models use and on random shapes (columns that are not a multiple of the kernel's tile, one to
sixteen rows and more); a deliberately wrong kernel is the negative control of the comparison.
The choice among strategies is by measurement, so the tests check what is chosen from, not
which one wins.
"""

import numpy as np
import pytest

from speclib.lm import kernel, products
from speclib.lm.drafters import DRAFTER_FILES, load_drafter_model
from speclib.lm.products import (LONG_CANDIDATES, MAX_ROWS, ROW_COUNTS, STRATEGIES, Product, candidates,
                                  choose_plan, measured_plans)
from speclib.lm.transformer import TransformerConfig, load_pair, random_transformer

needs_numba = pytest.mark.skipif(not kernel.available(), reason="the compiled kernels need numba")

#: float32 products of length up to 1024 against numpy's, relative to the size of the terms.
RTOL = 2e-5


def close(got, want, x, w):
    # |error| below RTOL times the sum of |terms| of each output: the bound rounding obeys.
    scale = np.abs(x) @ np.abs(w)
    return bool(np.all(np.abs(got - want) <= RTOL * scale + 1e-30))


def model_shapes():
    target, draft = load_pair()
    shapes = {p.w.shape for model in (target, draft) for p in model._products.values()}
    for name in DRAFTER_FILES:
        if name in ("distilled", "early-exit"):
            shapes |= {p.w.shape for p in load_drafter_model(name, target=target)._products.values()}
    return sorted(shapes)


SHAPES = model_shapes() + [(1, 1), (5, 2), (7, 3), (13, 4), (33, 100), (64, 7)]


@pytest.mark.parametrize("shape", SHAPES)
def test_every_strategy_computes_the_product(shape):
    rng = np.random.default_rng(sum(shape))
    w = rng.standard_normal(shape).astype(np.float32)
    product = Product(w)
    for rows in (*range(1, MAX_ROWS + 1), 17, 40, 64, 129):
        x = rng.standard_normal((rows, shape[0])).astype(np.float32)
        want = x.astype(np.float64) @ w.astype(np.float64)
        for strategy in (None, *candidates()):
            got = product(x, strategy)
            assert got.shape == want.shape and got.dtype == np.float32, (strategy, rows)
            assert close(got, want, x, w), (strategy, rows, np.abs(got - want).max())


def test_the_comparison_catches_a_wrong_product():
    # The negative control: the same check rejects a product that drops one term of one sum
    # (the last inner index of the last column), the smallest plausible kernel fault.
    rng = np.random.default_rng(0)
    w = rng.standard_normal((256, 97)).astype(np.float32)
    x = rng.standard_normal((5, 256)).astype(np.float32)
    want = x.astype(np.float64) @ w.astype(np.float64)
    wrong = x @ w
    wrong[:, -1] -= x[:, -1] * w[-1, -1]
    assert not close(wrong, want, x, w)
    assert close(x @ w, want, x, w)


@needs_numba
@pytest.mark.parametrize("rows", [1, 2, 3, 4, 5, 8, 9, 16])
def test_kernel_writes_exactly_its_output(rows):
    # Columns beyond the last multiple of 3 are computed from a repeated column and must not be
    # written anywhere: a guard band around the output stays untouched.
    rng = np.random.default_rng(rows)
    w = rng.standard_normal((40, 10)).astype(np.float32)
    x = rng.standard_normal((rows, 40)).astype(np.float32)
    out = np.full((rows + 1, 12), 7.0, dtype=np.float32)  # one row and two columns too many
    kernel.rows_matmul(x, np.ascontiguousarray(w.T), out)
    assert close(out[:rows, :10], x.astype(np.float64) @ w, x, w)
    assert (out[rows] == 7).all() and (out[:, 10:] == 7).all()


def test_plan_chooses_from_the_candidates_for_every_row_count():
    w = np.random.default_rng(1).standard_normal((48, 50)).astype(np.float32)
    product = Product(w)
    plan = product.plan()
    assert len(plan) == len(ROW_COUNTS) and set(plan) <= set(candidates())
    assert set(plan[MAX_ROWS:]) <= set(LONG_CANDIDATES)
    info = measured_plans()[48, 50]
    assert info["plan"] == plan and info["seconds"].shape == (len(ROW_COUNTS), len(info["names"]))
    assert np.all(info["seconds"][:MAX_ROWS] > 0)
    # the measured choice is choose_plan's reading of the measured table: the fastest strategy,
    # with one row at a time priced at no more than n times the fastest one-row product
    assert choose_plan(info["seconds"], tuple(info["names"])) == plan


def test_environment_limits_the_candidates(monkeypatch):
    monkeypatch.setenv("SPECLIB_PRODUCTS", "full, rows")
    assert candidates() == ("full", "rows")
    w = np.random.default_rng(2).standard_normal((30, 31)).astype(np.float32)
    assert set(Product(w).plan()) <= {"full", "rows"}
    monkeypatch.setenv("SPECLIB_PRODUCTS", "fastest")
    with pytest.raises(ValueError, match="SPECLIB_PRODUCTS: unknown strategy 'fastest'"):
        candidates()
    monkeypatch.setenv("SPECLIB_PRODUCTS", "")
    assert candidates() == tuple(s for s in STRATEGIES if s != "kernel" or kernel.available())


def test_without_numba_the_kernel_is_not_offered(monkeypatch):
    monkeypatch.setattr(kernel, "_NUMBA", False)
    assert "kernel" not in candidates()
    monkeypatch.setenv("SPECLIB_PRODUCTS", "kernel")
    with pytest.raises(ValueError, match="the kernel needs numba"):
        candidates()
    monkeypatch.delenv("SPECLIB_PRODUCTS")
    model = random_transformer(TransformerConfig(vocab_size=7, block_size=16, d_model=8, n_layers=1, n_heads=2))
    with pytest.raises(ValueError, match="products: the kernel needs numba"):
        model.products = "kernel"


def test_product_refuses_a_non_matrix():
    with pytest.raises(ValueError, match="w: expected a matrix"):
        Product(np.ones(3, dtype=np.float32))


# --------------------------------------------------------------------------- the attention kernel


def numpy_attention(q, keys, values, filled, mask):
    h, n, dh = q.shape
    end = filled + n
    att = q.astype(np.float64) @ keys[:, :end].astype(np.float64).transpose(0, 2, 1)
    if mask is None:
        mask = np.triu(np.full((n, end), -np.inf), k=filled + 1)
    att = att + mask
    att = np.exp(att - att.max(axis=-1, keepdims=True))
    att /= att.sum(axis=-1, keepdims=True)
    return (att @ values[:, :end]).transpose(1, 0, 2).reshape(n, h * dh)


@needs_numba
@pytest.mark.parametrize("n, filled, tree", [(1, 0, False), (2, 0, False), (5, 64, False), (9, 100, False),
                                             (16, 3, False), (5, 20, True), (9, 0, True)])
def test_attention_kernel_matches_numpy(n, filled, tree):
    rng = np.random.default_rng(n + filled)
    h, slots, dh = 4, 128, 16
    keys = rng.standard_normal((h, slots, dh)).astype(np.float32)
    values = rng.standard_normal((h, slots, dh)).astype(np.float32)
    q = rng.standard_normal((h, n, dh)).astype(np.float32)
    mask = None
    if tree:  # each node sees the cached slots, itself and a random earlier node
        mask = np.zeros((n, filled + n), dtype=np.float32)
        allowed = np.eye(n, dtype=bool) | (np.tril(rng.random((n, n)) < 0.5))
        mask[:, filled:][~allowed] = -np.inf
    got = kernel.attend(q, keys, values, filled, mask)
    want = numpy_attention(q, keys, values, filled, mask)
    np.testing.assert_allclose(got, want, atol=2e-5)
    # negative control: one slot too many seen by the first token is detected
    if mask is None and n > 1:
        leaky = np.zeros((n, filled + n), dtype=np.float32)
        leaky[:, filled + 1:] = np.triu(np.full((n, n - 1), -np.inf, dtype=np.float32), k=1)
        assert np.abs(kernel.attend(q, keys, values, filled, leaky) - want).max() > 1e-3
