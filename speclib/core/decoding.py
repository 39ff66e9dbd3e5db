"""The decoding loops: plain autoregressive sampling, and the one speculative loop.

Both take models that follow the protocol of :mod:`speclib.lm.models` and an explicit random
generator, and both return ``(tokens, stats)`` where ``tokens`` are the new tokens only (the
prompt is not repeated) and ``stats`` is a :class:`GenerationStats`.

:func:`speculative_generate` is the only speculative loop in speclib (the vectorized engine
and the reference article's own loop aside).  What varies plugs into it:

* the **proposer** (the ``draft`` argument): a draft model, or any object of
  :mod:`speclib.core.proposers` (prompt lookup, several drafts);
* the **verifier**: :func:`speclib.core.sampling.verify` by default, or typical acceptance,
  exact match, multi-draft recursion, greedy match, or a faulty rule of the bug zoo;
* the **draft-length policy** (the ``k`` argument): an integer, or a policy of
  :mod:`speclib.core.policies` (heuristic, confidence stop, fallback monitor);
* the **caches**: every model is read through the protocol of :mod:`speclib.core.cache`
  (``model.cache()`` when the model has one, a generic recomputing cache otherwise).

Every random choice goes through a chooser (:class:`speclib.core.sampling.Chooser`): a
generator samples, and :func:`speclib.core.exact.output_distribution` replays every branch of
this very loop to get its exact output distribution.
"""

from __future__ import annotations

import functools
import math
import numbers
import time
import types
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from .._validate import MAX_DRAFT_LENGTH, MAX_NEW_TOKENS, as_bool, as_int, as_real, as_tokens
from .cache import checked_rows, extend_checked, model_cache
from .policies import FixedK, _check_controller
from .proposers import DraftModel, Proposal, check_model, check_proposal
from .tree import TokenTree, keep_branch, score_tree, sequence_nodes, tree_from_paths
from .sampling import Sampler, Verification, as_chooser, verify


