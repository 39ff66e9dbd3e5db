"""Self-checks for the book's exercises.

A check takes the student's function (or answer), runs it on cases whose right answer
speclib knows, and raises ``ExerciseError`` with a message that says *what* is wrong
(shape, a value off on which input, a distribution that drifts) without printing the
solution.  On success it prints a short confirmation.
"""

from __future__ import annotations


class ExerciseError(AssertionError):
    """Raised by a self-check, with a hint that does not give the answer away."""


def passed(message: str = "All checks passed.") -> None:
    """Print the confirmation a student sees when a check succeeds."""
    print(f"\u2714 {message}")


def call_student(fn, *args, **kwargs):
    """Call the student's function; a stub that is not done yet gets a friendly message."""
    try:
        return fn(*args, **kwargs)
    except NotImplementedError:
        name = getattr(fn, "__name__", "your function")
        raise ExerciseError(f"{name} still raises NotImplementedError: complete the stub, then run this check again.") from None


# --- Chapter 0: overview -------------------------------------------------------------------

def check_tokens_per_pass(tokens_per_pass) -> None:
    """Exercise ex-00-1: ``tokens_per_pass(tokens_per_step)`` from per-step token counts."""
    cases = [([5, 5, 5], 5.0), ([1], 1.0), ([3, 1, 2, 2], 2.0), ([5, 2, 1, 4, 3], 3.0)]
    for steps, want in cases:
        got = call_student(tokens_per_pass, list(steps))
        try:
            got = float(got)
        except (TypeError, ValueError):
            raise ExerciseError(f"for {steps} your function returned {got!r}, not a number") from None
        if abs(got - want) > 1e-12:
            raise ExerciseError(
                f"for per-step counts {steps} you returned {got:g}. Each entry is one target pass; "
                "what is the total number of tokens, and how many passes produced them?"
            )
    passed("tokens_per_pass agrees with GenerationStats.tokens_per_target_pass on every case.")
