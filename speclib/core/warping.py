"""Sampling controls: temperature, top-k and top-p, and greedy decoding.

Real systems rarely sample from a model's raw distribution.  They *warp* each next-token
row first:

``temperature`` T
    ``q(x) ** (1 / T)``, renormalised (the same as dividing the logits by T).  T < 1
    sharpens the row, T > 1 flattens it, and T = 0 means greedy decoding: all the mass
    on the most likely token (the lowest token id among exact ties, as ``numpy.argmax``).
``top_k``
    keep the ``top_k`` most likely tokens and renormalise (ties broken by the lower id).
``top_p`` (nucleus sampling)
    keep the smallest set of most likely tokens whose mass reaches ``top_p``, renormalise.

They are applied in that order, as Hugging Face transformers does.  A warp is a fixed
function of the row, so a warped model is just another model: :func:`warp` wraps one and
follows the protocol of :mod:`speclib.lm.models`.  Speculative decoding with a warped target
and a warped draft is therefore exact *for the warped target*, which is what a user asking
for ``temperature=0.7`` wants.  At temperature 0 verification reduces to an exact-match
test; :func:`greedy_speculative_generate` writes that rule out, and its output equals
:func:`greedy_generate` token for token.

Chapter 10 measures three things with this module: :func:`control_placement_errors` (exact:
which models must the controls be applied to?), :func:`mean_acceptance_rate` (what do the
controls do to acceptance on given contexts?) and :func:`greedy_agreement` (does greedy
speculative decoding reproduce greedy decoding?).
"""

from __future__ import annotations

from typing import Callable, NamedTuple

import numpy as np

from .._validate import (MAX_DRAFT_LENGTH, MAX_NEW_TOKENS, as_bool, as_distribution, as_int, as_int_list, as_real,
                         as_tokens)
from .decoding import GenerationStats, _check_model, _last_rows, autoregressive_generate, speculative_generate
from .exact import output_distribution, target_sequence_distribution
from .sampling import acceptance_rate

# Masses that differ from ``top_p`` by less than this count as reaching it (rounding in cumsum).
_TOP_P_SLACK = 1e-12


def _check_settings(temperature: object, top_k: object, top_p: object) -> tuple[float, int | None, float | None]:
    temperature = as_real(temperature, "temperature", low=0.0)
    if top_k is not None:
        top_k = as_int(top_k, "top_k", minimum=1)
    if top_p is not None:
        top_p = as_real(top_p, "top_p", low=0.0, high=1.0)
        if top_p == 0.0:
            raise ValueError("top_p: must be > 0 (top_p = 0 would keep no token); use temperature=0 for greedy decoding")
    return temperature, top_k, top_p


def _check_pair(target: Callable, draft: Callable) -> int:
    vocab = _check_model(target, "target")
    if _check_model(draft, "draft") != vocab:
        raise ValueError(f"draft: vocabulary of {draft.vocab_size} tokens differs from the target's {vocab}")
    return vocab


def _keep_top(rows: np.ndarray, keep: Callable[[np.ndarray], np.ndarray]) -> np.ndarray:
    """Zero every token that ``keep`` drops, then renormalise.

    ``keep`` receives the rows sorted by decreasing probability (a stable sort, so ties keep
    the lower id first) and returns a boolean mask in that sorted order.
    """
    flat = rows.reshape(-1, rows.shape[-1])
    which = np.arange(flat.shape[0])[:, None]
    order = np.argsort(-flat, axis=-1, kind="stable")
    mask = np.empty(flat.shape, dtype=bool)
    mask[which, order] = keep(flat[which, order])
    kept = np.where(mask, flat, 0.0)
    return (kept / kept.sum(axis=-1, keepdims=True)).reshape(rows.shape)