@dataclass
class GenerationStats:
    """Counters kept by a decoding loop.

    ``draft_verified`` counts the draft tokens the target actually judged: the accepted
    ones plus the first rejected one of each block.  Drafts after a rejection are thrown
    away unjudged; they are *proposed* but neither accepted nor rejected, and counting them
    as rejections (as the reference article does) biases the acceptance rate downwards
    more and more as ``k`` grows.
    """

    tokens_generated: int = 0
    target_passes: int = 0
    draft_passes: int = 0
    draft_proposed: int = 0
    draft_verified: int = 0
    accepted: int = 0
    tokens_per_step: list[int] = field(default_factory=list)
    k_per_step: list[int] = field(default_factory=list)  #: draft length of every step (0: a plain step)
    accepted_per_step: list[int] = field(default_factory=list)
    #: Drafted positions the target scored: a chain's ``k``, a token tree's nodes (each once).
    scored_nodes: int = 0

    @property
    def nodes_per_target_pass(self) -> float:
        """Drafted positions scored per target pass (a tree's nodes; a chain's ``k``)."""
        return self.scored_nodes / self.target_passes if self.target_passes else math.nan

    @property
    def acceptance_rate(self) -> float:
        """Accepted / verified drafts: an estimate of alpha (nan when nothing was verified)."""
        return self.accepted / self.draft_verified if self.draft_verified else math.nan

    @property
    def accepted_per_proposed(self) -> float:
        """Accepted / proposed drafts: the reference article's (biased) "acceptance"."""
        return self.accepted / self.draft_proposed if self.draft_proposed else math.nan

    @property
    def tokens_per_target_pass(self) -> float:
        """Generated tokens per target forward pass (1.0 for plain decoding)."""
        return self.tokens_generated / self.target_passes if self.target_passes else math.nan

    def walltime(self, c: float) -> float:
        """Cost in target-pass units: ``target_passes + c * draft_passes``."""
        return self.target_passes + as_real(c, "c", low=0.0) * self.draft_passes

    def speedup(self, c: float) -> float:
        """Tokens per unit of cost, relative to plain decoding (which makes 1 token per unit)."""
        return self.tokens_generated / self.walltime(c)

    def record_step(self, proposed: int, accepted: int, emitted: int, draft_passes: int | None = None,
                    depth: int | None = None, nodes: int | None = None) -> None:
        """Count one step: one target pass, ``proposed`` drafts of which ``accepted`` were kept,
        and ``emitted`` tokens output.

        ``depth`` is the length of the drafted block (``proposed`` unless several sequences
        were drafted).  A step that kept fewer drafts than its depth judged exactly one more,
        the first rejected one; the drafts after it were never verified.  ``draft_passes``
        defaults to one pass per proposed draft (prompt lookup proposes without any).
        ``nodes`` is the number of drafted positions the target pass scored (``proposed``
        unless a token tree merged drafts that share a prefix).
        """
        if not (type(proposed) is int and type(accepted) is int and type(emitted) is int
                and 0 <= accepted <= proposed <= MAX_NEW_TOKENS and 0 <= emitted <= MAX_NEW_TOKENS):
            proposed, accepted, emitted = _counts(proposed, accepted, emitted)
        if draft_passes is not None and (type(draft_passes) is not int or draft_passes < 0):
            draft_passes = as_int(draft_passes, "draft_passes", minimum=0, maximum=MAX_NEW_TOKENS)
        if depth is not None and (type(depth) is not int or depth < 0):
            depth = as_int(depth, "depth", minimum=0, maximum=MAX_NEW_TOKENS)
        depth = proposed if depth is None else depth
        self.target_passes += 1
        self.draft_passes += proposed if draft_passes is None else draft_passes
        self.draft_proposed += proposed
        self.draft_verified += accepted + int(accepted < depth)
        self.accepted += accepted
        self.tokens_generated += int(emitted)
        self.tokens_per_step.append(int(emitted))
        self.k_per_step.append(int(depth))
        self.accepted_per_step.append(int(accepted))
        self.scored_nodes += proposed if nodes is None else int(nodes)

    def add(self, other: "GenerationStats") -> None:
        """Add the counters of ``other`` (another segment of the same generation) to these."""
        for name in ("tokens_generated", "target_passes", "draft_passes", "draft_proposed", "draft_verified",
                     "accepted", "scored_nodes"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        for name in ("tokens_per_step", "k_per_step", "accepted_per_step"):
            getattr(self, name).extend(getattr(other, name))

    def summary(self) -> str:
        """One line with the figures a reader usually wants."""
        acc = "n/a" if math.isnan(self.acceptance_rate) else f"{self.acceptance_rate:.3f}"
        return (
            f"tokens={self.tokens_generated}, target_passes={self.target_passes}, "
            f"draft_passes={self.draft_passes}, tokens/pass={self.tokens_per_target_pass:.2f}, "
            f"acceptance={acc}"
        )


def _counts(proposed: object, accepted: object, emitted: object) -> tuple[int, int, int]:
    """The counts of :meth:`GenerationStats.record_step`, checked (the slow path: anything but plain ints in range)."""
    proposed = as_int(proposed, "proposed", minimum=0, maximum=MAX_NEW_TOKENS)
    accepted = as_int(accepted, "accepted", minimum=0, maximum=proposed, why="no more drafts are accepted than proposed")
    emitted = as_int(emitted, "emitted", minimum=0, maximum=MAX_NEW_TOKENS)
    return proposed, accepted, emitted


def _window(model: object, tokens: np.ndarray, rows_needed: int) -> np.ndarray:
    """The shortest tail of ``tokens`` that still gives the model's last ``rows_needed`` rows."""
    context_length = getattr(model, "context_length", None)
    if context_length is None:
        return tokens
    return tokens[-(context_length + rows_needed):]


def _last_rows(model: Callable, tokens: np.ndarray, n_rows: int, name: str) -> np.ndarray:
    """The model's last ``n_rows`` rows on ``tokens``, checked (for code that shows one step)."""
    window = _window(model, tokens, n_rows)
    return checked_rows(model(window), name, len(window), model.vocab_size)[-n_rows:]


_check_model = check_model


def _check_rng_and_timings(rng: object, timings: object):
    if timings is not None and not isinstance(timings, dict):
        raise TypeError(f"timings: expected a dict (or None), got {type(timings).__name__}")
    return as_chooser(rng)


def autoregressive_generate(
    model: Callable,
    prompt: np.ndarray,
    max_new_tokens: int,
    rng: np.random.Generator | int,
    *,
    timings: dict | None = None,
) -> tuple[np.ndarray, GenerationStats]:
    """Sample ``max_new_tokens`` tokens from ``model``, one forward pass per token.

    The model is read through its cache (:func:`speclib.core.cache.model_cache`): a model
    with a cache of its own reads only the newest token at each pass.

    Parameters
    ----------
    model : model
        Any model following the protocol in :mod:`speclib.lm.models`.
    prompt : array_like of int, shape (n,)
        At least one token to condition on.
    max_new_tokens : int
        How many tokens to generate (0 or more).
    rng : numpy.random.Generator or int
    timings : dict, optional
        If given, the seconds spent in forward passes are added to ``timings["model"]``.

    Returns
    -------
    tokens : ndarray of int, shape (max_new_tokens,)
    stats : GenerationStats

    Examples
    --------
    >>> from speclib.lm.models import markov_pair
    >>> target, _ = markov_pair(vocab_size=8, seed=0)
    >>> tokens, stats = autoregressive_generate(target, [0], 5, rng=1)
    >>> len(tokens), stats.target_passes
    (5, 5)
    """
    vocab = check_model(model, "model")
    prompt = as_tokens(prompt, "prompt", vocab, allow_empty=False)
    max_new_tokens = as_int(max_new_tokens, "max_new_tokens", minimum=0, maximum=MAX_NEW_TOKENS,
                            why="tokens one call generates")
    choose = _check_rng_and_timings(rng, timings)

    cache, stats = model_cache(model, "model"), GenerationStats()
    text = np.empty(prompt.size + max_new_tokens, dtype=np.int64)
    text[:prompt.size] = prompt
    for n in range(prompt.size, text.size):
        q = extend_checked(cache, text[len(cache):n], "model", timings, last=1)[0]
        text[n] = choose.token(q)
        stats.record_step(proposed=0, accepted=0, emitted=1)
    return text[prompt.size:], stats


def _chain(proposal: Proposal) -> np.ndarray:
    """The drafts a target pass scores (an empty chain for a plain step)."""
    return proposal.tokens if proposal.tokens.shape[-1] else proposal.tokens.reshape(0)


def chain_feed(cache, text: np.ndarray, drafts: np.ndarray) -> np.ndarray:
    """What a target pass over a chain of ``drafts`` feeds: the text the cache has not read, then the drafts."""
    return np.concatenate([text[len(cache):], drafts])


def _target_rows(cache, text: np.ndarray, drafts: np.ndarray | TokenTree, timings: dict | None) -> np.ndarray:
    """One target pass: the rows at every drafted position and the one after.

    A chain of ``k`` drafts gives ``(k+1, V)``.  A token tree gives ``(n+1, V)``: the row at
    the root, then one after each node (:func:`speclib.core.tree.score_tree`).  A target
    cache with ``extend_tree`` scores the whole tree in one pass and holds it until the
    step keeps the accepted branch; any other cache is fed one root-to-leaf path after
    another.  Several draft sequences (``drafts`` of shape ``(m, k)``) are scored as the
    tree they make, each node once, and returned per sequence, ``(m, k+1, V)``; the cache
    then keeps the text only.
    """
    if isinstance(drafts, TokenTree):
        return score_tree(cache, text, drafts, "target", timings)
    if drafts.ndim == 1:
        return extend_checked(cache, chain_feed(cache, text, drafts), "target", timings, last=drafts.size + 1)
    m, tree = drafts.shape[0], tree_from_paths(drafts)
    rows = score_tree(cache, text, tree, "target", timings)
    keep_branch(cache, text.size, tree, -1)
    nodes = np.concatenate([np.full((m, 1), -1), sequence_nodes(tree, m)], axis=1)
    return rows[nodes + 1]


def _verifier_step(verifier: Callable) -> Callable:
    """The trusted core of a verifier (``verifier.step``), or an adapter for a plain callable."""
    step = getattr(verifier, "step", None)
    if step is not None:
        return step
    inner = getattr(getattr(verifier, "func", None), "step", None)  # functools.partial of a verifier
    if inner is not None:
        return functools.partial(inner, *verifier.args, **verifier.keywords)
    if not callable(verifier):
        raise TypeError(f"verifier: expected a callable, got {type(verifier).__name__}")

    def sampled_only(drafts, p_rows, q_rows, choose, *, bonus=True):
        if not isinstance(choose, Sampler):
            raise TypeError(f"verifier: {getattr(verifier, '__name__', verifier)!r} draws from a generator, "
                            "not through a chooser, so its exact distribution cannot be enumerated")
        return verifier(drafts, p_rows, q_rows, choose.rng, bonus=bonus)

    sampled_only.verifier_name = getattr(verifier, "__name__", type(verifier).__name__)
    return sampled_only


def _trusted(part: object) -> bool:
    """Whether a proposer or a verifier's step is speclib's own, whose answers need no check.

    Declared by ``trusted = True`` on the proposer's own class (not inherited: a subclass
    may change what it returns), or on the step function (also through ``functools.partial``).
    """
    if isinstance(part, functools.partial):
        part = part.func
    if isinstance(part, types.FunctionType):
        return getattr(part, "trusted", False) is True
    return vars(type(part)).get("trusted", False) is True


def _name(part: object) -> str:
    """A plug-in's name in errors: its ``verifier_name``, ``__name__`` or ``repr``."""
    if isinstance(part, functools.partial):
        part = part.func
    return getattr(part, "verifier_name", None) or getattr(part, "__name__", None) or repr(part)


def _policy_k(k: object, policy: object) -> int:
    """What ``policy.draft_length()`` returned, if it is an int in [0, MAX_DRAFT_LENGTH] (the slow path)."""
    who = f"policy {getattr(policy, 'name', type(policy).__name__)!s}: draft_length()"
    if isinstance(k, (bool, np.bool_)) or not isinstance(k, numbers.Integral):
        raise TypeError(f"{who} returned {k!r} ({type(k).__name__}); expected an integer >= 0")
    if not 0 <= k <= MAX_DRAFT_LENGTH:
        raise ValueError(f"{who} returned {k}; a draft length lies in [0, {MAX_DRAFT_LENGTH}]")
    return int(k)


def _check_verification(out: object, drafts: np.ndarray, vocab: int, name: str) -> Verification:
    """What a verifier that is not speclib's own returned, if it is a consistent :class:`Verification`.

    ``tokens`` an integer array of ids in the vocabulary; ``n_accepted`` an int in
    ``0 .. k``; the tokens are the ``n_accepted`` kept drafts (of one of the sequences, when
    there are several) followed by at most one more token, and at least one token in all.
    """
    who = f"verifier {name}:"
    if not isinstance(out, Verification):
        raise TypeError(f"{who} returned {type(out).__name__}; expected a speclib.core.sampling.Verification "
                        "(tokens, n_accepted)")
    tokens, n_accepted = out
    if not isinstance(tokens, np.ndarray) or tokens.dtype.kind not in "iu" or tokens.ndim != 1:
        raise TypeError(f"{who} returned tokens of type {type(tokens).__name__}"
                        f"{f' (dtype {tokens.dtype}, shape {tokens.shape})' if isinstance(tokens, np.ndarray) else ''}"
                        "; expected a 1-D integer array")
    if isinstance(n_accepted, (bool, np.bool_)) or not isinstance(n_accepted, numbers.Integral):
        raise TypeError(f"{who} returned n_accepted = {n_accepted!r} ({type(n_accepted).__name__}); expected an int")
    is_tree = isinstance(drafts, TokenTree)
    depth, n_accepted = (drafts.depth if is_tree else drafts.shape[-1]), int(n_accepted)
    if not 0 <= n_accepted <= depth:
        raise ValueError(f"{who} returned n_accepted = {n_accepted} for a block of {depth} drafts")
    if not max(1, n_accepted) <= tokens.size <= n_accepted + 1:
        raise ValueError(f"{who} returned {tokens.size} tokens with n_accepted = {n_accepted}; a step emits the "
                         "accepted drafts followed by at most one token (a correction or the bonus)")
    if tokens.min() < 0 or tokens.max() >= vocab:
        bad = int(tokens.min()) if tokens.min() < 0 else int(tokens.max())
        raise ValueError(f"{who} returned token {bad}, out of range for a vocabulary of {vocab}")
    kept = tokens[:n_accepted]
    if is_tree:
        try:
            consistent = drafts.node_of(kept) >= -1
        except ValueError:  # not a path of the tree
            consistent = False
    elif drafts.ndim == 1:
        consistent = bool((drafts[:n_accepted] == kept).all())
    else:
        consistent = bool((drafts.reshape(-1, depth)[:, :n_accepted] == kept).all(axis=1).any())
    if not consistent:
        raise ValueError(f"{who} returned tokens {tokens.tolist()} with n_accepted = {n_accepted}, but its first "
                         f"{n_accepted} are not drafted tokens")
    return Verification(tokens, n_accepted)


class SpeculativeRun:
    """The state of one speculative generation, advanced one step at a time by :meth:`step`.

    :func:`speculative_generate` builds one and steps it to the end; the exact enumerator
    (:func:`speclib.core.exact.output_distribution`) copies it at every step boundary and
    steps the copies along every branch; the batch driver of :mod:`speclib.core.variants`
    steps one per sequence.  The arguments are those of :func:`speculative_generate`,
    already checked.
    """

    def __init__(self, target: Callable, proposer, prompt: np.ndarray, max_new_tokens: int, policy,
                 step: Callable, bonus: bool, timings: dict | None, vocab: int) -> None:
        self.target_cache = model_cache(target, "target")
        self.proposer, self.policy = proposer, policy
        self.verify_step, self.bonus, self.timings = step, bonus, timings
        self.stats = GenerationStats()
        self.text = np.empty(prompt.size + max_new_tokens, dtype=np.int64)
        self.text[:prompt.size] = prompt
        self.n, self.start = prompt.size, prompt.size
        proposer.start(prompt, vocab)
        # What a user's plug-in returns is checked at every step; speclib's own are not.
        self.vocab = vocab
        self.check_proposals = not _trusted(proposer)
        self.verifier_name = None if _trusted(step) else _name(step)
        self.verifies_trees = getattr(step.func if isinstance(step, functools.partial) else step,
                                      "verifies_trees", False) is True

    @property
    def done(self) -> bool:
        return self.n >= self.text.size

    def step(self, choose) -> Verification:
        """One step: draft, verify, accept / correct, bonus."""
        # 1. Draft: up to k tokens, with the row each was drawn from.
        proposal = self.draft(choose)
        # 2. Verify: one target pass scores every drafted position
        #    and the one after.
        q_rows = _target_rows(self.target_cache, self.text[:self.n],
                              _chain(proposal) if proposal.tree is None
                              else proposal.tree, self.timings)
        # 3. Accept / reject / correct, 4. bonus, 5. roll back.
        return self.finish(proposal, q_rows, choose)

    # A batch driver calls the two halves itself, with one target
    # pass for the whole batch between them.
    def draft(self, choose) -> Proposal:
        """Step 1: up to ``k`` drafts, with the row each was drawn from."""
        k = self.policy.draft_length()
        if type(k) is not int or not 0 <= k <= MAX_DRAFT_LENGTH:
            k = _policy_k(k, self.policy)
        k = min(k, self.text.size - self.n)
        proposal = self.proposer.propose(self.text[:self.n], k,
                                         self.policy, choose,
                                         self.timings)
        if self.check_proposals:
            check_proposal(proposal, k, self.vocab,
                           f"proposer {type(self.proposer).__name__}")
        return proposal

    def finish(self, proposal: Proposal, q_rows: np.ndarray,
               choose) -> Verification:
        """Steps 3 to 5, given the target's rows ``q_rows``."""
        n, remaining = self.n, self.text.size - self.n
        tree = proposal.tree
        drafts = proposal.tokens if tree is None else tree
        depth = proposal.tokens.shape[-1] if tree is None else tree.depth
        # 3. Accept / reject / correct, 4. bonus (a step without
        #    drafts is a plain one).
        if depth:
            if tree is not None and not self.verifies_trees:
                raise TypeError(f"verifier {_name(self.verify_step)}: verifies one chain of drafts, but "
                                f"proposer {type(self.proposer).__name__} proposes a token tree; verify it "
                                "with speclib.core.variants.multi_draft_verify (its default)")
            out = self.verify_step(drafts, proposal.rows, q_rows,
                                   choose, bonus=self.bonus)
            if self.verifier_name is not None:
                out = _check_verification(out, drafts, self.vocab,
                                          self.verifier_name)
        else:
            out = Verification(np.array([choose.token(q_rows[0])]), 0)
        emitted = out.tokens[:remaining]
        self.text[n:n + emitted.size] = emitted
        self.n = n + emitted.size
        # 5. Both caches keep the accepted prefix, never the last
        #    token: the next pass reads it first.
        #    A tree-scoring target cache first keeps the accepted
        #    branch of the tree it holds.
        if tree is not None:
            keep_branch(self.target_cache, n, tree,
                        tree.node_of(out.tokens[:out.n_accepted]))
        keep = min(n + out.n_accepted, self.n - 1)
        self.target_cache.rollback(min(len(self.target_cache), keep))
        self.proposer.accept(keep)
        self.policy.update(depth, out.n_accepted)
        self.stats.record_step(
            drafts.size if tree is None else tree.draws.size,
            out.n_accepted, emitted.size, proposal.passes, depth,
            nodes=(tree.size if tree is not None else
                   tree_from_paths(drafts).size if drafts.ndim == 2
                   else None))
        return out

    def truncate(self, length: int) -> None:
        """Keep only the first ``length`` tokens of the text (``length <= n``), caches included."""
        self.n = length
        self.target_cache.rollback(min(len(self.target_cache), length - 1))
        self.proposer.accept(length - 1)

    @property
    def tokens(self) -> np.ndarray:
        """The tokens generated so far."""
        return self.text[self.start:self.n]


def prepare_run(target: Callable, draft: object, prompt: object, max_new_tokens: object, k: object,
                bonus: object = True, verifier: Callable | None = None, timings: object = None) -> SpeculativeRun:
    """Check the arguments of :func:`speculative_generate` once and build its :class:`SpeculativeRun`."""
    vocab = check_model(target, "target")
    proposer = draft if hasattr(draft, "propose") else DraftModel(draft, "draft")
    prompt = as_tokens(prompt, "prompt", vocab, allow_empty=False)
    max_new_tokens = as_int(max_new_tokens, "max_new_tokens", minimum=0, maximum=MAX_NEW_TOKENS,
                            why="tokens one call generates")
    if hasattr(k, "draft_length"):
        policy = _check_controller(k)
    elif isinstance(k, numbers.Integral) and not isinstance(k, bool):
        policy = FixedK(as_int(k, "k", minimum=1, maximum=MAX_DRAFT_LENGTH,
                               why="the longest draft speclib computes with"))
    else:
        raise TypeError(f"k: expected an integer draft length or a draft-length policy (a controller with "
                        f"draft_length, keep_drafting and update), got {k!r} ({type(k).__name__})")
    bonus = as_bool(bonus, "bonus")
    step = _verifier_step(getattr(proposer, "verifier", verify) if verifier is None else verifier)
    if timings is not None and not isinstance(timings, dict):
        raise TypeError(f"timings: expected a dict (or None), got {type(timings).__name__}")
    return SpeculativeRun(target, proposer, prompt, max_new_tokens, policy, step, bool(bonus), timings, vocab)


def speculative_generate(
    target: Callable,
    draft: object,
    prompt: np.ndarray,
    max_new_tokens: int,
    k: object,
    rng: np.random.Generator | int,
    *,
    bonus: bool = True,
    verifier: Callable[..., Verification] | None = None,
    timings: dict | None = None,
) -> tuple[np.ndarray, GenerationStats]:
    """Sample ``max_new_tokens`` tokens from ``target`` with speculative decoding.

    Each step (:meth:`SpeculativeRun.step`): the draft proposes up to ``k`` tokens one at a time, recording the
    distribution each came from; one target pass scores all drafted positions and the one
    after; the verifier keeps a prefix of the drafts and adds a correction or bonus token;
    both caches are rolled back to the accepted prefix.  With the default verifier the
    output follows the target's distribution exactly, whatever the draft.

    Parameters
    ----------
    target : model
        A model following the protocol in :mod:`speclib.lm.models`.
    draft : model or proposer
        A draft model with the target's vocabulary, or a proposer of
        :mod:`speclib.core.proposers` (:class:`~speclib.core.proposers.PromptLookup`,
        :class:`~speclib.core.proposers.MultiDraft`, ...).
    prompt : array_like of int, shape (n,)
        At least one token.
    max_new_tokens : int
        How many tokens to generate (0 or more).  The last step drafts no more tokens than
        are still needed, and anything it emits beyond the total is dropped.
    k : int or policy
        The draft length (at least 1), or a draft-length policy of
        :mod:`speclib.core.policies` (updated in place).
    rng : numpy.random.Generator, int or Chooser
    bonus : bool, default True
        Passed to the verifier.
    verifier : callable, optional
        The verification rule; default :func:`speclib.core.sampling.verify` (or the
        proposer's own ``verifier``, for several drafts).
    timings : dict, optional
        If given, the seconds spent in the target's and the draft's forward passes are
        added to ``timings["target"]`` and ``timings["draft"]``, and the whole call's to
        ``timings["total"]``; the difference is the loop's own bookkeeping.

    Returns
    -------
    tokens : ndarray of int, shape (max_new_tokens,)
    stats : GenerationStats

    Examples
    --------
    >>> from speclib.lm.models import markov_pair
    >>> target, draft = markov_pair(vocab_size=8, draft_noise=0.2, seed=0)
    >>> tokens, stats = speculative_generate(target, draft, [0], 20, k=4, rng=1)
    >>> len(tokens), stats.target_passes < 20
    (20, True)
    """
    t_start = time.perf_counter()
    run = prepare_run(target, draft, prompt, max_new_tokens, k, bonus, verifier, timings)
    choose = as_chooser(rng)
    while not run.done:
        run.step(choose)
    if timings is not None:
        timings["total"] = timings.get("total", 0.0) + time.perf_counter() - t_start
    return run.tokens.copy(), run.stats
