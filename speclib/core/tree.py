"""Token trees: several drafted continuations that share their prefixes, scored in one pass.

A tree drafter (SpecInfer, Medusa, EAGLE-2) proposes a small tree of candidate tokens after
the text.  Node ``i`` holds ``tokens[i]`` and hangs below node ``parents[i]``; ``-1`` is the
root, the last token of the text.  Nodes come in topological order (a parent before its
children) and siblings hold different tokens, so a path of tokens from the root names at
most one node.  A target that supports tree attention scores every node in one pass: node
``i`` sits at position ``len(text) - 1 + depth(i)`` and attends to the text and to its own
ancestors only (:func:`ancestor_mask`), so its row is the row a plain pass over its own path
would give.

:class:`TokenTree` also records the order in which candidates were *drawn* (``draws``): the
exact multi-branch rule (:func:`speclib.core.variants.multi_draft_verify`) tests a node's
candidates in that order, and a draft that sampled the same token twice from one context
drew two candidates that share one node.

Examples
--------
>>> tree = tree_from_paths([[3, 1], [3, 2], [4, 1]])
>>> tree.tokens.tolist(), tree.parents.tolist()
([3, 1, 2, 4, 1], [-1, 0, 0, -1, 3])
>>> depths(tree.parents).tolist(), tree.node_of([3, 2])
([1, 2, 2, 1, 2], 2)
"""

from __future__ import annotations

import time
from typing import NamedTuple

import numpy as np

from .._validate import as_int, as_tokens
from .cache import checked_rows, rows_trusted


def check_parents(parents: object, n: int, name: str = "parents") -> np.ndarray:
    """``parents`` as int64, one per node, each ``-1`` or an earlier node's index, else an error."""
    n = as_int(n, "n", minimum=0)
    arr = None if isinstance(parents, (str, bytes)) else np.asarray(parents)
    if arr is None or (arr.size and arr.dtype.kind not in "iu"):
        raise TypeError(f"{name}: expected integer parent indices, got {parents!r}")
    arr = arr.astype(np.int64).reshape(-1)
    if arr.shape != (n,):
        raise ValueError(f"{name}: expected one parent per node ({n}), got {arr.size}")
    bad = np.flatnonzero((arr < -1) | (arr >= np.arange(n)))
    if bad.size:
        i = int(bad[0])
        raise ValueError(f"{name}: node {i} has parent {int(arr[i])}; a parent must be -1 (the root) "
                         f"or an earlier node (0 .. {i - 1})")
    return arr


def depths(parents: np.ndarray) -> np.ndarray:
    """Depth of every node: 1 for a child of the root, one more than its parent otherwise."""
    out = np.ones(len(parents), dtype=np.int64)
    for i, p in enumerate(parents):
        if p >= 0:
            out[i] = out[p] + 1
    return out


def ancestor_mask(parents: np.ndarray) -> np.ndarray:
    """``mask[i, j]``: node ``j`` is node ``i`` or one of its ancestors (what ``i`` attends to).

    Examples
    --------
    >>> ancestor_mask(np.array([-1, 0, -1])).astype(int).tolist()
    [[1, 0, 0], [1, 1, 0], [0, 0, 1]]
    """
    n = len(parents)
    mask = np.eye(n, dtype=bool)
    for i, p in enumerate(parents):
        if p >= 0:
            mask[i] |= mask[p]
    return mask


def path_to(parents: np.ndarray, node: int) -> list[int]:
    """The nodes from the root's child down to ``node`` (empty for ``node = -1``)."""
    path = []
    while node >= 0:
        path.append(int(node))
        node = parents[node]
    return path[::-1]


def is_chain(parents: np.ndarray) -> bool:
    """True when every node is the child of the one before it: an ordinary block of drafts."""
    return bool(np.array_equal(parents, np.arange(-1, len(parents) - 1)))


class TokenTree(NamedTuple):
    """A drafted token tree (see the module docstring).

    ``draws`` lists node indices in the order the candidates were drawn, a node once per
    draw; the candidates of a node are the entries of ``draws`` whose parent it is, in order.
    """

    tokens: np.ndarray  #: (n,) int64, the token of each node
    parents: np.ndarray  #: (n,) int64, the parent of each node (-1: the last token of the text)
    draws: np.ndarray  #: node indices in the order they were drawn (a node once per draw)

    @property
    def size(self) -> int:
        """Number of nodes (what a tree pass scores)."""
        return int(self.tokens.size)

    @property
    def depth(self) -> int:
        """Length of the longest path (0 for an empty tree)."""
        return int(depths(self.parents).max()) if self.size else 0

    def children(self, node: int) -> list[int]:
        """The candidates below ``node`` (-1: the root), in draw order, repeated once per draw."""
        return [int(c) for c in self.draws if self.parents[c] == node]

    def node_of(self, path: object) -> int:
        """The node a path of tokens from the root ends at (-1 for an empty path)."""
        node = -1
        for x in np.asarray(path, dtype=np.int64).reshape(-1):
            hit = np.flatnonzero((self.parents == node) & (self.tokens == x))
            if hit.size == 0:
                raise ValueError(f"path: token {int(x)} is not a child of node {node}")
            node = int(hit[0])
        return node

    def paths(self) -> list[list[int]]:
        """Every root-to-leaf path, as node indices, leaves in node order."""
        inner = set(int(p) for p in self.parents if p >= 0)
        return [path_to(self.parents, i) for i in range(self.size) if i not in inner]


