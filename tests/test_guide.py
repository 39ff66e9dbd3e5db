"""The practitioner's guide stands on the main line, and what it computes is right.

The guide (``book/guide.ipynb``) is the last page of the main line: a reader who has read
nothing of the second part must be able to use it.  So every symbol in its formulas is
defined on the guide itself (its table of symbols, or a displayed definition) or in the math
of a main-line page, never only in a chapter of the second part.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml

from speclib.book.guide import ENGINE_SETTINGS, choose_k_per_batch, counters_in_book_terms
from speclib.book.record import Quantity, Record
from speclib.core.theory import expected_tokens_per_pass

ROOT = Path(__file__).resolve().parents[1]
GUIDE = ROOT / "book" / "guide.ipynb"
MATH = re.compile(r"\$\$(.+?)\$\$|\$([^$\n]+)\$", re.S)
GREEK = {"alpha", "beta", "gamma", "eta", "epsilon", "lambda", "mu", "sigma", "tau", "theta", "pi", "rho"}
SYMBOL = re.compile(r"\\([A-Za-z]+)|([A-Za-z])(?:_\{?([A-Za-z0-9]+)\}?)?")
WORDS_IN_MATH = re.compile(r"\\(?:text|mathrm|operatorname|mathbf|mathit)\{[^}]*\}")


def markdown(path: Path) -> str:
    if path.suffix == ".md":
        return path.read_text(encoding="utf-8")
    nb = json.loads(path.read_text(encoding="utf-8"))
    return "\n\n".join("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "markdown")


def symbols(text: str) -> set[str]:
    """The symbols of the math in ``text``: Greek letters by name, letters with their subscripts."""
    found = set()
    for m in MATH.finditer(text):
        math = WORDS_IN_MATH.sub(" ", m.group(1) or m.group(2))
        for s in SYMBOL.finditer(math):
            if s.group(1):
                if s.group(1) in GREEK:
                    found.add(s.group(1))
            else:
                found.add(s.group(2) + (f"_{s.group(3)}" if s.group(3) else ""))
    return found


def defined_on(text: str) -> set[str]:
    """What a page defines for itself: the symbols of its table rows (a table of symbols) and of
    the left-hand side of its displayed definitions (``S(k) = ...``)."""
    rows = "\n".join(line for line in text.splitlines() if line.startswith("|"))
    out = symbols(rows)
    for m in re.finditer(r"\$\$(.+?)\$\$", text, re.S):
        left = m.group(1).split("=")[0]
        out |= symbols(f"${left}$")
    return out


def main_line_pages() -> list[Path]:
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text(encoding="utf-8"))
    part = next(p for p in toc["parts"] if p["caption"] == "The main line")
    names = [toc["root"]] + [c["file"] for c in part["chapters"]]
    return [next(p for p in (ROOT / f"{n}.ipynb", ROOT / f"{n}.md") if p.is_file()) for n in names]


def undefined_in_guide(guide_text: str) -> set[str]:
    main = set()
    for page in main_line_pages():
        if page != GUIDE:
            main |= symbols(markdown(page))
    return symbols(guide_text) - defined_on(guide_text) - main


def test_the_guide_is_on_the_main_line():
    assert GUIDE in main_line_pages()


def test_every_symbol_of_the_guide_is_defined_on_it_or_in_the_main_line():
    missing = undefined_in_guide(markdown(GUIDE))
    assert not missing, f"the guide uses symbols defined neither on it nor in the main line: {sorted(missing)}"


def test_the_symbol_check_finds_a_symbol_from_the_second_part():
    """Negative control: without its table row, c_B (defined in chapter 15 only) is flagged."""
    text = markdown(GUIDE)
    assert "c_B" in symbols(text)
    without = "\n".join(line for line in text.splitlines() if not line.startswith("| $c_B$"))
    assert "c_B" in undefined_in_guide(without)
    assert symbols("$r_B(k + 1)$ and $\\alpha > c$ and $\\text{tokens}$") == {"r_B", "k", "alpha", "c"}


def test_the_guide_sends_the_reader_to_the_second_part_only_for_more():
    """Each step carries its own answer: a step may cite the chapter that derives it, but the
    guide's own text holds the rule (no step is only a pointer)."""
    text = markdown(GUIDE)
    steps = re.split(r"^## ", text, flags=re.M)[1:]
    for step in steps:
        body = re.sub(r"\{doc\}`[^`]*`|\{cite:[pt]\}`[^`]*`|\{ref\}`[^`]*`", "", step)
        assert len(body.split()) >= 60, f"step {step.splitlines()[0]!r} has almost no text of its own"


