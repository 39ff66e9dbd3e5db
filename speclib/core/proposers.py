"""Proposers: what drafts the tokens that the target verifies.

The one loop, :func:`speclib.core.decoding.speculative_generate`, asks its proposer for at most
``k`` tokens per step and the rows they were drawn from (the verifier divides by them).
A proposer follows three calls:

``start(prompt, vocab_size)``
    a new generation begins (a proposer with a model opens that model's cache here);
``propose(text, k, policy, choose, timings) -> Proposal``
    up to ``k`` drafts after ``text``; ``policy.keep_drafting(p, x)`` may end the draft
    early, and every random choice goes through ``choose`` (see
    :class:`speclib.core.sampling.Chooser`);
``accept(length)``
    after verification the first ``length`` tokens of the text stand (roll caches back).

:class:`DraftModel`
    a draft language model, sampling one token per draft pass (what a model passed as the
    loop's ``draft`` becomes);
:class:`PromptLookup`
    no model: the tokens that followed an earlier occurrence of the text's last ``n``
    tokens, proposed as point masses (:func:`lookup_draft`);
:class:`MultiDraft`
    ``m`` independent draft sequences per step, verified together by
    :func:`speclib.core.variants.multi_draft_verify` (its default verifier).
"""

from __future__ import annotations

import time
from typing import Callable, NamedTuple, Protocol, runtime_checkable

import numpy as np

from .._validate import MAX_DRAFT_LENGTH, SUM_TOLERANCE, as_int, as_tokens
from .cache import extend_checked, model_cache
from .tree import TokenTree, keep_branch, score_tree, sequence_nodes, token_tree, tree_from_paths


class Proposal(NamedTuple):
    """What a proposer offers for one step."""

    tokens: np.ndarray  #: the drafts, shape (n,), or (m, n) for several sequences
    rows: np.ndarray  #: the rows they were drawn from, shape (n, V) or (m, n, V)
    passes: int  #: draft passes spent (a pass whose row stopped the draft included)
    #: A token tree (:class:`speclib.core.tree.TokenTree`): then ``tokens`` are its nodes' tokens
    #: and ``rows[i]`` the row node ``i`` was drawn from; None for a chain.
    tree: TokenTree | None = None


@runtime_checkable
class Proposer(Protocol):
    """What the loop asks of a proposer (see the module docstring)."""

    def start(self, prompt: np.ndarray, vocab_size: int) -> None: ...

    def propose(self, text: np.ndarray, k: int, policy, choose, timings: dict | None) -> Proposal: ...

    def accept(self, length: int) -> None: ...


