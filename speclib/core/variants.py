"""Variants of speculative decoding that production systems use, each measured against the target.

Every variant runs in the one loop, :func:`speclib.core.decoding.speculative_generate`, as a
part plugged into it; its exact law comes from the same loop through
:func:`speclib.core.exact.output_distribution`.

Exact variants (the output follows the target's distribution):

* **Prompt lookup** (:class:`speclib.core.proposers.PromptLookup`, :func:`lookup_replay`): no
  draft model; the proposal is what followed an earlier occurrence of the text's last ``n``
  tokens.  A deterministic proposal is a draft whose row is a point mass, so the ordinary
  ratio rule verifies it: keep ``x`` with probability ``q(x)``, else draw from ``q`` without ``x``.
* **Several drafts at once, token trees** (:class:`speclib.core.proposers.MultiDraft`,
  :class:`speclib.core.proposers.TreeDraft`, with :func:`multi_draft_verify`): a tree of
  candidates scored in one target pass and verified with SpecInfer's recursive rejection:
  each candidate is tested against the residual left by the ones rejected before it.
* **Exact-match verification** (:func:`exact_match_verify`): the target draws its own token
  ``y ~ q``; a draft ``x`` is kept iff ``y == x``, and on a mismatch ``y`` itself is emitted.
  The emitted token is always ``y``, so the output is exact; a draft survives with
  probability ``sum_x p(x) q(x)``, never more than the ratio rule's ``sum_x min(p, q)``.
* **Batches** (:func:`batch_generate`): ``B`` sequences verified in one pass; each keeps its own
  accepted tokens, and the batch pays for its longest block (``"pad"``), or every sequence
  keeps only as many as the shortest block (``"truncate"``).
* **A cached model with rollback** (:class:`RecurrentModel`, :class:`RecurrentCache`): the
  per-position state must be cut back to the accepted prefix after every rejection.

A lossy variant (the output drifts from the target, by an amount measured here):

* **Typical acceptance** (:func:`typical_verify`, Medusa's rule): keep a draft whenever the
  target gives it more than ``min(epsilon, delta * exp(-H(q)))``; at the first failure emit a
  draw from ``q``.

Every verifier here has the signature of :func:`speclib.core.sampling.verify` (checked
inputs, a generator or a chooser as ``rng``) and a ``step`` attribute, its trusted core,
which draws through a chooser; the loop calls that, and ``functools.partial`` of a verifier
keeps it.  Negative controls: :func:`greedy_match_verify`, :func:`exact_match_fresh_draw`,
``multi_draft_verify(recursive=False)``.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Callable, NamedTuple, Sequence

import numpy as np

from .._validate import (MAX_DRAFT_LENGTH, MAX_ENTRIES, MAX_NEW_TOKENS, as_bool, as_distribution, as_generator,
                         as_int, as_real, as_tokens, model_rows)
from .cache import checked_rows, fed_tokens
from .decoding import _chain, _check_model, chain_feed, prepare_run
from .proposers import _lookup, lookup_draft  # noqa: F401  (lookup_draft: the chapter imports it from here)
from .sampling import Verification, _residual, as_chooser, check_block
from .tree import TokenTree, sequence_nodes, token_tree, tree_from_paths


def _check_pair(target: Callable, draft: Callable) -> int:
    vocab = _check_model(target, "target")
    if _check_model(draft, "draft") != vocab:
        raise ValueError(f"draft: vocabulary of {draft.vocab_size} tokens differs from the target's {vocab}")
    return vocab


def total_variation(a: np.ndarray, b: np.ndarray) -> float:
    """``0.5 * sum |a - b|``: the largest difference in probability the two assign to any event.

    ``a`` and ``b`` are two distributions of any shape (a row, or the joint law of a sequence
    of shape ``(V,) * length``): finite, non-negative, each summing to 1 over all entries.
    """
    a, b = _whole_distribution(a, "a"), _whole_distribution(b, "b")
    if a.shape != b.shape:
        raise ValueError(f"a and b must have the same shape, got {a.shape} and {b.shape}")
    return float(0.5 * np.abs(a - b).sum())


def _whole_distribution(values: object, name: str) -> np.ndarray:
    """``values`` as one distribution over all its entries (whatever its shape), checked."""
    arr = np.asarray(values) if not isinstance(values, (str, bytes)) else values
    if isinstance(arr, np.ndarray) and arr.ndim == 0:
        raise ValueError(f"{name}: expected an array of probabilities, got a scalar")
    flat = as_distribution(np.ravel(arr) if isinstance(arr, np.ndarray) else arr, name, ndim=1)
    return flat.reshape(np.shape(arr))


# --- Greedy match: the negative control for point-mass drafts ---------------------------------


def greedy_match_verify(draft_tokens, p_draft, q_target, rng, *, bonus: bool = True) -> Verification:
    """A faulty verifier, the negative control: keep a draft iff it is the target's argmax.

    Right for greedy decoding, wrong for sampling: a kept token is always the target's
    favourite, and a rejection draws from ``q`` as if nothing had been kept.
    """
    draft_tokens, p_draft, q_target = check_block(draft_tokens, p_draft, q_target)
    return _greedy_match_step(draft_tokens, p_draft, q_target, as_chooser(rng), bonus=as_bool(bonus, "bonus"))


def _greedy_match_step(draft_tokens, p_draft, q_target, choose, *, bonus: bool = True) -> Verification:
    for i, x in enumerate(draft_tokens):
        if x != int(np.argmax(q_target[i])):
            return Verification(np.append(draft_tokens[:i], choose.token(q_target[i])), i)
    if not bonus:
        return Verification(draft_tokens.copy(), len(draft_tokens))
    return Verification(np.append(draft_tokens, choose.token(q_target[-1])), len(draft_tokens))


greedy_match_verify.step = _greedy_match_step
_greedy_match_step.trusted = True  # speclib's own: the loop does not check what it returns


# --- Several drafts, recursive rejection (SpecInfer) -------------------------------------------


def recursive_rejection_rates(p: np.ndarray, q: np.ndarray, m: int) -> np.ndarray:
    """Acceptance probability of each of ``m`` candidates, given that the ones before it were rejected.

    Candidate ``j`` is a fresh draw from ``p`` tested against ``r_j``, the residual left by
    the ``j - 1`` rejections before it (``r_1 = q``): it is kept with probability
    ``a_j = sum_x min(p(x), r_j(x))``, and on rejection ``r_{j+1} = max(r_j - p, 0) / Z``.
    ``a_1`` is the acceptance rate ``alpha``; every later ``a_j`` is at most ``p(S)``, the
    draft's mass on ``S = {x : q(x) > p(x)}``, where all residuals live, and so at most
    ``alpha``.  Once a residual is used up (nothing left where ``r > p``), the remaining
    rates are 0.

    Returns
    -------
    ndarray of shape (m,)

    Examples
    --------
    >>> recursive_rejection_rates([0.6, 0.3, 0.1], [0.2, 0.3, 0.5], 3)
    array([0.6, 0.1, 0.1])
    """
    p = as_distribution(p, "p", ndim=1)
    q = as_distribution(q, "q", ndim=1)
    if p.shape != q.shape:
        raise ValueError(f"p and q must have the same shape, got {p.shape} and {q.shape}")
    m = as_int(m, "m", minimum=1, maximum=MAX_DRAFT_LENGTH, why="candidate drafts")
    rates, r = np.zeros(m), q
    for j in range(m):
        rates[j] = np.minimum(p, r).sum()
        excess = np.maximum(r - p, 0.0)
        if excess.sum() <= 0.0:
            break
        r = excess / excess.sum()
    return rates


def multi_draft_acceptance(p: np.ndarray, q: np.ndarray, m: int) -> float:
    """Probability that one of ``m`` independent draws from ``p`` is accepted by recursive rejection.

    ``1 - prod_j (1 - a_j)`` with the rates ``a_j`` of :func:`recursive_rejection_rates`.
    With ``m = 1`` this is the acceptance rate ``alpha``; it never exceeds
    ``1 - (1 - alpha)**m``, since every candidate after the first is accepted with
    probability at most ``alpha``.

    Examples
    --------
    >>> multi_draft_acceptance([0.5, 0.5, 0.0], [0.25, 0.25, 0.5], 1)
    0.5
    >>> multi_draft_acceptance([0.5, 0.5, 0.0], [0.25, 0.25, 0.5], 3)
    0.5
    """
    return float(1.0 - np.prod(1.0 - recursive_rejection_rates(p, q, m)))


def multi_draft_verify(
    drafts: np.ndarray | TokenTree,
    p_draft: np.ndarray,
    q_target: np.ndarray,
    rng: np.random.Generator | int,
    *,
    recursive: bool = True,
    bonus: bool = True,
) -> Verification:
    """Verify a token tree (or ``m`` draft sequences of length ``k``) at once, with recursive rejection.

    From the root, the candidates below the last kept node (its children in the order they
    were drawn) are tested in turn.  Candidate ``c`` with token ``x``, proposed from the row
    ``p_c``, is kept with probability ``min(1, r(x)/p_c(x))``; if rejected, ``r`` becomes the
    residual ``max(r - p_c, 0)/Z`` for the next candidate (``r`` starts as the target's row
    at the node).  When every candidate fails, a token is drawn from the final ``r`` and the
    step ends; when one is kept, the step moves down to it.  A kept leaf: a bonus token from
    the target's row after it.

    This is exact whenever each candidate, given the candidates before it, was drawn from
    its own row: SpecInfer's independent samples (every ``p_c`` is the draft's row ``p``,
    and two sequences that drew the same token are two candidates of one node, tested one
    after the other), samples without replacement (``p_c`` is ``p`` without the earlier
    siblings, renormalised), and deterministic choices such as the draft's top-``b``
    (``p_c`` is the point mass on ``x``: ``x`` is kept with probability ``r(x)``, and a
    rejection removes it from ``r``).  The tests check all three by exact enumeration.

    Parameters
    ----------
    drafts : TokenTree, or array_like of int, shape (m, k)
        A :class:`speclib.core.tree.TokenTree`, or draft sequences each sampled
        independently from the draft (verified as the tree they make).
    p_draft : array_like, shape (n, V), or (m, k, V) for sequences
        The row each node (``p_draft[j, i]``: each drafted token) was proposed from.
    q_target : array_like, shape (n + 1, V), or (m, k + 1, V) for sequences
        The target's rows: at the root, then after each node (along each sequence).
    rng : numpy.random.Generator or int
    recursive : bool, default True
        False tests every candidate against the target's row itself, not against the
        residual: the faulty version (siblings verified independently), kept as the
        negative control.

    Returns
    -------
    Verification

    Examples
    --------
    >>> from speclib.core.tree import token_tree
    >>> tree = token_tree([0, 1], [-1, -1])  # two deterministic candidates: point-mass rows
    >>> p = np.eye(2)
    >>> q = np.array([[0.0, 1.0], [0.5, 0.5], [0.5, 0.5]])
    >>> out = multi_draft_verify(tree, p, q, rng=0)   # 0 is rejected (q(0) = 0), 1 kept
    >>> out.tokens[0], out.n_accepted
    (np.int64(1), 1)
    """
    if isinstance(drafts, TokenTree):
        tree = token_tree(drafts.tokens, drafts.parents, drafts.draws)
        p_draft = as_distribution(p_draft, "p_draft", ndim=2)
        q_target = as_distribution(q_target, "q_target", ndim=2)
        n, vocab = tree.size, q_target.shape[1]
        if p_draft.shape != (n, vocab) or q_target.shape != (n + 1, vocab):
            raise ValueError(f"p_draft, q_target: expected shapes ({n}, V) and ({n + 1}, V) for a tree of {n} "
                             f"nodes, got {p_draft.shape} and {q_target.shape}")
        as_tokens(tree.tokens, "drafts.tokens", vocab)
        if not p_draft[np.arange(n), tree.tokens].min(initial=1.0) > 0:
            raise ValueError("p_draft: a node's token has probability 0 under its own row")
        return _multi_draft_step(tree, p_draft, q_target, as_chooser(rng), recursive=as_bool(recursive, "recursive"),
                                 bonus=as_bool(bonus, "bonus"))
    p_draft = as_distribution(p_draft, "p_draft", ndim=3)
    q_target = as_distribution(q_target, "q_target", ndim=3)
    m, k, vocab = p_draft.shape
    drafts = as_tokens(np.asarray(drafts).reshape(-1), "drafts", vocab).reshape(np.shape(drafts))
    if drafts.shape != (m, k):
        raise ValueError(f"drafts: expected shape ({m}, {k}) to match p_draft, got {drafts.shape}")
    if q_target.shape != (m, k + 1, vocab):
        raise ValueError(f"q_target: expected shape ({m}, {k + 1}, {vocab}), got {q_target.shape}")
    return _multi_draft_step(drafts, p_draft, q_target, as_chooser(rng), recursive=as_bool(recursive, "recursive"),
                             bonus=as_bool(bonus, "bonus"))


def _sequences_as_tree(drafts: np.ndarray, p_draft: np.ndarray, q_target: np.ndarray):
    """``m`` sequences as the tree they make, with each node's draft row and target row.

    A node's rows are those of the first sequence through its parent (for ``p``) and through
    itself (for ``q``): the sequences through one node share its context, hence its rows.
    """
    m, k = drafts.shape
    tree = tree_from_paths(drafts)
    nodes = sequence_nodes(tree, m)
    p_rows = np.empty((tree.size, p_draft.shape[-1]))
    q_rows = np.empty((tree.size + 1, q_target.shape[-1]))
    q_rows[0] = q_target[0, 0]
    first = {-1: 0}  # node -> the first sequence through it
    for i in range(k):
        for j in range(m):
            node = int(nodes[j, i])
            if node not in first:
                first[node] = j
                p_rows[node] = p_draft[first[int(nodes[j, i - 1]) if i else -1], i]
                q_rows[node + 1] = q_target[j, i + 1]
    return tree, p_rows, q_rows


def _multi_draft_step(drafts, p_draft, q_target, choose, *, recursive: bool = True, bonus: bool = True) -> Verification:
    tree = drafts
    if not isinstance(tree, TokenTree):
        tree, p_draft, q_target = _sequences_as_tree(drafts, p_draft, q_target)
    node, kept = -1, []
    while True:
        candidates = tree.children(node)
        if not candidates:  # a leaf: every draft on its path kept
            if not bonus:
                return Verification(np.array(kept, dtype=np.int64), len(kept))
            return Verification(np.array(kept + [choose.token(q_target[node + 1])]), len(kept))
        r = q_target[node + 1]
        winner = None
        for c in candidates:
            x, p = tree.tokens[c], p_draft[c]
            if choose.coin(min(1.0, r[x] / p[x])):  # keep x with probability min(1, r(x)/p_c(x))
                winner = c
                break
            if recursive:
                r = _residual(p, r)
        if winner is None:
            fix = r if recursive else _residual(p, q_target[node + 1])
            return Verification(np.array(kept + [choose.token(fix)]), len(kept))
        kept.append(int(tree.tokens[winner]))
        node = winner


multi_draft_verify.step = _multi_draft_step
_multi_draft_step.trusted = True  # speclib's own: the loop does not check what it returns
_multi_draft_step.verifies_trees = True  # it takes the token trees of MultiDraft and TreeDraft


# --- Typical acceptance (lossy) ----------------------------------------------------------------


def entropy(q: np.ndarray) -> np.ndarray | float:
    """Shannon entropy in nats along the last axis (``0 log 0 = 0``)."""
    return _entropy(as_distribution(q, "q"))


def _entropy(q: np.ndarray) -> np.ndarray | float:
    with np.errstate(divide="ignore", invalid="ignore"):
        h = -np.where(q > 0, q * np.log(q), 0.0).sum(axis=-1)
    return float(h) if h.ndim == 0 else h


def typical_threshold(q: np.ndarray, epsilon: float, delta: float) -> np.ndarray | float:
    """Medusa's acceptance threshold ``min(epsilon, delta * exp(-H(q)))``, row by row."""
    q = as_distribution(q, "q")
    epsilon, delta = _check_typical(epsilon, delta)
    return _typical_threshold(q, epsilon, delta)


