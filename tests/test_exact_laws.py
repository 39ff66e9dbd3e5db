"""The exact law of every proposer shape through every driver, by enumeration of the code that ships.

Shapes: a chain from a draft model, a chain of point masses (prompt lookup), ``m`` draft
sequences handed over as an ``(m, k)`` array (a user's proposer, without a tree), the tree
those sequences make (:class:`MultiDraft`), and top-``b`` or sampled trees (:class:`TreeDraft`).
Drivers: the one loop (:func:`speculative_generate`, enumerated by
:func:`speclib.core.exact.output_distribution`), the batch driver (:func:`batch_generate`,
enumerated here by replaying every branch of one sequence's choices), and a target that
scores a whole tree in one pass (the numpy transformer's cache) or path by path (any other
model).  Targets: a second-order model (its context reaches past the last token, so a row
read for the wrong context shows), the same warped (temperature and top-k, so rows hold
zeros), a warped Markov chain, and transformers at temperatures 0.5 and 0.

Every law must equal the target's to 1e-12 (float64 models) or 1e-6 (float32 transformer
passes computed in differently shaped products); the negative controls show the same
check measuring a faulty rule far above that.
"""

from __future__ import annotations

import functools

import numpy as np
import pytest

from speclib.book import broken
from speclib.core.exact import Replay, output_distribution, target_sequence_distribution
from speclib.core.proposers import MultiDraft, PromptLookup, Proposal, TreeDraft
from speclib.core.variants import batch_generate, multi_draft_verify, total_variation
from speclib.core.warping import warp
from speclib.lm.models import markov_pair
from speclib.lm.transformer import TransformerConfig, random_transformer

EXACT = 1e-12  # float64 models: the laws agree to rounding
FLOAT32 = 1e-6  # float32 transformer rows from differently shaped passes (observed below 1e-7)
DETECTABLE = 1e-3  # the total variation a faulty rule must reach for a control to count
LENGTH = 3
BATCH_LENGTH = 2  # the batch driver's paths are replayed one by one, unmerged: fewer of them


class Sequences:
    """A user's proposer: ``m`` independent draft sequences as an ``(m, k)`` array, no tree.

    Each sequence is drawn afresh from the draft model after the text; ``rows[j, i]`` is the
    row token ``i`` of sequence ``j`` was drawn from.  Not speclib's own: the loop checks
    every proposal, and builds the tree the sequences make itself.
    """

    def __init__(self, model, m: int) -> None:
        self.model, self.m, self.vocab_size = model, m, model.vocab_size

    verifier = staticmethod(multi_draft_verify)

    def start(self, prompt, vocab_size):
        pass

    def propose(self, text, k, policy, choose, timings):
        tokens = np.zeros((self.m, k), dtype=np.int64)
        rows = np.zeros((self.m, k, self.vocab_size))
        for j in range(self.m):
            for i in range(k):
                rows[j, i] = self.model(np.concatenate([text, tokens[j, :i]]))[-1]
                tokens[j, i] = choose.token(rows[j, i])
        return Proposal(tokens, rows, self.m * k)

    def accept(self, length):
        pass


def _second_order():
    """A second-order pair (the draft another model, confidently wrong) on 3 tokens."""
    rng = np.random.default_rng(11)
    q = rng.dirichlet(np.full(3, 0.4), size=(3, 3))
    p = rng.dirichlet(np.full(3, 0.3), size=(3, 3))
    return broken.SecondOrderModel(q), broken.SecondOrderModel(p)


def _markov():
    target, _ = markov_pair(vocab_size=3, draft_noise=0.7, seed=4)
    draft, _ = markov_pair(vocab_size=3, draft_noise=0.0, seed=104)  # a confident draft of another chain
    return target, draft


def _warped(make):
    def pair():
        target, draft = make()
        return warp(target, temperature=0.5, top_k=2), warp(draft, temperature=1.5)
    return pair


TARGETS = {"second-order": _second_order, "second-order-warped": _warped(_second_order),
           "markov-warped": _warped(_markov)}
MATRIX = ["second-order", "second-order-warped"]  # (the Markov chain's: tests/test_tree.py, test_variants.py)
SHAPES = {
    "chain": lambda d: d,
    "lookup": lambda d: PromptLookup(n_max=2),
    "sequences": lambda d: Sequences(d, 2),
    "multi-draft": lambda d: MultiDraft(d, 2),
    "top-b-tree": lambda d: TreeDraft(d, (2, 1)),
    "sampled-tree": lambda d: TreeDraft(d, (2,), sample=True),
}


