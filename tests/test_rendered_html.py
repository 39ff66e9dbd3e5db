"""The built pages as a browser shows them: math typeset offline, nothing wider than the column.

These tests open every page of the built book in headless Chromium (tools/render_check.py)
with every host name unresolvable, as on a machine without network.  They need Chromium:
`python3 dev.py test` installs it where it can (Debian's `chromium` package, as root); where
it is missing anyway, the tests fail and say how to install it.  They never skip: a check
that silently does not run would let a formula run off the page unnoticed.

The width check uses a 1200 px window: the narrowest column of the theme's wide layout (both
sidebars shown).  MathJax 3 does not break lines itself, so a long display formula has to be
broken by hand (an `aligned` environment) to fit.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest
from bs4 import BeautifulSoup

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
import render_check  # noqa: E402

WIDTH = 1200
MATHJAX = "_static/mathjax/tex-chtml.js"
# What a page would fetch from elsewhere if the build fell back on the defaults.
CDN_MARKERS = ("require.js", "require.min.js", "embed-amd", "html-manager", "mathjax@", "mathjax/3", "tex-mml-chtml")


@pytest.fixture(scope="module")
def html_root(built_book) -> Path:
    return built_book  # tests/conftest.py: one build for every test that reads the pages


@pytest.fixture(scope="module")
def reports(html_root) -> dict[str, render_check.PageReport]:
    try:
        render_check.find_chromium()
    except FileNotFoundError as err:
        pytest.fail(str(err))
    with render_check.Chromium(width=WIDTH) as browser:
        return {str(p.relative_to(html_root)): browser.load(p) for p in render_check.built_pages(html_root)}


def soups(html_root: Path) -> dict[str, BeautifulSoup]:
    return {str(p.relative_to(html_root)): BeautifulSoup(p.read_text(encoding="utf-8"), "html.parser")
            for p in render_check.built_pages(html_root)}


def test_mathjax_ships_with_the_book(html_root):
    assert (html_root / MATHJAX).is_file(), "MathJax is not copied into the built book"
    fonts = list((html_root / "_static/mathjax/output/chtml/fonts/woff-v2").glob("*.woff"))
    assert len(fonts) > 10, "MathJax's fonts are not copied into the built book"
    with_math = 0
    for name, soup in soups(html_root).items():
        if not soup.select("div.math, span.math"):
            continue
        with_math += 1
        sources = [s["src"] for s in soup.find_all("script", src=True) if "mathjax" in s["src"].lower()]
        assert len(sources) == 1 and sources[0].split("?")[0].endswith(MATHJAX), \
            f"{name}: MathJax is not loaded from the book's own copy: {sources}"
        assert (html_root / name).parent.joinpath(sources[0].split("?")[0]).resolve().is_file(), name
    assert with_math >= 10, "the pages hold almost no math: is the book built from the right sources?"


def test_no_page_loads_anything_from_another_site(html_root):
    for name, soup in soups(html_root).items():
        for tag, attr in (("script", "src"), ("link", "href"), ("img", "src"), ("iframe", "src"), ("source", "src")):
            for el in soup.find_all(tag, **{attr: True}):
                if tag == "link" and not set(el.get("rel", [])) & {"stylesheet", "preload", "modulepreload", "icon"}:
                    continue
                assert not el[attr].startswith(("http:", "https:", "//")), f"{name}: loads {el[attr]}"
        text = str(soup).lower()
        for marker in CDN_MARKERS:
            assert marker not in text, f"{name}: still refers to {marker} (a CDN asset)"


def test_every_formula_is_typeset_offline(reports):
    typeset = 0
    for name, report in reports.items():
        assert not report.untypeset, f"{name}: formulas left as raw TeX: {report.untypeset[:3]}"
        assert not report.console_errors, f"{name}: script errors: {report.console_errors[:3]}"
        typeset += len(report.formulas)
    assert typeset > 500, f"only {typeset} formulas typeset in the whole book"


def test_pages_request_nothing_from_the_network(reports):
    for name, report in reports.items():
        assert not report.remote_requests(), f"{name}: requests {report.remote_requests()}"


def test_no_display_formula_is_wider_than_its_column(reports):
    too_wide = [f"{name}: {f['width']:.0f} px in {f['room']:.0f} px: {f['tex'].strip()[:90]!r}"
                for name, report in reports.items() for f in report.overflowing()]
    displays = sum(f["display"] for r in reports.values() for f in r.formulas)
    assert displays > 20, f"only {displays} display formulas measured"
    assert not too_wide, f"display formulas wider than the column at a {WIDTH} px window:\n" + "\n".join(too_wide)


def test_no_output_block_scrolls_sideways(reports):
    """Printed output wraps at the column's edge; only a listing, which must keep its lines
    whole, may scroll (see the next test)."""
    scrolling = [f"{name}: {text!r}" for name, report in reports.items() for text in report.scrolling]
    assert not scrolling, "output blocks wider than the column:\n" + "\n".join(scrolling[:20])


def _lost(reports) -> list[str]:
    return [f"{name}: {'listing' if w['listing'] else 'output'}: {w['line']!r}"
            for name, report in reports.items() for w in report.lost_indentation()]


def _wide(reports) -> list[str]:
    return [f"{name}: {t['width']:.0f} px in {t['room']:.0f} px: {t['head']!r}"
            for name, report in reports.items() for t in report.wide_tables()]


def test_no_listing_wraps_and_loses_its_indentation(reports):
    """A line of code that wraps goes on at the left edge and reads as the next statement at the
    outer level.  Every line of a listing stays whole (it fits the column or its block scrolls),
    and so does every indented line of printed output (printed code, aligned columns)."""
    lost = _lost(reports)
    assert not lost, (f"lines that wrap and lose their indentation at a {WIDTH} px window (shorten them, or "
                      "print code as a listing):\n" + "\n".join(lost[:30]))


def test_every_table_fits_its_column(reports):
    tables = sum(len(r.tables) for r in reports.values())
    assert tables > 20, f"only {tables} tables measured"
    wide = _wide(reports)
    assert not wide, (f"tables wider than the column at a {WIDTH} px window (the narrowest column of the wide "
                      "layout; fewer or shorter columns):\n" + "\n".join(wide))


def test_the_layout_checks_catch_wrapped_listings_and_wide_tables(html_root):
    """Negative control on a real page: with the book's former style (listings wrapped at the
    column's edge) and a table forced wider than the column, both checks fail."""
    try:
        render_check.find_chromium()
    except FileNotFoundError as err:
        pytest.fail(str(err))
    page = html_root / "book" / "09_bug_zoo.html"
    with render_check.Chromium(width=WIDTH) as browser:
        browser.load(page)
        browser.evaluate("document.head.insertAdjacentHTML('beforeend', '<style>div.highlight pre "
                         "{white-space: pre-wrap !important} article table {min-width: 900px}</style>')")
        broken = {"09_bug_zoo.html": browser.measure(page)}
    assert any("listing" in line for line in _lost(broken)), "a wrapped listing went unnoticed"
    assert _wide(broken), "a table wider than the column went unnoticed"


