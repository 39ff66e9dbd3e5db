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