def gap(target, proposer, prompt, k, length=LENGTH, **options):
    law = output_distribution(target, proposer, prompt, length, k, **options)
    return total_variation(law, target_sequence_distribution(target, prompt, length))


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("pair", MATRIX)
def test_every_shape_is_exact_through_the_loop(pair, shape):
    target, draft = TARGETS[pair]()
    # prompt lookup finds the last "0" earlier and proposes what followed it, "1 0"
    assert gap(target, SHAPES[shape](draft), [2, 0, 1, 0], 2) < EXACT


def test_sequences_read_for_the_wrong_node_are_caught():
    # Negative control for the sequence shape: siblings tested against q itself, not the residual.
    target, draft = _second_order()
    wrong = functools.partial(multi_draft_verify, recursive=False)
    assert gap(target, Sequences(draft, 2), [2, 0, 1, 0], 1, length=2, verifier=wrong) > DETECTABLE


@pytest.mark.parametrize("temperature", [0.5, 0.0])
def test_tree_scoring_targets_are_exact_at_other_temperatures(temperature):
    # The numpy transformer scores a tree in one pass (tree attention) and keeps one branch;
    # block 8 and a prompt of 6: the window moves inside the last steps' trees.
    cfg = TransformerConfig(vocab_size=3, block_size=8, d_model=8, n_layers=1, n_heads=2)
    target = random_transformer(cfg, seed=1).with_temperature(temperature)
    draft = random_transformer(cfg, seed=2).with_temperature(0.7)
    prompt = [0, 1, 2, 0, 1, 2]
    assert gap(target, TreeDraft(draft, (2,)), prompt, 2) < FLOAT32


# --- the batch driver ------------------------------------------------------------------------


def batch_law(sample, vocab: int, length: int) -> np.ndarray:
    """The exact law of ``sample(chooser)``: every branch of its choices replayed (no merging)."""
    law = np.zeros((vocab,) * length)
    scripts = [[]]
    while scripts:
        choose = Replay(scripts.pop())
        law[tuple(int(t) for t in sample(choose))] += choose.prob
        scripts.extend(choose.branches())
    return law


@pytest.mark.parametrize("policy", ["pad", "truncate"])
@pytest.mark.parametrize("pair", ["second-order", "markov-warped"])
def test_the_batch_driver_is_exact_for_each_sequence(pair, policy):
    # Sequence `who` is enumerated while the other samples from a fixed seed: its law given the
    # other's draws must be the target's ("truncate" cuts its blocks where the other's end).
    target, draft = TARGETS[pair]()
    prompts = [[1], [2, 0]]
    for who in (0, 1):
        def sample(choose, verifier=None):
            rng = [choose, 7] if who == 0 else [7, choose]
            outs, _ = batch_generate(target, draft, prompts, BATCH_LENGTH, 2, rng=rng, policy=policy,
                                     verifier=verifier)
            return outs[who]

        want = target_sequence_distribution(target, prompts[who], BATCH_LENGTH)
        assert total_variation(batch_law(sample, 3, BATCH_LENGTH), want) < EXACT
        if who == 0:  # the negative control: a rule that resamples from q after a rejection
            bad = functools.partial(sample, verifier=broken.RESAMPLE_FROM_TARGET.verifier)
            assert total_variation(batch_law(bad, 3, BATCH_LENGTH), want) > DETECTABLE


def test_the_batch_driver_is_exact_at_temperature_half_through_the_batched_pass():
    from speclib.lm.batched import batched_extend

    cfg = TransformerConfig(vocab_size=3, block_size=8, d_model=8, n_layers=1, n_heads=2)
    target = random_transformer(cfg, seed=1).with_temperature(0.5)
    draft = random_transformer(cfg, seed=2).with_temperature(0.7)
    prompts = [[0, 1, 2, 0, 1, 2], [2]]

    def sample(choose):
        return batch_generate(target, draft, prompts, BATCH_LENGTH, 2, rng=[choose, 3],
                              target_pass=batched_extend)[0][0]

    want = target_sequence_distribution(target, prompts[0], BATCH_LENGTH)
    assert total_variation(batch_law(sample, 3, BATCH_LENGTH), want) < FLOAT32