def check_proposal(proposal: object, k: int, vocab_size: int, name: str = "draft") -> Proposal:
    """What a proposer returned, if it is a :class:`Proposal` the loop can verify; else an error naming it.

    The loop checks what a proposer that is not speclib's own returns, at every step:
    a :class:`Proposal`; ``tokens`` an integer array of shape ``(n,)`` or ``(m, n)`` with
    ``n <= k`` and every id in the vocabulary; ``rows`` of shape ``tokens.shape + (V,)``,
    each a probability distribution under which its token has positive probability (the
    verifier divides by it); ``passes`` an integer >= 0.

    Examples
    --------
    >>> check_proposal(Proposal(np.array([1]), np.array([[0.5, 0.5]]), 1), k=2, vocab_size=2).tokens
    array([1])
    >>> check_proposal((np.array([1]), None, 1), k=2, vocab_size=2)
    Traceback (most recent call last):
    TypeError: draft: propose() returned tuple; expected a speclib.core.proposers.Proposal (tokens, rows, passes)
    """
    who = f"{name}: propose()"
    if not isinstance(proposal, Proposal):
        raise TypeError(f"{who} returned {type(proposal).__name__}; expected a speclib.core.proposers.Proposal "
                        "(tokens, rows, passes)")
    tokens, rows, passes = proposal[:3]
    if not isinstance(tokens, np.ndarray) or tokens.dtype.kind not in "iu" or tokens.ndim not in (1, 2):
        raise TypeError(f"{who} returned tokens of type {type(tokens).__name__}"
                        f"{f' (dtype {tokens.dtype}, shape {tokens.shape})' if isinstance(tokens, np.ndarray) else ''}; "
                        "expected an integer array of shape (n,) or (m, n)")
    tree = proposal.tree
    if tree is not None:  # a token tree: its nodes are the drafts, its depth is bounded by k
        if not isinstance(tree, TokenTree) or not isinstance(tokens, np.ndarray) or tokens.ndim != 1 \
                or not np.array_equal(tree.tokens, tokens):
            raise ValueError(f"{who} returned a tree whose nodes are not its tokens; expected "
                             "Proposal(tree.tokens, rows, passes, tree) with tree a speclib.core.tree.TokenTree")
        try:  # parents before children, siblings distinct
            token_tree(tree.tokens, tree.parents, tree.draws)
        except (TypeError, ValueError) as error:
            raise type(error)(f"{who} returned a malformed tree: {error}") from None
        if tree.depth > k:
            raise ValueError(f"{who} returned a tree of depth {tree.depth}; the policy allowed at most {k}")
    elif tokens.shape[-1] > k:
        raise ValueError(f"{who} returned {tokens.shape[-1]} drafts per sequence; the policy allowed at most {k}")
    if tokens.size and (tokens.min() < 0 or tokens.max() >= vocab_size):
        bad = int(tokens.min()) if tokens.min() < 0 else int(tokens.max())
        raise ValueError(f"{who} returned token {bad}, out of range for a vocabulary of {vocab_size}")
    if not isinstance(rows, np.ndarray) or rows.dtype.kind not in "fiu" or rows.shape != tokens.shape + (vocab_size,):
        raise ValueError(f"{who} returned rows of shape {np.shape(rows)} for tokens of shape {tokens.shape}; "
                         f"expected {tokens.shape + (vocab_size,)}, the row each draft was drawn from")
    if tokens.size:
        flat, drafted = rows.reshape(-1, vocab_size), tokens.reshape(-1)
        sums = flat.sum(axis=1)
        if not (flat.min() >= 0.0 and np.abs(sums - 1.0).max() <= SUM_TOLERANCE):
            raise ValueError(f"{who} returned rows that are not probability distributions (NaN, a negative "
                             "entry, or a sum other than 1)")
        if not flat[np.arange(drafted.size), drafted].min() > 0.0:
            raise ValueError(f"{who} returned a draft that has probability 0 under its own row; rows must be "
                             "the distributions the drafts were drawn from")
    if type(passes) is not int:
        passes = as_int(passes, f"{name}: propose() passes")
    if passes < 0:
        raise ValueError(f"{who} returned passes = {passes}; the draft passes spent are >= 0")
    return proposal


def _draft_length(k: object) -> int:
    """``k`` checked as the loop's draft length: an int in [0, MAX_DRAFT_LENGTH] (a fast path for a Python int)."""
    if type(k) is int and 0 <= k <= MAX_DRAFT_LENGTH:
        return k
    return as_int(k, "k", minimum=0, maximum=MAX_DRAFT_LENGTH, why="the longest draft speclib computes with")


def _loop_text(text: object) -> np.ndarray:
    """``text`` as the loop passes it: a 1-D int64 array (its ids were checked when it was fed)."""
    if type(text) is np.ndarray and text.dtype == np.int64 and text.ndim == 1:
        return text
    return as_tokens(text, "text")


def _check_policy(policy: object) -> None:
    if not callable(getattr(policy, "keep_drafting", None)):
        raise TypeError(f"policy: expected a draft-length policy with keep_drafting(p, x), got {type(policy).__name__}")


def check_model(model: object, name: str) -> int:
    """The vocabulary size of ``model``, or a TypeError naming the argument."""
    if not callable(model) or not hasattr(model, "vocab_size"):
        raise TypeError(f"{name}: expected a model (a callable with a vocab_size attribute), got {type(model).__name__}")
    return as_int(model.vocab_size, f"{name}.vocab_size", minimum=1)


