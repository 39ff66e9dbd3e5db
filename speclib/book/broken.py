"""The bug zoo: faulty speculative decoders, kept apart from the main API.

A test of exactness is only worth something if it fails on a decoder that is not exact.
Each :class:`Variant` here is the correct decoder with one knob turned: a mistake that
users of real implementations have reported, an off-by-one of the same family, or a
textbook one.  There are two levels.

Every variant is a set of faulty *parts* plugged into the one loop,
:func:`speclib.core.decoding.speculative_generate`: a faulty verifier (``accept``,
``correct``, ``report``, ``bonus_row``), a faulty proposer (``propose``, ``tell_raw_draft``), a
target without the sampling controls (``warp_target``) or a target whose cache forgets
nothing on rollback (``rollback_cache``).  :meth:`Variant.plug` assembles them;
:func:`generate` runs the loop with them, and :func:`distribution` computes the exact
distribution of that same loop's output with :func:`speclib.core.exact.output_distribution`,
which follows every branch of its random choices, so the enumeration cannot drift from the
sampler.  With :data:`CORRECT` and the same seed, :func:`generate` emits exactly the tokens of
:func:`speclib.core.decoding.speculative_generate` on the warped pair.  :data:`FAULTY` lists
the variants whose mistake lies inside the verifier; :data:`ZOO` lists the six mistakes the
book's bug-zoo chapter studies.

The cache bug is invisible to a first-order Markov target (its row reads one token, and
the stale entries sit further back), so the zoo's test pair, :func:`second_order_pair`,
remembers two tokens.

The module, in order:

1. :class:`Variant` and the variants: :data:`CORRECT`, the verifier variants of
   :data:`FAULTY` (plus :data:`RATIO_WITHOUT_MIN`), the decoder variants, and :data:`ZOO`
   with the two facts the chapter's table shows, :data:`REPORTED` and :data:`ZOO_STEP`;
2. the mistakes the loop itself refuses, before any token comes out (:data:`CAUGHT_BY_THE_LOOP`,
   :func:`loop_refusals`), among them :class:`MisalignedModel`, a model returning one row too
   many;
3. the test pair: :class:`SecondOrderModel`, :func:`second_order_pair`, :func:`zoo_pair`;
4. the faulty parts (:class:`StaleCache`, the zoo's proposer and verifier), :func:`generate`,
   :func:`distribution` and :func:`distance_from_target`; the numbered steps the chapter
   refers to are the numbered comments of :meth:`speclib.core.decoding.SpeculativeRun.step`;
5. two verifiers "from a code review", for the chapter's find-the-bug exercises;
6. the find-the-bug exercises of other chapters: a top-k heads block (chapter 9b) and a
   batched target pass that hands rows to the wrong requests (chapter 15,
   :func:`shipped_batched_extend_logits`), and a widened export for an engine whose final
   layer norm was copied unchanged (chapter 16, :func:`shipped_widen`).
"""

from __future__ import annotations

import functools
from types import MappingProxyType
from typing import Callable, NamedTuple

import numpy as np

from .._validate import as_bool, as_distribution, as_generator, as_int, as_tokens
from ..core.cache import RecomputeCache
from ..core.decoding import GenerationStats, _check_model, speculative_generate
from ..core.exact import output_distribution, target_sequence_distribution
from ..core.proposers import DraftModel
from ..core.sampling import (Verification, _ratio_step, _residual, acceptance_probability, check_block, sample_token,
                             verify)
from ..core.warping import _check_pair, _check_settings, _warp, warp
from ..lm.models import dirichlet_targets, noisy_draft


