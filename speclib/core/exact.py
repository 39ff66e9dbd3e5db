"""The exact law of the decoding loop, computed by running that loop along every branch.

Every random choice of :func:`speclib.core.decoding.speculative_generate` (each draft token,
each accept / reject coin, each correction and bonus token) goes through a chooser.
:class:`Replay` is a chooser that follows a script of choices and records the probability
of the path it takes; :func:`output_distribution` runs the loop's own step once for every
path of its random choices (merging paths that leave the same state) and adds up the
probabilities of the outputs.  The result is the exact
output distribution of *the code that ships*, for every proposer, verifier, draft-length
policy and faulty part plugged into the loop, and it turns "the output follows the target"
from a statistical claim into an identity that can be checked to 1e-12:

1. :func:`output_distribution` is the distribution of the first ``length`` tokens that
   ``speculative_generate`` emits;
2. :func:`target_sequence_distribution` is the target's autoregressive distribution over
   the same sequences.  The theorem says the two arrays are equal;
3. :func:`total_variation` and :func:`max_abs_error` measure the gap (zero for an exact
   decoder, the size of the damage for a faulty one).
"""

from __future__ import annotations

import copy
import itertools
import math
import pickle
from typing import Callable

import numpy as np

from .._validate import MAX_DRAFT_LENGTH, as_int, as_tokens, model_rows
from .decoding import SpeculativeRun, _check_model, prepare_run

#: Largest number of sequences the enumerator will list (V ** length).
MAX_SEQUENCES = 200_000

#: Largest number of paths (runs of one step) :func:`output_distribution` follows.
MAX_PATHS = 500_000


def _check_sizes(vocab: int, length: int, name: str = "length") -> None:
    """Refuse ``V ** length > MAX_SEQUENCES`` without computing the power (logarithms)."""
    if vocab > 1 and length * math.log(vocab) > math.log(MAX_SEQUENCES) + 1e-9:
        raise ValueError(
            f"{name}: enumerating {vocab}**{length} sequences is too many (limit {MAX_SEQUENCES:,}); "
            "use a smaller vocabulary or length"
        )


class Replay:
    """A chooser that replays a script of choices, for exhaustive enumeration.

    Choice ``i`` takes the ``script[i]``-th possible outcome (outcomes of probability 0 are
    not possible); past the script it takes the first one and notes how many others there
    were, so that :meth:`branches` can list the paths not yet taken.  ``prob`` is the
    probability of the path taken so far.
    """

    def __init__(self, script: list[int]) -> None:
        if not isinstance(script, (list, tuple)):
            raise TypeError(f"script: expected a list of choice indices (ints >= 0), got {type(script).__name__}")
        for i, pick in enumerate(script):
            if type(pick) is not int:
                pick = as_int(pick, f"script[{i}]")
            if pick < 0:
                raise ValueError(f"script[{i}]: a choice index is >= 0, got {pick}")
        self.script, self.taken, self.new_choices, self.prob = list(script), [], [], 1.0

    def _pick(self, n_possible: int) -> int:
        i = len(self.taken)
        if i < len(self.script):
            pick = self.script[i]
        else:
            pick = 0
            if n_possible > 1:
                self.new_choices.append((i, n_possible))
        self.taken.append(pick)
        return pick

    def token(self, probs: np.ndarray) -> int:
        probs = np.asarray(probs, dtype=float)
        total = probs.sum()
        if not 0.0 < total < np.inf or probs.min() < 0.0:  # NaN fails the comparisons
            raise ValueError(f"token: asked to draw from a row that is not a distribution (its entries sum to "
                             f"{total:.6g}, the smallest is {probs.min():.6g}; a NaN, infinite, negative or "
                             "all-zero row)")
        possible = np.flatnonzero(probs > 0)
        pick = self._pick(possible.size)
        if pick >= possible.size:
            raise ValueError(f"script: choice {len(self.taken) - 1} takes outcome {pick}, but only "
                             f"{possible.size} are possible")
        x = int(possible[pick])
        self.prob *= probs[x] / total
        return x

    def coin(self, a: float) -> bool:
        a = float(a)
        if not 0.0 <= a <= 1.0:
            raise ValueError(f"accept: returned {a:.6g}; an acceptance probability must lie in [0, 1]")
        if a == 1.0 or a == 0.0:  # no choice to make, so no branch
            return a == 1.0
        pick = self._pick(2)
        if pick > 1:
            raise ValueError(f"script: choice {len(self.taken) - 1} takes outcome {pick} of a coin (0 or 1)")
        heads = pick == 0
        self.prob *= a if heads else 1.0 - a
        return heads

    def branches(self) -> list[list[int]]:
        """Scripts for every path that leaves this one at a choice it met for the first time."""
        return [self.taken[:i] + [j] for i, n in self.new_choices for j in range(1, n)]


