"""The sampling rule: acceptance rate, residual, verify."""

import numpy as np
import pytest

from speclib import acceptance_rate, residual_distribution, sample_token, verify


def test_acceptance_rate_hand_computed():
    # min(0.5, 0.25) + min(0.5, 0.25) + min(0, 0.5) = 0.5
    assert acceptance_rate([0.5, 0.5, 0.0], [0.25, 0.25, 0.5]) == pytest.approx(0.5)


def test_acceptance_rate_is_one_minus_total_variation():
    rng = np.random.default_rng(0)
    p, q = rng.dirichlet(np.ones(7), size=(2, 50))
    tv = 0.5 * np.abs(p - q).sum(axis=1)
    np.testing.assert_allclose(acceptance_rate(p, q), 1 - tv, atol=1e-12)


def test_acceptance_rate_batch_shape():
    p = np.full((4, 3, 5), 0.2)
    assert acceptance_rate(p, p).shape == (4, 3)


def test_residual_hand_computed():
    r = residual_distribution([0.6, 0.3, 0.1], [0.2, 0.3, 0.5])
    np.testing.assert_allclose(r, [0.0, 0.0, 1.0])
    r = residual_distribution([0.5, 0.5, 0.0, 0.0], [0.1, 0.3, 0.4, 0.2])
    np.testing.assert_allclose(r, [0.0, 0.0, 2 / 3, 1 / 3])


def test_residual_when_p_equals_q_returns_q():
    q = np.array([0.2, 0.3, 0.5])
    np.testing.assert_array_equal(residual_distribution(q, q), q)


def test_sample_token_frequencies():
    rng = np.random.default_rng(1)
    probs = np.array([0.1, 0.0, 0.6, 0.3])
    draws = np.array([sample_token(probs, rng) for _ in range(20000)])
    freq = np.bincount(draws, minlength=4) / draws.size
    assert freq[1] == 0  # a zero-probability token is never drawn
    np.testing.assert_allclose(freq, probs, atol=0.015)


def test_verify_all_accepted_when_p_equals_q_adds_bonus():
    p = np.full((3, 4), 0.25)
    q = np.vstack([p, [[0, 0, 1.0, 0]]])
    out = verify([3, 1, 0], p, q, rng=0)
    assert out.n_accepted == 3
    np.testing.assert_array_equal(out.tokens, [3, 1, 0, 2])


def test_verify_without_bonus_returns_only_drafts():
    p = np.full((2, 4), 0.25)
    q = np.full((3, 4), 0.25)
    out = verify([3, 1], p, q, rng=0, bonus=False)
    assert out.n_accepted == 2
    np.testing.assert_array_equal(out.tokens, [3, 1])


def test_verify_rejects_token_the_target_rules_out():
    # q gives token 0 no mass: it is always rejected and replaced from the residual {2}.
    p = np.array([[0.5, 0.5, 0.0], [1 / 3, 1 / 3, 1 / 3]])
    q = np.array([[0.0, 0.5, 0.5], [1 / 3, 1 / 3, 1 / 3], [1 / 3, 1 / 3, 1 / 3]])
    for seed in range(20):
        out = verify([0, 1], p, q, rng=seed)
        assert out.n_accepted == 0
        np.testing.assert_array_equal(out.tokens, [2])


def test_verify_emits_between_one_and_k_plus_one_tokens():
    rng = np.random.default_rng(5)
    for _ in range(200):
        k = int(rng.integers(1, 6))
        p = rng.dirichlet(np.ones(5), size=k)
        q = rng.dirichlet(np.ones(5), size=k + 1)
        drafts = np.array([rng.choice(5, p=row) for row in p])
        out = verify(drafts, p, q, rng)
        assert 1 <= len(out.tokens) <= k + 1
        assert len(out.tokens) == out.n_accepted + 1
        np.testing.assert_array_equal(out.tokens[: out.n_accepted], drafts[: out.n_accepted])


