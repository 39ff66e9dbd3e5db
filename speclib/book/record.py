"""The book's record of its measurements: one run, one file, every page reads it.

A quantity that more than one page states (a drafter's acceptance rate inside the loop, its
draft cost ``c``, the cost ``r(n)`` of a target pass over ``n`` tokens, the loop's own time
per step, a wall-clock speed-up) is measured once, by ``benchmarks/record.py``, and stored
with its provenance in a record file.  Pages read it from there and glue it under its
*name*; a test fails when two pages state the same name with different values.

Names
-----
A name is the quantity, then its subject, then its conditions, joined by ``/``, in this order:

``quantity / subject / k<draft length> / B<batch> / T<temperature> / task / loop|isolated / passes / cpu|gpu``

- ``quantity``: one of :data:`KINDS` (``alpha``, ``tokens_per_pass``, ``c``, ``r<n>``,
  ``t1_ms``, ``speedup``, ``outside``, ``outside_plain``, ...);
- ``subject``: a drafter (``pair``, ``distilled``, ``ngram``, ``medusa``, ``eagle``,
  ``early-exit``: for a quantity measured in its runs), ``target`` (the target's isolated
  passes) or another model a record names (``stack``, a real model's name);
- ``k4`` the draft length, ``T1`` / ``T0.8`` the temperature, ``loop`` (measured inside
  the decoding loop) or ``isolated`` (a pass timed on its own), the passes (``numpy``: the
  numpy target with its measured product choice; ``full``, ``blocks``, ``rows``,
  ``transposed``, ``kernel``: one product strategy forced; ``compiled``: the whole pass
  one numba call; ``torch``: PyTorch), and the device (``cpu``, ``gpu``).

A condition a quantity does not depend on is left out, never written twice, and the order is
fixed, so one quantity has exactly one name.  Examples: ``alpha/eagle/k4/T1/loop``,
``c/pair/loop/numpy/cpu``, ``r5/target/isolated/full/cpu``, ``r5/pair/loop/compiled/cpu``
(the target's pass over 5 tokens inside the pair's runs), ``speedup/ngram/k3/T1/numpy/cpu``.
:func:`name` builds one from keywords, :func:`parse_name` takes one apart.

Reading
-------
::

    from speclib.book.record import load_records
    rec = load_records()                          # every shipped record, one namespace
    q = rec["alpha/pair/k4/T1/loop"]              # a Quantity: value, low, high, n, interval, ...
    q.value, q.low, q.high, q.text()              # 0.713, 0.704, 0.723, '0.713 (0.704 to 0.723)'
    rec.value("c/pair/loop/numpy/cpu")            # the float
    rec.get("speedup", "pair", k=3, T=1, passes="numpy", device="cpu")   # by keywords
    rec.names("speedup/pair/")                    # every name with that start

Glue (in a notebook): ``rec.glue("c/pair/loop/numpy/cpu")`` glues the value, rounded to its
kind's digits (:data:`KINDS`), under the name itself; ``rec.glue(name, "low", "high")`` also
glues ``name/low`` and ``name/high`` (likewise ``q25``, ``q75``, ``n``), and
``rec.glue(name, "text")`` glues ``name/text``, the value with its interval as prose
("0.707 (0.698 to 0.716)").  In Markdown: ``{glue:}`c/pair/loop/numpy/cpu```, from another
page ``{glue:text}`07_real_pair.ipynb::c/pair/loop/numpy/cpu:s``` (the format is required
with ``::``): chapter 7 glues every quantity of every shipped record (:meth:`Record.glue_all`),
so a Markdown page can state any of them from there.  A page that measures a quantity live
glues its own figure under a local name (not a record name) and shows the record's beside it,
saying which is which.  A page that must keep a local name for a record quantity (another
page reads it) glues it with :meth:`Record.alias`, which says which quantity it is (or that it
is derived from several), so the tests treat it as the record's.
:meth:`Record.ranking` ranks quantities only as far as their intervals allow
(:func:`speclib.book.render.ranking_sentence`).

Files
-----
A record file is JSON: ``{"format": 1, "provenance": {...}, "settings": {...},
"quantities": {name: {"value": v, "low": ..., "high": ..., "q25": ..., "q75": ..., "n": ...,
"interval": "what low and high are"}}}``; only ``value`` is required of a quantity.
:func:`check_record` refuses a damaged record and names what is wrong (a missing part, a
name that does not parse, a value that is not a finite number, a value outside its interval,
a ``quick`` test run).  The book's CPU record is :data:`BOOK_RECORD`; any other record file
in ``speclib/data`` named ``record_*.json`` (a real model's benchmark, say: its subject the
model's name, its passes ``f32`` or ``q8``; a benchmark writes one with :func:`provenance` and
:func:`write_record`) is read the same way by :func:`load_records`, and the accelerator record (``accelerator_pair.json``, its own
layout) is translated into names with ``torch/gpu`` (:func:`accelerator_quantities`).  Two
records may not hold the same name.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import NamedTuple

DATA = Path(__file__).resolve().parent.parent / "data"
#: The book's record, written by ``benchmarks/record.py``.
BOOK_RECORD = DATA / "record_cpu.json"
FORMAT = 1

#: Quantity kinds: digits a page shows, unit, and what the number is.  ``r<n>`` stands for
#: ``r2``, ``r3``, ...: the cost of a target pass over n tokens in one-token passes.
KINDS: dict[str, tuple[int, str, str]] = {
    "alpha": (3, "fraction", "drafts kept / drafts judged inside the loop, pooled over prompts"),
    "tokens_per_pass": (2, "tokens", "tokens generated per target pass inside the loop"),
    "c": (3, "one-token target passes", "median one-token draft pass / median one-token target pass"),
    "r": (2, "one-token passes", "median target pass over n tokens / median one-token pass"),
    "t1_ms": (2, "ms", "median one-token target pass"),
    "speedup": (2, "x (ratio of seconds)", "median of paired wall-clock ratios, plain time / speculative time"),
    "outside": (2, "one-token target passes", "time per step outside both models' passes (the loop's own work)"),
    "outside_plain": (2, "one-token target passes", "time per plain-decoding token outside the target's pass"),
    "ms": (1, "ms", "median time of a pass"),
    "fit_fixed_ms": (1, "ms", "intercept of the line fitted to the passes over 2 tokens and more"),
    "fit_per_token_ms": (2, "ms", "slope of that line, per token"),
    "weights_mib": (0, "MiB", "size of the weights"),
    "tokens_per_s": (0, "tokens per second", "generated tokens per second over a whole batch"),
    "decode_tokens_per_s": (1, "tokens per second", "one request's new tokens after the first step, over the "
                            "seconds after it (median over repetitions)"),
    "predicted": (2, "x (ratio of seconds)", "the cost model's speed-up from the measured pass times of the "
                  "passes a run made (no loop overhead)"),
    "ms_per_token": (2, "ms", "one request's time per generated token"),
    "waste": (2, "fraction", "share of a padded batch's slots that keep no token"),
    "peak_mb": (0, "MB", "largest resident memory of the process"),
}
#: The conditions, in the order a name lists them, and the values each may take.
CONDITIONS: tuple[tuple[str, str], ...] = (
    ("k", r"k[0-9]+"),
    ("B", r"B[0-9]+"),
    ("T", r"T[0-9]+(?:\.[0-9]+)?"),
    ("task", r"code_edit|summary|quote|open|grounded|all"),
    ("where", r"loop|isolated"),
    ("passes", r"numpy|full|blocks|rows|transposed|kernel|compiled|torch|ggml|f32|q8|q4"),
    ("device", r"cpu|gpu"),
)
#: Parts of a quantity that can be glued beside its value (``name/low``).
FIELDS = ("low", "high", "q25", "q75", "n")
GLUE_PREFIX = "application/papermill.record/"  #: myst-nb's prefix for a value glued without display
_SUBJECT = re.compile(r"[a-z][a-z0-9_-]*")
_MARGIN = 1e-9  # rounding slack when a value is compared with its interval


def kind_of(quantity: str) -> str:
    """The kind of a quantity's first name part: ``r5`` -> ``r``, ``c`` -> ``c``; ValueError if none."""
    if re.fullmatch(r"r[0-9]+", quantity):
        return "r"
    if quantity in KINDS and quantity != "r":
        return quantity
    raise ValueError(f"name: {quantity!r} is not a quantity the record knows "
                     f"({', '.join(k for k in KINDS if k != 'r')}, r<n>)")