def _state_key(run: SpeculativeRun) -> tuple:
    """What the future of a run depends on: its text, its caches' contents and its policy's state."""
    proposer_cache = getattr(run.proposer, "cache", None) or getattr(getattr(run.proposer, "draft", None), "cache", None)
    try:
        policy = pickle.dumps(run.policy)
    except Exception:  # an unpicklable policy: no merging, still exact
        policy = id(run.policy)
    return (run.text[:run.n].tobytes(), run.target_cache.tokens.tobytes(),
            None if proposer_cache is None else proposer_cache.tokens.tobytes(), policy)


def output_distribution(target: Callable, draft: object, prompt: np.ndarray, length: int, k: object,
                        **options) -> np.ndarray:
    """Exact distribution of the ``length`` tokens ``speculative_generate`` emits after ``prompt``.

    The loop's own step (:meth:`speclib.core.decoding.SpeculativeRun.step`) runs along every
    branch of its random choices, with the same ``draft`` (model or proposer), ``k``
    (integer or policy) and ``options`` (``verifier``, ``bonus``).  Paths that leave a step
    in the same state (text, caches, policy) are merged before the next step.

    Examples
    --------
    >>> from speclib.lm.models import markov_pair
    >>> target, draft = markov_pair(vocab_size=3, draft_noise=0.5, seed=0)
    >>> law = output_distribution(target, draft, [0], 2, k=1)
    >>> float(abs(law - target_sequence_distribution(target, [0], 2)).max()) < 1e-12
    True
    """
    vocab = _check_model(target, "target")
    length = as_int(length, "length", minimum=1)
    _check_sizes(vocab, length)
    start, shared = _start(target, draft, prompt, length, k, options)
    out = np.zeros((vocab,) * length)
    budget = [MAX_PATHS]

    def expand(run: SpeculativeRun, prob: float) -> None:
        if run.done:
            out[tuple(int(t) for t in run.tokens)] += prob
            return
        for branch, p_step, _ in _step_outcomes(run, shared, budget):
            expand(branch, prob * p_step)

    expand(start, 1.0)
    return out


def _start(target, draft, prompt, length, k, options) -> tuple[SpeculativeRun, dict]:
    """A fresh run of the loop, and the models its copies share instead of copying."""
    start = prepare_run(target, copy.deepcopy(draft) if hasattr(draft, "propose") else draft, prompt, length,
                        copy.deepcopy(k) if hasattr(k, "draft_length") else k, **options)
    shared = {id(m): m for m in (target, draft, getattr(draft, "model", None),
                                 getattr(getattr(draft, "draft", None), "model", None)) if m is not None}
    return start, shared


def _step_outcomes(run: SpeculativeRun, shared: dict, budget: list) -> list:
    """Every outcome of one step of ``run``: ``(run after the step, probability, verification)``.

    Paths that leave the run in the same state are merged (their verifications agree on
    everything that matters afterwards; the first one is kept).
    """
    outcomes: dict[tuple, list] = {}
    scripts: list[list[int]] = [[]]
    while scripts:
        budget[0] -= 1
        if budget[0] < 0:
            raise ValueError(f"length: more than {MAX_PATHS:,} paths of random choices to enumerate; "
                             "use a smaller vocabulary, length or draft length")
        branch = copy.deepcopy(run, dict(shared))
        choose = Replay(scripts.pop())
        verification = branch.step(choose)
        key = _state_key(branch) + (verification.n_accepted,)
        if key in outcomes:
            outcomes[key][1] += choose.prob
        else:
            outcomes[key] = [branch, choose.prob, verification]
        scripts.extend(choose.branches())
    return list(outcomes.values())


