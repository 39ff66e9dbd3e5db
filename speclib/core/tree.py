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

from typing import NamedTuple

import numpy as np

from .._validate import as_int, as_tokens


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