class DraftModel:
    """Draft with a language model: one cached draft pass and one sampled token per draft.

    ``name`` labels the model in error messages and in the loop's ``timings``.
    """

    trusted = True  #: its proposals are well-formed by construction: the loop does not check them

    def __init__(self, model: Callable, name: str = "draft") -> None:
        if not isinstance(name, str):
            raise TypeError(f"name: expected the model's name (a string), got {type(name).__name__}")
        self.vocab_size = check_model(model, name)
        self.model, self.name = model, name
        self.cache = None

    def start(self, prompt: np.ndarray, vocab_size: int) -> None:
        vocab_size = as_int(vocab_size, "vocab_size", minimum=1)
        if self.vocab_size != vocab_size:
            raise ValueError(f"{self.name}: vocabulary of {self.vocab_size} tokens differs from the target's {vocab_size}")
        as_tokens(prompt, "prompt", vocab_size, allow_empty=False)
        self.cache = model_cache(self.model, self.name)

    def propose(self, text: np.ndarray, k: int, policy, choose, timings: dict | None) -> Proposal:
        cache, name = self.cache, self.name
        if cache is None:
            raise RuntimeError(f"{name}: propose() before start(): a generation begins with start(prompt, vocab_size)")
        text, k = _loop_text(text), _draft_length(k)
        _check_policy(policy)
        tokens = np.empty(k, dtype=np.int64)
        rows = np.empty((k, self.vocab_size))
        feed, n = text[len(cache):], 0  # the first pass also feeds what the draft has not seen
        for _ in range(k):
            p = self.row(extend_checked(cache, feed, name, timings)[-1])
            x = choose.token(self.pick(p))
            keep = policy.keep_drafting(p, x)
            if keep is not True and keep is not False:
                keep = _policy_answer(keep, policy)
            if not keep:
                return Proposal(tokens[:n], rows[:n], n + 1)
            tokens[n], rows[n] = x, self.report(p)
            n += 1
            feed = tokens[n - 1:n]
        return Proposal(tokens, rows, k)

    def accept(self, length: int) -> None:
        if type(length) is not int or length < 0:
            length = as_int(length, "length", minimum=0)
        self.cache.rollback(min(len(self.cache), length))

    # The three rows of a draft, all the model's row here.  The bug zoo
    # (speclib.book.broken) overrides them to build its faulty proposers.
    @staticmethod
    def row(p: np.ndarray) -> np.ndarray:
        """The draft's row for the next token, from the model's row."""
        return p

    @staticmethod
    def pick(p: np.ndarray) -> np.ndarray:
        """The row the token is actually drawn from."""
        return p

    @staticmethod
    def report(p: np.ndarray) -> np.ndarray:
        """The row the verifier is told the token came from."""
        return p

    def __repr__(self) -> str:
        return f"DraftModel({self.model!r})"


def _policy_answer(keep: object, policy: object) -> bool:
    """What ``policy.keep_drafting`` returned, if it is a truth value (numpy's included)."""
    if isinstance(keep, np.bool_):
        return bool(keep)
    raise TypeError(f"policy: {getattr(policy, 'name', type(policy).__name__)!s}.keep_drafting() returned {keep!r} "
                    f"({type(keep).__name__}); expected True or False")