def warp_distribution(
    probs: np.ndarray,
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
) -> np.ndarray:
    """Apply temperature, then top-k, then top-p to next-token distributions.

    Parameters
    ----------
    probs : array_like, shape (..., V)
        Distributions on the last axis (rows summing to 1).
    temperature : float >= 0, default 1.0
        1 leaves the rows alone; 0 puts all the mass on the most likely token (lowest id
        among exact ties).  Tokens of probability 0 keep probability 0 at any temperature.
    top_k : int >= 1 or None, default None
        Keep only the ``top_k`` most likely tokens (all of them when ``top_k >= V``).
    top_p : float in (0, 1] or None, default None
        Keep the smallest set of most likely tokens whose probability reaches ``top_p``
        (at least one token).

    Returns
    -------
    ndarray, same shape as ``probs``, rows summing to 1.

    Raises
    ------
    ValueError, TypeError
        If ``probs`` is not an array of distributions, ``temperature`` is negative or not
        finite, ``top_k`` is not a positive integer, or ``top_p`` is outside (0, 1].

    Examples
    --------
    >>> q = [0.5, 0.3, 0.2]
    >>> warp_distribution(q, temperature=0)
    array([1., 0., 0.])
    >>> warp_distribution(q, top_k=2)
    array([0.625, 0.375, 0.   ])
    >>> warp_distribution(q, top_p=0.8)
    array([0.625, 0.375, 0.   ])
    >>> warp_distribution([0.5, 0.5], temperature=0.5)
    array([0.5, 0.5])
    """
    rows = as_distribution(probs, "probs")
    return _warp(rows, *_check_settings(temperature, top_k, top_p))


def _warp(rows: np.ndarray, temperature: float, top_k: int | None, top_p: float | None) -> np.ndarray:
    """:func:`warp_distribution` on rows and settings that were already validated."""
    rows = np.array(rows, dtype=float)  # a copy: never touch the caller's array
    if temperature == 0.0:
        greedy = np.zeros_like(rows)
        np.put_along_axis(greedy, np.argmax(rows, axis=-1)[..., None], 1.0, axis=-1)
        rows = greedy
    elif temperature != 1.0:
        # In log space, relative to the row's maximum, so that a tiny temperature gives
        # zeros and ones instead of overflowing.
        with np.errstate(divide="ignore", over="ignore", under="ignore", invalid="ignore"):
            logp = np.log(rows)
            scaled = (logp - logp.max(axis=-1, keepdims=True)) / temperature
            rows = np.exp(np.where(np.isfinite(logp), scaled, -np.inf))
        rows /= rows.sum(axis=-1, keepdims=True)

    if top_k is not None and top_k < rows.shape[-1]:
        rows = _keep_top(rows, lambda s: np.arange(s.shape[-1]) < top_k)
    if top_p is not None:
        # Keep a token if the mass of the tokens ranked above it is still short of top_p; the most
        # likely token is always kept, however small top_p is (else a row would keep nothing).
        rows = _keep_top(rows, lambda s: (np.cumsum(s, axis=-1) - s < top_p - _TOP_P_SLACK)
                         | (np.arange(s.shape[-1]) == 0))
    return rows


class WarpedModel:
    """A model whose rows are another model's rows after :func:`warp_distribution`.

    Follows the protocol of :mod:`speclib.lm.models`; build it with :func:`warp`.
    """

    def __init__(self, model: Callable, temperature: float = 1.0, top_k: int | None = None,
                 top_p: float | None = None) -> None:
        self.vocab_size = _check_model(model, "model")
        self.temperature, self.top_k, self.top_p = _check_settings(temperature, top_k, top_p)
        self.model = model
        # The warp acts row by row, so the wrapped model reads exactly what the model reads.
        self.context_length = getattr(model, "context_length", None)

    def __call__(self, tokens: np.ndarray) -> np.ndarray:
        rows = np.asarray(self.model(tokens))
        try:
            rows = as_distribution(rows, "rows")
        except (TypeError, ValueError):
            # Not distributions: passed on untouched, so that the loop that called this model
            # refuses them with an error naming the model's role ("target", "draft").
            return rows
        return _warp(rows, self.temperature, self.top_k, self.top_p)

    def __repr__(self) -> str:
        return (f"warp({self.model!r}, temperature={self.temperature:g}, "
                f"top_k={self.top_k}, top_p={self.top_p})")


