"""Proposers (speclib.core.proposers): what each one proposes, and what its draft reads to do it.

Checked against what the docstrings promise: a top-``b`` tree's children are the ``b`` likeliest
tokens with positive probability; a sampled tree's children are drawn without replacement,
each proposed with the draft's row less the siblings before it; prompt lookup proposes what
:func:`lookup_draft` finds in the text it is asked about, whatever it was asked before; a tree
draft's model reads every token of the text once (not the whole text at every step).
"""

from __future__ import annotations

import numpy as np
import pytest

from speclib.core.decoding import prepare_run
from speclib.core.policies import FixedK
from speclib.core.proposers import PromptLookup, TreeDraft, lookup_draft
from speclib.core.sampling import as_chooser
from speclib.core.tree import depths, token_tree
from speclib.lm.models import FixedContextModel
from speclib.lm.transformer import KVCache, TransformerConfig, random_transformer


def test_top_b_children_are_the_likeliest_tokens_with_positive_probability():
    # Two tokens of five have positive probability: a (3, 3) tree has 2 children per node,
    # 2 + 4 nodes, each proposed as a point mass on its token.
    draft = FixedContextModel(np.array([0.0, 0.6, 0.0, 0.4, 0.0]))
    proposer = TreeDraft(draft, (3, 3))
    proposer.start(np.array([0]), 5)
    prop = proposer.propose(np.array([0]), 2, FixedK(2), as_chooser(0), None)
    tree = prop.tree
    assert tree.size == 6 and sorted(tree.tokens.tolist()) == [1, 1, 1, 3, 3, 3]
    assert tree.tokens[tree.parents == -1].tolist() == [1, 3]  # likeliest first
    np.testing.assert_array_equal(prop.rows, np.eye(5)[tree.tokens])
    # with three tokens possible, three children
    wide = TreeDraft(FixedContextModel(np.array([0.2, 0.5, 0.0, 0.3, 0.0])), (3,))
    wide.start(np.array([0]), 5)
    assert wide.propose(np.array([0]), 1, FixedK(1), as_chooser(0), None).tree.tokens.tolist() == [1, 3, 0]


def test_sampled_children_are_drawn_without_replacement():
    p = np.array([0.4, 0.3, 0.2, 0.1])
    proposer = TreeDraft(FixedContextModel(p), (3,), sample=True)
    proposer.start(np.array([0]), 4)
    for seed in range(30):
        prop = proposer.propose(np.array([0]), 1, FixedK(1), as_chooser(seed), None)
        tree = prop.tree
        token_tree(tree.tokens, tree.parents, tree.draws)  # siblings distinct, else an error
        assert tree.size == 3
        for j in range(3):  # child j: p without the siblings drawn before it, renormalised
            want = p.copy()
            want[tree.tokens[:j]] = 0.0
            np.testing.assert_allclose(prop.rows[j], want / want.sum())


def test_prompt_lookup_proposes_what_lookup_draft_finds_whatever_the_text():
    # One PromptLookup asked about texts that grow, shrink (a rejection), change into another
    # text, and start again: every proposal is lookup_draft's on that text.
    rng = np.random.default_rng(3)
    lookup = PromptLookup(n_max=3)
    base = rng.integers(0, 4, 60)
    lookup.start(base[:5], 4)
    texts = [base[:n] for n in range(5, 40, 3)]
    texts.append(base[:30])  # rolled back ...
    other = base[:45].copy()
    other[:20] = rng.integers(0, 4, 20)
    other[29] = base[29] + 1 if base[29] < 3 else 0  # ... and another text, differing at its last seen token
    texts += [other[:n] for n in range(35, 46, 2)]
    for text in texts:
        got = lookup.propose(text, 4, None, None, None).tokens
        assert got.tolist() == lookup_draft(text, 4, 3).tolist(), text.size
        lookup.accept(text.size)
    # a new generation (start) after a text that agrees with the new prompt only at its end
    fresh = rng.integers(0, 4, 45)
    fresh[-2:] = other[43:45]
    lookup.start(fresh, 4)
    for n in (45, 47):
        text = np.concatenate([fresh, [1, 2]])[:n]
        assert lookup.propose(text, 4, None, None, None).tokens.tolist() == lookup_draft(text, 4, 3).tolist()


class _NoGrowModel:
    """The transformer behind a cache that scores trees but cannot grow one (as the Hugging Face adapter)."""

    def __init__(self, model):
        self.model, self.vocab_size = model, model.vocab_size

    def __call__(self, tokens):
        return self.model(tokens)

    def cache(self):
        return _NoGrowCache(self.model)


class _NoGrowCache(KVCache):
    grow_tree = None  # TreeDraft then scores its tree level by level


@pytest.mark.parametrize("how", ["grow", "levels"])
def test_a_tree_draft_reads_each_token_once(how):
    # Hand count of the draft's tokens run through its network (block 64: no window move).  Each
    # step reads what its cache lacks, the tokens the previous step emitted (the prompt first),
    # and the tree's nodes above its deepest level: once when the cache grows the tree, and once
    # per level below them when the tree is scored level by level.
    cfg = TransformerConfig(vocab_size=7, block_size=64, d_model=8, n_layers=1, n_heads=2)
    target, model = random_transformer(cfg, seed=1), random_transformer(cfg, seed=2)
    draft = model if how == "grow" else _NoGrowModel(model)
    proposer = TreeDraft(draft, (2, 2))
    run = prepare_run(target, proposer, [1, 2, 3], 30, 3)
    trees = []
    inner = proposer.propose
    proposer.propose = lambda *args: trees.append(inner(*args)) or trees[-1]
    choose = as_chooser(0)
    while not run.done:
        run.step(choose)
    cache = proposer.draft.cache
    cache = getattr(cache, "cache", cache)  # a user's cache is read through the loop's check
    lacked = [3] + run.stats.tokens_per_step[:-1]
    want = 0
    for f, prop in zip(lacked, trees):
        per_depth = np.bincount(depths(prop.tree.parents), minlength=prop.tree.depth + 1)[1:]
        if how == "grow":  # the text, then each level but the last once
            want += f + int(per_depth[:-1].sum())
        else:  # level l reads the text and the levels above it
            want += sum(f + int(per_depth[:level].sum()) for level in range(prop.tree.depth))
    assert cache.tokens_computed == want