#: What a caption should not carry: the machine's state and the software's versions belong to
#: the record a figure was drawn from (its provenance), not to what the reader is told to see.
MACHINE_METADATA = re.compile(
    r"load average|chosen by measurement among|among full, blocks"
    r"|\b(?:numba|numpy|OpenBLAS|scipy|PyTorch|torch|transformers|vLLM|Python|CUDA)\s+v?\d+\.\d+", re.I)


def captions(soup: BeautifulSoup) -> list[str]:
    """A page's captions, as this book writes them: the paragraph that follows a figure (an image
    in a cell's output), and a paragraph set wholly in italics (a table's or figure's caption)."""
    found = []
    for img in soup.select("article div.cell_output img, article figure img"):
        holder = img.find_parent("div", class_="cell") or img.find_parent("figure")
        after = holder.find_next(["p", "h1", "h2", "h3"]) if holder else None
        if after is not None and after.name == "p":
            found.append(after.get_text(" ", strip=True))
    for p in soup.select("article p"):
        children = [c for c in p.children if getattr(c, "name", None) or str(c).strip()]
        if len(children) == 1 and getattr(children[0], "name", None) == "em":
            found.append(p.get_text(" ", strip=True))
    return found


def test_captions_carry_no_machine_metadata(html_root):
    bad = [f"{name}: {MACHINE_METADATA.search(text).group(0)!r} in {text[:160]!r}"
           for name, soup in soups(html_root).items() for text in captions(soup) if MACHINE_METADATA.search(text)]
    assert not bad, "captions carrying machine metadata (say what to see; the record keeps the " \
                    "provenance):\n" + "\n".join(bad)


def test_the_caption_check_reads_captions_and_flags_metadata():
    page = BeautifulSoup(
        '<article><div class="cell"><div class="cell_output"><img src="a.png"></div></div>'
        "<p>Median of 9 repeats, numba 0.67.0, load average 0.3.</p>"
        "<p><em>Best k per drafter, on the H200.</em></p>"
        '<div class="cell"><div class="cell_output"><img src="b.png"></div></div>'
        "<p>The speed-up falls as the batch grows.</p></article>", "html.parser")
    found = captions(page)
    assert len(found) == 3
    assert [bool(MACHINE_METADATA.search(t)) for t in found] == [True, False, False]
    for bad in ("products chosen by measurement among full, blocks, rows", "numpy 2.2.6 with OpenBLAS 0.3.29",
                "torch 2.13.0+cpu"):
        assert MACHINE_METADATA.search(bad), bad
    for fine in ("the OpenBLAS Haswell kernels", "k = 4 at temperature 1", "r(4) = 1.51"):
        assert not MACHINE_METADATA.search(fine), fine