def _typical_threshold(q: np.ndarray, epsilon: float, delta: float) -> np.ndarray | float:
    return np.minimum(epsilon, delta * np.exp(-_entropy(q)))


def _check_typical(epsilon: float, delta: float) -> tuple[float, float]:
    # delta <= 1: exp(-H(q)) <= max q, so a larger delta could set the threshold above
    # every probability of the row (Medusa's delta is about sqrt(epsilon)).
    return as_real(epsilon, "epsilon", low=0.0, high=1.0), as_real(delta, "delta", low=0.0, high=1.0)


def typical_verify(draft_tokens, p_draft, q_target, rng, *, epsilon: float, delta: float,
                   bonus: bool = True) -> Verification:
    """Typical acceptance: keep draft ``x`` iff ``q(x) > min(epsilon, delta exp(-H(q)))``.

    Lossy: the kept drafts follow the draft, filtered, not the target.  At the first failure a
    token is drawn from ``q`` (not from a residual) and the step ends; all kept: a bonus
    token.  The signature matches :func:`speclib.core.sampling.verify`, so
    ``functools.partial(typical_verify, epsilon=..., delta=...)`` can be passed as
    ``verifier`` to :func:`speclib.core.decoding.speculative_generate`.
    """
    epsilon, delta = _check_typical(epsilon, delta)
    draft_tokens, p_draft, q_target = check_block(draft_tokens, p_draft, q_target)
    return _typical_step(draft_tokens, p_draft, q_target, as_chooser(rng), epsilon=epsilon, delta=delta,
                         bonus=as_bool(bonus, "bonus"))


