"""Where acceptance comes from: the acceptance rate grouped by what the target is writing.

A drafter is accepted more often on some stretches of text than on others: the characters
of an indentation after a newline are easy to guess, the next character of a name less so.
:func:`writing_context` labels each character of a text by such a context, and
:func:`acceptance_by_context` averages the acceptance rate ``sum_x min(p(x), q(x))`` of the
rows that predict the characters of each context (chapter 9b).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .._validate import as_distribution

#: The contexts, in the order the book's figure shows them.
CONTEXTS = ("line start", "indentation", "inside a name", "other")


def writing_context(text: str) -> np.ndarray:
    """The context of each character of ``text``, as an index into :data:`CONTEXTS`.

    * ``line start``: the first character of a line (the character after a newline);
    * ``indentation``: a space inside a line's leading spaces, after its first character;
    * ``inside a name``: a letter, digit or underscore that continues a name;
    * ``other``: everything else (the first character of ``text`` included).

    Examples
    --------
    >>> [CONTEXTS[i] for i in writing_context("a\\n  bc")]
    ['other', 'other', 'line start', 'indentation', 'other', 'inside a name']
    """
    if not isinstance(text, str):
        raise TypeError(f"text: expected a str, got {type(text).__name__}")
    labels = np.full(len(text), CONTEXTS.index("other"), dtype=np.int64)
    leading = False  # inside the leading spaces of a line
    for i in range(1, len(text)):
        prev, ch = text[i - 1], text[i]
        if prev == "\n":
            labels[i] = CONTEXTS.index("line start")
            leading = ch == " "
        elif ch == " " and leading:
            labels[i] = CONTEXTS.index("indentation")
        else:
            leading = False
            if (ch.isalnum() or ch == "_") and (prev.isalnum() or prev == "_"):
                labels[i] = CONTEXTS.index("inside a name")
    return labels


class ContextAcceptance(NamedTuple):
    """Acceptance rate and number of rows per context, in the order of :data:`CONTEXTS`."""

    alpha: np.ndarray
    count: np.ndarray


def acceptance_by_context(p_rows: np.ndarray, q_rows: np.ndarray, text: str, offset: int = 1) -> ContextAcceptance:
    """Mean ``sum_x min(p, q)`` of the rows that predict each context's characters.

    Row ``j`` of ``p_rows`` (draft) and ``q_rows`` (target) predicts character
    ``j + offset`` of ``text`` (``offset = 1`` for rows computed on ``text`` itself, as
    teacher-forced rows are; Medusa's head ``i`` has ``offset = i + 2``).  A context with no
    row gets NaN and a count of 0.

    Examples
    --------
    >>> p = np.array([[1.0, 0.0], [0.5, 0.5]]); q = np.array([[1.0, 0.0], [1.0, 0.0]])
    >>> res = acceptance_by_context(p, q, "a\\nb")   # row 0 predicts "\\n", row 1 "b"
    >>> res.alpha[CONTEXTS.index("line start")], res.alpha[CONTEXTS.index("other")]
    (np.float64(0.5), np.float64(1.0))
    """
    p = as_distribution(p_rows, "p_rows")
    q = as_distribution(q_rows, "q_rows")
    if p.ndim != 2 or p.shape != q.shape:
        raise ValueError(f"p_rows, q_rows: expected two (n, V) arrays of one shape, got {p.shape} and {q.shape}")
    if type(offset) is not int or offset < 1:
        raise ValueError(f"offset: expected an int >= 1 (the row predicting the next character), got {offset!r}")
    labels = writing_context(text)
    if p.shape[0] + offset > labels.size:
        raise ValueError(f"text: {p.shape[0]} rows with offset {offset} need at least {p.shape[0] + offset} "
                         f"characters, got {labels.size}")
    per_row = np.minimum(p, q).sum(axis=1)
    which = labels[offset:offset + p.shape[0]]
    count = np.bincount(which, minlength=len(CONTEXTS))
    total = np.bincount(which, weights=per_row, minlength=len(CONTEXTS))
    with np.errstate(invalid="ignore", divide="ignore"):
        alpha = np.where(count > 0, total / np.maximum(count, 1), np.nan)
    return ContextAcceptance(alpha, count)