def parse_name(text: str) -> dict[str, str]:
    """``{"quantity", "subject", condition: value, ...}`` of a name, or ValueError saying what is wrong.

    Examples
    --------
    >>> parse_name("speedup/pair/k3/T1/numpy/cpu")
    {'quantity': 'speedup', 'subject': 'pair', 'k': 'k3', 'T': 'T1', 'passes': 'numpy', 'device': 'cpu'}
    >>> parse_name("c/pair/cpu/loop")
    Traceback (most recent call last):
    ...
    ValueError: name: 'c/pair/cpu/loop': 'loop' comes after 'cpu'; the order is k, B, T, task, where, passes, device
    """
    if not isinstance(text, str):
        raise TypeError(f"name: expected a string, got {type(text).__name__}")
    parts = text.split("/")
    if len(parts) < 2 or not all(parts):
        raise ValueError(f"name: {text!r}: expected quantity/subject[/conditions], e.g. 'c/pair/loop/numpy/cpu'")
    kind_of(parts[0])
    if not _SUBJECT.fullmatch(parts[1]):
        raise ValueError(f"name: {text!r}: {parts[1]!r} is not a subject (lowercase letters, digits, - and _)")
    out = {"quantity": parts[0], "subject": parts[1]}
    last = -1
    for part in parts[2:]:
        where = next((i for i, (_, pattern) in enumerate(CONDITIONS) if re.fullmatch(pattern, part)), None)
        if where is None:
            raise ValueError(f"name: {text!r}: {part!r} is no condition (k<n>, B<n>, T<t>, a task family, "
                             "loop or isolated, the passes, cpu or gpu)")
        dim = CONDITIONS[where][0]
        if dim in out:
            raise ValueError(f"name: {text!r}: two values of {dim!r}")
        if where < last:
            before = next(p for p in parts[2:] if re.fullmatch(CONDITIONS[last][1], p))
            raise ValueError(f"name: {text!r}: {part!r} comes after {before!r}; the order is "
                             + ", ".join(d for d, _ in CONDITIONS))
        last = where
        out[dim] = part
    return out