def lookup_draft(tokens: np.ndarray, k: int, n_max: int = 3, n_min: int = 1) -> np.ndarray:
    """Propose up to ``k`` tokens by finding the last ``n`` tokens earlier in the text.

    For ``n = n_max, ..., n_min``: find the most recent earlier position where the final
    ``n`` tokens occurred, and propose the (at most ``k``) tokens that followed it.  The
    first ``n`` with a match wins.  No match: an empty proposal.

    Examples
    --------
    >>> lookup_draft([5, 6, 7, 8, 1, 5, 6], k=3)
    array([7, 8, 1])
    >>> lookup_draft([1, 2, 3], k=3)
    array([], dtype=int64)
    """
    tokens = as_tokens(tokens, "tokens")
    if tokens.size and tokens.min() < 0:
        raise ValueError(f"tokens: token ids are >= 0, got {int(tokens.min())} at position {int(np.argmin(tokens))}")
    k = as_int(k, "k", minimum=1)
    n_max = as_int(n_max, "n_max", minimum=1)
    n_min = as_int(n_min, "n_min", minimum=1)
    if n_min > n_max:
        raise ValueError(f"n_min: must be <= n_max ({n_max}), got {n_min}")
    return _lookup(tokens, k, n_max, n_min)


def _lookup(tokens: np.ndarray, k: int, n_max: int, n_min: int) -> np.ndarray:
    size = tokens.size
    for n in range(min(n_max, size - 1), n_min - 1, -1):
        tail = tokens[size - n:]
        # Windows starting at 0 .. size - n - 1: every occurrence that ends before the tail does.
        windows = np.lib.stride_tricks.sliding_window_view(tokens[:size - 1], n)
        hits = np.flatnonzero((windows == tail).all(axis=1))
        if hits.size:
            start = hits[-1] + n
            return tokens[start:start + k].copy()
    return np.zeros(0, dtype=np.int64)


class PromptLookup:
    """Prompt lookup: propose what followed the last earlier occurrence of the text's tail.

    No draft model and no draft pass.  The proposal is deterministic, a draft whose rows are
    point masses, so the ratio rule verifies it: keep ``x`` with probability ``q(x)``, else
    draw from ``q`` without ``x``.  Without a match the step is a plain one.

    The drafts are those of :func:`lookup_draft`, but found in an index of the text's
    n-grams (``n_min`` to ``n_max`` tokens: where each last occurred) that grows with the
    text, so a step costs the same at the 100th token as at the 25,000th (the whole
    generation is linear in its length, where searching the text afresh is quadratic).

    Examples
    --------
    >>> lookup = PromptLookup()
    >>> lookup.start(np.array([5, 6, 7, 8, 1, 5, 6]), vocab_size=10)
    >>> lookup.propose(np.array([5, 6, 7, 8, 1, 5, 6]), 3, None, None, None).tokens
    array([7, 8, 1])
    """

    trusted = True  #: its proposals are well-formed by construction: the loop does not check them

    def __init__(self, n_max: int = 3, n_min: int = 1) -> None:
        self.n_max = as_int(n_max, "n_max", minimum=1, maximum=MAX_DRAFT_LENGTH)
        self.n_min = as_int(n_min, "n_min", minimum=1)
        if self.n_min > self.n_max:
            raise ValueError(f"n_min: must be <= n_max ({self.n_max}), got {self.n_min}")
        self.vocab_size = None
        self._reset()

    def _reset(self) -> None:
        self._seen: list[int] = []  # the text indexed so far
        # For each n: n-gram -> starts of its occurrences, oldest first.  Indexed are the
        # windows that end before the last token seen (the text's tail must not match itself).
        self._index: dict[int, dict[tuple, list[int]]] = {n: {} for n in range(self.n_min, self.n_max + 1)}

    def start(self, prompt: np.ndarray, vocab_size: int) -> None:
        self.vocab_size = as_int(vocab_size, "vocab_size", minimum=1)
        as_tokens(prompt, "prompt", self.vocab_size, allow_empty=False)
        self._reset()

    def _grow(self, text: np.ndarray) -> None:
        """Index the windows that ``text`` adds to what was seen (it extends what was seen)."""
        seen, old, size = self._seen, len(self._seen), text.size
        if size < old or (old and int(text[old - 1]) != seen[old - 1]):
            self._reset()  # another text than the one indexed: start again
            seen, old = self._seen, 0
        seen.extend(text[old:].tolist())
        for n, index in self._index.items():
            # Windows whose last token is at position old - 1 .. size - 2.
            for s in range(max(0, old - n), size - n):
                index.setdefault(tuple(seen[s:s + n]), []).append(s)

    def _shrink(self, length: int) -> None:
        """Forget the text from position ``length`` on."""
        seen = self._seen
        for n, index in self._index.items():
            for s in range(len(seen) - n - 1, max(-1, length - n - 1), -1):
                key = tuple(seen[s:s + n])
                starts = index[key]
                starts.pop()
                if not starts:
                    del index[key]
        del seen[length:]

    def propose(self, text: np.ndarray, k: int, policy, choose, timings: dict | None) -> Proposal:
        if self.vocab_size is None:
            raise RuntimeError("PromptLookup: propose() before start(): a generation begins with "
                               "start(prompt, vocab_size)")
        text, k = _loop_text(text), _draft_length(k)
        self._grow(text)
        size, seen = text.size, self._seen
        tokens = np.zeros(0, dtype=np.int64)
        if k:
            for n in range(min(self.n_max, size - 1), self.n_min - 1, -1):
                starts = self._index[n].get(tuple(seen[size - n:]))
                if starts:
                    begin = starts[-1] + n
                    tokens = text[begin:begin + k].copy()
                    break
        rows = np.zeros((tokens.size, self.vocab_size))
        rows[np.arange(tokens.size), tokens] = 1.0
        return Proposal(tokens, rows, 0)

    def accept(self, length: int) -> None:
        if type(length) is not int or length < 0:
            length = as_int(length, "length", minimum=0)
        if length < len(self._seen):
            self._shrink(length)

    def __repr__(self) -> str:
        return f"PromptLookup(n_max={self.n_max}, n_min={self.n_min})"


