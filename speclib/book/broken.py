"""The bug zoo: faulty speculative decoders, kept apart from the main API.

A test of exactness is only worth something if it fails on a decoder that is not exact.
Each :class:`Variant` here is the correct decoder with one knob turned: a mistake that
users of real implementations have reported, an off-by-one of the same family, or a
textbook one.  There are two levels.

*Verifier variants* change only the verification step, through the hooks ``accept``,
``correct`` and ``report`` that :func:`speclib.core.sampling.verify` and
:func:`speclib.core.exact.speculative_block_distribution` share; ``variant.verifier`` plugs
into :func:`speclib.core.decoding.speculative_generate` and ``variant.hooks`` into
:mod:`speclib.core.exact`, so the sampling tests and the exact enumeration judge the very same
rule.  :data:`FAULTY` lists them.

*Decoder variants* need the rest of the loop: how the draft token is picked, which sampling
controls reach which model, which target row the bonus comes from, whether the target's
key-value cache is rolled back.  :func:`generate` is a speculative decoder written with one
switch per such mistake, and :func:`distribution` computes the exact distribution of its
output by running *the same code* once for every branch of its random choices (each draw
and each accept/reject coin), so the enumeration cannot drift from the sampler.  With
:data:`CORRECT` and the same seed, :func:`generate` emits exactly the tokens of
:func:`speclib.core.decoding.speculative_generate`.  :data:`ZOO` lists the six mistakes the
book's bug-zoo chapter studies.

The cache bug is invisible to a first-order Markov target (its row reads one token, and
the stale entries sit further back), so the zoo's test pair, :func:`second_order_pair`,
remembers two tokens.

The module, in order:

1. :class:`Variant` and the variants: :data:`CORRECT`, the verifier variants of
   :data:`FAULTY` (plus :data:`RATIO_WITHOUT_MIN`), the decoder variants, and :data:`ZOO`
   with the two facts the chapter's table shows, :data:`REPORTED` and :data:`ZOO_STEP`;
2. the test pair: :class:`SecondOrderModel`, :func:`second_order_pair`, :func:`zoo_pair`;
3. the decoder: :class:`KVCache`, the step function ``_step`` (its numbered comments are
   the steps the chapter refers to), :func:`generate`, :func:`distribution` and
   :func:`distance_from_target`;
4. two verifiers "from a code review", for the chapter's find-the-bug exercises.
"""

from __future__ import annotations

import functools
from types import MappingProxyType
from typing import Callable, NamedTuple

import numpy as np

from .._validate import as_distribution, as_generator, as_int, as_tokens
from ..core.decoding import GenerationStats, _last_rows
from ..core.exact import MAX_SEQUENCES, _identity, target_sequence_distribution
from ..lm.models import dirichlet_targets, noisy_draft
from ..core.sampling import Verification, _residual, acceptance_probability, sample_token, verify
from ..core.warping import _check_pair, _check_settings, _warp, warp


def _sharpen(p: np.ndarray) -> np.ndarray:
    """The draft row squared and renormalised: a temperature-0.5 version of it."""
    s = p**2
    return s / s.sum()


def _one_hot_argmax(p: np.ndarray) -> np.ndarray:
    """All the mass on the row's most likely token: what ``argmax`` picks."""
    out = np.zeros_like(p)
    out[np.argmax(p)] = 1.0
    return out


