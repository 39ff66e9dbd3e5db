"""Property-based tests of the sampling math on random p and q (hypothesis)."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from speclib import acceptance_rate, expected_tokens_per_pass, residual_distribution, tokens_per_step_pmf

weights = arrays(np.float64, st.integers(2, 12), elements=st.floats(0, 10, allow_nan=False))


@st.composite
def pq_pair(draw):
    v = draw(st.integers(2, 12))
    w = arrays(np.float64, v, elements=st.floats(0, 10, allow_nan=False, allow_subnormal=False))
    p, q = draw(w), draw(w)
    if p.sum() < 1e-6 or q.sum() < 1e-6:
        p, q = p + 1.0, q + 1.0
    return p / p.sum(), q / q.sum()


@given(pq_pair())
def test_alpha_bounds_and_symmetry(pq):
    p, q = pq
    a = acceptance_rate(p, q)
    assert -1e-12 <= a <= 1 + 1e-12
    assert abs(a - acceptance_rate(q, p)) < 1e-12
    assert abs(a - (1 - 0.5 * np.abs(p - q).sum())) < 1e-9


@given(pq_pair())
def test_accept_plus_residual_reconstructs_q(pq):
    """min(p, q) + (1 - alpha) * residual = q: the identity behind the theorem."""
    p, q = pq
    alpha = acceptance_rate(p, q)
    r = residual_distribution(p, q)
    assert abs(r.sum() - 1) < 1e-9 and (r >= 0).all()
    if alpha < 1 - 1e-9:
        np.testing.assert_allclose(np.minimum(p, q) + (1 - alpha) * r, q, atol=1e-9)


@given(pq_pair())
def test_residual_lives_where_q_exceeds_p(pq):
    p, q = pq
    r = residual_distribution(p, q)
    if acceptance_rate(p, q) < 1 - 1e-9:
        assert (r[q <= p] == 0).all()


@given(st.floats(0, 1), st.integers(1, 30))
@settings(max_examples=200)
def test_pmf_is_a_distribution_with_the_right_mean(alpha, k):
    pmf = tokens_per_step_pmf(alpha, k)
    assert abs(pmf.sum() - 1) < 1e-9 and (pmf >= 0).all()
    assert abs(pmf @ np.arange(1, k + 2) - expected_tokens_per_pass(alpha, k)) < 1e-9


@given(st.floats(0, 1), st.integers(1, 30))
def test_expected_tokens_monotone_in_k_and_bounded(alpha, k):
    e = expected_tokens_per_pass(alpha, k)
    assert 1 - 1e-12 <= e <= k + 1 + 1e-12
    assert expected_tokens_per_pass(alpha, k + 1) >= e - 1e-12
