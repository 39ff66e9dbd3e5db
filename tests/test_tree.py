"""Token trees: one target pass for a whole tree, the cache that keeps one branch, and the window.

Every claim is checked against the plain path: a node's row from a tree pass must equal the
row an ordinary cached pass over that node's own path gives (float32 tolerance), and the
cache after keeping one branch must be the cache of an ordinary pass over that branch.
"""

from __future__ import annotations

import numpy as np
import pytest

from speclib.core.tree import ancestor_mask, path_to, token_tree, tree_from_paths
from speclib.lm.transformer import TransformerConfig, random_transformer

ATOL = 2e-5  # float32 rows computed in differently shaped products

CFG = TransformerConfig(vocab_size=11, block_size=16, d_model=16, n_layers=2, n_heads=2, tied=False)


@pytest.fixture(scope="module")
def model():
    return random_transformer(CFG, seed=3)


def random_tree(rng: np.random.Generator, n: int, vocab: int) -> tuple[np.ndarray, np.ndarray]:
    """A random tree of ``n`` nodes (siblings distinct), parents before children."""
    tokens, parents = [], []
    for i in range(n):
        for _ in range(100):
            p = int(rng.integers(-1, i))
            x = int(rng.integers(vocab))
            if not any(pp == p and xx == x for pp, xx in zip(parents, tokens)):
                break
        tokens.append(x)
        parents.append(p)
    return np.array(tokens), np.array(parents)


def plain_rows(model, prefix, path_tokens):
    cache = model.cache()
    return cache.extend_logits(np.concatenate([prefix, path_tokens]))[len(prefix):]


@pytest.mark.parametrize("prefix_length", [1, 5, 11])
def test_every_node_row_equals_a_plain_pass_over_its_path(model, prefix_length):
    rng = np.random.default_rng(prefix_length)
    for _ in range(6):
        prefix = rng.integers(0, CFG.vocab_size, prefix_length)
        tokens, parents = random_tree(rng, int(rng.integers(1, 9)), CFG.vocab_size)
        cache = model.cache()
        cache.extend(prefix)
        rows = cache.extend_tree_logits(tokens, parents)
        assert len(cache) == prefix_length  # the tree is pending, not fed
        for node in range(tokens.size):
            path = path_to(parents, node)
            want = plain_rows(model, prefix, tokens[path])[-1]
            np.testing.assert_allclose(rows[node], want, atol=ATOL)


def test_a_wrong_mask_is_caught(model):
    """Negative control: letting every node see every earlier node (a causal mask) breaks the rows."""
    rng = np.random.default_rng(0)
    prefix = rng.integers(0, CFG.vocab_size, 4)
    tokens, parents = np.array([1, 2, 3]), np.array([-1, -1, -1])  # three siblings
    cache = model.cache()
    cache.extend(prefix)
    f = cache._filled
    causal = np.triu(np.full((3, f + 3), -np.inf, dtype=np.float32), k=f + 1)
    wrong = model._run(tokens, f, cache._keys, cache._values, None, f + np.zeros(3, dtype=int), causal)
    want = plain_rows(model, prefix, tokens[2:3])[-1]
    assert np.abs(wrong[2] - want).max() > 100 * ATOL
    right = cache.extend_tree_logits(tokens, parents)
    np.testing.assert_allclose(right[2], want, atol=ATOL)


def test_a_chain_tree_gives_exactly_todays_rows(model):
    rng = np.random.default_rng(1)
    prefix, chain = rng.integers(0, CFG.vocab_size, 6), rng.integers(0, CFG.vocab_size, 5)
    a, b = model.cache(), model.cache()
    a.extend(prefix)
    b.extend(prefix)
    tree_rows = a.extend_tree_logits(chain, np.arange(-1, 4))
    np.testing.assert_array_equal(tree_rows, b.extend_logits(chain))
    a.accept_tree(4)
    np.testing.assert_array_equal(a._keys[:, :, :a._filled], b._keys[:, :, :b._filled])


def test_the_kept_branch_is_the_cache_of_a_plain_pass(model):
    rng = np.random.default_rng(2)
    for trial in range(8):
        prefix = rng.integers(0, CFG.vocab_size, int(rng.integers(1, 9)))
        tokens, parents = random_tree(rng, 7, CFG.vocab_size)
        node = int(rng.integers(-1, tokens.size))
        path = path_to(parents, node)
        tree_cache = model.cache(features=True)
        tree_cache.extend(prefix)
        tree_cache.extend_tree(tokens, parents)
        tree_cache.accept_tree(node)
        plain = model.cache(features=True)
        plain.extend(np.concatenate([prefix, tokens[path]]))
        assert tree_cache.tokens.tolist() == plain.tokens.tolist()
        assert (tree_cache._start, tree_cache._filled) == (plain._start, plain._filled)
        f = plain._filled
        np.testing.assert_allclose(tree_cache._keys[:, :, :f], plain._keys[:, :, :f], atol=ATOL)
        np.testing.assert_allclose(tree_cache._values[:, :, :f], plain._values[:, :, :f], atol=ATOL)
        np.testing.assert_allclose(tree_cache.features, plain.features, atol=ATOL)
        # ... and extending both afterwards gives the same rows, across a window move
        more = rng.integers(0, CFG.vocab_size, 12)
        np.testing.assert_allclose(tree_cache.extend_logits(more), plain.extend_logits(more), atol=ATOL)