class Variant(NamedTuple):
    """One way to get speculative decoding wrong (or the correct rule, for comparison).

    Every field after ``description`` is a switch whose default is the correct behaviour; a
    variant turns one of them.  ``accept``, ``correct`` and ``report`` live inside the
    verifier, so :func:`speclib.core.sampling.verify` and :mod:`speclib.core.exact` can run them
    (:attr:`verifier`, :attr:`hooks`).  The other five need the whole decoding loop and run
    only in :func:`generate` and :func:`distribution`:

    ==================  ===============================================  ==================
    switch              correct setting                                  turned by
    ==================  ===============================================  ==================
    ``propose``         draw the draft token from the draft's row        ARGMAX_DRAFT
    ``tell_raw_draft``  tell the verifier the row the token came from    RAW_DRAFT_REPORTED
    ``warp_target``     apply the sampling controls to the target too    DRAFT_ONLY_WARP
    ``bonus_row``       bonus from target row -1 (after the last draft)  WRONG_BONUS_ROW
    ``rollback_cache``  truncate the target's cache to the kept tokens   STALE_CACHE
    ==================  ===============================================  ==================
    """

    name: str
    description: str
    #: acceptance probability ``(p_x, q_x) -> float``; correct: ``min(1, q_x / p_x)``
    accept: Callable[[float, float], float] = acceptance_probability
    #: correction row after a rejection ``(p, q) -> row``; correct: ``max(0, q - p) / Z``
    correct: Callable[[np.ndarray, np.ndarray], np.ndarray] = _residual
    #: the draft row the verifier is told, given the row the token came from; correct: the same
    report: Callable[[np.ndarray], np.ndarray] = _identity
    #: the row the draft token is actually drawn from, given the draft's row; correct: that row
    propose: Callable[[np.ndarray], np.ndarray] = _identity
    #: apply the sampling controls (temperature, top-k, top-p) to the target as well
    warp_target: bool = True
    #: tell the verifier the draft's raw row rather than the warped row it sampled from
    tell_raw_draft: bool = False
    #: index into the k + 1 target rows for the bonus token; correct: -1, the row after the last draft
    bonus_row: int = -1
    #: after verification, truncate the target's cache to the accepted tokens
    rollback_cache: bool = True

    @property
    def in_verifier(self) -> bool:
        """Whether the mistake lies inside :func:`speclib.core.sampling.verify` alone."""
        return (self.propose is _identity and self.warp_target and not self.tell_raw_draft
                and self.bonus_row == -1 and self.rollback_cache)

    def _require_verifier(self) -> None:
        if not self.in_verifier:
            raise ValueError(
                f"variant {self.name!r} changes the decoding loop, not only verify(); "
                "use speclib.book.broken.generate and speclib.book.broken.distribution for it"
            )

    @property
    def hooks(self) -> dict:
        """Keyword arguments for :mod:`speclib.core.exact` (verifier variants only)."""
        self._require_verifier()
        return {"accept": self.accept, "correct": self.correct, "report": self.report}

    @property
    def verifier(self) -> Callable:
        """A drop-in replacement for :func:`speclib.core.sampling.verify` (verifier variants only)."""
        self._require_verifier()
        base = functools.partial(verify, accept=self.accept, correct=self.correct)
        if self.report is _identity:
            return base

        def reporting_verifier(draft_tokens, p_draft, q_target, rng, **kwargs):
            told = np.array([self.report(row) for row in np.asarray(p_draft, dtype=float)])
            return base(draft_tokens, told, q_target, rng, **kwargs)

        return reporting_verifier


# --- The correct rule, and the verifier variants (run by verify() and speclib.core.exact) ---------

CORRECT = Variant("correct", "min(1, q/p) acceptance and the residual max(0, q - p)/Z")

RESAMPLE_FROM_TARGET = Variant(
    "resample from q",
    "after a rejection, draw the replacement from q instead of the residual",
    correct=lambda p, q: q,
)

INVERTED_RATIO = Variant(
    "inverted ratio",
    "accept with min(1, p/q) instead of min(1, q/p)",
    accept=lambda p_x, q_x: min(1.0, p_x / q_x) if q_x > 0 else 1.0,
)

RATIO_WITHOUT_MIN = Variant(
    "ratio without the min",
    "use q/p as the acceptance probability without capping it at 1; ill-formed as a "
    "probability, yet `u < q/p` and `u < min(1, q/p)` are the same event, so a sampler "
    "built on it emits exactly the tokens of the correct one",
    accept=lambda p_x, q_x: q_x / p_x,
)

MISREPORTED_DRAFT = Variant(
    "misreported draft",
    "tokens drawn from p, but the verifier is handed a sharpened p (as with raw against "
    "top-k-processed logits)",
    report=_sharpen,
)