def _typical_step(draft_tokens, p_draft, q_target, choose, *, epsilon: float, delta: float,
                  bonus: bool = True) -> Verification:
    thresholds = _typical_threshold(q_target, epsilon, delta)
    for i, x in enumerate(draft_tokens):
        if not q_target[i, x] > thresholds[i]:
            return Verification(np.append(draft_tokens[:i], choose.token(q_target[i])), i)
    if not bonus:
        return Verification(draft_tokens.copy(), len(draft_tokens))
    return Verification(np.append(draft_tokens, choose.token(q_target[-1])), len(draft_tokens))


typical_verify.step = _typical_step
_typical_step.trusted = True  # speclib's own: the loop does not check what it returns


def typical_first_token(p: np.ndarray, q: np.ndarray, epsilon: float, delta: float) -> np.ndarray:
    """Exact distribution of the first token a typical-acceptance step emits.

    ``p(x) 1[q(x) > t] + (1 - sum_{x: q(x) > t} p(x)) q(x)`` with ``t`` the threshold: the
    kept drafts plus the fallback draws from ``q``.  Row by row for arrays of rows.
    """
    p = as_distribution(p, "p")
    q = as_distribution(q, "q")
    if p.shape != q.shape:
        raise ValueError(f"p and q must have the same shape, got {p.shape} and {q.shape}")
    epsilon, delta = _check_typical(epsilon, delta)
    keep = q > np.asarray(_typical_threshold(q, epsilon, delta))[..., None]
    kept = np.where(keep, p, 0.0)
    return kept + (1.0 - kept.sum(axis=-1, keepdims=True)) * q


