"""What the practitioner's guide computes: an engine's counters in the book's terms, the draft
length for a batch size from measured pass costs, and the map of the engines' settings.

The guide (``book/guide.ipynb``) reads every measured number from the book's record
(:mod:`speclib.book.record`); this module turns those numbers into its answers.
"""

from __future__ import annotations

from typing import NamedTuple, Sequence

from .._validate import MAX_DRAFT_LENGTH, as_int_list, as_probability_array


def counters_in_book_terms(per_position: Sequence[float]) -> dict:
    """An engine's per-position acceptance rates as the book counts them.

    ``per_position[i]`` is the share of drafting steps whose draft ``i + 1`` was kept (what
    vLLM and llama.cpp print as the "acceptance rate per position"; each is at most the one
    before it, since a draft is judged only when all before it were kept).  Returns

    - ``alpha``: kept / judged drafts, the book's acceptance rate: a step judges its first
      draft, and draft ``i + 1`` only when draft ``i`` was kept;
    - ``per_drafted``: kept / drafted, what an engine's "draft acceptance rate" divides by
      (it falls with ``k`` by construction);
    - ``tokens_per_pass``: one plus the drafts kept per step, the engines' "mean acceptance
      length".

    Examples
    --------
    >>> r = counters_in_book_terms([0.8, 0.6, 0.4])
    >>> round(r["alpha"], 4), round(r["per_drafted"], 4), round(r["tokens_per_pass"], 2)
    (0.75, 0.6, 2.8)
    """
    rates = as_probability_array(per_position, "per_position")
    if rates.ndim != 1 or rates.size < 1:
        raise ValueError(f"per_position: expected one rate per draft position, got shape {rates.shape}")
    if (rates[1:] > rates[:-1] + 1e-12).any():
        raise ValueError("per_position: a later position cannot keep more drafts than an earlier one "
                         f"(got {rates.tolist()}): are these rates conditional on the earlier positions?")
    kept = float(rates.sum())
    judged = 1.0 + float(rates[:-1].sum())
    return {"alpha": kept / judged, "per_drafted": kept / rates.size, "tokens_per_pass": 1.0 + kept}


class BatchChoice(NamedTuple):
    """The cost model's choice at one batch size: ``k`` (0: speculation off) and every prediction."""

    batch_size: int
    k: int
    predicted: dict  #: k -> predicted speed-up over plain decoding at this batch size


def batch_costs(record, batch_size: int, passes: str = "numpy", device: str = "cpu",
                subject: str = "pair") -> tuple[float, dict]:
    """``(c_B, {n: r_B(n)})`` at one batch size, from the record's batched passes.

    ``c_B = B t_D / t_T(B, 1)``: the draft run request by request, per drafted token, in plain
    batched passes, from ``c/<subject>/B1/...`` (``t_D / t_T(1, 1)``) and the one-token passes
    ``t1_ms/target/B<b>/...``; ``r_B(n)`` is ``r<n>/target/B<b>/...``.
    """
    b = as_int_list([batch_size], "batch_size", minimum=1)[0]
    tail = f"isolated/{passes}/{device}"
    t1 = record.value(f"t1_ms/target/B{b}/{tail}")
    c_b = b * record.value(f"c/{subject}/B1/{tail}") * record.value(f"t1_ms/target/B1/{tail}") / t1
    prefix = f"/target/B{b}/{tail}"
    r_b = {int(key[1:key.index("/")]): record.value(key) for key in record.names("r")
           if key.endswith(prefix) and key[1:key.index("/")].isdigit()}
    return c_b, r_b


def choose_k_per_batch(alpha: float, record, batch_sizes: Sequence[int], ks: Sequence[int],
                       passes: str = "numpy", device: str = "cpu", subject: str = "pair") -> list[BatchChoice]:
    """For each batch size, the ``k`` in ``ks`` with the largest predicted speed-up, or 0 when none beats 1.

    The costs come from :func:`batch_costs`; the prediction is
    :func:`speclib.core.cost.speedup_with_overhead` with ``c_B`` and ``r_B(k+1)`` and the loop's
    own work left out (an upper bound).
    """
    from ..core.cost import speedup_with_overhead

    alpha = float(as_probability_array(alpha, "alpha"))
    ks = as_int_list(ks, "ks", minimum=1, maximum=MAX_DRAFT_LENGTH)
    out = []
    for b in as_int_list(batch_sizes, "batch_sizes", minimum=1):
        c_b, r_b = batch_costs(record, b, passes, device, subject)
        missing = [k for k in ks if k + 1 not in r_b]
        if missing:
            raise KeyError(f"record: no r{missing[0] + 1}/target/B{b}/isolated/{passes}/{device}")
        predicted = {k: speedup_with_overhead(alpha, k, c_b, r_b[k + 1]) for k in ks}
        best = max(predicted, key=predicted.get)
        out.append(BatchChoice(b, best if predicted[best] > 1.0 else 0, predicted))
    return out


#: The engines' settings for each part of the book, with where the documentation puts them and
#: what it says of their start: (what, vLLM, SGLang, llama.cpp, transformers).  Values are the
#: engines' documented defaults (vLLM 0.32 documentation, SGLang's speculative decoding
#: documentation, llama.cpp's server README, transformers' generation strategies), as of 2026.
ENGINE_SETTINGS: tuple[tuple[str, str, str, str, str], ...] = (
    ("draft model",
     '`"method": "draft_model"`, `"model"`',
     "`--speculative-algorithm STANDALONE`, `--speculative-draft-model-path`",
     "`--spec-draft-model` (`-md`)",
     "`assistant_model=`"),
    ("draft length k",
     '`"num_speculative_tokens"` (no default: you set it)',
     "`--speculative-num-steps` (3 by default for STANDALONE)",
     "`--spec-draft-n-max` (3; older builds: `--draft-max`, 16)",
     "`num_assistant_tokens`"),
    ("k per batch size, 0 = off",
     '`"num_speculative_tokens_per_batch_size"`: `[start, end, k]` ranges',
     "none per batch size; `--speculative-adaptive` moves k with acceptance",
     "none",
     "no batched assisted generation"),
    ("stop when the draft is unsure",
     "none",
     "none",
     "`--spec-draft-p-min` (0.0: off)",
     "`assistant_confidence_threshold`"),
    ("sampled, not greedy, drafts",
     '`"draft_sample_method": "probabilistic"`',
     "none",
     "`--spec-draft-sampling probabilistic` (greedy by default)",
     "drafts sample when `do_sample=True`"),
    ("n-gram lookup",
     '`"method": "ngram"`, `"prompt_lookup_min"`, `"prompt_lookup_max"` (5 and 5)',
     "`--speculative-algorithm NGRAM`",
     "`--spec-type ngram-simple` (and other `ngram-*` types)",
     "`prompt_lookup_num_tokens`"),
)

