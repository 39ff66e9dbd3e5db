"""The record of the book's pair and drafters on an accelerator (``benchmarks/accelerator.py``).

The record is JSON in ``speclib/data/accelerator_pair.json``: its ``provenance`` (date,
commit, the accelerator, PyTorch and CUDA versions, the host processor), its ``settings``
(prompts, draft lengths, repetitions), and four measurements: ``agreement`` (the device's
logits against numpy's), ``isolated`` (the target's cached passes over 1..16 tokens, on the
device and numpy on the host), ``cost`` (each drafter's ``c`` in the loop) and ``drafters``
(the paired wall-clock speed-up at every ``k``).  :func:`check_accelerator_record` refuses a
record that lacks any of it, names what is wrong, and refuses a ``quick`` record (the
script's test run); :func:`accelerator_summary` is what chapter 7 shows.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np

from ..lm.drafters import DRAFTER_NAMES

#: Where ``benchmarks/accelerator.py`` writes the record.
ACCELERATOR_RECORD = Path(__file__).resolve().parent.parent / "data" / "accelerator_pair.json"
#: The drafters whose ``c`` the record measures (all of them).
NETWORKS = DRAFTER_NAMES
#: Largest |logit difference| between the device and numpy that the record may show: float32
#: rounding of logits of a few units, summed over four layers, stays far below it.
LOGIT_TOLERANCE = 1e-3

_PER_K = ("speedup_median", "speedup_q25", "speedup_q75", "acceptance", "c", "r", "tokens_per_pass",
          "outside_per_step")


def _need(mapping: object, key: str, where: str):
    if not isinstance(mapping, dict) or key not in mapping:
        raise ValueError(f"record: {where} has no {key!r}")
    return mapping[key]


def _numbers(values: object, where: str, n: int | None = None, positive: bool = True,
             missing: bool = False) -> list[float]:
    """``values`` if a list of (``n``) finite numbers (> 0 if ``positive``; NaN allowed if ``missing``)."""
    if not isinstance(values, list) or not values or (n is not None and len(values) != n):
        raise ValueError(f"record: {where} should be a list of {n or 'some'} numbers")
    for v in values:
        if missing and isinstance(v, float) and math.isnan(v):
            continue  # a setting the runs never reached (Medusa's heads draft at most their number)
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or (positive and v <= 0):
            raise ValueError(f"record: {where} holds {v!r}, not a {'positive ' if positive else ''}finite number")
    return values


def check_accelerator_record(record: object) -> dict:
    """``record`` unchanged if it has every part the book reads, else a ValueError that names the part.

    Examples
    --------
    >>> check_accelerator_record({"provenance": {}})
    Traceback (most recent call last):
    ...
    ValueError: record: provenance has no 'date'
    """
    prov = _need(record, "provenance", "the record")
    for key in ("date", "commit", "accelerator", "host", "python", "numpy", "quick", "seconds"):
        _need(prov, key, "provenance")
    if prov["quick"] is not False:
        raise ValueError("record: provenance says quick: a test run of the script, not a measurement")
    acc = prov["accelerator"]
    for key in ("name", "torch", "device", "tf32"):
        _need(acc, key, "provenance.accelerator")
    if acc["tf32"] is not False:
        raise ValueError("record: provenance.accelerator.tf32 should be false (the rows must be float32's)")
    settings = _need(record, "settings", "the record")
    for key in ("ks", "reps", "n_new", "prompts", "pass_tokens"):
        _need(settings, key, "settings")
    ks = settings["ks"]
    agreement = _need(record, "agreement", "the record")
    diffs = _need(agreement, "max_abs_logit_difference", "agreement")
    for name in ("target", "pair", "distilled", "early-exit"):
        d = _need(diffs, name, "agreement.max_abs_logit_difference")
        _numbers([d], f"agreement.max_abs_logit_difference.{name}", positive=False)
        if d > LOGIT_TOLERANCE:
            raise ValueError(f"record: agreement.max_abs_logit_difference.{name} is {d:.3g}, above {LOGIT_TOLERANCE:g}: "
                             "the device computes another network")
    same = _need(agreement, "same_tokens_fraction", "agreement")
    for name in DRAFTER_NAMES:
        _numbers([_need(same, name, "agreement.same_tokens_fraction")], f"agreement.same_tokens_fraction.{name}",
                 positive=False)
    isolated = _need(record, "isolated", "the record")
    for where in ("device", "host_numpy"):
        part = _need(isolated, where, "isolated")
        n = len(_numbers(_need(part, "n_tokens", f"isolated.{where}"), f"isolated.{where}.n_tokens"))
        for key in ("median_ms", "q25_ms", "q75_ms", "r"):
            _numbers(_need(part, key, f"isolated.{where}"), f"isolated.{where}.{key}", n)
        if not part["q25_ms"][0] <= part["median_ms"][0] <= part["q75_ms"][0]:
            raise ValueError(f"record: isolated.{where}: quartiles out of order")
    cost = _need(record, "cost", "the record")
    for name in NETWORKS:
        _numbers([_need(_need(cost, name, "cost"), "c", f"cost.{name}")], f"cost.{name}.c")
    drafters = _need(record, "drafters", "the record")
    for name in DRAFTER_NAMES:
        run = _need(drafters, name, "drafters")
        if _need(run, "ks", f"drafters.{name}") != ks:
            raise ValueError(f"record: drafters.{name}.ks differs from settings.ks")
        for key in _PER_K:
            _numbers(_need(run, key, f"drafters.{name}"), f"drafters.{name}.{key}", len(ks), missing=True)
        for key in ("best_k", "best_speedup", "best_q25", "best_q75", "t1_ms"):
            _numbers([_need(run, key, f"drafters.{name}")], f"drafters.{name}.{key}")
        if not run["best_q25"] <= run["best_speedup"] <= run["best_q75"]:
            raise ValueError(f"record: drafters.{name}: the best speed-up lies outside its middle half")
    return record


def load_accelerator_record(path: str | Path | None = None) -> dict:
    """The checked record (by default the shipped one)."""
    path = ACCELERATOR_RECORD if path is None else Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no accelerator record; run benchmarks/accelerator.py on a machine with a GPU")
    try:
        record = json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path}: not JSON ({exc})") from None
    return check_accelerator_record(record)


def stepped_logit_difference(model, other, ids: np.ndarray, seed: int = 0) -> float:
    """Largest |logit difference| between two models' caches fed ``ids`` the way a loop feeds them.

    One to five tokens at a time (``KVCache.extend_logits``), and after about a third of the
    passes a rollback of some of them, which are then fed again: so the comparison covers
    passes over several tokens, rollbacks and, past the block, the window's moves.  Both
    caches see the same steps (``seed``).

    Examples
    --------
    >>> from speclib.lm.transformer import TransformerConfig, random_transformer
    >>> m = random_transformer(TransformerConfig(vocab_size=5, block_size=8, d_model=8, n_layers=1, n_heads=2))
    >>> stepped_logit_difference(m, m, np.arange(20) % 5)
    0.0
    """
    ids = np.asarray(ids, dtype=np.int64)
    rng = np.random.default_rng(seed)
    a, b, worst, i = model.cache(), other.cache(), 0.0, 0
    while i < ids.size:
        chunk = ids[i:i + int(rng.integers(1, 6))]
        worst = max(worst, float(np.abs(a.extend_logits(chunk) - b.extend_logits(chunk)).max()))
        back = int(rng.integers(0, chunk.size + 1)) if rng.random() < 0.3 else 0
        a.rollback(len(a) - back)
        b.rollback(len(b) - back)
        i += chunk.size - back
    return worst


def accelerator_summary(record: dict, alphas: dict[str, float] | None = None) -> dict:
    """What chapter 7 shows, from a checked record.

    Per drafter: the best ``k``, its median speed-up and middle half, ``c`` (measured apart
    from the runs, :func:`speclib.lm.drafters.draft_costs`), the isolated ``r`` of the
    verification pass at that ``k``, and the cost model's prediction from those and
    ``alphas[name]`` (the acceptance measured apart, e.g. the metrics file's in-loop rate; the
    run's own where not given).  Medusa's heads draft ``min(k, heads)`` tokens from one pass,
    so its step is one draft pass and a verification of ``min(k, heads) + 1`` tokens.  And
    ``outside``: the loop's own time per step at that ``k``, outside both models' passes, in
    target passes (what the cost model leaves out), and ``predicted_with``: the prediction with
    it and with plain decoding's own time per token
    (:func:`speclib.core.cost.speedup_with_overhead`).  Plus the isolated ``r`` on the device
    and numpy's on the host, by number of tokens.
    """
    from ..core.cost import speedup_with_overhead
    from ..lm.drafters import DATA_DIR, DRAFTER_FILES, load_weights

    record = check_accelerator_record(record)
    heads = load_weights(DATA_DIR / DRAFTER_FILES["medusa"])[0]["heads"]
    iso = record["isolated"]
    r_dev = dict(zip(iso["device"]["n_tokens"], iso["device"]["r"]))
    r_host = dict(zip(iso["host_numpy"]["n_tokens"], iso["host_numpy"]["r"]))
    rows = {}
    for name, run in record["drafters"].items():
        k = run["best_k"]
        i = run["ks"].index(k)
        alpha = (alphas or {}).get(name, run["acceptance"][i])
        c = record["cost"][name]["c"]
        drafts, passes = (min(k, heads), 1) if name == "medusa" else (k, k)
        r = r_dev[drafts + 1]
        outside, plain = run["outside_per_step"][i], run.get("outside_per_token_plain", 0.0)
        rows[name] = {"k": k, "speedup": run["best_speedup"], "q25": run["best_q25"], "q75": run["best_q75"],
                      "alpha": alpha, "c": c, "r": r, "outside": outside, "outside_plain": plain,
                      "predicted": speedup_with_overhead(alpha, k, c, r, drafts=drafts, draft_passes=passes),
                      "predicted_with": speedup_with_overhead(alpha, k, c, r, outside, plain, drafts=drafts,
                                                              draft_passes=passes)}
    best = max(rows, key=lambda n: rows[n]["speedup"])
    return {"rows": rows, "best": best, "r_device": r_dev, "r_host": r_host,
            "t1_ms": iso["device"]["median_ms"][0], "host_t1_ms": iso["host_numpy"]["median_ms"][0],
            "worst_logit_difference": max(record["agreement"]["max_abs_logit_difference"].values()),
            "prediction_errors": np.array([rows[n]["predicted"] / rows[n]["speedup"] - 1 for n in rows])}
