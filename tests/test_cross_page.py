"""One account of the numbers across the book (issue 38, items 1 and 5).

1. **One value per named quantity.**  A quantity of the book's record is glued under its name
   (``c/pair/loop/numpy/cpu``, see :mod:`speclib.book.record`), by the page that reads it from
   the record, and a Markdown page states it by naming that page (``07_real_pair.ipynb::name``).
   Every glued value of every page is collected; two pages that state the same name with
   different values fail, and so does a page whose value is not the record's.
2. **No ranking outside the interval rule.**  A sentence of prose that compares ("faster",
   "beats", "the highest", "below", ...) in its own words, next to a glued figure that was
   measured (a record quantity, or a value glued by a cell whose output varies from run to
   run, tagged ``nbval-ignore-output``), ranks estimates by hand.  Such a comparison must be
   generated (:func:`speclib.book.render.ranking_sentence`, :meth:`Record.ranking`, or a
   sentence a function writes from the intervals) and glued whole, so its words are not in
   the page's source.

Each rule is run on planted pages too (negative controls): a contradiction, a wrong value, a
hand-written ranking.
"""

from __future__ import annotations

import copy
import json
import re
import sys
from pathlib import Path

import pytest

from speclib.book.record import is_name, load_records, split_field

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
from editions import glued_values  # noqa: E402

BOOK = ROOT / "book"
PAGES = sorted(BOOK.glob("*.ipynb")) + sorted(BOOK.glob("*.md"))
ROLE = re.compile(r"\{glue(?P<kind>:(?:any|text|md)?)?\}`(?P<content>[^`]+)`")
#: Words that rank or compare two quantities.  "above" and "below" count only before a figure
#: (``below {glue}``, ``above them at {glue}``), not as "the table above".
COMPARATIVE = re.compile(
    r"\b(?:faster|slower|fastest|slowest|beats?|beating|outperform\w*|highest|lowest|best|worst|higher than|"
    r"lower than|more than|less than|wins?|ahead of|better than|worse than|exceeds?|cheaper|costlier)\b"
    r"|\b(?:above|below)\s+(?:(?:the|its|their|them|both|all|it|that|at|of|every)\s+){0,3}(?:GLUE|MATH|\d)",
    re.I)


