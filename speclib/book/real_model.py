"""The real model's record as the book shows it: tables and sentences for chapter 7 and the guide.

Every figure comes from ``speclib/data/record_smollm.json`` (``benchmarks/record_smollm.py``),
read through :mod:`speclib.book.record`: decoding rates and speed-ups per engine, setting,
temperature and task group, speclib's acceptance and the cost model's prediction.
"""

from __future__ import annotations

from .record import Record, name
from .render import markdown_table

#: The engines of the record, as the book names them, with the passes their names carry.
ENGINES = {"speclib": ("speclib", "q8"), "llama.cpp": ("llamacpp", "ggml"), "transformers": ("transformers", "torch")}
#: The task groups chapter 7 reports (the families that give the answer's text, and chat).
GROUPS = ("grounded", "open")


def _key(record: Record, quantity: str, engine: str, setting: str, T: float, task: str) -> str | None:
    """The record's name for an (engine, setting) such as ("speclib", "lookup-8"), or None if absent."""
    subject, passes = ENGINES[engine]
    kind, _, k = setting.partition("-")
    key = name(quantity, f"{subject}-{kind}", k=int(k) if k else None, T=T, task=task, passes=passes, device="cpu")
    return key if key in record else None


def settings_in(record: Record, engine: str) -> list[str]:
    """The settings of ``engine`` that the record measured (``plain`` first, then by name)."""
    subject = ENGINES[engine][0]
    found = set()
    for key in record.names("decode_tokens_per_s/"):
        parts = key.split("/")
        if parts[1].startswith(subject + "-"):
            kind = parts[1][len(subject) + 1:]
            k = next((p[1:] for p in parts[2:] if p.startswith("k") and p[1:].isdigit()), "")
            found.add(kind + (f"-{k}" if k else ""))
    return sorted(found, key=lambda s: (s != "plain", s.split("-")[0], int(s.split("-")[1]) if "-" in s else 0))


def _cell(record: Record, key: str | None, fmt: str) -> str:
    if key is None:
        return "-"
    q = record[key]
    if q.low is None:
        return format(q.value, fmt)
    return f"{q.value:{fmt}} ({q.low:{fmt}} to {q.high:{fmt}})"


def engines_table(record: Record, T: float, groups=GROUPS) -> str:
    """Markdown: each engine's settings, decoding tokens per second and speed-up over its own plain
    decoding (median, range over repetitions), per task group, at temperature ``T``."""
    header = ["engine", "setting"]
    for g in groups:
        header += [f"{g}: tokens/s", f"{g}: x own plain"]
    rows = []
    for engine in ENGINES:
        for setting in settings_in(record, engine):
            row = [engine, setting]
            for g in groups:
                row.append(_cell(record, _key(record, "decode_tokens_per_s", engine, setting, T, g), ".0f"))
                row.append("1" if setting == "plain" else
                           _cell(record, _key(record, "speedup", engine, setting, T, g), ".2f"))
            if any(c != "-" for c in row[2:]):
                rows.append(row)
    return markdown_table(header, rows)


def prediction_table(record: Record, temperatures=(0.0, 1.0), groups=GROUPS) -> tuple[str, list[dict]]:
    """Markdown: speclib's settings, the cost model's speed-up from the passes each run made and the
    measured one, per temperature and group; with the rows for
    :func:`speclib.book.wallclock.gap_sentence`."""
    rows, gaps = [], []
    for T, setting, g in ((T, s, g) for T in temperatures for s in settings_in(record, "speclib") for g in groups):
        if setting != "plain":
            p = _key(record, "predicted", "speclib", setting, T, g)
            m = _key(record, "speedup", "speclib", setting, T, g)
            a = name("alpha", f"speclib-{setting.split('-')[0]}", k=int(setting.split("-")[1]), T=T, task=g,
                     where="loop")
            if p is None or m is None:
                continue
            rows.append([f"{T:g}", setting, g, f"{record[a].value:.2f}" if a in record else "-",
                         f"{record[p].value:.2f}", _cell(record, m, ".2f")])
            kind, k = setting.split("-")
            gaps.append({"drafter": f"{kind}, {g} tasks, T = {T:g}", "k": int(k), "predicted": record[p].value,
                         "measured": record[m].value})
    table = markdown_table(["T", "setting", "tasks", "drafts kept", "predicted", "measured (range)"], rows)
    return table, gaps


def identity_sentence(identity: dict) -> str:
    """What the greedy runs wrote against each engine's own plain output, in one sentence.

    ``identity`` is the record's ``settings["identity"]``: engine -> setting -> ``{"identical",
    "compared", "first_differences"}``.

    Examples
    --------
    >>> identity_sentence({"speclib": {"lookup-8": {"identical": 4, "compared": 4, "first_differences": []}},
    ...                    "llama.cpp": {"lookup-3": {"identical": 2, "compared": 4, "first_differences": [7, 51]}}})
    "At temperature 0, speclib's speculative runs wrote their engine's plain text in 4 of 4 runs; llama.cpp's in 2 of 4 runs (the others part from it at tokens 7 and 51)."
    """
    parts = []
    for engine, settings in identity.items():
        same = sum(v["identical"] for v in settings.values())
        total = sum(v["compared"] for v in settings.values())
        if not total:
            continue
        text = f"{engine}'s in {same} of {total} runs"
        where = sorted(d for v in settings.values() for d in v["first_differences"] if d is not None)
        if where:
            listed = ", ".join(map(str, where[:-1])) + (" and " if len(where) > 1 else "") + str(where[-1])
            text += f" (the others part from it at token{'s' if len(where) > 1 else ''} {listed})"
        parts.append(text)
    if not parts:
        raise ValueError("identity: no engine compared a speculative greedy run with its plain one")
    first = parts[0].replace("'s in ", "'s speculative runs wrote their engine's plain text in ", 1)
    return "At temperature 0, " + "; ".join([first] + parts[1:]) + "."