def name(quantity: str, subject: str, *, k: int | None = None, B: int | None = None, T: float | None = None,
         task: str | None = None, where: str | None = None, passes: str | None = None,
         device: str | None = None) -> str:
    """The name of a quantity from keywords, checked by :func:`parse_name`.

    Examples
    --------
    >>> name("speedup", "pair", k=3, T=1.0, passes="numpy", device="cpu")
    'speedup/pair/k3/T1/numpy/cpu'
    >>> name("alpha", "eagle", k=4, T=0.8, where="loop")
    'alpha/eagle/k4/T0.8/loop'
    """
    parts = [quantity, subject]
    if k is not None:
        parts.append(f"k{int(k)}")
    if B is not None:
        parts.append(f"B{int(B)}")
    if T is not None:
        parts.append(f"T{float(T):g}")
    parts += [p for p in (task, where, passes, device) if p is not None]
    text = "/".join(parts)
    parse_name(text)
    return text


def is_name(text: str) -> bool:
    """Whether ``text`` is a record name, or a name followed by one of :data:`FIELDS` or ``text``."""
    try:
        split_field(text)
        return True
    except (ValueError, TypeError):
        return False


def split_field(text: str) -> tuple[str, str | None]:
    """``(name, field)`` of a glue key such as ``alpha/pair/k4/T1/loop/low``; field None for the value."""
    head, _, last = text.rpartition("/")
    if last in FIELDS + ("text",) and head:
        parse_name(head)
        return head, last
    parse_name(text)
    return text, None