# --- Decoder variants (run only by generate() and distribution() below) ---------------------

ARGMAX_DRAFT = Variant(
    "argmax draft",
    "the draft token is picked by argmax, but the ratio q/p still uses the draft's softmax "
    "probability, as if the token had been sampled",
    propose=_one_hot_argmax,
)

RAW_DRAFT_REPORTED = Variant(
    "raw draft reported",
    "the draft samples from its warped (temperature / top-k / top-p) row, but the verifier "
    "is handed the raw row",
    tell_raw_draft=True,
)

DRAFT_ONLY_WARP = Variant(
    "controls on the draft only",
    "temperature, top-k and top-p are applied to the draft but not to the target during "
    "verification, so the output follows the raw target",
    warp_target=False,
)

WRONG_BONUS_ROW = Variant(
    "bonus from the wrong row",
    "when all k drafts survive, the bonus token is drawn from the target row of the last "
    "draft's position (off by one) instead of the row after it",
    bonus_row=-2,
)

STALE_CACHE = Variant(
    "cache not rolled back",
    "after a rejection the target's key-value cache keeps the rejected drafts, so later "
    "target rows are conditioned on tokens that are not in the text",
    rollback_cache=False,
)

# --- The lists the tests and the chapter use -------------------------------------------------

#: Verifier variants that change the output distribution; each must be caught by the exact
#: enumeration and by the chi-square test.  RATIO_WITHOUT_MIN is not among them: it changes
#: no sample, and only the enumerator's check that an acceptance probability lies in [0, 1]
#: flags it.
FAULTY = (RESAMPLE_FROM_TARGET, INVERTED_RATIO, MISREPORTED_DRAFT)

#: The six mistakes of the bug-zoo chapter: the five of :data:`REPORTED`, plus the off-by-one
#: bonus row.
ZOO = (ARGMAX_DRAFT, RAW_DRAFT_REPORTED, DRAFT_ONLY_WARP, RESAMPLE_FROM_TARGET, WRONG_BONUS_ROW, STALE_CACHE)

#: The zoo mistakes that users of real implementations have reported (the book's list of
#: pitfalls from practice).  WRONG_BONUS_ROW is not among them: it is an off-by-one of the
#: same family, added because a test that stops at ``k`` tokens cannot see it.
REPORTED = (ARGMAX_DRAFT, RAW_DRAFT_REPORTED, DRAFT_ONLY_WARP, RESAMPLE_FROM_TARGET, STALE_CACHE)

#: The step of the decoding loop (the numbered comments of ``_step``) where each zoo mistake lives.
ZOO_STEP = MappingProxyType({
    ARGMAX_DRAFT.name: "1. draft",
    RAW_DRAFT_REPORTED.name: "1. draft",
    DRAFT_ONLY_WARP.name: "2. verify",
    RESAMPLE_FROM_TARGET.name: "3. accept or correct",
    WRONG_BONUS_ROW.name: "4. bonus",
    STALE_CACHE.name: "5. cache",
})

#: The sampling controls under which the zoo is shown and tested.  Two of the six mistakes
#: (RAW_DRAFT_REPORTED, DRAFT_ONLY_WARP) do nothing at all unless some control is on.
ZOO_SETTINGS = MappingProxyType({"temperature": 0.7, "top_k": 2})


# --- A test pair that remembers two tokens ---------------------------------------------------

class SecondOrderModel:
    """A model whose next token depends on the last two tokens.

    ``table[a, b]`` is the distribution after ``... a b``; the first token of a sequence is
    read as following token 0.  Follows the protocol of :mod:`speclib.lm.models`.
    """

    context_length = 2

    def __init__(self, table: np.ndarray) -> None:
        table = as_distribution(table, "table", ndim=3)
        if not table.shape[0] == table.shape[1] == table.shape[2]:
            raise ValueError(f"table: expected shape (V, V, V), got {table.shape}")
        self.table = table
        self.vocab_size = table.shape[2]

    def __call__(self, tokens: np.ndarray) -> np.ndarray:
        tokens = as_tokens(tokens, "tokens", self.vocab_size)
        previous = np.concatenate([[0], tokens[:-1]]).astype(np.int64)
        return self.table[previous, tokens]

    def __repr__(self) -> str:
        return f"SecondOrderModel(vocab_size={self.vocab_size})"