class TypicalAcceptance(NamedTuple):
    """Per-position acceptance of the typical rule set against the ratio rule's (row by row)."""

    typical: np.ndarray | float  #: ``sum_x p(x) 1[q(x) > t]``
    ratio: np.ndarray | float  #: ``alpha = sum_x min(p(x), q(x))``
    gained: np.ndarray | float  #: ``sum_{q(x) > t} max(p(x) - q(x), 0)``: kept by the threshold, often rejected by the ratio
    lost: np.ndarray | float  #: ``sum_{q(x) <= t} min(p(x), q(x))``: sometimes kept by the ratio, never by the threshold


def typical_acceptance(p: np.ndarray, q: np.ndarray, epsilon: float, delta: float) -> TypicalAcceptance:
    """How often typical acceptance keeps a draft from ``p``, split against the ratio rule.

    ``typical = ratio + gained - lost``: above the threshold ``t`` the rule keeps every
    draft, gaining the mass ``p - q`` that the ratio rule rejects where the draft
    over-proposes; at or below ``t`` it keeps none, losing the ``min(p, q)`` that the ratio
    rule keeps there.  Which term wins depends on where the draft's excess mass sits.

    Examples
    --------
    >>> [round(float(v), 3) for v in typical_acceptance([0.6, 0.2, 0.2], [0.9, 0.08, 0.02], 0.09, 0.3)]
    [0.6, 0.7, 0.0, 0.1]
    """
    p = as_distribution(p, "p")
    q = as_distribution(q, "q")
    if p.shape != q.shape:
        raise ValueError(f"p and q must have the same shape, got {p.shape} and {q.shape}")
    epsilon, delta = _check_typical(epsilon, delta)
    above = q > np.asarray(_typical_threshold(q, epsilon, delta))[..., None]
    parts = (np.where(above, p, 0.0), np.minimum(p, q), np.where(above, np.maximum(p - q, 0.0), 0.0),
             np.where(above, 0.0, np.minimum(p, q)))
    sums = [part.sum(axis=-1) for part in parts]
    return TypicalAcceptance(*(float(v) if np.ndim(v) == 0 else v for v in sums))


def text_acceptance(target: Callable, draft: Callable, tokens: np.ndarray, start: int) -> float:
    """Mean ratio-rule acceptance ``sum_x min(p, q)`` at the positions of ``tokens[start:]``.

    How easy a text is to speculate on: for each position from ``start`` on, the chance
    that a draft token sampled there would be accepted by the exact rule, given the text
    before it.  Comparing it on the outputs of two decoders separates "accepts more in the
    same contexts" from "writes text whose contexts are easier", which a lossy rule can do.

    Examples
    --------
    >>> from speclib.lm.models import markov_pair
    >>> target, draft = markov_pair(vocab_size=4, draft_noise=0.0, seed=0)
    >>> text_acceptance(target, draft, [0, 1, 2, 3], start=1)
    1.0
    """
    vocab = _check_pair(target, draft)
    tokens = as_tokens(tokens, "tokens", vocab, allow_empty=False)
    start = as_int(start, "start", minimum=1)
    if start >= tokens.size:
        raise ValueError(f"start: must be below the text length {tokens.size}, got {start}")
    rows = slice(start - 1, tokens.size - 1)  # row i predicts token i + 1
    q, p = model_rows(target, tokens, "target")[rows], model_rows(draft, tokens, "draft")[rows]
    return float(np.minimum(p, q).sum(axis=1).mean())


# --- Exact-match verification ------------------------------------------------------------------


def exact_match_verify(draft_tokens, p_draft, q_target, rng, *, bonus: bool = True) -> Verification:
    """Draw the target's own token ``y ~ q``; keep draft ``x`` iff ``y == x``, else emit ``y`` and stop.

    The emitted token is ``y`` in both cases, a draw from ``q``, so the output is exact
    whatever the draft.  A draft survives with probability ``q(x)``, on average
    ``sum_x p(x) q(x)`` (:func:`match_acceptance`).  Same signature as
    :func:`speclib.core.sampling.verify` (``p_draft`` is not needed).
    """
    draft_tokens, p_draft, q_target = check_block(draft_tokens, p_draft, q_target)
    return _exact_match_step(draft_tokens, p_draft, q_target, as_chooser(rng), bonus=as_bool(bonus, "bonus"))