class MultiDraft:
    """``m`` independent draft sequences of up to ``k`` tokens per step, from one draft model.

    Each sequence is drawn afresh from the same context (``m * k`` draft passes per step).
    The proposal is the token tree the sequences make (:func:`speclib.core.tree.tree_from_paths`):
    sequences that share a prefix share its nodes, so the target scores each node once, all
    in one pass; the tree remembers that two sequences drawing the same token drew two
    candidates.  The loop verifies it with :func:`speclib.core.variants.multi_draft_verify`
    unless told otherwise.  The policy's ``keep_drafting`` is not consulted: every sequence
    has the step's full length.
    """

    trusted = True  #: its proposals are well-formed by construction: the loop does not check them

    def __init__(self, model: Callable, m: int, name: str = "draft") -> None:
        self.draft = DraftModel(model, name)
        self.m = as_int(m, "m", minimum=1)
        self.vocab_size = self.draft.vocab_size

    @property
    def verifier(self):
        from .variants import multi_draft_verify  # the rule that goes with this proposer

        return multi_draft_verify

    def start(self, prompt: np.ndarray, vocab_size: int) -> None:
        self.draft.start(prompt, vocab_size)

    def propose(self, text: np.ndarray, k: int, policy, choose, timings: dict | None) -> Proposal:
        cache, name, m = self.draft.cache, self.draft.name, self.m
        if cache is None:
            raise RuntimeError(f"{name}: propose() before start(): a generation begins with start(prompt, vocab_size)")
        text, k = _loop_text(text), _draft_length(k)
        tokens = np.empty((m, k), dtype=np.int64)
        rows = np.empty((m, k, self.vocab_size))
        if k == 0:
            return Proposal(tokens, rows, 0)
        first = extend_checked(cache, text[len(cache):], name, timings)[-1]
        for j in range(m):
            cache.rollback(text.size)
            p = first
            for i in range(k):
                if i:
                    p = extend_checked(cache, tokens[j, i - 1:i], name, timings)[0]
                tokens[j, i], rows[j, i] = choose.token(p), p
        cache.rollback(text.size)  # the cache holds one branch of the tree: keep only the text
        tree = tree_from_paths(tokens)
        nodes = sequence_nodes(tree, m)
        # A node's row: the row the first sequence through its parent drew from there (the
        # sequences through one node share its context, hence its row).
        first = {}  # node -> first sequence through it
        node_rows = np.empty((tree.size, self.vocab_size))
        for i in range(k):
            for j in range(m):
                node = int(nodes[j, i])
                if node not in first:
                    first[node] = j
                    node_rows[node] = rows[first[int(nodes[j, i - 1])] if i else 0, i]
        return Proposal(tree.tokens, node_rows, m * k, tree)

    def accept(self, length: int) -> None:
        self.draft.accept(length)

    def __repr__(self) -> str:
        return f"MultiDraft({self.draft.model!r}, m={self.m})"