def test_instructors_page_links_every_exercise_by_its_number(html_root):
    """Each item of the instructors' exercise list links to its exercise and reads "Exercise N" as the exercise does."""
    from speclib.book.course import book_exercises

    exercises = book_exercises(ROOT)
    table = BeautifulSoup((html_root / "book/instructors.html").read_text(encoding="utf-8"), "html.parser")
    links = {a["href"].split("#")[-1]: (a["href"], a.get_text(strip=True)) for a in table.select("li a[href*='#ex-']")}
    assert len(links) == len(exercises), f"{len(links)} links for {len(exercises)} exercises"
    pages: dict[str, BeautifulSoup] = {}
    for ex in exercises:
        href, text = links[ex.label]
        page = href.split("#")[0]
        soup = pages.setdefault(page, BeautifulSoup((html_root / "book" / page).read_text(encoding="utf-8"),
                                                    "html.parser"))
        target = soup.find(id=ex.label)
        assert target is not None, f"{ex.label}: the link points nowhere"
        title = target.find(class_="admonition-title") or target.find_next(class_="admonition-title")
        assert title.get_text(" ", strip=True).startswith(text + " "), f"{ex.label}: {text!r} vs {title.get_text()!r}"


def test_overview_shows_the_algorithm_and_the_shipped_step(html_root):
    """Chapter 00 holds the algorithm box and, verbatim, the one-page algorithm as it ships
    (speclib.core.minimal, which tests/test_minimal.py proves equal to the library's loop)."""
    import inspect
    import textwrap

    from speclib.core import minimal

    soup = BeautifulSoup((html_root / "book/00_overview.html").read_text(encoding="utf-8"), "html.parser")
    assert soup.select("div.algorithm, div.proof.algorithm, div[class*=algorithm]"), "no algorithm box"
    listings = [pre.get_text() for pre in soup.select("div.highlight pre")]
    for function in (minimal._speculative_sample,):
        code = textwrap.dedent(inspect.getsource(function)).strip()
        assert any(textwrap.dedent(text).strip() == code for text in listings), \
            f"the page does not show the code of {function.__qualname__} as it ships"


def _citations(html_root: Path):
    """(page, bibliography id, what the citation reads) for every in-text citation of the book.

    ``{cite:p}`` links its whole text, "vLLM project, 2026a"; ``{cite:t}`` links only the year and
    writes the author before it, "vLLM project [2026a]", read here as "vLLM project, 2026a".
    """
    sys.path.insert(0, str(ROOT / "_ext"))
    import bib_labels

    bib = BeautifulSoup((html_root / "book/bibliography.html").read_text(encoding="utf-8"), "html.parser")
    labels = {div["id"]: " ".join(div.find(class_="label").get_text("", strip=True).strip("[]").split())
              for div in bib.select("div.citation")}
    out = []
    for name, soup in soups(html_root).items():
        for a in soup.select("a.reference.internal[href*='#']"):
            page, _, target = a["href"].rpartition("#")
            if not page.endswith("bibliography.html") or target not in labels:
                continue
            text = " ".join(a.get_text(" ", strip=True).split())
            before = " ".join("".join(s.get_text() if hasattr(s, "get_text") else str(s)
                                      for s in reversed(list(a.previous_siblings))).split())
            who, year = bib_labels.split_label(labels[target])
            if year and text == year and before.endswith(f"{who} ["):
                text = f"{who}, {year}"  # a textual citation
            out.append((name, target, labels[target], text))
    return out


def test_every_citation_reads_as_its_own_entry(html_root):
    """Two entries never share a citation text, and a citation reads as the label its entry
    carries in the bibliography (four vLLM pages of 2026 once all read "vLLM project, 2026")."""
    from collections import defaultdict

    cited = _citations(html_root)
    assert len(cited) > 50, "the test found too few citations to mean anything"
    by_text = defaultdict(set)
    for _, target, _, text in cited:
        by_text[text].add(target)
    assert {text: sorted(ids) for text, ids in by_text.items() if len(ids) > 1} == {}
    wrong = [f"{page}: {text!r} links to [{label}]" for page, _, label, text in cited if text != label]
    assert wrong == []
    assert {label for *_, label, _ in cited} >= {"vLLM project, 2026a", "Hugging Face, 2026a"}
