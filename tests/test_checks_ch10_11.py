"""Self-checks of the exercises ex-10-2 and ex-11-3 accept a right answer and explain wrong ones."""

import numpy as np
import pytest

from speclib.book.checks import (ExerciseError, check_kept_rejection_two_tokens,
                                 check_late_temperature_first_token)
from speclib.core.sampling import sample_token
from speclib.core.warping import warp_distribution


def stub(*args, **kwargs):
    raise NotImplementedError("complete me")


# --- ex-10-2: the temperature applied after the residual -----------------------------------------

def good_late_temperature(p, q, temperature):
    p_hot, q_hot = warp_distribution(p, temperature), warp_distribution(q, temperature)
    kept = np.minimum(p_hot, q_hot)
    residual = np.maximum(q - p, 0.0)
    return kept + (1 - kept.sum()) * warp_distribution(residual / residual.sum(), temperature)


def test_late_temperature_accepts_correct_answer(capsys):
    check_late_temperature_first_token(good_late_temperature)
    assert "\u2714" in capsys.readouterr().out


def _warped_residual(p, q, t):  # the correct decoder: residual of the warped rows
    p_hot, q_hot = warp_distribution(p, t), warp_distribution(q, t)
    kept = np.minimum(p_hot, q_hot)
    residual = np.maximum(q_hot - p_hot, 0.0)
    return kept + (1 - kept.sum()) * residual / residual.sum()


def _raw_residual_unwarped(p, q, t):  # forgets to warp the residual at all
    kept = np.minimum(warp_distribution(p, t), warp_distribution(q, t))
    residual = np.maximum(q - p, 0.0)
    return kept + (1 - kept.sum()) * residual / residual.sum()


def _raw_acceptance(p, q, t):  # accepts with the raw rows
    kept = np.minimum(p, q)
    residual = np.maximum(q - p, 0.0)
    return kept + (1 - kept.sum()) * warp_distribution(residual / residual.sum(), t)


@pytest.mark.parametrize(
    "wrong, hint",
    [
        (lambda p, q, t: warp_distribution(q, t), "warped target, what a correct decoder emits"),
        (_warped_residual, "warped target, what a correct decoder emits"),
        (_raw_residual_unwarped, "not what this decoder emits"),
        (_raw_acceptance, "not what this decoder emits"),
        (lambda p, q, t: np.minimum(warp_distribution(p, t), warp_distribution(q, t)), "sums to"),
        (lambda p, q, t: q[:2], "shape"),
        (stub, "NotImplementedError"),
    ],
)
def test_late_temperature_rejects_wrong_answers(wrong, hint):
    with pytest.raises(ExerciseError, match=hint):
        check_late_temperature_first_token(wrong)


def test_late_temperature_reference_is_not_the_target():
    """Negative control: the faulty decoder really differs from the warped target on the first case."""
    p, q = np.array([0.6, 0.1, 0.1, 0.2]), np.array([0.2, 0.3, 0.4, 0.1])
    assert np.abs(good_late_temperature(p, q, 0.5) - warp_distribution(q, 0.5)).max() > 0.01
    assert np.abs(good_late_temperature(p, q, 0.5) - _raw_residual_unwarped(p, q, 0.5)).max() > 0.01


# --- ex-11-3: the verifier that keeps the rejected draft -----------------------------------------

def good_kept_rejection(p, q):
    keep = np.minimum(1.0, np.divide(q, p, out=np.zeros_like(q), where=p > 0))
    residual = np.maximum(q - p, 0.0)
    residual /= residual.sum()
    return p[:, None] * (keep[:, None] * q + (1 - keep)[:, None] * residual)


def test_kept_rejection_accepts_correct_answer(capsys):
    check_kept_rejection_two_tokens(good_kept_rejection)
    assert "\u2714" in capsys.readouterr().out


def test_kept_rejection_matches_the_faulty_verifier_by_sampling():
    """The formula is the distribution of a verifier written with the off-by-one slice (seeded, 4 sigma)."""
    p, q = np.array([0.5, 0.3, 0.2]), np.array([0.2, 0.3, 0.5])
    rng, n, counts = np.random.default_rng(3), 20000, np.zeros((3, 3))
    for _ in range(n):
        x = sample_token(p, rng)
        if rng.random() < min(1.0, q[x] / p[x]):
            y = sample_token(q, rng)
        else:
            residual = np.maximum(q - p, 0.0)
            y = sample_token(residual / residual.sum(), rng)  # kept x, then the correction
        counts[x, y] += 1
    want = good_kept_rejection(p, q)
    assert (np.abs(counts / n - want) < 4 * np.sqrt(want * (1 - want) / n) + 1e-12).all()


@pytest.mark.parametrize(
    "wrong, hint",
    [
        (lambda p, q: np.outer(q, q), "target's own distribution"),
        (lambda p, q: np.outer(p, q), "not what follows it"),
        (lambda p, q: np.outer(q, np.maximum(q - p, 0) / np.maximum(q - p, 0).sum()), "first token"),
        (lambda p, q: good_kept_rejection(p, q)[0], "shape"),
        (lambda p, q: 2 * good_kept_rejection(p, q), "sums to"),
        (stub, "NotImplementedError"),
    ],
)
def test_kept_rejection_rejects_wrong_answers(wrong, hint):
    with pytest.raises(ExerciseError, match=hint):
        check_kept_rejection_two_tokens(wrong)