def _identity(p: np.ndarray) -> np.ndarray:
    return p


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
    verifier (:attr:`verifier`), and so does ``bonus_row``; the other four are faulty
    proposers, or a faulty target, assembled by :meth:`plug`:

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
        """Whether the mistake lies inside the verifier alone."""
        return self.propose is _identity and self.warp_target and not self.tell_raw_draft and self.rollback_cache

    @property
    def verifier(self) -> Callable:
        """The variant's verifier: :func:`speclib.core.sampling.verify` with its switches turned.

        Same signature as ``verify``; its ``step`` is what the loop runs.
        """
        if (self.accept, self.correct, self.report, self.bonus_row) == (acceptance_probability, _residual,
                                                                         _identity, -1):
            return verify
        step = functools.partial(_zoo_verify_step, accept=self.accept, correct=self.correct, report=self.report,
                                 bonus_row=self.bonus_row)

        def zoo_verifier(draft_tokens, p_draft, q_target, rng, *, bonus: bool = True) -> Verification:
            from ..core.sampling import as_chooser, check_block

            return step(*check_block(draft_tokens, p_draft, q_target), as_chooser(rng), bonus=as_bool(bonus, "bonus"))

        zoo_verifier.step = step
        zoo_verifier.__name__ = f"verify ({self.name})"
        return zoo_verifier

    def plug(self, target: Callable, draft: Callable, *, temperature: float = 1.0, top_k: int | None = None,
             top_p: float | None = None) -> dict:
        """The parts of this variant for :func:`speculative_generate`: ``target``, ``draft``, ``verifier``.

        ``target`` and ``draft`` are the raw models; the sampling controls are applied as the
        variant applies them (the correct way: to both models).
        """
        _check_pair(target, draft)
        settings = dict(zip(("temperature", "top_k", "top_p"), _check_settings(temperature, top_k, top_p)))
        warped = warp(target, **settings) if self.warp_target else target
        if self.propose is _identity and not self.tell_raw_draft:
            proposer = warp(draft, **settings)
        else:
            proposer = _ZooProposer(draft, settings, self.propose, self.tell_raw_draft)
        return {"target": warped if self.rollback_cache else _StaleTarget(warped), "draft": proposer,
                "verifier": self.verifier}


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
    "probability (`u < q/p` and `u < min(1, q/p)` are the same event, so a sampler that "
    "took it would emit exactly the tokens of the correct one), and the loop refuses it",
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
#: enumeration and by the chi-square test.  RATIO_WITHOUT_MIN is not among them: it would
#: change no sample, and the loop refuses it (every coin's probability must lie in [0, 1]);
#: it is one of the mistakes of :data:`CAUGHT_BY_THE_LOOP`.
FAULTY = (RESAMPLE_FROM_TARGET, INVERTED_RATIO, MISREPORTED_DRAFT)

#: The six mistakes of the bug-zoo chapter: the five of :data:`REPORTED`, plus the off-by-one
#: bonus row.
ZOO = (ARGMAX_DRAFT, RAW_DRAFT_REPORTED, DRAFT_ONLY_WARP, RESAMPLE_FROM_TARGET, WRONG_BONUS_ROW, STALE_CACHE)

#: The zoo mistakes that users of real implementations have reported (the book's list of
#: pitfalls from practice).  WRONG_BONUS_ROW is not among them: it is an off-by-one of the
#: same family, added because a test that stops at ``k`` tokens cannot see it.
REPORTED = (ARGMAX_DRAFT, RAW_DRAFT_REPORTED, DRAFT_ONLY_WARP, RESAMPLE_FROM_TARGET, STALE_CACHE)

#: The step of the decoding loop (the numbered comments of ``SpeculativeRun.step``) where each zoo mistake lives.
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


# --- Mistakes the loop refuses outright ---------------------------------------------------------

