"""Acceptance by what the target is writing (chapter 9b)."""

import numpy as np
import pytest

from speclib.book.contexts import CONTEXTS, acceptance_by_context, writing_context

LINE, INDENT, NAME, OTHER = range(4)


def test_labels_of_a_small_program():
    text = "def f(x):\n    return x_1\n"
    labels = writing_context(text)
    assert labels[text.index("ef")] == NAME and labels[text.index("f(")] == OTHER
    first = text.index("\n") + 1
    assert labels[first] == LINE  # the first of the four spaces
    assert list(labels[first + 1:first + 4]) == [INDENT] * 3
    r = text.index("return")
    assert labels[r] == OTHER and list(labels[r + 1:r + 6]) == [NAME] * 5
    assert labels[text.index("_1")] == NAME and labels[text.index("1\n")] == NAME
    assert labels[0] == OTHER


def test_spaces_inside_a_line_are_not_indentation():
    labels = writing_context("a = 1\n  b  c")
    assert labels[1] == OTHER  # the space after "a"
    assert labels[9] == OTHER and labels[10] == OTHER  # spaces after "b"


def test_grouped_mean_against_a_direct_computation():
    rng = np.random.default_rng(0)
    text = "if x:\n    y = x\n  z\n"
    n, v = len(text) - 1, 5
    p = rng.dirichlet(np.ones(v), n)
    q = rng.dirichlet(np.ones(v), n)
    res = acceptance_by_context(p, q, text)
    labels = writing_context(text)[1:]
    per_row = np.minimum(p, q).sum(axis=1)
    for c in range(len(CONTEXTS)):
        assert res.count[c] == (labels == c).sum()
        np.testing.assert_allclose(res.alpha[c], per_row[labels == c].mean())
    # the offset shifts which character a row predicts: a negative control for the alignment
    shifted = acceptance_by_context(p[:-1], q[:-1], text, offset=2)
    assert not np.allclose(shifted.count, acceptance_by_context(p[:-1], q[:-1], text).count)


def test_an_empty_context_is_nan():
    p = np.array([[1.0, 0.0]])
    res = acceptance_by_context(p, p, "a(")
    assert res.count[OTHER] == 1 and np.isnan(res.alpha[LINE]) and res.count[LINE] == 0


@pytest.mark.parametrize("args, match", [
    ((np.ones((2, 2)) / 2, np.ones((3, 2)) / 2, "abcd"), "one shape"),
    ((np.ones((3, 2)) / 2, np.ones((3, 2)) / 2, "ab"), "need at least 4 characters"),
    ((np.ones((1, 2)) / 2, np.ones((1, 2)) / 2, "ab", 0), "offset"),
    ((np.ones((1, 2)), np.ones((1, 2)) / 2, "ab"), "p_rows"),
])
def test_bad_input(args, match):
    with pytest.raises((ValueError, TypeError), match=match):
        acceptance_by_context(*args)


def test_text_must_be_a_string():
    with pytest.raises(TypeError, match="text: expected a str"):
        writing_context(b"abc")