def _exact_match_step(draft_tokens, p_draft, q_target, choose, *, bonus: bool = True,
                      fresh_draw: bool = False) -> Verification:
    for i, x in enumerate(draft_tokens):
        y = choose.token(q_target[i])
        if y != x:
            if fresh_draw:  # the mistake: a new draw, independent of the mismatch
                y = choose.token(q_target[i])
            return Verification(np.append(draft_tokens[:i], y), i)
    if not bonus:
        return Verification(draft_tokens.copy(), len(draft_tokens))
    return Verification(np.append(draft_tokens, choose.token(q_target[-1])), len(draft_tokens))


exact_match_verify.step = _exact_match_step
_exact_match_step.trusted = True  # speclib's own: the loop does not check what it returns


def exact_match_fresh_draw(draft_tokens, p_draft, q_target, rng, *, bonus: bool = True) -> Verification:
    """The negative control: on a mismatch, emit a *new* draw from ``q`` instead of ``y``.

    The new draw is independent of the mismatch, so a token that matched less often is
    over-represented: the output drifts from ``q``.
    """
    draft_tokens, p_draft, q_target = check_block(draft_tokens, p_draft, q_target)
    return _exact_match_step(draft_tokens, p_draft, q_target, as_chooser(rng), bonus=as_bool(bonus, "bonus"),
                             fresh_draw=True)


exact_match_fresh_draw.step = functools.partial(_exact_match_step, fresh_draw=True)


def match_acceptance(p: np.ndarray, q: np.ndarray) -> np.ndarray | float:
    """``sum_x p(x) q(x)``: how often a draft from ``p`` equals the target's own draw from ``q``.

    Examples
    --------
    >>> match_acceptance([0.5, 0.5], [0.5, 0.5])
    0.5
    """
    p = as_distribution(p, "p")
    q = as_distribution(q, "q")
    if p.shape != q.shape:
        raise ValueError(f"p and q must have the same shape, got {p.shape} and {q.shape}")
    a = (p * q).sum(axis=-1)
    return float(a) if a.ndim == 0 else a


# --- Batches -----------------------------------------------------------------------------------


@dataclass
class BatchStats:
    """Counters of a batched run.

    ``slots`` counts the positions the batch pays for: per step, ``B`` times the longest
    block (``"pad"``) or ``B`` times the block every sequence keeps (``"truncate"``).
    ``tokens_generated`` counts the tokens kept, ``padding`` the difference, and
    ``discarded`` the tokens a sequence emitted but had to drop (``"truncate"`` only).
    """

    batch_size: int
    target_passes: int = 0
    draft_passes: int = 0
    tokens_generated: int = 0
    slots: int = 0
    discarded: int = 0
    block_lengths: list[list[int]] = field(default_factory=list)
    pass_tokens: list[int] = field(default_factory=list)  #: tokens each batched target pass read
    accepted: int = 0  #: drafts kept, over all sequences
    draft_verified: int = 0  #: drafts the target judged (as in :class:`GenerationStats`)

    @property
    def acceptance_rate(self) -> float:
        """Accepted / verified drafts over the whole batch (nan when nothing was verified)."""
        return self.accepted / self.draft_verified if self.draft_verified else float("nan")

    @property
    def padding(self) -> int:
        return self.slots - self.tokens_generated

    @property
    def waste(self) -> float:
        """Fraction of the paid-for slots that hold no kept token."""
        return self.padding / self.slots if self.slots else float("nan")

    @property
    def tokens_per_pass(self) -> float:
        """Kept tokens per target pass, per sequence."""
        return self.tokens_generated / (self.target_passes * self.batch_size) if self.target_passes else float("nan")


