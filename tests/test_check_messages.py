"""Self-check messages read as short lines in the book's column, never broken inside an expression."""

import re
import textwrap

import pytest

from speclib.book.checks import MESSAGE_WIDTH, ExerciseError, passed, wrap_message

HINT = ("for outcomes [[1, 0], [1, 1, 1, 1], [0], [1, 1, 0]] and k = 4: the rate at position 2 is 0.5, "
        "which is wrong. A draft at position j is judged only if the drafts before it were accepted: "
        "which blocks should the denominator count? Pass `acceptance_by_position(outcomes, k)` itself.")
EXPRESSIONS = ("[[1, 0], [1, 1, 1, 1], [0], [1, 1, 0]]", "k = 4", "`acceptance_by_position(outcomes, k)`")


def _broken(text: str) -> list[str]:
    """The expressions of HINT that a line break cuts in two."""
    return [e for e in EXPRESSIONS if e not in text.replace("\n", "\x00")]


def test_lines_are_short_and_keep_every_word():
    text = wrap_message(f"ExerciseError: {HINT}")
    assert max(len(line) for line in text.split("\n")) <= MESSAGE_WIDTH
    assert text.split() == f"ExerciseError: {HINT}".split()


WIDTHS = (40, 50, 60, MESSAGE_WIDTH, 76, 88)


def test_expressions_stay_whole():
    for width in WIDTHS:
        assert _broken(wrap_message(f"ExerciseError: {HINT}", width)) == [], width
    # Negative control: a plain textwrap at the same widths cuts some of them, so the test can fail.
    assert any(_broken(textwrap.fill(f"ExerciseError: {HINT}", width=width)) for width in WIDTHS)


def test_a_clause_that_does_not_fit_starts_a_line():
    stub = ("ExerciseError: acceptance_by_position still raises NotImplementedError: "
            "complete the stub, then run this check again.")
    assert wrap_message(stub, 76).split("\n") == [
        "ExerciseError: acceptance_by_position still raises NotImplementedError:",
        "complete the stub, then run this check again."]
    assert wrap_message("ExerciseError: residual still raises NotImplementedError: complete the stub, "
                        "then run this check again.").split("\n") == [
        "ExerciseError: residual still raises NotImplementedError:",
        "complete the stub, then run this check again."]


def test_line_breaks_and_long_units_are_kept():
    name = "x" * (MESSAGE_WIDTH + 5)
    assert wrap_message(f"short\n{name} end") == f"short\n{name}\nend"
    assert wrap_message("a (never closed b c") == "a (never closed b c"
    with pytest.raises(TypeError, match="text"):
        wrap_message(None)


def test_the_rendered_error_and_the_confirmation_are_wrapped(capsys):
    lines = ExerciseError(HINT)._render_traceback_()
    plain = re.sub(r"\x1b\[[0-9;]*m", "", lines[0])
    assert plain == wrap_message(f"ExerciseError: {HINT}")
    passed("lag1_autocorrelation agrees with article_figures.lag1_autocorrelation on every sequence tried.")
    out = capsys.readouterr().out
    assert out.startswith("\u2714 ") and max(len(line) for line in out.splitlines()) <= MESSAGE_WIDTH