class Quantity(NamedTuple):
    """One named measurement of a record."""

    name: str
    value: float
    low: float | None = None  #: interval (what kind: ``interval``)
    high: float | None = None
    q25: float | None = None  #: middle half of the runs, where the value is a median of runs
    q75: float | None = None
    n: int | None = None  #: sample size (runs, prompts, timed passes)
    interval: str = ""  #: what low and high are, e.g. "95% bootstrap over prompts"
    source: str = ""  #: the record file it came from

    @property
    def kind(self) -> str:
        return kind_of(self.name.split("/")[0])

    @property
    def digits(self) -> int:
        return KINDS[self.kind][0]

    @property
    def unit(self) -> str:
        return KINDS[self.kind][1]

    def rounded(self, field: str | None = None) -> float | int:
        """The value (or a field) as a page states it: rounded to the kind's digits (``n`` an int)."""
        v = self.value if field is None else getattr(self, field)
        if v is None:
            raise ValueError(f"{self.name}: has no {field!r}")
        if field == "n" or self.digits == 0:
            return int(round(v))
        return round(float(v), self.digits)

    def text(self) -> str:
        """The value with its interval, as prose: ``0.707 (0.698 to 0.716)``."""
        f = f"{{:.{self.digits}f}}"
        if self.low is None:
            return f.format(self.value)
        return f"{f.format(self.value)} ({f.format(self.low)} to {f.format(self.high)})"


def _finite(v: object, where: str) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        raise ValueError(f"record: {where} is {v!r}, not a finite number")
    return float(v)


def check_record(record: object, source: str = "record", allow_quick: bool = False) -> dict:
    """``record`` unchanged if it is a whole record, else a ValueError that names what is wrong.

    Examples
    --------
    >>> check_record({"format": 1, "provenance": {}})
    Traceback (most recent call last):
    ...
    ValueError: record: provenance has no 'date'
    """
    if not isinstance(record, dict):
        raise ValueError(f"{source}: expected a JSON object, got {type(record).__name__}")
    if record.get("format") != FORMAT:
        raise ValueError(f"{source}: format is {record.get('format')!r}, this reader reads format {FORMAT}")
    prov = record.get("provenance")
    if not isinstance(prov, dict):
        raise ValueError(f"{source}: has no 'provenance'")
    for key in ("date", "commit", "command", "processor", "python", "numpy", "quick", "seconds"):
        if key not in prov:
            raise ValueError(f"{source}: provenance has no {key!r}")
    if prov["quick"] is not False and not allow_quick:
        raise ValueError(f"{source}: provenance says quick: a test run of the benchmark, not a measurement")
    if not isinstance(record.get("settings"), dict):
        raise ValueError(f"{source}: has no 'settings'")
    quantities = record.get("quantities")
    if not isinstance(quantities, dict) or not quantities:
        raise ValueError(f"{source}: has no 'quantities'")
    for key, q in quantities.items():
        try:
            parse_name(key)
        except (ValueError, TypeError) as exc:
            raise ValueError(f"{source}: quantities: {exc}") from None
        if not isinstance(q, dict) or "value" not in q:
            raise ValueError(f"{source}: quantities[{key!r}] has no 'value'")
        unknown = set(q) - {"value", "interval"} - set(FIELDS)
        if unknown:
            raise ValueError(f"{source}: quantities[{key!r}] has unknown parts {sorted(unknown)}")
        value = _finite(q["value"], f"quantities[{key!r}].value")
        if value < 0:
            raise ValueError(f"{source}: quantities[{key!r}].value is {value!r}, below 0")
        for lo, hi in (("low", "high"), ("q25", "q75")):
            if (lo in q) != (hi in q):
                raise ValueError(f"{source}: quantities[{key!r}] has {lo if lo in q else hi!r} without "
                                 f"{hi if lo in q else lo!r}")
            if lo in q:
                a, b = _finite(q[lo], f"quantities[{key!r}].{lo}"), _finite(q[hi], f"quantities[{key!r}].{hi}")
                if not a - _MARGIN <= value <= b + _MARGIN:
                    raise ValueError(f"{source}: quantities[{key!r}]: value {value} lies outside {lo} to {hi} "
                                     f"({a} to {b})")
        if "low" in q and not q.get("interval"):
            raise ValueError(f"{source}: quantities[{key!r}] has an interval but does not say what it is "
                             "('interval')")
        if "n" in q and (isinstance(q["n"], bool) or not isinstance(q["n"], int) or q["n"] < 1):
            raise ValueError(f"{source}: quantities[{key!r}].n is {q['n']!r}, not a positive count")
    return record


