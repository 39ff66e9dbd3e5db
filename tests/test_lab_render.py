"""The student edition as a student sees it in JupyterLab (the environment requirements.txt, and so
Binder, sets up): the numbers in the text, the exercises and proofs rendered, no role markup.

JupyterLab runs from this environment on a free local port, with no token and a throw-away home
and settings folder, serving a copy of student/ (opening a notebook writes a checkpoint next to
it); headless Chromium opens two chapters and reads what their Markdown cells show
(tools/lab_check.py).  A screenshot of each chapter's first screen and of its first exercise is
saved under the test's temporary folder; the test prints where.  As a negative control the same
chapter from book/, whose Markdown still holds myst-nb's glue roles, is opened too: it must fail
the same checks, so they can fail.  Needs Chromium, as tests/test_rendered_html.py does.
"""

from __future__ import annotations

import json
import re
import shutil
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
import editions  # noqa: E402
import lab_check  # noqa: E402
import render_check  # noqa: E402

CHAPTERS = ("03_verification", "07_real_pair")
#: What the build's roles look like when nothing renders them.
ROLE_MARKUP = re.compile(r"\{(glue[:\w]*|cite:\w+|doc|ref|term|prf:\w+|numref|exercise|solution[\w-]*)\}")


def glued_texts(chapter: str) -> set[str]:
    """The glued plain values the student's chapter shows, as the reader sees them: distinctive ones
    (with a digit and at least three characters, so that a match is no coincidence), outside the
    solutions (which the student edition leaves out).  Glued Markdown sentences are left out: their
    text changes when rendered (typographic quotes, emphasis)."""
    from build_book import strip_notebook

    nb = json.loads((ROOT / "book" / f"{chapter}.ipynb").read_text(encoding="utf-8"))
    values = editions.glued_values(nb)
    strip_notebook(nb)
    shown = set()
    for cell in nb["cells"]:
        if cell["cell_type"] != "markdown":
            continue
        for match in editions.GLUE_ROLE.finditer("".join(cell["source"])):
            key = match.group("content").rsplit(":", 1)[0] if match.group("kind") in (":text", ":md") \
                else match.group("content")
            if match.group("kind") == ":md" or "text/markdown" in values.get(key, {}):
                continue
            text = editions.glued_markdown(match.group("kind"), match.group("content"), values, chapter)
            text = re.sub(r"\\(.)", r"\1", text)  # the reader sees the escaped characters themselves
            if re.search(r"\d", text) and len(text) >= 3 and not re.search(r"[*_`$\[\]]", text):
                shown.add(text)
    return shown


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    try:
        render_check.find_chromium()
    except FileNotFoundError as err:
        pytest.fail(str(err))
    served = tmp_path_factory.mktemp("served")
    for folder in ("student", "book"):
        shutil.copytree(ROOT / folder, served / folder, ignore=shutil.ignore_patterns(".*"))
    with lab_check.JupyterLab(served) as server, lab_check.Browser(width=1200, height=900, timeout=90) as browser:
        yield server, browser


def problems(view: lab_check.NotebookView, chapter: str) -> list[str]:
    """What is wrong with a chapter as JupyterLab showed it (empty when it reads as it should)."""
    out = []
    text = view.all_text.replace("\u2019", "'").replace("\u2018", "'")  # the renderer's typographic quotes
    markup = sorted(set(m.group(0) for m in ROLE_MARKUP.finditer(text)))
    if markup:
        out.append(f"role markup in the text: {markup}")
    missing = sorted(v for v in glued_texts(chapter) if v not in text)
    if missing:
        out.append(f"glued values not shown: {missing[:8]}{' ...' if len(missing) > 8 else ''}")
    n_exercises = len(re.findall(r"^(?:`{3,}|:{3,})\{exercise\}", json.dumps([]) + "\n".join(
        "".join(c["source"]) for c in json.loads((ROOT / "book" / f"{chapter}.ipynb").read_text())["cells"]
        if c["cell_type"] == "markdown"), re.M))
    if len(view.found.get("exercises", [])) != n_exercises:
        out.append(f"{len(view.found.get('exercises', []))} exercises rendered, the chapter has {n_exercises}")
    if not any(re.match(r"Exercise\s*1\b", e) for e in view.found.get("exercises", [])):
        out.append("no block reads 'Exercise 1 (...)'")
    if view.found.get("problems"):
        out.append(f"unresolved references or errors: {view.found['problems'][:5]}")
    if view.math == 0 or "$" in text:
        out.append(f"formulas not typeset ({view.math} typeset, raw $ in the text: {'$' in text})")
    if view.rendered != view.cells:
        out.append(f"{view.rendered} of {view.cells} Markdown cells rendered")
    return out


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_jupyterlab_shows_the_student_chapter_as_text_with_its_numbers(lab, chapter, tmp_path):
    server, browser = lab
    view = browser.open_notebook(server, f"student/{chapter}.ipynb")
    top = browser.screenshot(tmp_path / f"{chapter}-top.png")
    browser.scroll_to(".jp-MarkdownCell aside.myst-exercise")
    exercise = browser.screenshot(tmp_path / f"{chapter}-exercise.png")
    print(f"\nscreenshots of student/{chapter}.ipynb in JupyterLab: {top} and {exercise}")
    assert problems(view, chapter) == []
    assert len(glued_texts(chapter)) >= 5  # the chapter does glue numbers this test looks for
    assert view.errors == [], f"uncaught errors in the page: {view.errors}"


def test_the_book_s_own_notebook_fails_the_same_checks(lab, tmp_path):
    """Negative control: the chapter as book/ holds it (roles unresolved) does not pass."""
    server, browser = lab
    view = browser.open_notebook(server, f"book/{CHAPTERS[0]}.ipynb")
    shot = browser.screenshot(tmp_path / f"book-{CHAPTERS[0]}-top.png")
    print(f"\nscreenshot of book/{CHAPTERS[0]}.ipynb (glue roles unresolved) in JupyterLab: {shot}")
    found = problems(view, CHAPTERS[0])
    assert any(p.startswith("glued values not shown") for p in found), found