class MisalignedModel:
    """A model with an off-by-one: it returns one row more than it is given tokens.

    The extra last row favours token 3 (of at least four).  Taking the last ``n`` rows, as a
    loop that only checked for too *few* rows would, shifts every row by one position: with
    this model such a loop emitted ``[3 3 3 3 3]``.  The loop refuses it instead.
    """

    def __init__(self, model: Callable) -> None:
        vocab = _check_model(model, "model")
        if vocab < 4:
            raise ValueError(f"model: the extra row favours token 3, so the vocabulary needs at least 4 tokens, "
                             f"got {vocab}")
        self.model, self.vocab_size = model, vocab

    def __call__(self, tokens: np.ndarray) -> np.ndarray:
        rows = self.model(tokens)
        extra = np.full((1, self.vocab_size), 0.01)
        extra[0, 3] = 1.0 - 0.01 * (self.vocab_size - 1)
        return np.concatenate([rows, extra])

    def __repr__(self) -> str:
        return f"MisalignedModel({self.model!r})"


def _nan_accept(p_x: float, q_x: float) -> float:
    return float("nan")


def _negative_correction(p: np.ndarray, q: np.ndarray) -> np.ndarray:
    return q - p  # the residual without max(0, .) and without normalising


#: Mistakes that need no test at all: the loop itself refuses each one, at its boundary, with
#: an error naming the part and what it returned, before a single token comes out.  Each entry
#: is ``name -> (description, parts)``: ``parts(target, draft)`` gives the arguments of
#: :func:`speclib.core.decoding.speculative_generate` that carry the mistake
#: (:func:`loop_refusals` runs them).
CAUGHT_BY_THE_LOOP = MappingProxyType({
    "model returns one row too many": (
        "a target whose model returns one row more than the tokens it is given (the rows would "
        "all shift by one position)",
        lambda target, draft: {"target": MisalignedModel(target)}),
    "acceptance probability NaN": (
        "an accept rule that returns NaN (a 0/0), which every comparison with a uniform number "
        "would read as a rejection",
        lambda target, draft: {"verifier": functools.partial(verify, accept=_nan_accept)}),
    RATIO_WITHOUT_MIN.name: (
        RATIO_WITHOUT_MIN.description.split(";")[0],
        lambda target, draft: {"verifier": RATIO_WITHOUT_MIN.verifier}),
    "negative correction row": (
        "a correction rule that returns q - p, negative where the draft over-proposes",
        lambda target, draft: {"verifier": functools.partial(verify, accept=lambda p_x, q_x: 0.0,
                                                              correct=_negative_correction)}),
    "emits after a rejection": (
        "a verifier that goes on emitting drafts after the first rejection "
        "(shipped_verify_b, the second find-the-bug exercise)",
        lambda target, draft: {"verifier": shipped_verify_b}),
})


def loop_refusals(target: Callable | None = None, draft: Callable | None = None) -> dict[str, str]:
    """Run each mistake of :data:`CAUGHT_BY_THE_LOOP` through the loop; return the error each one gets.

    ``target`` and ``draft`` default to a Markov pair over four tokens.  Raises AssertionError
    if a mistake runs to the end (the loop no longer catches it).

    Examples
    --------
    >>> refusals = loop_refusals()
    >>> refusals["model returns one row too many"]
    'ValueError: target: a model must map tokens of shape (n,) to probabilities of shape (n, 4), exactly one row per token; it returned 5 rows for 4 tokens'
    """
    from ..lm.models import markov_pair

    if target is None and draft is None:
        target, draft = markov_pair(vocab_size=4, draft_noise=0.9, seed=1)
    elif target is None or draft is None:
        raise TypeError("target, draft: give both models, or neither (a Markov pair over four tokens)")
    else:
        _check_pair(target, draft)
        if target.vocab_size < 4:
            raise ValueError(f"target: the misaligned model's extra row favours token 3, so the vocabulary needs "
                             f"at least 4 tokens, got {target.vocab_size}")
    speculative_generate(target, draft, [0], 20, 3, 0)  # the correct parts must run (an error here is theirs)
    out = {}
    for name, (_, parts) in CAUGHT_BY_THE_LOOP.items():
        arguments = {"target": target, "draft": draft, "k": 3, **parts(target, draft)}
        try:
            speculative_generate(arguments.pop("target"), arguments.pop("draft"), [0], 20, arguments.pop("k"), 0,
                                 **arguments)
        except (TypeError, ValueError) as error:
            out[name] = f"{type(error).__name__}: {error}"
        else:
            raise AssertionError(f"{name}: the loop ran to the end")
    return out


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


