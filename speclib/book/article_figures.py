"""Analysis and figures for the chapter that revisits the reference article.

:mod:`speclib.book.article` re-runs the article's experiment.  This module holds what the chapter
needs to reproduce the article's figures and to show where its accounting goes wrong:

* **Accountings.**  Under independent acceptance with probability ``alpha``, a block of ``k``
  drafts keeps ``A`` of them with ``P(A >= j) = alpha**j``; the target judges
  ``V = min(A + 1, k)`` of them.  Hence ``E[A] = alpha + ... + alpha**k`` and
  ``E[V] = 1 + ... + alpha**(k-1)``, so ``accepted / verified`` estimates ``alpha`` at every
  ``k``, while the article's ``accepted / proposed`` estimates ``E[A] / k``
  (:func:`accepted_per_proposed`), which falls towards 0 as ``k`` grows.
* **Break-even.**  :func:`break_even_c` is the draft/target cost ratio at which speculation
  with ``k`` drafts stops paying; it depends on ``alpha`` *and* ``k``, unlike the article's
  fixed acceptance threshold.
* **Figure.**  :func:`plot_k_sweep` draws on axes it is given (or creates) and returns them;
  it never calls ``plt.show()``.

Notation: ``p`` draft, ``q`` target, ``k`` draft length, ``alpha`` acceptance rate, ``c``
draft/target cost ratio.
"""

from __future__ import annotations

from typing import NamedTuple, Sequence

import numpy as np

from .._validate import MAX_BLOCKS, MAX_DRAFT_LENGTH, as_int, as_probability_array, as_real_array
from .article import CONTEXT_ID, EndToEnd, SpeculativeDecoder, SweepRow
from ..core.theory import tokens_per_step_variance
from ..core.tradeoff import break_even_c  # noqa: F401  (one definition, shared with chapter 6)


def _scalar_or_array(x: np.ndarray) -> float | np.ndarray:
    return float(x) if np.ndim(x) == 0 else x


# ---------------------------------------------------------------------------------------------
# Accountings
# ---------------------------------------------------------------------------------------------


def accepted_per_proposed(alpha: float | np.ndarray, k: int) -> float | np.ndarray:
    """What the article's "acceptance" estimates: ``alpha (1 - alpha**k) / ((1 - alpha) k)``.

    Expected accepted drafts per block, ``alpha + alpha**2 + ... + alpha**k``, divided by the
    ``k`` drafts proposed.  Equal to ``alpha`` only at ``k = 1``.

    Examples
    --------
    >>> accepted_per_proposed(0.5, 1)
    0.5
    >>> accepted_per_proposed(0.5, 2)   # (0.5 + 0.25) / 2
    0.375
    """
    alpha = as_probability_array(alpha, "alpha")
    k = as_int(k, "k", minimum=1, maximum=MAX_DRAFT_LENGTH)
    powers = alpha[..., None] ** np.arange(1, k + 1)
    return _scalar_or_array(powers.sum(axis=-1) / k)


def accounting_gap(alpha: float | np.ndarray, k: int) -> float | np.ndarray:
    """``alpha - accepted_per_proposed(alpha, k)``: how far the article's figure falls short.

    Examples
    --------
    >>> accounting_gap(0.5, 1)
    0.0
    >>> accounting_gap(0.5, 2)
    0.125
    """
    alpha_arr = as_probability_array(alpha, "alpha")
    return _scalar_or_array(alpha_arr - np.asarray(accepted_per_proposed(alpha_arr, k)))


def alpha_from_accepted_per_proposed(rate: float, k: int) -> float:
    """Invert :func:`accepted_per_proposed`: the ``alpha`` behind an accepted / proposed figure.

    The map is strictly increasing from 0 to 1 on ``[0, 1]``, so the inverse is unique.

    Examples
    --------
    >>> round(alpha_from_accepted_per_proposed(0.375, 2), 6)
    0.5
    """
    from scipy.optimize import brentq

    rate = float(as_probability_array(rate, "rate"))
    k = as_int(k, "k", minimum=1, maximum=MAX_DRAFT_LENGTH)
    if rate in (0.0, 1.0) or k == 1:
        return rate
    return float(brentq(lambda a: accepted_per_proposed(a, k) - rate, 0.0, 1.0, xtol=1e-14))