def warp(model: Callable, temperature: float = 1.0, top_k: int | None = None,
         top_p: float | None = None) -> WarpedModel:
    """Wrap ``model`` so that its rows are warped by temperature, top-k and top-p.

    Parameters
    ----------
    model : model
        Any model following the protocol of :mod:`speclib.lm.models`.
    temperature, top_k, top_p :
        As in :func:`warp_distribution`.

    Returns
    -------
    WarpedModel
        A model with the same ``vocab_size`` (and ``context_length``).

    Examples
    --------
    >>> from speclib.lm.models import markov_pair
    >>> target, _ = markov_pair(vocab_size=4, seed=0)
    >>> greedy_target = warp(target, temperature=0)
    >>> greedy_target([0, 1]).sum(axis=1)
    array([1., 1.])
    >>> warp(target, top_p=1.5)
    Traceback (most recent call last):
        ...
    ValueError: top_p: must be <= 1.0, got 1.5
    """
    return WarpedModel(model, temperature, top_k, top_p)


def greedy_generate(model: Callable, prompt: np.ndarray, max_new_tokens: int) -> tuple[np.ndarray, GenerationStats]:
    """Greedy decoding: append the most likely token (lowest id among ties), one pass each.

    The arguments and the returned ``(tokens, stats)`` are those of
    :func:`speclib.core.decoding.autoregressive_generate`, without ``rng``.

    Examples
    --------
    >>> from speclib.lm.models import MarkovModel
    >>> model = MarkovModel([[0.1, 0.9], [0.8, 0.2]])
    >>> greedy_generate(model, [0], 4)[0]
    array([1, 0, 1, 0])
    """
    _check_model(model, "model")
    as_int(max_new_tokens, "max_new_tokens", minimum=0, maximum=MAX_NEW_TOKENS)
    # Plain decoding of the temperature-0 model: every row is one-hot, so the draws are certain.
    return autoregressive_generate(warp(model, temperature=0), prompt, max_new_tokens, rng=0)


def greedy_speculative_generate(
    target: Callable,
    draft: Callable,
    prompt: np.ndarray,
    max_new_tokens: int,
    k: int,
) -> tuple[np.ndarray, GenerationStats]:
    """Speculative decoding at temperature 0, where verification is an exact-match test.

    The draft proposes its ``k`` greedy tokens; one target pass gives the target's greedy
    choice at every drafted position; drafts are kept while they *equal* the target's
    choice, the first mismatch is replaced by the target's choice, and if all ``k`` match
    the target's next choice comes free.  This is the one loop,
    :func:`speclib.core.decoding.speculative_generate`, on the temperature-0 pair: its rows are
    one-hot, ``min(1, q(x)/p(x))`` is 1 on a match and 0 otherwise, and the residual is the
    target's one-hot row, so no draw is random.  The output equals
    :func:`greedy_generate` on the target, token for token.

    The arguments and the returned ``(tokens, stats)`` are those of
    :func:`speclib.core.decoding.speculative_generate`, without ``rng``.

    Examples
    --------
    >>> from speclib.lm.models import markov_pair
    >>> target, draft = markov_pair(vocab_size=8, draft_noise=0.5, seed=0)
    >>> spec, stats = greedy_speculative_generate(target, draft, [0], 30, k=4)
    >>> bool((spec == greedy_generate(target, [0], 30)[0]).all()), stats.target_passes < 30
    (True, True)
    """
    _check_pair(target, draft)
    as_int(max_new_tokens, "max_new_tokens", minimum=0, maximum=MAX_NEW_TOKENS)
    # The one loop on the temperature-0 pair: the draws are certain, so the seed does not matter.
    return speculative_generate(warp(target, temperature=0), warp(draft, temperature=0), prompt, max_new_tokens,
                                as_int(k, "k", minimum=1, maximum=MAX_DRAFT_LENGTH), rng=0)