class TreeDraft:
    """A token tree from a draft model: ``branching[d]`` children per node at depth ``d``, a chain below.

    At each node the draft gives a row ``p`` (one cached pass per level of the tree, all of
    its nodes at once where the draft's cache scores trees).  Its children are

    * ``sample=False``: the ``b`` most likely tokens of ``p`` (with positive probability),
      chosen deterministically.  Each is proposed as a point mass: its row is ``delta_x``.
    * ``sample=True``: ``b`` tokens drawn from ``p`` without replacement: child ``j`` is a draw
      from ``p`` with the earlier children removed and renormalised, and that is its row.

    Below the levels ``branching`` names, each node has one child, down to depth ``k``:
    ``TreeDraft(model, branching=(2, 2))`` with ``k = 4`` is the tree ``(2, 2, 1, 1)``.
    The loop verifies the tree with :func:`speclib.core.variants.multi_draft_verify`
    (recursive rejection over siblings, each tested against the residual its own row leaves),
    which is exact for both kinds of rows: candidate ``j`` is drawn from its row given the
    candidates before it.  The policy's ``keep_drafting`` is not consulted.

    Examples
    --------
    >>> from speclib.lm.models import markov_pair
    >>> from speclib.core.decoding import speculative_generate
    >>> target, draft = markov_pair(vocab_size=6, draft_noise=0.3, seed=0)
    >>> tokens, stats = speculative_generate(target, TreeDraft(draft, (2, 2)), [0], 12, k=3, rng=0)
    >>> len(tokens), stats.scored_nodes / stats.target_passes <= 2 + 4 + 4
    (12, True)
    """

    trusted = True  #: its proposals are well-formed by construction: the loop does not check them

    def __init__(self, model: Callable, branching: tuple[int, ...] = (2, 2, 1, 1), sample: bool = False,
                 name: str = "draft") -> None:
        self.draft = DraftModel(model, name)
        if isinstance(branching, (str, bytes)) or not hasattr(branching, "__len__") or len(branching) == 0:
            raise TypeError(f"branching: expected a non-empty tuple of children per level, got {branching!r}")
        self.branching = tuple(as_int(b, f"branching[{i}]", minimum=1, maximum=64, why="children of one node")
                               for i, b in enumerate(branching))
        if not isinstance(sample, (bool, np.bool_)):
            raise TypeError(f"sample: expected True or False, got {sample!r} ({type(sample).__name__})")
        self.sample = bool(sample)
        self.vocab_size = self.draft.vocab_size

    @property
    def verifier(self):
        from .variants import multi_draft_verify  # the rule that goes with this proposer

        return multi_draft_verify

    def start(self, prompt: np.ndarray, vocab_size: int) -> None:
        self.draft.start(prompt, vocab_size)

    def levels(self, k: int) -> tuple[int, ...]:
        """Children per node at each depth of a tree ``k`` deep."""
        return (self.branching + (1,) * k)[:k]

    def _children(self, p: np.ndarray, b: int, choose) -> list[tuple[int, np.ndarray]]:
        """``b`` children of a node whose draft row is ``p``, each with the row it is proposed from."""
        out = []
        if not self.sample:
            order = np.argsort(-p, kind="stable")[:b]
            for x in order[p[order] > 0]:
                row = np.zeros_like(p)
                row[x] = 1.0
                out.append((int(x), row))
            return out
        left = p.copy()
        for _ in range(b):
            total = left.sum()
            if total <= 0:
                break
            row = left / total
            x = choose.token(row)
            out.append((int(x), row))
            left[x] = 0.0
        return out

    def propose(self, text: np.ndarray, k: int, policy, choose, timings: dict | None) -> Proposal:
        cache, name = self.draft.cache, self.draft.name
        if cache is None:
            raise RuntimeError(f"{name}: propose() before start(): a generation begins with start(prompt, vocab_size)")
        text, k = _loop_text(text), _draft_length(k)
        if callable(getattr(cache, "grow_tree", None)) and getattr(cache, "scores_trees", True) and k:
            return self._propose_growing(cache, name, text, k, choose, timings)
        tokens, parents, rows = [], [], []
        frontier, passes, scored = [-1], 0, None
        for b in self.levels(k):
            scored = TokenTree(np.array(tokens, dtype=np.int64), np.array(parents, dtype=np.int64),
                               np.arange(len(tokens)))
            # rows at the root and every node; the pass reads at least the text's last token
            cache.rollback(min(len(cache), text.size - 1))
            p_rows = score_tree(cache, text, scored, name, timings)
            passes += 1
            new = []
            for node in frontier:
                for x, row in self._children(p_rows[node + 1], b, choose):
                    tokens.append(x)
                    parents.append(node)
                    rows.append(row)
                    new.append(len(tokens) - 1)
            frontier = new
        if passes:  # keep the text read (the next step reads only what follows it), forget the tree
            keep_branch(cache, text.size, scored, -1)
        tree = TokenTree(np.array(tokens, dtype=np.int64), np.array(parents, dtype=np.int64), np.arange(len(tokens)))
        if not tokens:
            return Proposal(np.zeros(0, dtype=np.int64), np.zeros((0, self.vocab_size)), passes)
        return Proposal(tree.tokens, np.array(rows), passes, tree)

    def _propose_growing(self, cache, name: str, text: np.ndarray, k: int, choose, timings) -> Proposal:
        """The same tree from a cache that grows a pending tree: each node goes through the draft once.

        The first pass reads the text the cache lacks (at least its last token) as a pending
        chain; each later pass adds one level below it (``grow_tree``) and returns its rows.
        The cache then keeps the text and forgets the tree: the next step reads only the
        tokens written since.
        """
        cache.rollback(min(len(cache), text.size - 1))
        feed = text[len(cache):]
        f = feed.size
        t0 = time.perf_counter()
        p_frontier = [cache.extend_tree(feed, np.arange(-1, f - 1))[-1]]
        tokens, parents, rows, frontier, passes = [], [], [], [-1], 1
        levels = self.levels(k)
        for d, b in enumerate(levels):
            new = []
            for node, p in zip(frontier, p_frontier):
                for x, row in self._children(p, b, choose):
                    tokens.append(x)
                    parents.append(node)
                    rows.append(row)
                    new.append(len(tokens) - 1)
            frontier = new
            if d + 1 < len(levels) and frontier:  # rows below this level: one more pass
                grown = np.array([f - 1 if parents[i] < 0 else f + parents[i] for i in frontier])
                p_frontier = list(cache.grow_tree(np.array([tokens[i] for i in frontier]), grown))
                passes += 1
        cache.accept_tree(f - 1)  # keep the text read (the next step reads what follows it), forget the tree
        if timings is not None:
            seconds = time.perf_counter() - t0
            timings[name] = timings.get(name, 0.0) + seconds
        if not tokens:
            return Proposal(np.zeros(0, dtype=np.int64), np.zeros((0, self.vocab_size)), passes)
        tree = TokenTree(np.array(tokens, dtype=np.int64), np.array(parents, dtype=np.int64), np.arange(len(tokens)))
        return Proposal(tree.tokens, np.array(rows), passes, tree)

    def accept(self, length: int) -> None:
        self.draft.accept(length)

    def __repr__(self) -> str:
        return f"TreeDraft({self.draft.model!r}, branching={self.branching}, sample={self.sample})"