def token_tree(tokens: object, parents: object, draws: object = None, vocab_size: int | None = None) -> TokenTree:
    """A checked :class:`TokenTree` (``draws`` defaults to every node once, in node order).

    Examples
    --------
    >>> token_tree([5, 6, 7], [-1, 0, 0]).children(0)
    [1, 2]
    """
    tokens = as_tokens(tokens, "tokens", vocab_size)
    parents = check_parents(parents, tokens.size)
    if draws is None:
        draws = np.arange(tokens.size)
    else:
        draws = as_tokens(draws, "draws", tokens.size)
        missing = np.setdiff1d(np.arange(tokens.size), draws)
        if missing.size:
            raise ValueError(f"draws: node {int(missing[0])} was never drawn")
    seen = set()
    for i, (x, p) in enumerate(zip(tokens.tolist(), parents.tolist())):
        if (p, x) in seen:
            raise ValueError(f"tokens: node {i} repeats token {x} below node {p}; siblings must differ "
                             "(merge them: one node, drawn twice)")
        seen.add((p, x))
    return TokenTree(tokens, parents, draws)


def tree_from_paths(paths: object) -> TokenTree:
    """Merge draft sequences (shape ``(m, k)``) into one tree: shared prefixes become shared nodes.

    ``draws`` keeps every sequence's candidate, depth by depth and sequence by sequence, so
    that verification can test them in the order the sequences drew them.
    """
    paths = np.asarray(paths)
    if paths.ndim != 2:
        raise ValueError(f"paths: expected draft sequences of shape (m, k), got shape {paths.shape}")
    m, k = paths.shape
    tokens = as_tokens(paths.reshape(-1), "paths")
    node_of, nodes, parents, out = {}, [], [], np.empty((m, k), dtype=np.int64)
    for j in range(m):
        parent = -1
        for i in range(k):
            key = (parent, int(tokens[j * k + i]))
            if key not in node_of:
                node_of[key] = len(nodes)
                nodes.append(key[1])
                parents.append(parent)
            parent = out[j, i] = node_of[key]
    # Node order must put parents first: creation order does (a node is made after its parent).
    return TokenTree(np.array(nodes, dtype=np.int64), np.array(parents, dtype=np.int64), out.T.reshape(-1))


def sequence_nodes(tree: TokenTree, m: int) -> np.ndarray:
    """The node of every sequence at every depth, shape ``(m, k)``, for a tree made by :func:`tree_from_paths`."""
    return tree.draws.reshape(-1, m).T


def score_tree(cache, text: np.ndarray, tree: TokenTree, name: str, timings: dict | None = None) -> np.ndarray:
    """Rows of a cached model after ``text`` and after every node of ``tree``: shape ``(n + 1, V)``.

    Row 0 is the distribution after the text (at the root), row ``i + 1`` the one after
    node ``i``'s path.  The text the cache has not read yet (at least its last token) is fed
    first, as a chain below which the tree hangs.  A cache with ``extend_tree`` (the numpy
    transformer's, the Hugging Face adapter's) scores all of it in one pass and keeps the
    tree pending (:func:`keep_branch` then keeps one branch); any other cache is fed each
    root-to-leaf path in turn and is left holding the text.  ``name`` labels the model in
    errors and in ``timings`` (see :func:`speclib.core.cache.extend_checked`).
    """
    feed = text[len(cache):]
    f = feed.size
    if f == 0:
        raise ValueError(f"{name}: the cache has read the whole text; a tree pass reads at least its last token "
                         "(to score the root)")
    tokens = np.concatenate([feed, tree.tokens])
    parents = np.concatenate([np.arange(-1, f - 1), np.where(tree.parents < 0, f - 1, tree.parents + f)])
    t0 = time.perf_counter() if timings is not None else 0.0
    tree_pass = getattr(cache, "extend_tree", None)
    if callable(tree_pass) and getattr(cache, "scores_trees", True):  # a model may refuse custom masks
        rows = tree_pass(tokens, parents)
        trusted = rows_trusted(cache) and "extend_tree" in vars(type(cache))
    else:
        rows, trusted = _rows_by_paths(cache, tokens, parents, f), rows_trusted(cache)
    if timings is not None:
        seconds = time.perf_counter() - t0
        timings[name] = timings.get(name, 0.0) + seconds
        passes = timings.get("passes")
        if passes is not None:
            passes.append((name, tokens.size, seconds))
    if not trusted:
        rows = checked_rows(rows, name, tokens.size, getattr(cache, "vocab_size", None))
    return rows[f - 1:]


def _rows_by_paths(cache, tokens: np.ndarray, parents: np.ndarray, f: int) -> np.ndarray:
    """Every node's row from one ordinary pass per root-to-leaf path; the cache then holds the ``f`` fed tokens."""
    base, rows, done = len(cache), None, np.zeros(tokens.size, dtype=bool)
    parents = parents.tolist()
    leaves = sorted(set(range(tokens.size)) - set(parents))
    for leaf in leaves:
        path = path_to(parents, leaf)
        cache.rollback(base)
        out = np.asarray(cache.extend(tokens[path]))
        if rows is None:
            rows = np.empty((tokens.size,) + out.shape[1:], dtype=out.dtype)
        fresh = ~done[path]
        rows[np.array(path)[fresh]] = out[fresh]
        done[path] = True
    cache.rollback(base + f)  # every path starts with the fed tokens
    return rows


def keep_branch(cache, text_length: int, tree: TokenTree, node: int) -> None:
    """After :func:`score_tree`: keep the fed text and the branch of ``tree`` ending at ``node`` (-1: none).

    Only a cache that scored the tree in one pass holds it (``accept_tree``); any other
    already holds the text, and is left as it is.
    """
    accept = getattr(cache, "accept_tree", None)
    if callable(accept) and getattr(cache, "scores_trees", True):
        f = text_length - len(cache)
        accept(f - 1 if node < 0 else f + node)