# --- Chapter 10's measurements -----------------------------------------------------------------

#: Where the sampling controls can be applied, in the order :func:`control_placement_errors` reports.
PLACEMENTS = ("both models", "target only", "draft only")


def control_placement_errors(
    target: Callable,
    draft: Callable,
    prompt: np.ndarray,
    k: int,
    *,
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
) -> dict[str, float]:
    """How far speculative decoding is from the controlled target, for each placement of the controls.

    The user asked for ``warp(target, temperature, top_k, top_p)``.  For each entry of
    :data:`PLACEMENTS` (controls on both models, on the target only, on the draft only)
    this enumerates the first speculative step exactly (:mod:`speclib.core.exact`) and returns
    the largest gap, over all ``V ** (k + 1)`` continuations of ``prompt``, between the
    probability speculative decoding gives a sequence and the probability the controlled
    target gives it.  Rounding error (about 1e-16) means exact.

    Parameters
    ----------
    target, draft : model
        Models following the protocol of :mod:`speclib.lm.models`, with the same (small) vocabulary.
    prompt : array_like of int
        At least one token.
    k : int
        Draft length.
    temperature, top_k, top_p :
        As in :func:`warp_distribution`.

    Returns
    -------
    dict mapping each placement to its largest gap.

    Examples
    --------
    >>> from speclib.lm.models import markov_pair
    >>> target, draft = markov_pair(vocab_size=3, draft_noise=0.6, seed=5)
    >>> errors = control_placement_errors(target, draft, [0], 2, temperature=0.5)
    >>> errors["both models"] < 1e-12, errors["target only"] < 1e-12, errors["draft only"] > 0.1
    (True, True, True)
    """
    vocab = _check_pair(target, draft)
    prompt = as_tokens(prompt, "prompt", vocab, allow_empty=False)
    hot_target = warp(target, temperature, top_k, top_p)
    hot_draft = warp(draft, temperature, top_k, top_p)
    k = as_int(k, "k", minimum=1, maximum=MAX_DRAFT_LENGTH)
    want = target_sequence_distribution(hot_target, prompt, k + 1)
    pairs = dict(zip(PLACEMENTS, [(hot_target, hot_draft), (hot_target, draft), (target, hot_draft)]))
    return {name: float(np.abs(output_distribution(t, d, prompt, k + 1, k) - want).max())
            for name, (t, d) in pairs.items()}


def mean_acceptance_rate(
    target: Callable,
    draft: Callable,
    tokens: np.ndarray,
    *,
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
    warp_draft: bool = True,
) -> float:
    """The acceptance rate ``alpha = sum_x min(p(x), q(x))`` averaged over the contexts of a text.

    Each prefix ``tokens[:i + 1]`` is one context: the target's row ``q`` and the draft's row
    ``p`` after it are warped by the controls (the draft's only if ``warp_draft``) and their
    acceptance rate is computed exactly.  Unlike the rate measured while generating, this
    holds the contexts fixed, so it shows what the controls alone do to acceptance.

    Parameters
    ----------
    target, draft : model
        Models following the protocol of :mod:`speclib.lm.models`, with the same vocabulary.
    tokens : array_like of int, shape (n,)
        The text whose ``n`` prefixes are the contexts (at least one token).
    temperature, top_k, top_p :
        As in :func:`warp_distribution`.
    warp_draft : bool, default True
        Apply the controls to the draft too; with False the draft's raw rows are used.

    Returns
    -------
    float in [0, 1]

    Examples
    --------
    >>> from speclib.lm.models import MarkovModel
    >>> target = MarkovModel([[0.6, 0.4], [0.3, 0.7]])
    >>> draft = MarkovModel([[0.4, 0.6], [0.3, 0.7]])
    >>> mean_acceptance_rate(target, draft, [0, 1])            # (0.8 + 1.0) / 2
    0.9
    >>> mean_acceptance_rate(target, draft, [0, 1], temperature=0)   # argmaxes agree after token 1 only
    0.5
    """
    vocab = _check_pair(target, draft)
    tokens = as_tokens(tokens, "tokens", vocab, allow_empty=False)
    settings = _check_settings(temperature, top_k, top_p)
    q = _warp(_last_rows(target, tokens, tokens.size, "target"), *settings)
    p = _last_rows(draft, tokens, tokens.size, "draft")
    if as_bool(warp_draft, "warp_draft"):
        p = _warp(p, *settings)
    return float(np.mean(acceptance_rate(p, q)))


