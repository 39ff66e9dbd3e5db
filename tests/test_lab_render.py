"""The student edition as a student sees it in JupyterLab (the environment requirements.txt, and so
Binder, sets up): the numbers in the text, the exercises and proofs rendered, no role markup.

JupyterLab runs from this environment on a free local port, with no token and a throw-away home
and settings folder, serving a copy of student/ (opening a notebook writes a checkpoint next to
it); headless Chromium opens two chapters and reads what their Markdown cells show
(tools/lab_check.py).  A screenshot of each chapter's first screen and of its first exercise is
saved under the test's temporary folder; the test prints where.  As a negative control the same
chapter from book/, whose Markdown still holds myst-nb's glue roles, is opened too: it must fail
the same checks, so they can fail.  Needs Chromium, as tests/test_rendered_html.py does.

Run All is clicked as a reader clicks it (JupyterLab's own command): in a student chapter it runs
to the end, past the exercises' stubs and checks (tagged raises-exception), and the chapter's
explorer redraws when its slider moves; in the instructors' page of the instructor edition the
tables name every exercise "Exercise N" and link the chapters' notebooks, which a click opens.
The book's own instructors' page, run the same way, shows what the editions fix ("Exercise
{number}", links without .ipynb): the negative control.
"""

from __future__ import annotations

import json
import re
import shutil
import sys
import time
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
    for folder in ("student", "instructor", "book"):
        shutil.copytree(ROOT / folder, served / folder, ignore=shutil.ignore_patterns(".*"))
    for name in ("_toc.yml", "_config.yml"):  # what the instructors' page reads the chapters by
        shutil.copy(ROOT / name, served / name)
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


def outputs_text(browser) -> str:
    return browser.evaluate("[...document.querySelectorAll('.jp-NotebookPanel:not(.lm-mod-hidden) "
                            ".jp-OutputArea-output')].map(e => e.innerText).join('\\n')")


def test_run_all_runs_a_student_chapter_to_its_end_and_its_explorer_redraws(lab, tmp_path):
    server, browser = lab
    browser.open_notebook(server, "student/02_drafting.ipynb")
    cells = browser.run_all()
    assert all(c["count"] is not None for c in cells), "Run All stopped before the end"
    stubs = [c for c in cells if any(o.get("ename") == "ExerciseError" for o in c["outputs"])]
    assert stubs and all("raises-exception" in c["tags"] for c in stubs)
    assert cells.index(stubs[0]) < len(cells) - 1, "a cell after the first exercise's error ran"
    assert browser.scroll_to(".jp-OutputArea-output .widget-image")
    before = browser.evaluate("document.querySelector('.jp-OutputArea-output .widget-image').src")
    assert browser.evaluate("(() => { const h = document.querySelector('.jp-OutputArea-output .noUi-handle'); "
                            "h.focus(); return document.activeElement === h; })()")
    for kind in ("keyDown", "keyUp") * 2:  # two presses of the right arrow on the draft-noise slider
        browser.call("Input.dispatchKeyEvent", {"type": kind, "key": "ArrowRight", "code": "ArrowRight",
                                                "windowsVirtualKeyCode": 39})
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        after = browser.evaluate("document.querySelector('.jp-OutputArea-output .widget-image').src")
        if after != before:
            break
        time.sleep(0.5)
    shot = browser.screenshot(tmp_path / "02-explorer.png")
    print(f"\nscreenshot of the explorer after the slider moved: {shot}")
    assert after != before, "the explorer did not redraw when its slider moved"


def test_the_instructors_page_numbers_its_exercises_and_its_links_open_the_chapters(lab, tmp_path):
    server, browser = lab
    browser.open_notebook(server, "instructor/instructors.ipynb")
    cells = browser.run_all()
    assert all(c["count"] is not None for c in cells)
    shown = outputs_text(browser)
    assert "{number}" not in shown and "{doc}" not in shown and "{numref}" not in shown
    links = browser.links()
    exercises = [link for link in links if re.fullmatch(r"Exercise \d+", link["text"].strip())]
    assert len(exercises) == shown.count("Exercise ") and len(exercises) >= 40
    assert all(re.search(r"/instructor/\d\d_\w+\.ipynb(\?|$)", link["resolved"]) for link in links), links[:3]
    shot = browser.screenshot(tmp_path / "instructors.png")
    print(f"\nscreenshot of the instructors' page: {shot}")
    first = exercises[0]["resolved"].split("?")[0].rsplit("/", 1)[1]
    assert browser.click_link("Exercise 1") == f"instructor/{first}"


def test_the_book_s_own_instructors_page_shows_what_the_editions_fix(lab):
    """Negative control: the page as book/ holds it, run in JupyterLab, shows the MyST roles that only
    the book's build resolves: what the checks above would catch."""
    server, browser = lab
    browser.open_notebook(server, "book/instructors.ipynb")
    browser.run_all()
    shown = outputs_text(browser)
    assert "Exercise {number}" in shown
    assert not any(link["resolved"].split("?")[0].endswith(".ipynb") for link in browser.links())