class Record:
    """Named quantities from one or more record files (see the module's docstring)."""

    def __init__(self, quantities: dict[str, Quantity], provenance: dict | None = None,
                 settings: dict | None = None):
        self.quantities = dict(quantities)
        self.provenance = provenance or {}  #: source -> that file's provenance
        self.settings = settings or {}  #: source -> that file's settings
        self._glued: set[str] = set()  # glue keys this object has glued (myst-nb warns on a second one)

    @classmethod
    def from_json(cls, record: dict, source: str, allow_quick: bool = False) -> Record:
        check_record(record, source, allow_quick)
        qs = {key: Quantity(key, float(q["value"]), *(q.get(f) for f in ("low", "high", "q25", "q75", "n")),
                            q.get("interval", ""), source) for key, q in record["quantities"].items()}
        return cls(qs, {source: record["provenance"]}, {source: record["settings"]})

    def merged(self, other: Record) -> Record:
        """Both records in one namespace; ValueError when they hold the same name."""
        both = set(self.quantities) & set(other.quantities)
        if both:
            raise ValueError(f"records: {sorted(both)[0]!r} is in two records ("
                             f"{self.quantities[sorted(both)[0]].source} and {other.quantities[sorted(both)[0]].source})")
        return Record({**self.quantities, **other.quantities}, {**self.provenance, **other.provenance},
                      {**self.settings, **other.settings})

    def __contains__(self, key: str) -> bool:
        return key in self.quantities

    def __getitem__(self, key: str) -> Quantity:
        if key not in self.quantities:
            parse_name(key)  # a malformed name is told as such
            close = [n for n in self.quantities if n.split("/")[:2] == key.split("/")[:2]]
            hint = f"; with that quantity and subject: {', '.join(sorted(close)[:6])}" if close else ""
            raise KeyError(f"{key!r} is not in the record{hint}")
        return self.quantities[key]

    def value(self, key: str) -> float:
        """The value of ``key``, unrounded."""
        return self[key].value

    def get(self, quantity: str, subject: str, **conditions) -> Quantity:
        """The quantity named by keywords (:func:`name`)."""
        return self[name(quantity, subject, **conditions)]

    def names(self, start: str = "") -> list[str]:
        """Every name that starts with ``start``, sorted."""
        return sorted(n for n in self.quantities if n.startswith(start))

    def glue(self, key: str, *fields: str) -> float | int:
        """Glue ``key``'s value (rounded to its kind's digits) under ``key``, and each field under ``key/field``.

        ``fields`` are of :data:`FIELDS` (``low``, ``high``, ``q25``, ``q75``, ``n``) or
        ``text`` (the value with its interval as prose).  A name this object has already glued
        is not glued again (myst-nb warns on a duplicate).  Returns the glued value.
        """
        from myst_nb import glue

        q = self[key]
        for f in fields:
            if f not in FIELDS + ("text",):
                raise ValueError(f"fields: {f!r} is none of {FIELDS + ('text',)}")
        value = q.rounded()
        for k, v in [(f"{key}/{f}", q.text() if f == "text" else q.rounded(f)) for f in fields] + [(key, value)]:
            if k not in self._glued:  # each name once per notebook: the same value, glued again, is a warning
                glue(k, v, display=False)
                self._glued.add(k)
        return value

    def alias(self, local: str, key: str | None, value: object = None) -> object:
        """Glue a record quantity under a page's ``local`` name, saying which quantity it is.

        ``key`` names the quantity (its rounded value is glued) or is None for a figure
        *derived* from the record (``value``, e.g. the highest of several medians).  The glued
        output carries ``speclib_record`` in its metadata (the name, or ``"derived"``), so the
        cross-page test checks an alias against the record and treats both kinds as measured
        figures that no sentence may rank by hand.  Returns the glued value.
        """
        from IPython.core.formatters import format_display_data
        from IPython.display import display

        if key is not None:
            value = self[key].rounded()
        elif value is None:
            raise ValueError("value: a derived figure needs its value")
        bundle, metadata = format_display_data(value)
        metadata["scrapbook"] = {"name": local, "mime_prefix": GLUE_PREFIX}
        metadata["speclib_record"] = key or "derived"
        display({GLUE_PREFIX + k: v for k, v in bundle.items()}, raw=True, metadata=metadata)
        return value

    def glue_all(self, start: str = "") -> int:
        """Glue every quantity whose name starts with ``start`` (and its ``text`` where it has an
        interval), so that Markdown pages can state any of them from this notebook.  Returns how many."""
        names = self.names(start)
        for key in names:
            self.glue(key, *(("text",) if self[key].low is not None else ()))
        return len(names)

    def ranking(self, keys: dict[str, str], what: str) -> str:
        """A sentence ranking ``keys`` (label -> name) only as far as their intervals allow."""
        from .render import ranking_sentence

        est = {}
        for label, key in keys.items():
            q = self[key]
            if q.low is None:
                raise ValueError(f"keys: {key!r} has no interval to rank by")
            est[label] = (q.value, q.low, q.high)
        digits = max(self[k].digits for k in keys.values())
        sentence = ranking_sentence(est, what=what, digits=digits)
        return sentence[:1].upper() + sentence[1:]  # it may open a paragraph

    def leader(self, keys: dict[str, str], what: str, interval: str = "95% interval") -> str:
        """:func:`leader_sentence` over ``keys`` (label -> name), by their intervals."""
        est = {}
        for label, key in keys.items():
            q = self[key]
            if q.low is None:
                raise ValueError(f"keys: {key!r} has no interval to rank by")
            est[label] = (q.value, q.low, q.high)
        return leader_sentence(est, what, max(self[k].digits for k in keys.values()), interval)