def step_distribution(target: Callable, draft: object, prompt: np.ndarray, k: object,
                      **options) -> dict[tuple[tuple[int, ...], int], float]:
    """Exact law of what the loop's first step emits: ``{(tokens, n_accepted): probability}``.

    The same enumeration as :func:`output_distribution`, stopped after one step: the
    distribution of a block, of its length, or of the number of accepted drafts.

    Examples
    --------
    >>> from speclib.lm.models import markov_pair
    >>> target, draft = markov_pair(vocab_size=3, draft_noise=0.5, seed=0)
    >>> law = step_distribution(target, draft, [0], 2)
    >>> round(float(sum(law.values())), 12), sorted({n for _, n in law})
    (1.0, [0, 1, 2])
    """
    vocab = _check_model(target, "target")
    k_int = as_int(k, "k", minimum=1, maximum=MAX_DRAFT_LENGTH) if not hasattr(k, "draft_length") else None
    start, shared = _start(target, draft, prompt, (k_int or 1) + 1, k, options)
    if k_int is None:  # a policy: room for whatever it drafts
        start.text = np.concatenate([start.text, np.zeros(64, dtype=np.int64)])
    out: dict[tuple, float] = {}
    for branch, prob, verification in _step_outcomes(start, shared, [MAX_PATHS]):
        key = (tuple(int(t) for t in branch.tokens), int(verification.n_accepted))
        out[key] = out.get(key, 0.0) + prob
    return out


def target_sequence_distribution(target: Callable, prefix: np.ndarray, length: int) -> np.ndarray:
    """The target's own probability of every continuation of ``prefix`` of ``length`` tokens.

    Returns
    -------
    ndarray of shape ``(V,) * length``; entry ``[x1, ..., xL]`` is
    ``q(x1 | prefix) q(x2 | prefix, x1) ...``.
    """
    vocab = _check_model(target, "target")
    prefix = as_tokens(prefix, "prefix", vocab, allow_empty=False)
    length = as_int(length, "length", minimum=1)
    _check_sizes(vocab, length)
    out = np.zeros((vocab,) * length)
    for seq in itertools.product(range(vocab), repeat=length):
        full = np.concatenate([prefix, seq])
        rows = model_rows(target, full, "target")[prefix.size - 1 : prefix.size - 1 + length]
        out[seq] = np.prod(rows[np.arange(length), seq])
    return out


def max_abs_error(target: Callable, draft: object, prefix: np.ndarray, k: object, **options) -> float:
    """Largest gap between the loop's and the target's distribution of the first ``k + 1`` tokens.

    ``k`` may be a policy; then pass ``length`` in ``options`` (default ``k + 1``).
    """
    prefix, length = _compared(target, prefix, k, options.pop("length", None))
    spec = output_distribution(target, draft, prefix, length, k, **options)
    return float(np.abs(spec - target_sequence_distribution(target, prefix, length)).max())


def total_variation(target: Callable, draft: object, prefix: np.ndarray, k: object, **options) -> float:
    """Total-variation distance between the loop's and the target's output over ``k + 1`` tokens.

    Zero for a correct verifier; the size of the damage for a faulty one.  ``options`` go to
    :func:`output_distribution` (``verifier``, ``bonus``, and ``length`` to change the
    number of tokens compared).
    """
    prefix, length = _compared(target, prefix, k, options.pop("length", None))
    spec = output_distribution(target, draft, prefix, length, k, **options)
    return float(0.5 * np.abs(spec - target_sequence_distribution(target, prefix, length)).sum())


def _compared(target: Callable, prefix: object, k: object, length: object) -> tuple[np.ndarray, int]:
    """The checked ``prefix`` and number of tokens compared (``k + 1`` unless ``length`` is given)."""
    vocab = _check_model(target, "target")
    prefix = as_tokens(prefix, "prefix", vocab, allow_empty=False)
    if length is not None:
        length = as_int(length, "length", minimum=1)
        _check_sizes(vocab, length)
        return prefix, length
    if hasattr(k, "draft_length"):
        raise TypeError("length: k is a policy, so pass the number of tokens to compare as length=...")
    k = as_int(k, "k", minimum=1, maximum=MAX_DRAFT_LENGTH)
    _check_sizes(vocab, k + 1, "k")
    return prefix, k + 1