def load(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


def markdown_of(page: Path, nb: dict | None = None) -> list[str]:
    if page.suffix == ".md":
        return [page.read_text(encoding="utf-8")]
    nb = load(page) if nb is None else nb
    return ["".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "markdown"]


def varying_keys(nb: dict) -> set[str]:
    """Names glued by cells whose output nbval ignores: values that change from run to run."""
    out = set()
    for cell in nb["cells"]:
        if cell["cell_type"] == "code" and "nbval-ignore-output" in cell["metadata"].get("tags", []):
            for o in cell.get("outputs", []):
                record = o.get("metadata", {}).get("scrapbook")
                if record:
                    out.add(record["name"])
    return out


def aliases(nb: dict) -> dict[str, str]:
    """Local names glued by :meth:`speclib.book.record.Record.alias`: name -> record name or "derived"."""
    out = {}
    for cell in nb["cells"]:
        for o in cell.get("outputs", []):
            meta = o.get("metadata", {})
            if "speclib_record" in meta and "scrapbook" in meta:
                out[meta["scrapbook"]["name"]] = meta["speclib_record"]
    return out


def role_key(kind: str | None, content: str, page: str) -> tuple[str, str]:
    """``(notebook, key)`` that a glue role reads."""
    if kind == ":text" and ":" in content.replace("::", "\0"):
        content = content.rsplit(":", 1)[0]
    if "::" in content:
        doc, key = content.split("::", 1)
        return Path(doc).name, key
    return page, content


def statements(notebooks: dict[str, dict], markdown: dict[str, list[str]]) -> dict[str, list[tuple[str, str]]]:
    """Record name -> every (page, value) that states it: the notebooks' own glue, and each role of
    a page that reads another notebook's."""
    values = {page: glued_values(nb) for page, nb in notebooks.items()}
    out: dict[str, list[tuple[str, str]]] = {}
    for page, glued in values.items():
        local = aliases(notebooks[page])
        for key, bundle in glued.items():
            name = key if is_name(key) else local.get(key)
            if name and name != "derived":
                where = page if name == key else f"{page} as {key}"
                out.setdefault(name, []).append((where, bundle.get("text/plain", "")))
    for page, texts in markdown.items():
        for text in texts:
            for m in ROLE.finditer(text):
                doc, key = role_key(m.group("kind"), m.group("content"), page)
                if doc != page and is_name(key) and key in values.get(doc, {}):
                    out.setdefault(key, []).append((page, values[doc][key].get("text/plain", "")))
    return out


def contradictions(stated: dict[str, list[tuple[str, str]]]) -> list[str]:
    bad = []
    for key, where in sorted(stated.items()):
        if len({v for _, v in where}) > 1:
            bad.append(f"{key}: " + ", ".join(f"{v} ({p})" for p, v in where))
    return bad


def off_record(stated: dict[str, list[tuple[str, str]]], record) -> list[str]:
    """Stated values that are not the record's (as :meth:`Quantity.rounded` or ``text`` gives it)."""
    bad = []
    for key, where in sorted(stated.items()):
        name, field = split_field(key)
        if name not in record:
            bad.append(f"{key}: no such quantity in the record")
            continue
        q = record[name]
        want = q.text() if field == "text" else q.rounded(field)
        for page, value in where:
            got = value.strip("'\"")
            try:
                same = got == want if field == "text" else float(got) == float(want)
            except ValueError:
                same = False
            if not same:
                bad.append(f"{key}: {page} states {value}, the record {want}")
    return bad


def sentences(text: str):
    for paragraph in re.split(r"\n\s*\n", text):
        yield from re.split(r"(?<=[.!?])\s+(?=[A-Z{$(*])", paragraph)


def hand_rankings(page: str, texts: list[str], varying: dict[str, set[str]]) -> list[str]:
    """Sentences that compare in their own words next to a measured glued figure.

    ``varying`` maps a notebook to its measured local names: glued by a cell whose output
    varies, or an alias of a record quantity (:func:`aliases`)."""
    found = []
    for text in texts:
        for sentence in sentences(text):
            measured = [key for m in ROLE.finditer(sentence)
                        for doc, key in [role_key(m.group("kind"), m.group("content"), page)]
                        if is_name(key) or key in varying.get(doc, set())]
            if not measured:
                continue
            bare = re.sub(r"\$[^$]*\$", "MATH", ROLE.sub("GLUE", sentence))
            m = COMPARATIVE.search(bare)
            if m:
                found.append(f"[{m.group(0)}] {' '.join(sentence.split())[:180]}")
    return found


@pytest.fixture(scope="module")
def book():
    notebooks = {p.name: load(p) for p in PAGES if p.suffix == ".ipynb"}
    markdown = {p.name: markdown_of(p, notebooks.get(p.name)) for p in PAGES}
    return notebooks, markdown


# --- 1. one value per named quantity --------------------------------------------------------------

def test_no_two_pages_state_a_named_quantity_differently(book):
    assert contradictions(statements(*book)) == []


def test_every_stated_record_quantity_is_the_records(book):
    assert off_record(statements(*book), load_records()) == []


def glue_output(key: str, value: str) -> dict:
    return {"output_type": "display_data", "metadata": {"scrapbook": {"name": key, "mime_prefix": ""}},
            "data": {"text/plain": value}}


def test_a_planted_contradiction_and_a_wrong_value_are_found(book):
    notebooks, markdown = copy.deepcopy(book)
    record = load_records()
    key = "c/pair/loop/numpy/cpu"
    right = repr(record[key].rounded())
    for page, value in (("00_overview.ipynb", right), ("07_real_pair.ipynb", "0.193")):
        notebooks[page]["cells"].append({"cell_type": "code", "metadata": {}, "source": "",
                                         "outputs": [glue_output(key, value)]})
    markdown["guide.md"] = [f"The draft costs {{glue:text}}`07_real_pair.ipynb::{key}:s`."]
    stated = statements(notebooks, markdown)
    assert ("00_overview.ipynb", right) in stated[key] and ("07_real_pair.ipynb", "0.193") in stated[key]
    assert ("guide.md", "0.193") in stated[key]
    assert any(line.startswith(key) for line in contradictions(stated))
    assert any("07_real_pair.ipynb states 0.193" in line for line in off_record(stated, record))
    # an alias (a local name that says which record quantity it is) is held to the record too
    alias = glue_output("c_draft", "0.2")
    alias["metadata"]["speclib_record"] = key
    notebooks["15_serving.ipynb"]["cells"].append({"cell_type": "code", "metadata": {}, "source": "",
                                                   "outputs": [alias]})
    assert any("15_serving.ipynb as c_draft states 0.2" in line
               for line in off_record(statements(notebooks, markdown), record))
    # local names are each page's own business: the same local name on two pages is no contradiction
    assert contradictions({"t1_ms": []}) == [] and not is_name("t1_ms")


# --- 2. rankings go through the interval rule ------------------------------------------------------

@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_no_sentence_ranks_measured_figures_by_hand(page, book):
    notebooks, markdown = book
    varying = {name: varying_keys(nb) | set(aliases(nb)) for name, nb in notebooks.items()}
    found = hand_rankings(page.name, markdown[page.name], varying)
    if page.name in ("16_models_and_engines.ipynb", "guide.md"):  # known, and owned by other branches
        assert found, f"{page.name} no longer ranks measured figures by hand: remove this exception"
        pytest.xfail(f"{page.name} compares measured figures in its own words; it is rewritten on another branch")
    assert found == []


def test_the_scan_finds_a_hand_ranking_and_lets_a_generated_one_pass():
    varying = {"07_real_pair.ipynb": {"speedup_wall_top", "ranking", "best_k_pair"}}
    bad = ["EAGLE is faster: {glue:}`speedup/eagle/k3/T1/numpy/cpu`x against {glue:}`speedup/pair/k3/T1/numpy/cpu`x.",
           "Fixed k = 4 is below them at {glue:}`speedup_wall_top` (0.76 to 0.97).",
           "The fastest setting was {glue:text}`07_real_pair.ipynb::speedup_wall_top:s`x.",
           "The pair was best at k = {glue:}`best_k_pair`."]
    good = ["{glue:md}`ranking` The table above lists them.",            # the comparison is generated
            "Each drafter below generates {glue:}`speedup_wall_top` characters.",  # a place, not a ranking
            "The exact distance is below {glue:}`exact_bound`.",           # not a measurement that varies
            "The pass over 4 tokens costs {glue:}`r4/target/isolated/numpy/cpu` one-token passes."]
    for sentence in bad:
        assert hand_rankings("07_real_pair.ipynb", [sentence], varying), sentence
    for sentence in good:
        assert not hand_rankings("07_real_pair.ipynb", [sentence], varying), sentence