def leader_sentence(estimates: dict, what: str, digits: int = 2, interval: str = "95% interval") -> str:
    """Which of many settings leads, said only as far as the intervals allow.

    ``estimates`` maps a label to ``(value, low, high)``.  The setting with the highest value is
    named with its interval; every other whose interval reaches the leader's lower end is
    listed as not told apart from it (up to five, then how many more); when none does, the
    sentence says every other interval ends below it.  For two or three estimates
    :func:`speclib.book.render.ranking_sentence` says more.

    Examples
    --------
    >>> leader_sentence({"k = 1": (1.0, 0.9, 1.05), "k = 2": (1.2, 1.1, 1.3), "k = 3": (1.15, 1.05, 1.25)},
    ...                 "speed-up")
    'The highest speed-up is at k = 2, 1.20 (95% interval 1.10 to 1.30), but k = 3 (1.15) reaches into that interval, so these runs do not single out one setting.'
    >>> leader_sentence({"a": (2.0, 1.9, 2.1), "b": (1.0, 0.9, 1.1)}, "rate")
    'The highest rate is at a, 2.00 (95% interval 1.90 to 2.10); every other interval ends below 1.90.'
    """
    if not isinstance(estimates, dict) or len(estimates) < 2:
        raise ValueError("estimates: expected a dict of at least two labels to (value, low, high)")
    rows = []
    for label, triple in estimates.items():
        try:
            v, lo, hi = (float(x) for x in triple)
        except (TypeError, ValueError):
            raise ValueError(f"estimates[{label!r}]: expected (value, low, high), got {triple!r}") from None
        if not (lo <= v <= hi) or not all(math.isfinite(x) for x in (v, lo, hi)):
            raise ValueError(f"estimates[{label!r}]: expected low <= value <= high, finite, got {triple!r}")
        rows.append((v, lo, hi, str(label)))
    rows.sort(key=lambda r: -r[0])
    f = f"{{:.{int(digits)}f}}".format
    top = rows[0]
    head = f"The highest {what} is at {top[3]}, {f(top[0])} ({interval} {f(top[1])} to {f(top[2])})"
    close = [r for r in rows[1:] if r[2] >= top[1]]
    if not close:
        return head + f"; every other interval ends below {f(top[1])}."
    named = [f"{r[3]} ({f(r[0])})" for r in close[:5]]
    if len(close) > 5:
        named.append(f"{len(close) - 5} more")
    listed = named[0] if len(named) == 1 else ", ".join(named[:-1]) + " and " + named[-1]
    verb = "reaches" if len(close) == 1 else "reach"
    return head + f", but {listed} {verb} into that interval, so these runs do not single out one setting."