# --- The faulty parts ------------------------------------------------------------------------

def _zoo_verify_step(draft_tokens, p_draft, q_target, choose, *, bonus: bool = True, accept=acceptance_probability,
                     correct=_residual, report=_identity, bonus_row: int = -1) -> Verification:
    """The ratio rule with the zoo's switches: what the verifier is told, accept, correct, bonus row."""
    told = p_draft if report is _identity else np.array([report(row) for row in p_draft])
    k = len(draft_tokens)
    if bonus_row == -1 or not bonus:
        return _ratio_step(draft_tokens, told, q_target, choose, bonus=bonus, accept=accept, correct=correct)
    out = _ratio_step(draft_tokens, told, q_target, choose, bonus=False, accept=accept, correct=correct)
    if out.n_accepted < k:
        return out
    # 4. Every draft survived: the bonus token, from the wrong row.
    return Verification(np.append(draft_tokens, choose.token(q_target[bonus_row])), k)


class _ZooProposer(DraftModel):
    """A draft with the sampling controls applied, and the zoo's proposing mistakes."""

    def __init__(self, draft: Callable, settings: dict, propose: Callable, tell_raw_draft: bool) -> None:
        super().__init__(draft)
        self.settings, self._propose, self.tell_raw_draft = settings, propose, tell_raw_draft
        self._raw = None

    def row(self, raw: np.ndarray) -> np.ndarray:
        self._raw = raw
        return _warp(raw, **self.settings)

    def pick(self, p: np.ndarray) -> np.ndarray:
        return self._propose(p)

    def report(self, p: np.ndarray) -> np.ndarray:
        return self._raw if self.tell_raw_draft else p


class StaleCache(RecomputeCache):
    """A cache whose rollback forgets nothing: the rejected drafts' entries stay and condition later rows.

    ``len(cache)`` follows the rollbacks, as the loop expects, but the stored tokens (and so
    the rows computed from them) keep everything ever fed; ``tokens`` shows them all.
    """

    def __init__(self, model: Callable) -> None:
        super().__init__(model)
        self._logical = 0

    def __len__(self) -> int:
        return self._logical

    def extend(self, tokens: np.ndarray) -> np.ndarray:
        rows = super().extend(tokens)
        self._logical += rows.shape[0]
        return rows

    def rollback(self, length: int) -> None:
        self._logical = as_int(length, "length", minimum=0)


class _StaleTarget:
    """The target read through a :class:`StaleCache`."""

    def __init__(self, model: Callable) -> None:
        self.model, self.vocab_size = model, model.vocab_size
        self.context_length = getattr(model, "context_length", None)

    def __call__(self, tokens: np.ndarray) -> np.ndarray:
        return self.model(tokens)

    def cache(self) -> StaleCache:
        return StaleCache(self.model)