def second_order_pair(vocab_size: int = 3, draft_noise: float = 0.5, seed: int = 0,
                      concentration: float = 0.5) -> tuple[SecondOrderModel, SecondOrderModel]:
    """A (target, draft) pair of :class:`SecondOrderModel`, built like :func:`speclib.lm.models.markov_pair`.

    The target's ``V * V`` rows are Dirichlet(``concentration``) draws; the draft blurs each
    towards uniform by ``draft_noise``.

    Examples
    --------
    >>> target, draft = second_order_pair(vocab_size=3, seed=0)
    >>> target([0, 1, 2]).shape
    (3, 3)
    """
    vocab_size = as_int(vocab_size, "vocab_size", minimum=2)
    q = dirichlet_targets(vocab_size, vocab_size**2, seed, concentration).reshape((vocab_size,) * 3)
    return SecondOrderModel(q), SecondOrderModel(noisy_draft(q, draft_noise))


def zoo_pair() -> tuple[SecondOrderModel, SecondOrderModel]:
    """The bug zoo's test pair: ``second_order_pair(3, draft_noise=0.9, seed=9)``.

    Three tokens keep exact enumeration cheap; a two-token memory exposes the cache bug;
    and the draft is deliberately poor (90% uniform noise) so that rejections, the branch
    where most of the mistakes live, are common.
    """
    return second_order_pair(vocab_size=3, draft_noise=0.9, seed=9)


# --- One decoder, one switch per mistake -----------------------------------------------------

class KVCache:
    """The tokens a model's key-value cache holds, and the rows computed through it.

    A real cache stores each processed token's keys and values, and new tokens attend to all
    of them.  Simulated here by the token list itself: rows for new tokens are the model's
    rows on ``cache + new``, so whatever the cache holds, stale or not, conditions them.
    """

    def __init__(self, model: Callable, tokens: np.ndarray) -> None:
        self.model = model
        self.tokens = np.asarray(tokens, dtype=np.int64)

    def extend(self, new: np.ndarray) -> np.ndarray:
        """Feed ``new`` tokens; return one row per new token (the next-token distributions)."""
        self.tokens = np.concatenate([self.tokens, new])
        return _last_rows(self.model, self.tokens, len(new), "target")

    def rollback(self, length: int) -> None:
        """Forget everything after the first ``length`` tokens."""
        self.tokens = self.tokens[:length]


class _Draw:
    """Random choices from a generator, consumed in the order speculative_generate uses."""

    def __init__(self, rng: np.random.Generator) -> None:
        self.rng = rng

    def token(self, probs: np.ndarray) -> int:
        return sample_token(probs, self.rng)

    def coin(self, a: float) -> bool:
        return self.rng.random() < a


class _Replay:
    """Random choices replayed from a script, for exhaustive enumeration.

    Choice ``i`` takes the ``script[i]``-th possible outcome; past the script it takes the
    first one and notes how many others there were, so that the caller can explore them.
    ``prob`` is the probability of the path taken.
    """

    def __init__(self, script: list[int]) -> None:
        self.script, self.taken, self.new_choices, self.prob = script, [], [], 1.0

    def _choose(self, outcomes: list, probs: list[float]):
        i = len(self.taken)
        possible = [j for j, pr in enumerate(probs) if pr > 0]
        if i < len(self.script):
            pick = self.script[i]
        else:
            pick = 0
            self.new_choices.append((i, len(possible)))
        self.taken.append(pick)
        self.prob *= probs[possible[pick]]
        return outcomes[possible[pick]]

    def token(self, probs: np.ndarray) -> int:
        probs = np.asarray(probs, dtype=float)
        return int(self._choose(list(range(probs.size)), list(probs / probs.sum())))

    def coin(self, a: float) -> bool:
        if not 0.0 <= a <= 1.0:
            raise ValueError(f"accept: returned {a:.6g}; an acceptance probability must lie in [0, 1]")
        return self._choose([True, False], [a, 1.0 - a])

    def branches(self) -> list[list[int]]:
        """Scripts for every path that leaves this one at a choice it met for the first time."""
        return [self.taken[:i] + [j] for i, n in self.new_choices for j in range(1, n)]


