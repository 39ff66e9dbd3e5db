"""Faulty verifiers, kept apart from the main API: the negative controls.

A test of exactness is only worth something if it fails on a decoder that is not exact.
Each :class:`Variant` here describes one mistake in terms of the hooks that
:func:`speclib.sampling.verify` and :func:`speclib.exact.speculative_block_distribution`
share, so the sampling tests and the exact enumeration judge the very same rule.
"""

from __future__ import annotations

import functools
from typing import Callable, NamedTuple

import numpy as np

from .sampling import _residual, acceptance_probability, verify


def _identity(p: np.ndarray) -> np.ndarray:
    return p


def _sharpen(p: np.ndarray) -> np.ndarray:
    """The draft row squared and renormalised: a temperature-0.5 version of it."""
    s = p**2
    return s / s.sum()


class Variant(NamedTuple):
    """One way to get verification wrong (or a correct rule, for comparison)."""

    name: str
    description: str
    accept: Callable[[float, float], float] = acceptance_probability
    correct: Callable[[np.ndarray, np.ndarray], np.ndarray] = _residual
    report: Callable[[np.ndarray], np.ndarray] = _identity

    @property
    def hooks(self) -> dict:
        """Keyword arguments for :mod:`speclib.exact`."""
        return {"accept": self.accept, "correct": self.correct, "report": self.report}

    @property
    def verifier(self) -> Callable:
        """A drop-in replacement for :func:`speclib.sampling.verify`."""
        base = functools.partial(verify, accept=self.accept, correct=self.correct)
        if self.report is _identity:
            return base

        def reporting_verifier(draft_tokens, p_draft, q_target, rng, **kwargs):
            told = np.array([self.report(row) for row in np.asarray(p_draft, dtype=float)])
            return base(draft_tokens, told, q_target, rng, **kwargs)

        return reporting_verifier


CORRECT = Variant("correct", "min(1, q/p) acceptance and the residual max(0, q - p)/Z")

RESAMPLE_FROM_TARGET = Variant(
    "resample from q",
    "after a rejection, draw the replacement from q instead of the residual",
    correct=lambda p, q: q,
)

INVERTED_RATIO = Variant(
    "inverted ratio",
    "accept with min(1, p/q) instead of min(1, q/p)",
    accept=lambda p_x, q_x: min(1.0, p_x / q_x) if q_x > 0 else 1.0,
)

RATIO_WITHOUT_MIN = Variant(
    "ratio without the min",
    "use q/p as the acceptance probability without capping it at 1; ill-formed as a "
    "probability, yet `u < q/p` and `u < min(1, q/p)` are the same event, so a sampler "
    "built on it emits exactly the tokens of the correct one",
    accept=lambda p_x, q_x: q_x / p_x,
)

MISREPORTED_DRAFT = Variant(
    "misreported draft",
    "tokens drawn from p, but the verifier is handed a sharpened p (as with raw against "
    "top-k-processed logits)",
    report=_sharpen,
)

#: Every variant that changes the output distribution; each must be caught by the
#: exact enumeration and by the chi-square test.  RATIO_WITHOUT_MIN is not among them:
#: it changes no sample, and only the enumerator's check that an acceptance probability
#: lies in [0, 1] flags it.
FAULTY = (RESAMPLE_FROM_TARGET, INVERTED_RATIO, MISREPORTED_DRAFT)