def batch_generate(
    target: Callable,
    draft: Callable,
    prompts: Sequence[np.ndarray],
    max_new_tokens: int,
    k: int,
    rng: np.random.Generator | int | Sequence,
    *,
    policy: str = "pad",
    verifier: Callable[..., Verification] | None = None,
    target_pass: Callable | None = None,
) -> tuple[list[np.ndarray], BatchStats]:
    """Speculative decoding of ``B`` sequences whose blocks are verified in one batched pass.

    Every step each live sequence drafts ``k`` tokens (``SpeculativeRun.draft``), one target
    pass scores the blocks of the whole batch, and each sequence verifies its own block
    (``SpeculativeRun.finish``); ``k = 0`` steps the batch with plain decoding.  The
    sequences' blocks come out with different lengths.

    ``policy="pad"``
        Each sequence keeps its own block; the batch stays rectangular by padding every
        block to the longest, and the padding is paid for.
    ``policy="truncate"``
        Every sequence keeps only as many tokens as the shortest block has: no padding, but
        tokens already verified are thrown away.  Still exact, because where a block is cut
        depends on the other sequences, never on the token at the cut.

    A sequence that has its ``max_new_tokens`` leaves the batch.

    Parameters
    ----------
    draft : model
        A draft model with the target's vocabulary; each sequence reads it through a cache
        of its own.  A proposer (:class:`~speclib.core.proposers.TreeDraft`,
        :class:`~speclib.core.proposers.PromptLookup`, ...) is refused: it holds the state of
        one sequence, and a token tree needs a tree pass of its own, which the batched pass
        does not make.
    rng : numpy.random.Generator, int, chooser, or a sequence of them
        One source of randomness shared by the batch, or one per prompt: then sequence ``i``
        makes exactly the draws that ``speculative_generate(..., rng=rng[i])`` makes alone,
        and gives the same tokens.
    target_pass : callable, optional
        ``target_pass(caches, feeds) -> rows``: one batched pass that feeds ``feeds[i]`` to
        the target cache ``caches[i]`` and returns its rows (e.g.
        :func:`speclib.lm.batched.batched_extend` for the numpy transformer).  By default
        each cache is extended in turn (the same rows, one sequence at a time).

    Returns
    -------
    outputs : list of ndarray, one per prompt
    stats : BatchStats
    """
    if hasattr(draft, "propose"):
        raise TypeError(f"draft: batch_generate drafts with a model (one draft cache per sequence), got the "
                        f"proposer {type(draft).__name__}; a proposer holds one sequence's state, and a token "
                        "tree needs a tree pass of its own, which the batched pass does not make: run each "
                        "sequence with speculative_generate")
    vocab = _check_pair(target, draft)
    if isinstance(prompts, np.ndarray) and prompts.ndim == 1:
        raise TypeError("prompts: expected a sequence of prompts (one per sequence), got a single 1-D array")
    if isinstance(prompts, (str, bytes)) or not hasattr(prompts, "__iter__"):
        raise TypeError(f"prompts: expected a sequence of prompts (one per sequence), got {type(prompts).__name__}")
    prompts = [as_tokens(pr, f"prompts[{i}]", vocab, allow_empty=False) for i, pr in enumerate(prompts)]
    if not prompts:
        raise ValueError("prompts: need at least one prompt")
    max_new_tokens = as_int(max_new_tokens, "max_new_tokens", minimum=0, maximum=MAX_NEW_TOKENS,
                            why="tokens one call generates")
    k = as_int(k, "k", minimum=0, maximum=MAX_DRAFT_LENGTH)
    if policy not in ("pad", "truncate"):
        raise ValueError(f"policy: expected 'pad' or 'truncate', got {policy!r}")
    if target_pass is not None and not callable(target_pass):
        raise TypeError(f"target_pass: expected a callable (caches, feeds) -> rows, got {type(target_pass).__name__}")
    if isinstance(rng, (list, tuple)):
        if len(rng) != len(prompts):
            raise ValueError(f"rng: expected one generator or seed per prompt ({len(prompts)}), got {len(rng)}")
        choosers = [as_chooser(r, f"rng[{i}]") for i, r in enumerate(rng)]
    else:
        choosers = [as_chooser(rng)] * len(prompts)

    # One run of the speculative loop per sequence; this driver only steps them together.
    runs = [prepare_run(target, draft, pr, max_new_tokens, k or _NoDrafts(), True, verifier) for pr in prompts]
    stats = BatchStats(batch_size=len(prompts))
    while True:
        live = [i for i, run in enumerate(runs) if not run.done]
        if not live:
            break
        before = [(runs[i].n, runs[i].stats.draft_passes) for i in live]
        judged = [(runs[i].stats.accepted, runs[i].stats.draft_verified) for i in live]
        proposals = [runs[i].draft(choosers[i]) for i in live]
        rows, scored = _batch_target_rows([runs[i] for i in live], proposals, target_pass, vocab)
        for i, proposal, q_rows in zip(live, proposals, rows):
            runs[i].finish(proposal, q_rows, choosers[i])
        lengths = [runs[i].n - n for i, (n, _) in zip(live, before)]
        keep = min(lengths) if policy == "truncate" else None
        for i, (n, passes), length in zip(live, before, lengths):
            run = runs[i]
            if keep is not None and keep < length:
                run.truncate(n + keep)
            stats.discarded += length - (run.n - n)
            stats.tokens_generated += run.n - n
            stats.draft_passes += run.stats.draft_passes - passes
        stats.slots += len(live) * (max(lengths) if keep is None else keep)
        for i, (acc, ver) in zip(live, judged):
            stats.accepted += runs[i].stats.accepted - acc
            stats.draft_verified += runs[i].stats.draft_verified - ver
        stats.target_passes += 1
        stats.pass_tokens.append(scored)
        stats.block_lengths.append(lengths)
    return [run.tokens.copy() for run in runs], stats


class _NoDrafts:
    """The draft-length policy of plain decoding (``k = 0``): every step is a plain one."""

    name = "plain"

    def draft_length(self) -> int:
        return 0

    def keep_drafting(self, p: np.ndarray, x: int) -> bool:
        return False

    def update(self, n_drafted: int, n_accepted: int) -> None:
        pass


def _batch_target_rows(runs: list, proposals: list, target_pass: Callable | None,
                       vocab: int) -> tuple[list[np.ndarray], int]:
    """The target's rows for every run's proposal, from one batched pass; and the tokens it read.

    Every proposal is a chain (the runs draft with a :class:`~speclib.core.proposers.DraftModel`).
    """
    rows, drafts = [], [_chain(proposal) for proposal in proposals]
    feeds = [chain_feed(run.target_cache, run.text[:run.n], d) for run, d in zip(runs, drafts)]
    caches = [run.target_cache for run in runs]
    out = [c.extend(f) for c, f in zip(caches, feeds)] if target_pass is None else target_pass(caches, feeds)
    if not isinstance(out, (list, tuple)) or len(out) != len(feeds):
        raise ValueError(f"target_pass: expected a list of {len(feeds)} row arrays (one per cache), "
                         f"got {type(out).__name__}")
    for d, feed, r in zip(drafts, feeds, out):
        r = checked_rows(np.asarray(r), "target_pass")
        if r.shape != (feed.size, vocab):
            raise ValueError(f"target_pass: expected rows of shape ({feed.size}, {vocab}) for a cache fed "
                             f"{feed.size} tokens, got {r.shape}")
        rows.append(r[-(d.size + 1):])
    return rows, sum(f.size for f in feeds)


def block_length_cdf(alpha: float, k: int) -> np.ndarray:
    """``P(n <= j)`` for ``j = 0 .. k + 1``, ``n`` the tokens of one step under independent acceptance."""
    alpha = as_real(alpha, "alpha", 0.0, 1.0)
    k = as_int(k, "k", minimum=1, maximum=MAX_DRAFT_LENGTH)
    j = np.arange(k + 2)
    cdf = 1.0 - alpha ** j  # n <= j  iff  one of the first j drafts is rejected
    cdf[0] = 0.0
    cdf[k + 1] = 1.0
    return cdf