def _step(tokens: np.ndarray, cache: KVCache, draft: Callable, k: int, variant: Variant,
          settings: dict, choose: _Draw | _Replay) -> tuple[np.ndarray, int]:
    """One speculative step as ``variant`` implements it: ``(emitted tokens, n_accepted)``.

    On entry the cache holds ``tokens[:-1]``; a correct step leaves it holding everything
    but the last emitted token.
    """
    # 1. Draft k tokens, remembering the row the verifier is told about each.
    #    Switches: propose (the row the token is drawn from), tell_raw_draft and report (the
    #    row the verifier is told).
    drafted, told = tokens, []
    for _ in range(k):
        raw = _last_rows(draft, drafted, 1, "draft")[0]
        p = _warp(raw, **settings)
        drafted = np.append(drafted, choose.token(variant.propose(p)))
        told.append(variant.report(raw if variant.tell_raw_draft else p))
    proposals = drafted[tokens.size:]
    # 2. One target pass through the cache: the last accepted token, then every draft.
    #    Switch: warp_target.
    q_rows = cache.extend(np.append(tokens[-1], proposals))
    if variant.warp_target:
        q_rows = _warp(q_rows, **settings)
    # 3. Keep each draft with probability accept(p(x), q(x)); at the first rejection emit a
    #    correction and stop.  Switches: accept, correct.
    for i, x in enumerate(proposals):
        if told[i][x] <= 0:
            raise ValueError(f"variant {variant.name!r}: the verifier was told p(x) = 0 for a drafted token")
        if not choose.coin(variant.accept(told[i][x], q_rows[i, x])):
            correction = choose.token(variant.correct(told[i], q_rows[i]))
            emitted, n_accepted = np.append(proposals[:i], correction), i
            break
    else:
        # 4. Every draft survived: the bonus token, from the row after the last draft.
        #    Switch: bonus_row.
        bonus = choose.token(q_rows[variant.bonus_row])
        emitted, n_accepted = np.append(proposals, bonus), k
    # 5. Forget the target's view of the rejected drafts.  Switch: rollback_cache.
    if variant.rollback_cache:
        cache.rollback(tokens.size + n_accepted)
    return emitted.astype(np.int64), n_accepted


def _check_arguments(target: Callable, draft: Callable, prompt: object, k: object, variant: object,
                     temperature: object, top_k: object, top_p: object) -> tuple[int, np.ndarray, int, dict]:
    """Validate what :func:`generate` and :func:`distribution` share: ``(V, prompt, k, settings)``."""
    vocab = _check_pair(target, draft)
    prompt = as_tokens(prompt, "prompt", vocab, allow_empty=False)
    k = as_int(k, "k", minimum=1)
    if not isinstance(variant, Variant):
        raise TypeError(f"variant: expected a speclib.book.broken.Variant, got {type(variant).__name__}")
    settings = dict(zip(("temperature", "top_k", "top_p"), _check_settings(temperature, top_k, top_p)))
    return vocab, prompt, k, settings