class GreedyAgreement(NamedTuple):
    """What :func:`greedy_agreement` found."""

    runs: int  #: speculative runs compared with greedy decoding
    identical: int  #: runs whose tokens equal greedy decoding's, token for token
    tokens_per_pass: float  #: tokens per target pass of greedy_speculative_generate, over all its runs


def greedy_agreement(
    target: Callable,
    draft: Callable,
    prompts: list,
    max_new_tokens: int,
    ks: tuple[int, ...] = (1, 2, 4, 8),
) -> GreedyAgreement:
    """Compare speculative decoding at temperature 0 with greedy decoding of the target.

    For every prompt and every draft length in ``ks``, two speculative decoders run:
    :func:`greedy_speculative_generate` (the exact-match rule, no randomness) and
    :func:`speclib.core.decoding.speculative_generate` on both models warped to temperature 0
    (the ordinary sampler, with the prompt's index as its seed).  Each is compared, token for
    token, with :func:`greedy_generate` on the target.

    Returns
    -------
    GreedyAgreement

    Examples
    --------
    >>> from speclib.lm.models import markov_pair
    >>> target, draft = markov_pair(vocab_size=6, draft_noise=0.7, seed=1)
    >>> result = greedy_agreement(target, draft, [[0], [3]], 20, ks=(1, 3))
    >>> result.runs, result.identical
    (8, 8)
    """
    vocab = _check_pair(target, draft)
    max_new_tokens = as_int(max_new_tokens, "max_new_tokens", minimum=1, maximum=MAX_NEW_TOKENS)
    ks = tuple(as_int_list(ks, "ks", minimum=1, maximum=MAX_DRAFT_LENGTH))
    if isinstance(prompts, (str, bytes, np.ndarray)) or not isinstance(prompts, (list, tuple)):
        raise TypeError(f"prompts: expected a list of prompts (sequences of token ids), got {type(prompts).__name__}")
    prompts = [as_tokens(p, f"prompts[{i}]", vocab, allow_empty=False) for i, p in enumerate(prompts)]
    cold_target, cold_draft = warp(target, temperature=0), warp(draft, temperature=0)
    runs = identical = passes = tokens = 0
    for seed, prompt in enumerate(prompts):
        try:
            want, _ = greedy_generate(target, prompt, max_new_tokens)
        except ValueError as error:  # greedy_generate calls its model "model": here it is the target
            text = str(error)
            raise ValueError("target" + text[len("model"):] if text.startswith("model:") else text) from None
        for k in ks:
            exact_match, stats = greedy_speculative_generate(target, draft, prompt, max_new_tokens, k)
            sampled, _ = speculative_generate(cold_target, cold_draft, prompt, max_new_tokens, k, rng=seed)
            runs += 2
            identical += int((exact_match == want).all()) + int((sampled == want).all())
            passes, tokens = passes + stats.target_passes, tokens + stats.tokens_generated
    return GreedyAgreement(runs, identical, tokens / passes if passes else float("nan"))
