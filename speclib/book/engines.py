"""What serving engines do differently, computed with the book's theory on the book's pair.

A proposer that drafts *greedily* (the draft's most likely token, as vLLM's draft-model and
n-gram proposers do) hands the verifier a point mass: the draft "distribution" is one-hot at
``x* = argmax p``.  The ratio rule then keeps ``x*`` with probability ``min(1, q(x*) / 1) =
q(x*)`` and otherwise draws from ``q`` without ``x*``: still exact (the point-mass proposal of
prompt lookup, chapter 13), but the acceptance falls from ``sum_x min(p, q)`` to ``q(x*)``.
With a draft identical to the target at temperature 1, the book's rule accepts every draft
while the one-hot rule accepts ``E[max_x q(x)]``.  :func:`one_hot_acceptance` computes both on
real text.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from .._validate import as_real, as_tokens
from ..core.sampling import acceptance_rate
from ..lm.transformer import Transformer, softmax_rows


def _rows(model: Transformer, ids: np.ndarray, temperature: float) -> np.ndarray:
    block = model.config.block_size
    logits = np.concatenate([model.logits(ids[s:s + block]) for s in range(0, ids.size, block)])
    return softmax_rows(logits, temperature)


def one_hot_acceptance(target: Transformer, draft: Transformer, ids: object,
                       temperature: float = 1.0) -> dict[str, float]:
    """Acceptance of the ratio rule with a sampled draft and with a greedy (one-hot) draft.

    Both models read ``ids`` (teacher-forced, in windows of their block) at ``temperature``;
    at every position, with ``p`` the draft's row and ``q`` the target's:

    ``"sampled"``
        ``sum_x min(p(x), q(x))``: the book's rule with the draft sampled from ``p``;
    ``"one_hot"``
        ``q(argmax p)``: a greedy draft verified against its one-hot distribution;
    ``"identical_one_hot"``
        ``max_x q(x)``: the same with the target as its own draft (where ``"sampled"``
        would be 1).

    Each value is the mean over positions.

    Examples
    --------
    >>> from speclib.lm.transformer import TransformerConfig, random_transformer
    >>> cfg = TransformerConfig(vocab_size=6, block_size=8, d_model=8, n_layers=1, n_heads=2)
    >>> t = random_transformer(cfg, seed=0)
    >>> r = one_hot_acceptance(t, t, np.arange(20) % 6)
    >>> round(r["sampled"], 6), r["one_hot"] == r["identical_one_hot"] < 1
    (1.0, True)
    """
    for name, model in (("target", target), ("draft", draft)):
        if not isinstance(model, Transformer):
            raise TypeError(f"{name}: expected a speclib.lm.transformer.Transformer, got {type(model).__name__}")
    if target.vocab_size != draft.vocab_size:
        raise ValueError(f"draft: vocabulary of {draft.vocab_size} tokens differs from the target's {target.vocab_size}")
    ids = as_tokens(ids, "ids", target.vocab_size, allow_empty=False)
    temperature = as_real(temperature, "temperature", low=0.0)
    q, p = _rows(target, ids, temperature), _rows(draft, ids, temperature)
    greedy = p.argmax(axis=1)
    return {"sampled": float(np.mean(acceptance_rate(p, q))),
            "one_hot": float(np.mean(q[np.arange(q.shape[0]), greedy])),
            "identical_one_hot": float(np.mean(q.max(axis=1)))}


# --- vLLM on the book's models: the record written by benchmarks/vllm_pair.py ----------------

#: Where ``benchmarks/vllm_pair.py`` writes what vLLM and speclib did on the same prompts.
VLLM_RECORD = Path(__file__).resolve().parents[1] / "data" / "vllm_pair.json"
#: Every vLLM engine of the record, the speclib run it is compared with, and what it shows.
VLLM_ROWS = (
    ("draft", "draft/greedy", "the book's draft, drafted greedily (vLLM's default)"),
    ("draft-probabilistic", "draft/sampled", "the book's draft, sampled (`draft_sample_method`)"),
    ("distilled", "distilled/greedy", "the distilled draft, greedily"),
    ("early-exit", "early-exit/greedy", "the early-exit draft, greedily"),
    ("identical", "identical/greedy", "the target as its own draft, greedily"),
    ("identical-probabilistic", "identical/sampled", "the target as its own draft, sampled"),
    ("ngram", "ngram/greedy", "n-gram lookup in the text"),
)
_PROVENANCE = ("date", "vllm", "torch", "transformers", "python", "cpu", "repository_commit")
_COUNTERS = ("vllm:spec_decode_num_drafts", "vllm:spec_decode_num_draft_tokens",
             "vllm:spec_decode_num_accepted_tokens")


def _need(mapping: object, keys: tuple | list, where: str) -> None:
    if not isinstance(mapping, dict):
        raise ValueError(f"{where}: expected a JSON object, got {type(mapping).__name__}")
    missing = [key for key in keys if key not in mapping]
    if missing:
        raise ValueError(f"{where}: missing {', '.join(map(repr, missing))}")


def check_vllm_record(record: object) -> dict:
    """Check the layout of a ``vllm_pair.json`` record; return it, or name what is wrong.

    Provenance (versions, date, processor, commit), the settings, the prompts, for every
    engine of :data:`VLLM_ROWS` (and ``plain``) at temperatures 0 and 1 its request count,
    generated tokens and, for the speculative ones, vLLM's draft and acceptance counters;
    and speclib's runs on the same prompts.  Counters must be whole, non-negative and
    consistent (no more accepted than drafted tokens, no more drafted than ``k`` per draft).
    """
    _need(record, ("provenance", "settings", "prompts", "vllm", "speclib"), "record")
    _need(record["provenance"], _PROVENANCE, "record['provenance']")
    settings = record["settings"]
    _need(settings, ("k", "new_tokens", "prompts", "samples_at_T1", "temperatures", "speculative_config"),
          "record['settings']")
    k = settings["k"]
    if not isinstance(record["prompts"], list) or len(record["prompts"]) != settings["prompts"]:
        raise ValueError("record['prompts']: expected a list of settings['prompts'] prompts")
    temperatures = [str(float(t)) for t in settings["temperatures"]]
    engines = ["plain"] + [row[0] for row in VLLM_ROWS]
    _need(record, ("vllm_fixed_expand", "diagnosis"), "record")
    _need(record["diagnosis"], ("expand_kernel",), "record['diagnosis']")
    for key, names, temps in (("vllm", engines, temperatures), ("vllm_fixed_expand", engines[1:], ["1.0"])):
        _need(record[key], names, f"record[{key!r}]")
        for name in names:
            _need(record[key][name], ("temperatures",), f"record[{key!r}][{name!r}]")
            for t in temps:
                where = f"record[{key!r}][{name!r}] at T = {t}"
                run = record[key][name]["temperatures"].get(t)
                _need(run, ("requests", "generated", "counters", "tokens"), where)
                if len(run["tokens"]) != len(record["prompts"]):
                    raise ValueError(f"{where}: expected the tokens of one sample per prompt")
                if name == "plain":
                    continue
                _need(run["counters"], _COUNTERS, f"{where}, counters")
                drafts, drafted, accepted = (run["counters"][c] for c in _COUNTERS)
                if not all(isinstance(v, int) and v >= 0 for v in (drafts, drafted, accepted)):
                    raise ValueError(f"{where}: counters must be whole numbers >= 0")
                if not accepted <= drafted <= k * drafts:
                    raise ValueError(f"{where}: counters out of order (accepted {accepted}, drafted "
                                     f"{drafted}, drafts {drafts} of at most {k} tokens)")
    for t in temperatures:
        _need(record["speclib"], (t,), "record['speclib']")
        runs = record["speclib"][t].get("runs")
        _need(runs, [row[1] for row in VLLM_ROWS], f"record['speclib'][{t!r}]['runs']")
        for label, run in runs.items():
            _need(run, ("accepted", "verified", "proposed", "blocks", "generated", "target_passes"),
                  f"record['speclib'][{t!r}]['runs'][{label!r}]")
    return record


def load_vllm_record(path: str | Path | None = None) -> dict:
    """The stored record of ``benchmarks/vllm_pair.py`` (:data:`VLLM_RECORD`), checked."""
    path = VLLM_RECORD if path is None else Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"path: no vLLM record at {path}; run benchmarks/vllm_pair.py "
                                "(needs requirements-engines.txt)")
    try:
        record = json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise ValueError(f"path: {path} is not JSON ({exc})") from None
    return check_vllm_record(record)


def _rate(hits: int, total: int) -> tuple[float, float]:
    """A proportion and its binomial standard error (``nan`` for an empty count)."""
    if total == 0:
        return float("nan"), float("nan")
    a = hits / total
    return a, float(np.sqrt(a * (1 - a) / total))


def verified_from_counters(num_drafts: int, num_draft_tokens: int, accepted_per_pos, k: int) -> int | None:
    """How many drafts the target judged, from an engine's counters (``None`` where they cannot say).

    A block is judged up to its first rejection: every block at position 0, and at position
    ``i + 1`` the blocks whose draft ``i`` was accepted.  That holds when every block has ``k``
    drafts (``num_draft_tokens == k * num_drafts``); a proposer that drafts shorter blocks
    (n-gram lookup) leaves the count unknown.

    >>> verified_from_counters(100, 400, [80, 60, 45, 30], 4)
    285
    >>> verified_from_counters(100, 390, [80, 60, 45, 30], 4) is None
    True
    """
    per_pos = [int(v) for v in accepted_per_pos]
    if len(per_pos) != k:
        raise ValueError(f"accepted_per_pos: expected {k} counts (one per draft position), got {len(per_pos)}")
    if num_draft_tokens != k * num_drafts:
        return None
    return int(num_drafts + sum(per_pos[:-1]))


def vllm_comparison(record: dict, key: str = "vllm") -> list[dict]:
    """vLLM's acceptance beside speclib's on the same prompts, one row per engine and temperature.

    ``measure`` says which acceptance both columns hold: ``"per verified"`` (accepted drafts
    over the drafts the target judged: the book's estimate of alpha, recovered from vLLM's
    per-position counters by :func:`verified_from_counters`) where every block has ``k``
    drafts, else ``"per drafted"`` (over all drafted tokens, vLLM's own ratio; n-gram
    lookup).  ``vllm_se`` and ``speclib_se`` are binomial standard errors (positions in one
    request are not independent, so these understate the real spread); ``z`` is the
    difference in joint standard errors; ``vllm_per_block`` and ``speclib_per_block`` are the
    drafts kept per verification; ``book_rule`` is speclib's acceptance with the draft
    *sampled*, the book's rule, in the same measure.  ``key`` picks vLLM as it ships
    (``"vllm"``) or with its CPU expand kernel replaced (``"vllm_fixed_expand"``, temperature 1).
    """
    check_vllm_record(record)
    if key not in ("vllm", "vllm_fixed_expand"):
        raise ValueError(f"key: expected 'vllm' or 'vllm_fixed_expand', got {key!r}")
    k = record["settings"]["k"]
    rows = []
    temperatures = [str(float(x)) for x in record["settings"]["temperatures"]] if key == "vllm" else ["1.0"]
    for t in temperatures:
        for engine, label, what in VLLM_ROWS:
            c = record[key][engine]["temperatures"][t]["counters"]
            drafts, drafted, accepted = (c[name] for name in _COUNTERS)
            per_pos = c.get("vllm:spec_decode_num_accepted_tokens_per_pos", [0] * k)
            verified = verified_from_counters(drafts, drafted, per_pos, k)
            runs = record["speclib"][t]["runs"]
            mine, sampled = runs[label], runs.get(label.split("/")[0] + "/sampled")

            def speclib_rate(run, per_verified):
                if run is None:
                    return float("nan"), float("nan")
                return _rate(run["accepted"], run["verified"] if per_verified else run["proposed"])

            v, v_se = _rate(accepted, verified if verified is not None else drafted)
            s, s_se = speclib_rate(mine, verified is not None)
            rows.append({
                "engine": engine, "temperature": float(t), "what": what, "speclib_run": label,
                "measure": "per verified" if verified is not None else "per drafted",
                "vllm": v, "vllm_se": v_se, "speclib": s, "speclib_se": s_se,
                "z": (v - s) / float(np.hypot(v_se, s_se)) if v_se + s_se > 0 else 0.0,
                "vllm_per_block": accepted / drafts if drafts else float("nan"),
                "speclib_per_block": mine["accepted"] / mine["blocks"] if mine["blocks"] else float("nan"),
                "book_rule": speclib_rate(sampled, verified is not None)[0],
            })
    return rows


def greedy_agreement(record: dict) -> dict[str, float]:
    """At temperature 0: how often vLLM's tokens equal speclib's, prompt by prompt.

    ``plain``: vLLM's plain decoding against speclib's plain decoding (the exported models
    give the numpy models' rows to float32 rounding, so only a near tie can part them);
    ``speculative``: each speculative vLLM engine against vLLM's own plain decoding (a
    speculative engine must not change greedy output).  Fractions of prompts whose
    generated tokens are all equal.
    """
    check_vllm_record(record)
    plain_vllm = record["vllm"]["plain"]["temperatures"]["0.0"]["tokens"]
    plain_speclib = record["speclib"]["0.0"].get("plain_tokens")
    if plain_speclib is None:
        raise ValueError("record['speclib']['0.0']: missing 'plain_tokens'")
    same = [a == b for a, b in zip(plain_vllm, plain_speclib)]
    spec = [a == b for engine, _, _ in VLLM_ROWS
            for a, b in zip(record["vllm"][engine]["temperatures"]["0.0"]["tokens"], plain_vllm)]
    return {"plain": float(np.mean(same)), "speculative": float(np.mean(spec)),
            "prompts": len(same), "speculative_runs": len(spec)}


def plot_vllm_comparison(rows: list[dict], temperature: float = 1.0, ax=None):
    """Bars of vLLM's and speclib's acceptance per engine at one temperature (2 standard errors)."""
    import matplotlib.pyplot as plt

    from .plots import _axes

    chosen = [r for r in rows if isinstance(r, dict) and r.get("temperature") == temperature]
    if not chosen:
        raise ValueError(f"temperature: no rows at {temperature} (rows are vllm_comparison's output)")
    ax = _axes(ax, figsize=(7, 3.6))
    x = np.arange(len(chosen))
    ax.bar(x - 0.2, [r["vllm"] for r in chosen], 0.4, yerr=[2 * r["vllm_se"] for r in chosen],
           label="vLLM", color="tab:blue", capsize=3)
    ax.bar(x + 0.2, [r["speclib"] for r in chosen], 0.4, yerr=[2 * r["speclib_se"] for r in chosen],
           label="speclib, same prompts", color="tab:orange", capsize=3)
    ax.plot(x, [r["book_rule"] for r in chosen], "k_", markersize=22, mew=2,
            label="speclib, draft sampled (book's rule)")
    ax.set_xticks(x, [r["engine"].replace("-probabilistic", "\n(sampled)") for r in chosen], fontsize=9)
    ax.set_ylabel("accepted / verified\n(n-gram: / drafted)")
    ax.set_ylim(0, 1.08)
    ax.set_title(f"Acceptance of each engine at temperature {temperature:g}")
    ax.legend(fontsize=9, loc="upper left", ncol=3, frameon=False, bbox_to_anchor=(0, -0.22))
    plt.gcf().tight_layout()
    return ax


def output_loglik(record: dict, key: str = "vllm", temperature: float = 1.0,
                  target: Transformer | None = None) -> dict[str, tuple[float, float]]:
    """Mean log-probability per token, under the book's target, of what each engine generated.

    For every engine of ``record[key]`` (``"plain"`` included where present) and one sample
    per prompt: the mean over the generated tokens of ``log q(token | text so far)``, with
    ``q`` the numpy target at ``temperature``, then the mean over prompts and its standard
    error.  Text sampled from the target has the same expectation whichever exact method
    produced it; a decoder whose output does not follow ``q`` shows up as a lower figure
    (tokens the target finds unlikely) or a higher one (a sharpened distribution).
    """
    from ..lm.transformer import load_pair

    check_vllm_record(record)
    if key not in ("vllm", "vllm_fixed_expand"):
        raise ValueError(f"key: expected 'vllm' or 'vllm_fixed_expand', got {key!r}")
    target = load_pair()[0] if target is None else target
    q_model = target.with_temperature(as_real(temperature, "temperature", low=0.0))
    prompts = [p["ids"] for p in record["prompts"]]
    out = {}
    for engine, runs in record[key].items():
        run = runs["temperatures"].get(str(float(temperature)))
        if run is None:
            continue
        means = []
        for prompt, tokens in zip(prompts, run["tokens"]):
            rows = q_model(np.array(prompt + tokens))
            picked = rows[len(prompt) - 1 + np.arange(len(tokens)), tokens]
            means.append(float(np.mean(np.log(np.maximum(picked, 1e-300)))))
        means = np.array(means)
        out[engine] = (float(means.mean()), float(means.std(ddof=1) / np.sqrt(means.size)))
    return out