def _check_variant(variant: object) -> "Variant":
    if not isinstance(variant, Variant):
        raise TypeError(f"variant: expected a speclib.book.broken.Variant, got {type(variant).__name__}")
    return variant


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

    The one loop, :func:`speclib.core.decoding.speculative_generate`, with the parts of
    :meth:`Variant.plug`: the sampling controls applied to each row, and the variant's
    mistake plugged in.  With :data:`CORRECT` the output
    follows ``warp(target, temperature, top_k, top_p)`` exactly and, for the same seed, equals
    ``speculative_generate(warp(target, ...), warp(draft, ...), ...)`` token for token.

    ``target``, ``draft``, ``prompt``, ``max_new_tokens``, ``k`` and ``rng`` are those of
    ``speculative_generate``, and so are the returned ``(tokens, stats)``; ``variant`` says
    which implementation runs; ``temperature``, ``top_k`` and ``top_p`` are the sampling
    controls the user asked for (see :func:`speclib.core.warping.warp_distribution`).

    Examples
    --------
    >>> target, draft = second_order_pair(seed=0)
    >>> tokens, stats = generate(target, draft, [0], 10, k=3, rng=0, variant=STALE_CACHE)
    >>> len(tokens)
    10
    """
    parts = _check_variant(variant).plug(target, draft, temperature=temperature, top_k=top_k, top_p=top_p)
    return speculative_generate(prompt=prompt, max_new_tokens=max_new_tokens, k=k, rng=rng, **parts)


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
    correction and bonus token) is followed through the loop's own step
    (:func:`speclib.core.exact.output_distribution`), over as many speculative steps as the
    ``length`` tokens take, so the result is exact up to rounding and describes that very code.

    The arguments are those of :func:`generate`, with ``length`` (the number of generated
    tokens, ``V ** length`` at most ``speclib.core.exact.MAX_SEQUENCES``) for
    ``max_new_tokens``.  Returns an array of shape ``(V,) * length`` summing to 1, comparable
    with ``target_sequence_distribution(warp(target, ...), prompt, length)``; raises
    ValueError as :func:`generate` does, for too large a problem, or if the variant's
    acceptance probability leaves [0, 1].

    Examples
    --------
    >>> from speclib.lm.models import markov_pair
    >>> target, draft = markov_pair(vocab_size=2, draft_noise=0.5, seed=0)
    >>> dist = distribution(target, draft, [0], 2, k=1)
    >>> float(abs(dist - target_sequence_distribution(target, [0], 2)).max()) < 1e-12
    True
    """
    parts = _check_variant(variant).plug(target, draft, temperature=temperature, top_k=top_k, top_p=top_p)
    return output_distribution(prompt=prompt, length=length, k=k, **parts)


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


def shipped_verify_b(draft_tokens: np.ndarray,
                     p_draft: np.ndarray, q_target: np.ndarray,
                     rng: np.random.Generator | int, *,
                     bonus: bool = True) -> Verification:
    """Another one from the same review, with the signature of
    speclib.core.sampling.verify."""
    rng = as_generator(rng)
    p_draft = np.asarray(p_draft, dtype=float)
    q_target = np.asarray(q_target, dtype=float)
    out, n_accepted, rejected = [], 0, False
    for i, x in enumerate(draft_tokens):
        ratio = q_target[i, x] / p_draft[i, x]
        if rng.random() < min(1.0, ratio):
            out.append(int(x))
            n_accepted += 0 if rejected else 1
        else:
            residual = np.maximum(q_target[i] - p_draft[i], 0.0)
            out.append(sample_token(residual / residual.sum(), rng))
            rejected = True
    if bonus and not rejected:
        out.append(sample_token(q_target[len(draft_tokens)], rng))
    return Verification(np.array(out, dtype=np.int64), n_accepted)


def _checked_block(verifier: Callable) -> Callable:
    """``verifier`` with its block checked as :func:`speclib.core.sampling.verify` checks it.

    Applied after the definitions above, so that ``inspect.getsource`` (which follows
    ``__wrapped__``) still prints the code under review exactly as it was submitted.
    """
    @functools.wraps(verifier)
    def checked(draft_tokens, p_draft, q_target, rng, *, bonus=True):
        draft_tokens, p_draft, q_target = check_block(draft_tokens, p_draft, q_target)
        return verifier(draft_tokens, p_draft, q_target, rng, bonus=as_bool(bonus, "bonus"))

    return checked


shipped_verify_a = _checked_block(shipped_verify_a)
shipped_verify_b = _checked_block(shipped_verify_b)


# --- Chapter 9b: a heads drafter that samples from truncated rows ----------------------------