class Accountings(NamedTuple):
    """Two ways to count acceptance over a run of blocks."""

    accepted_per_proposed: float  #: the article's: accepted / all k drafts of every block
    accepted_per_verified: float  #: accepted / drafts the target actually judged


def _as_counts(n_accepted: object, k: int) -> np.ndarray:
    arr = np.asarray(n_accepted)
    if arr.ndim != 1 or arr.size == 0:
        raise ValueError(f"n_accepted: expected a non-empty 1-D array of counts, got shape {arr.shape}")
    if not np.issubdtype(arr.dtype, np.integer):
        raise TypeError(f"n_accepted: counts must be integers, got dtype {arr.dtype}")
    if (arr < 0).any() or (arr > k).any():
        raise ValueError(f"n_accepted: every count must lie in [0, k] = [0, {k}], got {arr.min()} to {arr.max()}")
    return arr.astype(np.int64)


def accountings(n_accepted: Sequence[int], k: int) -> Accountings:
    """Accepted / proposed and accepted / verified from the accepted drafts of each block.

    Parameters
    ----------
    n_accepted : sequence of int
        Accepted drafts in each block, each in ``[0, k]``.  A block with ``a < k`` had
        ``a + 1`` drafts judged (the last one rejected); a block with ``a = k`` had ``k``.
    k : int
        Drafts proposed per block.

    Examples
    --------
    >>> accountings([4, 0, 2], k=4)   # 6 accepted, 12 proposed, 4 + 1 + 3 = 8 judged
    Accountings(accepted_per_proposed=0.5, accepted_per_verified=0.75)
    """
    k = as_int(k, "k", minimum=1, maximum=MAX_DRAFT_LENGTH)
    a = _as_counts(n_accepted, k)
    verified = np.minimum(a + 1, k)
    return Accountings(float(a.sum() / (k * a.size)), float(a.sum() / verified.sum()))


def acceptance_outcomes(n_accepted: Sequence[int], k: int) -> np.ndarray:
    """The judged drafts' outcomes in order (1 accepted, 0 rejected), block after block.

    A block with ``a < k`` accepted drafts contributes ``a`` ones and a zero; a full block
    contributes ``k`` ones.  Under independent acceptance the result is a sequence of
    independent Bernoulli(``alpha``) draws.

    Examples
    --------
    >>> acceptance_outcomes([2, 3, 0], k=3)
    array([1, 1, 0, 1, 1, 1, 0])
    """
    k = as_int(k, "k", minimum=1, maximum=MAX_DRAFT_LENGTH)
    a = _as_counts(n_accepted, k)
    parts = [np.r_[np.ones(n, dtype=np.int64), np.zeros(int(n < k), dtype=np.int64)] for n in a]
    return np.concatenate(parts)


def lag1_autocorrelation(x: Sequence[float]) -> float:
    """Correlation between consecutive entries of ``x``; about 0 for independent draws.

    Raises ``ValueError`` for fewer than 3 values or a constant sequence (undefined).

    Examples
    --------
    >>> lag1_autocorrelation([0, 1, 0, 1, 0, 1])
    -1.0
    """
    x = as_real_array(x, "x")
    if not np.all(np.isfinite(x)):
        raise ValueError("x: contains NaN or an infinite value")
    if x.ndim != 1 or x.size < 3:
        raise ValueError(f"x: need a 1-D sequence of at least 3 values, got shape {x.shape}")
    a, b = x[:-1], x[1:]
    if a.std() == 0 or b.std() == 0:
        raise ValueError("x: the sequence is constant, so its autocorrelation is undefined")
    return float(np.corrcoef(a, b)[0, 1])


# ---------------------------------------------------------------------------------------------
# Theory beside measurement
# ---------------------------------------------------------------------------------------------


#: An ``alpha`` this close to 1 is 1 up to rounding (the draft equals the target).
ALPHA_ONE_TOL = 1e-9


def tokens_per_pass_se(alpha: float, k: int, n_passes: int) -> float:
    """Standard error of a mean of ``n_passes`` independent steps' token counts.

    Examples
    --------
    >>> tokens_per_pass_se(0.5, 1, 100)   # one step: 1 or 2 tokens, sd 0.5
    0.05
    """
    n_passes = as_int(n_passes, "n_passes", minimum=1)
    return float(np.sqrt(tokens_per_step_variance(alpha, k) / n_passes))