def expected_block_extremes(alpha: float, k: int, batch_size: int) -> tuple[float, float, float]:
    """``(E[n], E[min of B], E[max of B])`` for ``B`` independent blocks under acceptance ``alpha``.

    ``E[n]`` is :func:`speclib.core.theory.expected_tokens_per_pass`.  In a batch that pads, a
    step pays for ``B * E[max]`` slots and keeps ``B * E[n]`` tokens; in a batch that
    truncates, every sequence keeps ``E[min]`` tokens per pass.

    Examples
    --------
    >>> [round(v, 3) for v in expected_block_extremes(0.8, 4, 1)]
    [3.362, 3.362, 3.362]
    """
    batch_size = as_int(batch_size, "batch_size", minimum=1)
    cdf = block_length_cdf(alpha, k)
    survive = 1.0 - cdf[:-1]  # P(n > j), j = 0 .. k
    mean = survive.sum()
    low = (survive ** batch_size).sum()
    high = (1.0 - cdf[:-1] ** batch_size).sum()
    return float(mean), float(low), float(high)


# --- A cached model with rollback --------------------------------------------------------------


class RecurrentModel:
    """A small recurrent language model: ``h_t = tanh(W h_{t-1} + E[x_t])``, ``q_t = softmax(U h_t / T)``.

    Its state after a token depends on the *whole* text before it, so a decoder that
    does not want to re-read the text at every pass must keep a state per position, a cache
    (see :class:`RecurrentCache`), and cut it back after a rejection, like a transformer's KV
    cache.  Follows the model protocol; ``__call__`` recomputes everything from scratch.

    Parameters
    ----------
    vocab_size : int
    hidden_size : int, default 16
    seed : int, default 0
        Seeds the random weights.
    temperature : float, default 1.0
        Divides the logits; a draft can be the same network at a higher temperature.
    """

    context_length = None

    #: Positions read through this model's caches so far (the work the cache saves is visible here).
    positions_computed = 0

    def __init__(self, vocab_size: int, hidden_size: int = 16, seed: int = 0, temperature: float = 1.0) -> None:
        self.vocab_size = as_int(vocab_size, "vocab_size", minimum=2)
        self.hidden_size = as_int(hidden_size, "hidden_size", minimum=1)
        if self.hidden_size * max(self.hidden_size, self.vocab_size) > MAX_ENTRIES:
            big = "hidden_size" if self.hidden_size >= self.vocab_size else "vocab_size"
            raise ValueError(f"{big}: too large, a weight matrix would hold more than {MAX_ENTRIES:,} entries "
                             f"(vocab_size={self.vocab_size}, hidden_size={self.hidden_size})")
        self.temperature = as_real(temperature, "temperature", low=1e-3)
        rng = as_generator(as_int(seed, "seed", minimum=0))
        h = self.hidden_size
        # Recurrent weights large against the embeddings: the state remembers several tokens back.
        self.W = rng.normal(0.0, 1.5 / np.sqrt(h), (h, h))
        self.E = rng.normal(0.0, 0.5, (self.vocab_size, h))
        self.U = rng.normal(0.0, 2.5 / np.sqrt(h), (h, self.vocab_size))

    def cache(self) -> "RecurrentCache":
        """An empty :class:`RecurrentCache` (the loops of :mod:`speclib.core.decoding` use it)."""
        return RecurrentCache(self)

    def initial_state(self) -> np.ndarray:
        return np.zeros(self.hidden_size)

    def step(self, state: np.ndarray, token: int) -> np.ndarray:
        """The state after reading ``token``."""
        return np.tanh(self.W @ state + self.E[token])

    def states(self, tokens: np.ndarray, state: np.ndarray | None = None) -> np.ndarray:
        """States after each token, shape ``(n, hidden_size)``, starting from ``state``."""
        tokens = as_tokens(tokens, "tokens", self.vocab_size)
        state = self.initial_state() if state is None else state
        out = np.empty((tokens.size, self.hidden_size))
        for i, x in enumerate(tokens):
            state = self.step(state, int(x))
            out[i] = state
        return out

    def probs(self, states: np.ndarray) -> np.ndarray:
        """Next-token distributions from states, shape ``(n, V)``."""
        logits = states @ self.U / self.temperature
        logits -= logits.max(axis=-1, keepdims=True)
        e = np.exp(logits)
        return e / e.sum(axis=-1, keepdims=True)

    def __call__(self, tokens: np.ndarray) -> np.ndarray:
        return self.probs(self.states(tokens))

    def __repr__(self) -> str:
        return f"RecurrentModel(vocab_size={self.vocab_size}, hidden_size={self.hidden_size}, temperature={self.temperature})"


def recurrent_pair(vocab_size: int = 8, hidden_size: int = 16, seed: int = 0,
                   draft_temperature: float = 1.5) -> tuple[RecurrentModel, RecurrentModel]:
    """A ``(target, draft)`` pair: the same recurrent network, the draft at a higher temperature."""
    draft_temperature = as_real(draft_temperature, "draft_temperature", low=1e-3)
    target = RecurrentModel(vocab_size, hidden_size, seed)
    return target, RecurrentModel(vocab_size, hidden_size, seed, temperature=draft_temperature)


