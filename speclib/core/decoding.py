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
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from .._validate import MAX_NEW_TOKENS, as_bool, as_int, as_real, as_tokens
from .cache import checked_rows, extend_checked, model_cache
from .policies import FixedK, _check_controller
from .proposers import DraftModel, Proposal, check_model
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
                    depth: int | None = None) -> None:
        """Count one step: one target pass, ``proposed`` drafts of which ``accepted`` were kept,
        and ``emitted`` tokens output.

        ``depth`` is the length of the drafted block (``proposed`` unless several sequences
        were drafted).  A step that kept fewer drafts than its depth judged exactly one more,
        the first rejected one; the drafts after it were never verified.  ``draft_passes``
        defaults to one pass per proposed draft (prompt lookup proposes without any).
        """
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

    def add(self, other: "GenerationStats") -> None:
        """Add the counters of ``other`` (another segment of the same generation) to these."""
        for name in ("tokens_generated", "target_passes", "draft_passes", "draft_proposed", "draft_verified",
                     "accepted"):
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


def _window(model: object, tokens: np.ndarray, rows_needed: int) -> np.ndarray:
    """The shortest tail of ``tokens`` that still gives the model's last ``rows_needed`` rows."""
    context_length = getattr(model, "context_length", None)
    if context_length is None:
        return tokens
    return tokens[-(context_length + rows_needed):]


def _last_rows(model: Callable, tokens: np.ndarray, n_rows: int, name: str) -> np.ndarray:
    """The model's last ``n_rows`` rows on ``tokens``, checked (for code that shows one step)."""
    probs = np.asarray(model(_window(model, tokens, n_rows)), dtype=float)
    vocab = model.vocab_size
    if probs.ndim != 2 or probs.shape[1] != vocab or probs.shape[0] < n_rows:
        raise ValueError(
            f"{name}: a model must map tokens of shape (n,) to probabilities of shape (n, {vocab}); "
            f"got {probs.shape}"
        )
    return checked_rows(probs[-n_rows:], name)


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
        q = extend_checked(cache, text[len(cache):n], "model", timings)[-1]
        text[n] = choose.token(q)
        stats.record_step(proposed=0, accepted=0, emitted=1)
    return text[prompt.size:], stats


def _chain(proposal: Proposal) -> np.ndarray:
    """The drafts a target pass scores (an empty chain for a plain step)."""
    return proposal.tokens if proposal.tokens.shape[-1] else proposal.tokens.reshape(0)


def chain_feed(cache, text: np.ndarray, drafts: np.ndarray) -> np.ndarray:
    """What a target pass over a chain of ``drafts`` feeds: the text the cache has not read, then the drafts."""
    return np.concatenate([text[len(cache):], drafts])


def _target_rows(cache, text: np.ndarray, drafts: np.ndarray, timings: dict | None) -> np.ndarray:
    """One target pass: the rows at every drafted position and the one after, ``(k+1, V)``.

    Several draft sequences (``drafts`` of shape ``(m, k)``) are scored as one tree-shaped
    pass, ``(m, k+1, V)``, and the cache is left holding the text only.
    """
    feed = text[len(cache):]
    if drafts.ndim == 1:
        return extend_checked(cache, chain_feed(cache, text, drafts), "target", timings)[-(drafts.size + 1):]
    depth, rows = drafts.shape[1], []
    for branch in drafts:
        cache.rollback(min(len(cache), text.size - feed.size))
        rows.append(extend_checked(cache, np.concatenate([feed, branch]), "target", timings)[-(depth + 1):])
    cache.rollback(text.size)
    return np.array(rows)


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

    return sampled_only


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
                              _chain(proposal), self.timings)
        # 3. Accept / reject / correct, 4. bonus, 5. roll back.
        return self.finish(proposal, q_rows, choose)

    # A batch driver calls the two halves itself, with one target
    # pass for the whole batch between them.
    def draft(self, choose) -> Proposal:
        """Step 1: up to ``k`` drafts, with the row each was drawn from."""
        k = as_int(self.policy.draft_length(), "k.draft_length()",
                   minimum=0)
        k = min(k, self.text.size - self.n)
        return self.proposer.propose(self.text[:self.n], k, self.policy,
                                     choose, self.timings)

    def finish(self, proposal: Proposal, q_rows: np.ndarray,
               choose) -> Verification:
        """Steps 3 to 5, given the target's rows ``q_rows``."""
        n, remaining = self.n, self.text.size - self.n
        drafts, depth = proposal.tokens, proposal.tokens.shape[-1]
        # 3. Accept / reject / correct, 4. bonus (a step without
        #    drafts is a plain one).
        if depth:
            out = self.verify_step(drafts, proposal.rows, q_rows,
                                   choose, bonus=self.bonus)
        else:
            out = Verification(np.array([choose.token(q_rows[0])]), 0)
        emitted = out.tokens[:remaining]
        self.text[n:n + emitted.size] = emitted
        self.n = n + emitted.size
        # 5. Both caches keep the accepted prefix, never the last
        #    token: the next pass reads it first.
        keep = min(n + out.n_accepted, self.n - 1)
        self.target_cache.rollback(min(len(self.target_cache), keep))
        self.proposer.accept(keep)
        self.policy.update(depth, out.n_accepted)
        self.stats.record_step(drafts.size, out.n_accepted,
                               emitted.size, proposal.passes, depth)
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
        policy = FixedK(as_int(k, "k", minimum=1))
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