def _row(row: object, name: str = "row") -> SweepRow:
    if not isinstance(row, SweepRow):
        raise TypeError(f"{name}: expected a SweepRow (from speclib.book.article.k_sweep or noise_sweep), "
                        f"got {type(row).__name__}")
    return row


def _rows(rows: object, name: str) -> list[SweepRow]:
    """``rows`` as a non-empty list of :class:`SweepRow` (what the article's sweeps return)."""
    if isinstance(rows, (str, bytes, SweepRow)) or not hasattr(rows, "__iter__"):
        raise TypeError(f"{name}: expected a list of SweepRow (from speclib.book.article.k_sweep or "
                        f"noise_sweep), got {type(rows).__name__}")
    rows = [_row(r, f"{name}[{i}]") for i, r in enumerate(rows)]
    if not rows:
        raise ValueError(f"{name}: expected at least one SweepRow, got none")
    return rows


def tokens_per_pass_z(row: SweepRow, n_tokens: int) -> float:
    """``(measured - theory at alpha) / standard error`` for one row of an article sweep.

    A row's tokens per pass is ``n_tokens / passes``, so the number of passes is recovered
    exactly from it.  ``|z|`` below about 2 means the closed form fits.

    Raises ``ValueError`` when ``alpha`` is 1 (draft equal to target): every step then keeps
    all its drafts, the standard error is 0, and the only deviation from ``k + 1`` is the
    final step, cut short at ``n_tokens``.
    """
    row = _row(row)
    n_tokens = as_int(n_tokens, "n_tokens", minimum=1)
    if row.alpha > 1.0 - ALPHA_ONE_TOL:
        raise ValueError(f"row: alpha = {row.alpha:.12g} (the draft equals the target), so the "
                         "standard error is 0 and z is undefined; every step but the cut-short "
                         "last one emits k + 1 tokens")
    n_passes = round(n_tokens / row.tokens_per_pass)
    se = tokens_per_pass_se(row.alpha, row.k, n_passes)
    return float((row.tokens_per_pass - row.theory_at_alpha) / se)


def step_sizes(noise: float, k: int = 4, n_steps: int = 2000, seed: int = 0,
               context_id: int = CONTEXT_ID) -> np.ndarray:
    """Tokens emitted by each of ``n_steps`` consecutive steps of the article's decoder.

    The article's per-step histogram: one decoder per noise level, its steps run one after
    another in context ``context_id``.  Entry ``i`` is the accepted drafts of step ``i`` plus
    one (the correction or bonus token).

    Examples
    --------
    >>> step_sizes(0.0, k=4, n_steps=3)
    array([5, 5, 5])
    """
    n_steps = as_int(n_steps, "n_steps", minimum=1, maximum=MAX_BLOCKS)
    k = as_int(k, "k", minimum=1, maximum=MAX_DRAFT_LENGTH)
    dec = SpeculativeDecoder(draft_noise=noise, draft_k=k, seed=seed)
    context_id = as_int(context_id, "context_id", minimum=0)
    return np.array([len(dec.speculative_step(context_id)[0]) for _ in range(n_steps)])


# ---------------------------------------------------------------------------------------------
# Tables
# ---------------------------------------------------------------------------------------------


def article_tables(k_rows: Sequence[SweepRow], noise_rows: Sequence[SweepRow], e2e) -> str:
    """The article's three tables in its own layout and rounding (its columns only)."""
    k_rows, noise_rows = _rows(k_rows, "k_rows"), _rows(noise_rows, "noise_rows")
    if not isinstance(e2e, EndToEnd):
        raise TypeError(f"e2e: expected an EndToEnd (from speclib.book.article.end_to_end), got {type(e2e).__name__}")
    s, b = e2e.speculative, e2e.baseline
    lines = [f"{'K':>4}  {'Acceptance':>12}  {'Tokens/pass':>12}  {'Theoretical':>12}"]
    lines += [f"{r.k:>4}  {r.acceptance:>12.3f}  {r.tokens_per_pass:>12.2f}  {r.theoretical:>12.2f}"
              for r in k_rows]
    lines += ["", f"{'Noise':>7}  {'Acceptance':>12}  {'Tokens/pass':>12}"]
    lines += [f"{r.noise:>7.1f}  {r.acceptance:>12.3f}  {r.tokens_per_pass:>12.2f}" for r in noise_rows]
    lines += [
        "",
        f"  Speculative: {s.tokens_generated} tokens, {s.target_passes} target passes, "
        f"{s.tokens_per_target_pass:.2f} tokens/pass",
        f"  Baseline:    {b.tokens_generated} tokens, {b.target_passes} target passes, "
        f"{b.tokens_per_target_pass:.2f} tokens/pass",
        f"  Speedup:     {e2e.speedup:.2f}x fewer target passes",
    ]
    return "\n".join(lines)