class RecurrentCache:
    """The per-position states of a :class:`RecurrentModel` for the tokens read so far.

    Follows the cache protocol of :mod:`speclib.core.cache`: ``extend(tokens)`` reads new
    tokens from the last cached state (work proportional to the new tokens only) and returns
    their next-token rows; ``rollback(length)`` forgets every position from ``length`` on.
    After a rollback the cache must equal a fresh computation on the kept tokens; the tests
    check exactly that.  Every position read is counted in the model's
    ``positions_computed``.

    Attributes
    ----------
    states : ndarray, shape (len(cache), hidden_size)
    """

    #: Rows right by construction: the loops do not check them again (speclib.core.cache.rows_trusted).
    trusted_rows = True

    def __init__(self, model: RecurrentModel) -> None:
        if not isinstance(model, RecurrentModel):
            raise TypeError(f"model: expected a RecurrentModel, got {type(model).__name__}")
        self.model = model
        self._tokens = np.zeros(0, dtype=np.int64)
        self.states = np.zeros((0, model.hidden_size))

    def __len__(self) -> int:
        return int(self._tokens.size)

    @property
    def tokens(self) -> np.ndarray:
        """The tokens whose states are cached (a copy)."""
        return self._tokens.copy()

    def extend(self, tokens: np.ndarray) -> np.ndarray:
        """Read ``tokens`` after the cached ones; return their rows, shape ``(len(tokens), V)``."""
        tokens = fed_tokens(tokens, self.model.vocab_size)
        start = self.states[-1] if len(self) else None
        new = self.model.states(tokens, start)
        self._tokens = np.concatenate([self._tokens, tokens])
        self.states = np.concatenate([self.states, new])
        self.model.positions_computed += tokens.size
        return self.model.probs(new)

    def rollback(self, length: int) -> None:
        """Keep the first ``length`` positions (``0 <= length <= len(self)``)."""
        length = as_int(length, "length", minimum=0)
        if length > len(self):
            raise ValueError(f"length: cannot roll forward, the cache holds {len(self)} positions, got {length}")
        self._tokens = self._tokens[:length]
        self.states = self.states[:length]


class _OffByOneCache(RecurrentCache):
    """A :class:`RecurrentCache` whose rollback keeps one position too many (its length says otherwise)."""

    _extra = 0

    def __len__(self) -> int:
        return int(self._tokens.size) - self._extra

    def rollback(self, length: int) -> None:
        length = as_int(length, "length", minimum=0)
        real = min(int(self._tokens.size), length + 1)
        self._tokens, self.states, self._extra = self._tokens[:real], self.states[:real], real - length


class OffByOneRollback:
    """The negative control for caches: ``model`` read through a cache that keeps one position too many.

    After a rejection the first rejected draft's state stays in the cache, and the next
    token is read after it: the target conditions on text that was never written.
    """

    def __init__(self, model: RecurrentModel) -> None:
        if not isinstance(model, RecurrentModel):
            raise TypeError(f"model: expected a RecurrentModel, got {type(model).__name__}")
        self.model, self.vocab_size, self.context_length = model, model.vocab_size, None

    def __call__(self, tokens: np.ndarray) -> np.ndarray:
        return self.model(tokens)

    def cache(self) -> RecurrentCache:
        return _OffByOneCache(self.model)

    def __repr__(self) -> str:
        return f"OffByOneRollback({self.model!r})"


def accepted_length(prefix_length: int, n_accepted: int) -> int:
    """Positions a cache keeps after a step: the prefix plus the accepted drafts.

    The correction or bonus token is not in the cache yet (no pass has read it); the next
    step reads it first.
    """
    return as_int(prefix_length, "prefix_length", minimum=0) + as_int(n_accepted, "n_accepted", minimum=0)


class ArgmaxDraft:
    """A draft that always proposes its model's most likely token: a point-mass row at the argmax.

    Medusa's heads propose their top guesses, not samples.  Wrapped this way, such proposals
    still fit every decoder: the ratio rule on a point mass keeps ``x`` with probability
    ``q(x)`` (exact), :func:`typical_verify` keeps it when ``q(x)`` clears the threshold (lossy).
    """

    def __init__(self, draft: Callable) -> None:
        self.vocab_size = _check_model(draft, "draft")
        self.draft = draft
        self.context_length = getattr(draft, "context_length", None)

    def __call__(self, tokens: np.ndarray) -> np.ndarray:
        rows = np.asarray(self.draft(tokens))
        out = np.zeros_like(rows)
        out[np.arange(rows.shape[0]), rows.argmax(axis=1)] = 1.0
        return out

    def __repr__(self) -> str:
        return f"ArgmaxDraft({self.draft!r})"


def lookup_replay(tokens: np.ndarray, k: int, start: int, n_max: int = 3, n_min: int = 1) -> np.ndarray:
    """Tokens per step of prompt lookup against a target that writes exactly ``tokens``.

    From position ``start`` on, each step proposes :func:`lookup_draft` of the text so far;
    a target that deterministically continues with the real text accepts the proposal up to
    its first wrong token, then supplies the right one.  The mean of the returned counts is
    the tokens per target pass that prompt lookup reaches on this text when the target
    copies as well as the text repeats itself: a property of the text, not of a model.

    Returns
    -------
    ndarray of int: the tokens each step emitted (1 to ``k + 1``).

    Examples
    --------
    >>> lookup_replay([1, 2, 3, 1, 2, 3, 1, 2, 3], k=3, start=3).tolist()  # no match, a copy, the end
    [1, 4, 1]
    """
    tokens = as_tokens(tokens, "tokens")
    if tokens.size and tokens.min() < 0:
        raise ValueError(f"tokens: token ids are >= 0, got {int(tokens.min())} at position {int(np.argmin(tokens))}")
    k = as_int(k, "k", minimum=1, maximum=MAX_DRAFT_LENGTH)
    start = as_int(start, "start", minimum=1)
    lookup_draft(tokens[:1], 1, n_max, n_min)  # checks n_max and n_min
    if start >= tokens.size:
        raise ValueError(f"start: must be below the text length {tokens.size}, got {start}")
    steps, i = [], start
    while i < tokens.size:
        proposal = _lookup(tokens[:i], min(k, tokens.size - i), n_max, n_min)
        truth = tokens[i:i + proposal.size]
        matched = int(np.argmin(proposal == truth)) if (proposal != truth).any() else proposal.size
        emitted = min(matched + 1, tokens.size - i)
        steps.append(emitted)
        i += emitted
    return np.array(steps)