def provenance(command: str, quick: bool, seconds: float, **extra) -> dict:
    """The provenance every record carries: date, commit, command, processor and BLAS, Python and
    numpy, load average now, whether it was a test run (``quick``), its duration; plus ``extra``.

    For a benchmark that writes a record (``benchmarks/record.py``, or a real model's): build
    ``{"format": FORMAT, "provenance": provenance(...), "settings": {...}, "quantities": {...}}``
    and :func:`write_record` it.
    """
    import os
    import platform
    import subprocess
    import time

    import numpy as np

    from ..lm.products import blas_kernel
    from .wallclock import processor_summary

    try:
        commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=Path(__file__).resolve().parents[2],
                                capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        commit = "unknown"
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
    return {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "commit": commit, "command": command,
            "processor": processor_summary(), "blas": blas_kernel(), "python": platform.python_version(),
            "numpy": np.__version__, "load_average_at_end": load, "cores": os.cpu_count(), "quick": bool(quick),
            "seconds": round(float(seconds), 1), **extra}


def write_record(path: str | Path, record: dict) -> Path:
    """Check ``record`` (a quick one too) and write it as JSON; returns the path."""
    check_record(record, "the new record", allow_quick=True)
    path = Path(path)
    path.write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
    return path


def load_record(path: str | Path | None = None, allow_quick: bool = False) -> Record:
    """One record file, checked (by default the book's, :data:`BOOK_RECORD`)."""
    from .._validate import as_bool

    allow_quick = as_bool(allow_quick, "allow_quick")
    if path is not None and not isinstance(path, (str, Path)):
        raise TypeError(f"path: expected a file path, got {type(path).__name__}")
    path = BOOK_RECORD if path is None else Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no record; run benchmarks/record.py to measure one")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path}: not JSON ({exc})") from None
    return Record.from_json(data, path.name, allow_quick)