def generate(
    target: Callable,
    draft: Callable,
    prompt: np.ndarray,
    max_new_tokens: int,
    k: int,
    rng: np.random.Generator | int,
    variant: Variant = CORRECT,
    *,
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
) -> tuple[np.ndarray, GenerationStats]:
    """Speculative sampling with sampling controls, as ``variant`` implements it.

    The decoding loop of :func:`speclib.core.decoding.speculative_generate`, with the target
    read through a :class:`KVCache` and the sampling controls applied to each row, written
    so that every mistake in this module is one switch.  With :data:`CORRECT` the output
    follows ``warp(target, temperature, top_k, top_p)`` exactly and, for the same seed, equals
    ``speculative_generate(warp(target, ...), warp(draft, ...), ...)`` token for token.

    Parameters
    ----------
    target, draft : model
        Models following the protocol of :mod:`speclib.lm.models`, with the same vocabulary.
    prompt : array_like of int, shape (n,)
        At least one token.
    max_new_tokens : int
        How many tokens to generate (0 or more).
    k : int
        Draft length, at least 1.
    rng : numpy.random.Generator or int
    variant : Variant, default CORRECT
        Which implementation to run.
    temperature, top_k, top_p :
        The sampling controls the user asked for (see :func:`speclib.core.warping.warp_distribution`).

    Returns
    -------
    tokens : ndarray of int, shape (max_new_tokens,)
    stats : GenerationStats

    Examples
    --------
    >>> target, draft = second_order_pair(seed=0)
    >>> tokens, stats = generate(target, draft, [0], 10, k=3, rng=0, variant=STALE_CACHE)
    >>> len(tokens)
    10
    """
    _, prompt, k, settings = _check_arguments(target, draft, prompt, k, variant, temperature, top_k, top_p)
    max_new_tokens = as_int(max_new_tokens, "max_new_tokens", minimum=0)
    rng = as_generator(rng)

    tokens, cache, stats, choose = prompt.copy(), KVCache(target, prompt[:-1]), GenerationStats(), _Draw(rng)
    while tokens.size - prompt.size < max_new_tokens:
        remaining = max_new_tokens - (tokens.size - prompt.size)
        k_step = min(k, remaining)
        emitted, n_accepted = _step(tokens, cache, draft, k_step, variant, settings, choose)
        emitted = emitted[:remaining]
        tokens = np.concatenate([tokens, emitted])
        stats.record_step(k_step, n_accepted, len(emitted))
    return tokens[prompt.size:], stats


def distribution(
    target: Callable,
    draft: Callable,
    prompt: np.ndarray,
    length: int,
    k: int,
    variant: Variant = CORRECT,
    *,
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
) -> np.ndarray:
    """Exact distribution of the ``length`` tokens that :func:`generate` emits.

    Every branch of every random choice (each draft token, each accept/reject coin, each
    correction and bonus token) is followed through :func:`generate`'s own step function,
    over as many speculative steps as the ``length`` tokens take, so the result is exact up
    to rounding and describes that very code.

    Parameters
    ----------
    target, draft, prompt, k, variant, temperature, top_k, top_p :
        As in :func:`generate`.
    length : int
        Number of generated tokens (``V ** length`` may not exceed
        ``speclib.core.exact.MAX_SEQUENCES``).

    Returns
    -------
    ndarray of shape ``(V,) * length``, summing to 1, comparable with
    ``speclib.core.exact.target_sequence_distribution(warp(target, ...), prompt, length)``.

    Raises
    ------
    ValueError
        As :func:`generate`, for too large a problem, or if the variant's acceptance
        probability leaves [0, 1].

    Examples
    --------
    >>> from speclib.lm.models import markov_pair
    >>> target, draft = markov_pair(vocab_size=2, draft_noise=0.5, seed=0)
    >>> dist = distribution(target, draft, [0], 2, k=1)
    >>> float(abs(dist - target_sequence_distribution(target, [0], 2)).max()) < 1e-12
    True
    """
    vocab, prompt, k, settings = _check_arguments(target, draft, prompt, k, variant, temperature, top_k, top_p)
    length = as_int(length, "length", minimum=1)
    if vocab**length > MAX_SEQUENCES:
        raise ValueError(f"length: {vocab}**{length} sequences are too many to enumerate (limit {MAX_SEQUENCES})")

    out = np.zeros((vocab,) * length)

    def expand(tokens: np.ndarray, cached: np.ndarray, prob: float) -> None:
        remaining = length - (tokens.size - prompt.size)
        if remaining == 0:
            out[tuple(tokens[prompt.size:])] += prob
            return
        # Every outcome of one step, merged by what it leaves behind: the text and the cache.
        outcomes: dict[tuple, float] = {}
        scripts: list[list[int]] = [[]]
        while scripts:
            choose = _Replay(scripts.pop())
            cache = KVCache(target, cached)
            emitted, _ = _step(tokens, cache, draft, min(k, remaining), variant, settings, choose)
            key = (tuple(emitted[:remaining]), tuple(cache.tokens))
            outcomes[key] = outcomes.get(key, 0.0) + choose.prob
            scripts.extend(choose.branches())
        for (emitted, cache_tokens), p_step in outcomes.items():
            expand(np.concatenate([tokens, emitted]).astype(np.int64), np.array(cache_tokens, dtype=np.int64), prob * p_step)

    expand(prompt, prompt[:-1], 1.0)
    return out