def shipped_topk_block(head_rows, choose, top_k):
    """A Medusa-style block as a contributor shipped it.

    Draft i comes from head i's row cut to its top_k most likely
    tokens, so that the heads draft confident tokens only.
    """
    from ..core.warping import warp_distribution

    rows = np.asarray(head_rows, dtype=float)
    tokens = [choose.token(warp_distribution(row, top_k=top_k))
              for row in rows]
    return np.array(tokens, dtype=np.int64), rows


class HeadsBlockProposer:
    """A proposer whose block comes from ``block(head_rows, choose, top_k)``: context-free heads.

    Head ``i``'s row is ``head_rows[i]`` whatever the text (Medusa's heads, stripped to what
    the verification needs), so the exact enumerator can replay a whole generation with any
    ``block`` function, a student's included.
    """

    def __init__(self, block, head_rows, top_k: int = 2) -> None:
        if not callable(block):
            raise TypeError(f"block: expected a function (head_rows, choose, top_k) -> (tokens, rows), "
                            f"got {type(block).__name__}")
        self.block, self.head_rows, self.top_k = block, np.asarray(head_rows, dtype=float), top_k
        self.vocab_size = self.head_rows.shape[1]

    def start(self, prompt, vocab_size: int) -> None:
        pass

    def propose(self, text, k: int, policy, choose, timings):
        from ..core.proposers import Proposal

        tokens, rows = self.block(self.head_rows[:k], choose, self.top_k)
        return Proposal(np.asarray(tokens, dtype=np.int64), np.asarray(rows, dtype=float), 1)

    def accept(self, length: int) -> None:
        pass


# --- Chapter 15: a batched target pass that hands rows to the wrong requests ------------------

def shipped_batched_extend_logits(caches, feeds):
    """A shorter batched pass, as shipped.

    Same contract as speclib.lm.batched.batched_extend_logits:
    feed feeds[i] to caches[i], all in one pass, and return
    rows[i], the raw scores of caches[i] for feeds[i].
    """
    from ..lm.batched import (_check_batch, _joins_batch,
                              _run_stacked)

    model, feeds = _check_batch(caches, feeds)
    rows, joined = [], []
    for cache, tokens in zip(caches, feeds):
        if tokens.size and _joins_batch(cache, tokens.size):
            joined.append((cache, tokens))
        else:  # its window moves: the sequence's own pass
            rows.append(cache._extend_logits(tokens))
    if joined:
        rows += _run_stacked(model, [c for c, _ in joined],
                             [t for _, t in joined])
    return rows


def shipped_batched_extend(caches, feeds):
    """The shipped pass's rows as next-token distributions: the ``target_pass`` that
    :func:`speclib.core.variants.batch_generate` takes, as :func:`speclib.lm.batched.batched_extend`
    is for the library's pass."""
    from ..lm.batched import _softmax

    temperature = caches[0].model.temperature if caches else 1.0
    return [_softmax(r, temperature) for r in shipped_batched_extend_logits(caches, feeds)]


# --- Chapter 16: a widened export whose final layer norm was copied as it was ---------------

def shipped_widen(model, factor):
    """An export for an engine that needs wider heads,
    as shipped (exercise ex-16-2).

    The library widens the embeddings and the blocks
    (widened_body: the residual stream stored `factor`
    times, heads padded with zeros); the contributor wrote
    the final layer norm and the output embedding.
    """
    import numpy as np

    from ..lm.export import wider_transformer, widened_body

    params = widened_body(model, factor)
    P = model.params
    params["ln_f.g"] = np.concatenate([P["ln_f.g"]] * factor)
    params["ln_f.b"] = np.concatenate([P["ln_f.b"]] * factor)
    if not model.config.tied:
        w_out = [P["w_out"]] * factor
        params["w_out"] = np.concatenate(w_out, axis=0)
    return wider_transformer(model, factor, params)