def test_a_tree_across_a_window_move_is_scored_path_by_path(model):
    """Block 16: after 14 tokens, nodes at depth 3 are read through the next window."""
    rng = np.random.default_rng(4)
    prefix = rng.integers(0, CFG.vocab_size, 14)
    tokens, parents = np.array([1, 2, 3, 4, 5]), np.array([-1, 0, 1, -1, 3])
    cache = model.cache()
    cache.extend(prefix)
    before = cache.tokens_computed
    rows = cache.extend_tree_logits(tokens, parents)
    assert cache.tokens_computed - before > tokens.size  # two paths, each fed on its own
    for node in range(tokens.size):
        want = plain_rows(model, prefix, tokens[path_to(parents, node)])[-1]
        np.testing.assert_allclose(rows[node], want, atol=ATOL)
    cache.accept_tree(2)
    plain = model.cache()
    plain.extend(np.concatenate([prefix, [1, 2, 3]]))
    more = np.array([7, 8, 9])
    np.testing.assert_allclose(cache.extend_logits(more), plain.extend_logits(more), atol=ATOL)


def test_a_pending_tree_is_forgotten_by_extend_and_rollback(model):
    cache = model.cache()
    cache.extend([1, 2])
    cache.extend_tree([3, 4], [-1, -1])
    cache.extend([5])
    with pytest.raises(ValueError, match="no tree is pending"):
        cache.accept_tree(0)
    cache.extend_tree([3, 4], [-1, -1])
    cache.rollback(2)
    with pytest.raises(ValueError, match="no tree is pending"):
        cache.accept_tree(0)
    cache.extend_tree([3, 4], [-1, -1])
    with pytest.raises(ValueError, match="node: must be <= 1"):
        cache.accept_tree(2)


def test_bad_trees_are_refused(model):
    cache = model.cache()
    with pytest.raises(ValueError, match="parents: node 1 has parent 1"):
        cache.extend_tree([1, 2], [-1, 1])
    with pytest.raises(ValueError, match="parents: expected one parent per node"):
        cache.extend_tree([1, 2], [-1])
    with pytest.raises(TypeError, match="parents: expected integer"):
        cache.extend_tree([1, 2], [-1.0, 0.5])
    with pytest.raises(ValueError, match="siblings must differ"):
        token_tree([1, 1], [-1, -1])


def test_tree_structures():
    tree = tree_from_paths([[3, 1], [3, 1], [4, 2]])
    assert tree.tokens.tolist() == [3, 1, 4, 2] and tree.parents.tolist() == [-1, 0, -1, 2]
    # the candidates of a node, once per draw, in the order the sequences drew them
    assert tree.children(-1) == [0, 0, 2] and tree.children(0) == [1, 1]
    assert tree.paths() == [[0, 1], [2, 3]] and tree.depth == 2
    assert ancestor_mask(tree.parents).sum() == 6


# --- the window: a rollback behind a move does not re-read -------------------------------------


def test_rollback_behind_a_window_move_reuses_the_earlier_window(model):
    rng = np.random.default_rng(5)
    text = rng.integers(0, CFG.vocab_size, 30)
    cache = model.cache()
    cache.extend(text[:15])  # window 0, 15 slots
    cache.extend(text[15:18])  # positions 16, 17 move the window: 8 tokens re-read
    assert cache.tokens_computed == 18 + 8
    cache.rollback(14)  # behind the move: position 14 is read through window 0 again
    before = cache.tokens_computed
    rows = cache.extend_logits(text[14:17])
    # two tokens through window 0; window 8 kept its slots for positions 8 .. 13: 2 re-read, 1 new
    # (re-reading both windows from scratch, as a cache without the earlier one must, is 14 + 8)
    assert cache.tokens_computed - before == 3 + 2
    fresh = model.cache()
    np.testing.assert_allclose(rows, fresh.extend_logits(text[:17])[14:], atol=ATOL)
    # a rollback that stays inside the earlier window costs nothing but the new tokens
    cache.rollback(15)
    before = cache.tokens_computed
    rows = cache.extend_logits(text[15:16])
    assert cache.tokens_computed - before == 1
    np.testing.assert_allclose(rows[0], model.logits(text[:16])[15], atol=ATOL)


def test_window_reuse_follows_the_text_through_random_rollbacks(model):
    """Random feeds and rollbacks across many window moves: rows always equal a fresh computation."""
    rng = np.random.default_rng(6)
    cache, text = model.cache(), np.zeros(0, dtype=np.int64)
    for _ in range(60):
        if text.size and rng.random() < 0.4:
            keep = int(rng.integers(max(0, text.size - 12), text.size + 1))
            cache.rollback(keep)
            text = text[:keep]
        new = rng.integers(0, CFG.vocab_size, int(rng.integers(1, 6)))
        rows = cache.extend_logits(new)
        text = np.concatenate([text, new])
        np.testing.assert_allclose(rows, model.logits(text)[-new.size:], atol=ATOL)