# --- what the guide computes -------------------------------------------------------------------

def test_counters_in_book_terms_by_hand():
    # 100 steps of k = 3: 80 kept draft 1, 60 draft 2, 40 draft 3 -> 180 kept, 100 + 80 + 60 judged
    r = counters_in_book_terms([0.8, 0.6, 0.4])
    assert r["alpha"] == pytest.approx(180 / 240)
    assert r["per_drafted"] == pytest.approx(180 / 300)
    assert r["tokens_per_pass"] == pytest.approx(2.8)
    # the same as chapter 16's count of judged drafts from the counters themselves
    from speclib.book.engines import verified_from_counters

    assert verified_from_counters(100, 300, [80, 60, 40], 3) == 240
    # with independent acceptances the conversion gives alpha back, whatever k
    for alpha in (0.3, 0.7, 0.95):
        for k in (1, 4, 8):
            rates = [alpha ** (i + 1) for i in range(k)]
            assert counters_in_book_terms(rates)["alpha"] == pytest.approx(alpha)
            assert counters_in_book_terms(rates)["tokens_per_pass"] == pytest.approx(expected_tokens_per_pass(alpha, k))


def test_counters_in_book_terms_refuses_conditional_rates():
    with pytest.raises(ValueError, match="per_position: a later position"):
        counters_in_book_terms([0.6, 0.8])
    with pytest.raises(ValueError, match="per_position"):
        counters_in_book_terms([1.2])


def _record(values: dict) -> Record:
    return Record({k: Quantity(k, v, None, None, None, None, None, "", "test") for k, v in values.items()})


def test_choose_k_per_batch_shortens_the_draft_and_turns_it_off():
    where = "isolated/numpy/cpu"
    values = {f"c/pair/B1/{where}": 0.05}
    # the draft's pass is 0.05 of t_T(1, 1) = 1 ms; t_T(8, 1) = 2 ms, t_T(32, 1) = 4 ms
    for b, t1, r in ((1, 1.0, {2: 1.0, 3: 1.0, 4: 1.1}), (8, 2.0, {2: 1.4, 3: 1.9, 4: 2.6}),
                     (32, 4.0, {2: 1.9, 3: 2.8, 4: 3.7})):
        values[f"t1_ms/target/B{b}/{where}"] = t1
        for n, v in r.items():
            values[f"r{n}/target/B{b}/{where}"] = v
    rec = _record(values)
    from speclib.book.guide import batch_costs

    assert batch_costs(rec, 8)[0] == pytest.approx(8 * 0.05 * 1.0 / 2.0)  # c_B = B t_D / t_T(B, 1)
    assert batch_costs(rec, 32)[1] == {2: 1.9, 3: 2.8, 4: 3.7}
    choices = choose_k_per_batch(0.8, rec, [1, 8, 32], [1, 2, 3])
    assert [ch.k for ch in choices] == [3, 1, 0]
    assert all(ch.predicted[ch.k] > 1 for ch in choices if ch.k)
    assert max(choices[2].predicted.values()) <= 1
    with pytest.raises(KeyError, match="r5/target/B1"):
        choose_k_per_batch(0.8, rec, [1], [4])


def test_the_settings_map_has_every_engine_for_every_row():
    assert len(ENGINE_SETTINGS) >= 5
    for row in ENGINE_SETTINGS:
        assert len(row) == 5 and all(cell.strip() for cell in row), row