def test_verify_is_deterministic_given_seed():
    p = np.full((3, 4), 0.25)
    q = np.random.default_rng(0).dirichlet(np.ones(4), size=4)
    a = verify([0, 1, 2], p, q, rng=7)
    b = verify([0, 1, 2], p, q, rng=np.random.default_rng(7))
    np.testing.assert_array_equal(a.tokens, b.tokens)
    assert a.n_accepted == b.n_accepted


def test_first_token_acceptance_frequency_matches_alpha():
    # Drafting from p and verifying against q accepts with probability sum min(p, q).
    rng = np.random.default_rng(2)
    p = np.array([[0.7, 0.2, 0.1]])
    q = np.array([[0.2, 0.3, 0.5], [1 / 3, 1 / 3, 1 / 3]])
    n = 20000
    accepted = sum(verify([sample_token(p[0], rng)], p, q, rng).n_accepted for _ in range(n))
    alpha = acceptance_rate(p[0], q[0])
    assert abs(accepted / n - alpha) < 4 * np.sqrt(alpha * (1 - alpha) / n)


def test_acceptance_rate_of_rows_within_the_tolerance_stays_in_0_1():
    # Rows that sum to a hair more than 1 (within the tolerance as_distribution allows)
    # overlap by more than 1 unclipped; the theory's functions would then refuse the rate.
    from speclib.core.theory import expected_tokens_per_pass

    p = np.array([0.5 + 1e-4, 0.5 + 1e-4])
    assert acceptance_rate(p, p) == 1.0
    assert acceptance_rate(np.stack([p, p]), np.stack([p, p])).tolist() == [1.0, 1.0]
    assert expected_tokens_per_pass(acceptance_rate(p, p), 2) == 3.0
    assert acceptance_rate([0.5, 0.5, 0.0], [0.25, 0.25, 0.5]) == 0.5  # an ordinary rate is untouched


def test_verify_refuses_a_flag_that_is_not_a_bool():
    p = np.full((1, 2), 0.5)
    q = np.full((2, 2), 0.5)
    for flag in ("False", None, 2.5):
        with pytest.raises(TypeError, match="bonus: expected True or False"):
            verify([0], p, q, rng=0, bonus=flag)
    with pytest.raises(TypeError, match="accept: expected a callable"):
        verify([0], p, q, rng=0, accept=None)


def test_sample_token_and_acceptance_probability_check_direct_calls():
    from speclib.core import sampling

    for probs, match in [([np.nan, 1.0], "probs: row 0 contains NaN"), ([-0.5, 1.5], "probs: negative"),
                         ([0.25, 0.25], "probs: row 0 sums to 0.5"), (["0.5", "0.5"], "probs: expected")]:
        with pytest.raises((TypeError, ValueError), match=match):
            sample_token(probs, np.random.default_rng(0))
    assert sample_token([0.0, 1.0], 3) == 1  # an integer seed is a generator's seed
    with pytest.raises(TypeError, match="rng: expected"):
        sample_token([0.5, 0.5], "0")
    for args, match in [((0.5, -0.5), "q_x: must be >= 0.0"), ((0.0, 0.5), "p_x: must be > 0"),
                        ((float("nan"), 0.5), "p_x: must be finite")]:
        with pytest.raises(ValueError, match=match):
            sampling.acceptance_probability(*args)
    assert sampling.acceptance_probability(0.5, 0.25) == 0.5
    # the rule and the loop draw through the unchecked cores (no check per draft): same numbers
    assert sampling.verify.__kwdefaults__["accept"] is sampling._acceptance_probability
    assert sampling._ratio_step.__kwdefaults__["accept"] is sampling._acceptance_probability
    row, rng_a, rng_b = np.array([0.2, 0.3, 0.5]), np.random.default_rng(5), np.random.default_rng(5)
    assert [sample_token(row, rng_a) for _ in range(50)] == [sampling.Sampler(rng_b).token(row) for _ in range(50)]