def accelerator_quantities(record: dict, source: str = "accelerator_pair.json") -> Record:
    """The accelerator record (:mod:`speclib.book.accelerator`) as named quantities on ``torch/gpu``."""
    from .accelerator import check_accelerator_record

    record = check_accelerator_record(record)
    qs: dict[str, Quantity] = {}

    def add(key: str, value: float, **fields) -> None:
        if isinstance(value, float) and math.isnan(value):
            return  # a setting the drafter never reached (Medusa past its heads)
        qs[key] = Quantity(key, float(value), source=source, **fields)

    dev = record["isolated"]["device"]
    for n, r, med in zip(dev["n_tokens"], dev["r"], dev["median_ms"]):
        if n > 1:
            add(name(f"r{n}", "target", where="isolated", passes="torch", device="gpu"), r)
    add(name("t1_ms", "target", where="isolated", passes="torch", device="gpu"), dev["median_ms"][0])
    runs = record["settings"]["reps"] * len(record["settings"]["prompts"])
    for drafter, c in record["cost"].items():
        add(name("c", drafter, where="loop", passes="torch", device="gpu"), c["c"])
    for drafter, run in record["drafters"].items():
        T = record["settings"].get("temperature", 1.0)
        for i, k in enumerate(run["ks"]):
            add(name("speedup", drafter, k=k, T=T, passes="torch", device="gpu"), run["speedup_median"][i],
                q25=run["speedup_q25"][i], q75=run["speedup_q75"][i], n=runs)
            add(name("outside", drafter, k=k, T=T, passes="torch", device="gpu"), run["outside_per_step"][i])
    return Record(qs, {source: record["provenance"]}, {source: record["settings"]})


def median_interval(values: object, level: float = 0.95, n_boot: int = 2000, seed: int = 0
                    ) -> tuple[float, float, float]:
    """``(median, low, high)``: the median of ``values`` and a percentile-bootstrap interval of it.

    The runs are resampled with replacement ``n_boot`` times (a Generator seeded by ``seed``);
    the interval holds the middle ``level`` of the resampled medians.

    Examples
    --------
    >>> med, low, high = median_interval([0.9, 1.0, 1.1, 1.0, 0.95, 1.05])
    >>> med, low <= med <= high
    (1.0, True)
    """
    import numpy as np

    from .._validate import as_int, as_real, as_real_array

    n_boot = as_int(n_boot, "n_boot", minimum=1, maximum=10**6, why="resamples enough for any interval")
    seed = as_int(seed, "seed", minimum=0)
    v = as_real_array(values, "values", "run results")
    if v.ndim != 1 or v.size < 2 or not np.isfinite(v).all():
        raise ValueError(f"values: expected at least two finite numbers in a flat list, got shape {v.shape}")
    level = as_real(level, "level", low=0.0, high=1.0)
    rng = np.random.default_rng(seed)
    boot = np.median(v[rng.integers(0, v.size, (n_boot, v.size))], axis=1)
    low, high = np.percentile(boot, [50 * (1 - level), 50 * (1 + level)])
    return float(np.median(v)), float(low), float(high)


_CACHE: dict[tuple, Record] = {}


def load_records(folder: str | Path | None = None) -> Record:
    """Every record in ``folder`` (by default the shipped ones) in one namespace.

    The files named ``record_*.json`` (the book's CPU record and any other in this format)
    and, where present, the accelerator record, translated by :func:`accelerator_quantities`.
    """
    folder = DATA if folder is None else Path(folder)
    files = sorted(folder.glob("record_*.json"))
    acc = folder / "accelerator_pair.json"
    key = tuple((f, f.stat().st_mtime) for f in files + ([acc] if acc.is_file() else []))
    if key in _CACHE:
        return _CACHE[key]
    if not files:
        raise FileNotFoundError(f"{folder}: no record_*.json; run benchmarks/record.py to measure one")
    out = load_record(files[0])
    for f in files[1:]:
        out = out.merged(load_record(f))
    if acc.is_file():
        out = out.merged(accelerator_quantities(json.loads(acc.read_text(encoding="utf-8"))))
    _CACHE[key] = out
    return out