def corrected_table(rows: Sequence[SweepRow], n_tokens: int, by: str = "k") -> str:
    """A Markdown table: the article's columns beside the corrected ones, one row per sweep row.

    ``by`` names the column that varies (``"k"`` or ``"noise"``); ``z`` is
    :func:`tokens_per_pass_z` ("n/a" where ``alpha`` is 1).
    """
    if by not in ("k", "noise"):
        raise ValueError(f"by: expected 'k' or 'noise', got {by!r}")
    rows = _rows(rows, "rows")
    head = ("| k " if by == "k" else "| noise ") + (
        "| article | kept / judged | alpha | tokens / pass | formula at article "
        "| formula at alpha | z |")
    out = [head, "|" + "---|" * 8]
    for r in rows:
        first = f"{r.k}" if by == "k" else f"{r.noise:.1f}"
        z = "n/a" if r.alpha > 1.0 - ALPHA_ONE_TOL else f"{tokens_per_pass_z(r, n_tokens):+.1f}"
        out.append(
            f"| {first} | {r.acceptance:.3f} | {r.acceptance_verified:.3f} | {r.alpha:.3f} "
            f"| {r.tokens_per_pass:.2f} | {r.theoretical:.2f} | {r.theory_at_alpha:.2f} "
            f"| {z} |"
        )
    return "\n".join(out)


# ---------------------------------------------------------------------------------------------
# Figures
# ---------------------------------------------------------------------------------------------


def _axes(axes, n: int, figsize: tuple[float, float]):
    import matplotlib.pyplot as plt

    if axes is None:
        _, axes = plt.subplots(1, n, figsize=figsize)
    axes = np.atleast_1d(axes)
    if axes.size != n:
        raise ValueError(f"axes: expected {n} axes, got {axes.size}")
    return axes


def plot_k_sweep(rows: Sequence[SweepRow], axes=None, corrected: bool = False):
    """Acceptance and tokens per pass against K (the article's Figure 1, or its correction).

    Two panels, one above the other (the book's column is 7 inches wide).  With
    ``corrected=False`` the article's series are drawn; with ``corrected=True`` the corrected
    ones are added: accepted / verified, ``alpha``, the closed form at ``alpha``.  Returns the
    two axes.
    """
    if axes is None:
        import matplotlib.pyplot as plt

        axes = plt.subplots(2, 1, figsize=(7, 6.4), sharex=True)[1]
    ax1, ax2 = _axes(axes, 2, (7, 6.4))
    rows = _rows(rows, "rows")
    ks = [r.k for r in rows]
    ax1.plot(ks, [r.acceptance for r in rows], "o-", label="accepted / proposed (article)")
    ax2.plot(ks, [r.tokens_per_pass for r in rows], "D-", color="green", label="measured")
    ax2.plot(ks, [r.theoretical for r in rows], "s--", color="orange",
             label="formula at accepted / proposed (article)")
    if corrected:
        ax1.plot(ks, [r.acceptance_verified for r in rows], "^-", color="tab:red", label="accepted / verified")
        ax1.plot(ks, [r.alpha for r in rows], ":", color="black", label=r"$\alpha=\sum\min(p,q)$")
        ax2.plot(ks, [r.theory_at_alpha for r in rows], "x:", color="black", ms=9, label=r"formula at $\alpha$")
    for ax in (ax1, ax2):
        ax.set_xscale("log", base=2)
        ax.set_xticks(ks, [str(k) for k in ks])
        ax.legend(fontsize=9)
    ax2.set_xlabel("draft length k (tokens)")
    ax1.set_ylabel("acceptance rate")
    ax1.set_title("Acceptance against k")
    ax2.set_ylabel("tokens per target pass")
    ax2.set_title("Tokens per target pass against k")
    return np.array([ax1, ax2])