def distance_from_target(
    target: Callable,
    draft: Callable,
    prompt: np.ndarray,
    length: int,
    k: int,
    variant: Variant = CORRECT,
    *,
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
) -> float:
    """Exact total-variation distance between ``variant``'s output and the warped target's.

    The reference is what the user asked for: ``warp(target, temperature, top_k, top_p)``
    sampled token by token.  0 (up to rounding) for :data:`CORRECT`.

    Examples
    --------
    >>> target, draft = second_order_pair(seed=0)
    >>> distance_from_target(target, draft, [0], 2, k=1) < 1e-12
    True
    >>> distance_from_target(target, draft, [0], 2, k=1, variant=RESAMPLE_FROM_TARGET) > 0.01
    True
    """
    settings = dict(temperature=temperature, top_k=top_k, top_p=top_p)
    spec = distribution(target, draft, prompt, length, k, variant, **settings)
    want = target_sequence_distribution(warp(target, **settings), prompt, length)
    return float(0.5 * np.abs(spec - want).sum())


# --- Verifiers someone shipped: audit them (the chapter's "find the bug" exercises) ----------

def shipped_verify_a(draft_tokens: np.ndarray, p_draft: np.ndarray, q_target: np.ndarray,
                     rng: np.random.Generator | int, *, bonus: bool = True) -> Verification:
    """A verifier from a code review, with the signature of speclib.core.sampling.verify."""
    rng = as_generator(rng)
    p_draft, q_target = np.asarray(p_draft, dtype=float), np.asarray(q_target, dtype=float)
    k = len(draft_tokens)
    for i, x in enumerate(draft_tokens):
        if rng.random() < min(1.0, q_target[i, x] / p_draft[i, x]):
            continue
        residual = np.maximum(q_target[i] - p_draft[i], 0.0)
        fix = sample_token(residual / residual.sum(), rng)
        return Verification(np.append(draft_tokens[:i], fix), i)
    if not bonus:
        return Verification(np.array(draft_tokens), k)
    return Verification(np.append(draft_tokens, sample_token(q_target[k - 1], rng)), k)


def shipped_verify_b(draft_tokens: np.ndarray, p_draft: np.ndarray, q_target: np.ndarray,
                     rng: np.random.Generator | int, *, bonus: bool = True) -> Verification:
    """Another one from the same review, with the signature of speclib.core.sampling.verify."""
    rng = as_generator(rng)
    p_draft, q_target = np.asarray(p_draft, dtype=float), np.asarray(q_target, dtype=float)
    out, n_accepted, rejected = [], 0, False
    for i, x in enumerate(draft_tokens):
        if rng.random() < min(1.0, q_target[i, x] / p_draft[i, x]):
            out.append(int(x))
            n_accepted += 0 if rejected else 1
        else:
            residual = np.maximum(q_target[i] - p_draft[i], 0.0)
            out.append(sample_token(residual / residual.sum(), rng))
            rejected = True
    if bonus and not rejected:
        out.append(sample_token(q_target[len(draft_tokens)], rng))
    return Verification(np.array(out, dtype=np.int64), n_accepted)
