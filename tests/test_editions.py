"""The notebook editions (student/ and instructor/) are what book/ gives, hold no solution in the
student's copy, and show numbers, citations and links instead of the build's roles."""

import json
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
import editions  # noqa: E402
from build_book import strip_markdown  # noqa: E402

INDEX = editions.BookIndex(ROOT)


def md(text):
    return {"cell_type": "markdown", "metadata": {}, "source": text}


def code(text, outputs=(), **metadata):
    return {"cell_type": "code", "execution_count": 3, "metadata": dict(metadata), "outputs": list(outputs),
            "source": text}


def glued(name, plain, hidden=True, **more):
    prefix = editions.GLUE_PREFIX if hidden else ""
    data = {prefix + "text/plain": plain, **{prefix + k: v for k, v in more.items()}}
    return {"output_type": "display_data", "data": data,
            "metadata": {"scrapbook": {"name": name, "mime_prefix": prefix}}}


# --- glued values --------------------------------------------------------------------------

NB = {"cells": [code("glue(...)", [glued("n", "300"), glued("rate", "0.8765"), glued("word", "'below'"),
                                    glued("shown", "42", hidden=False), glued("name", "'x_1 * y'"),
                                    glued("sentence", "<Markdown>", **{"text/markdown": "It is *so*."}),
                                    {"output_type": "stream", "name": "stdout", "text": "ignored\n"}])],
      "metadata": {}}


def test_glued_values_are_read_with_and_without_the_prefix():
    values = editions.glued_values(NB)
    assert values["n"] == {"text/plain": "300"} and values["shown"] == {"text/plain": "42"}
    assert values["sentence"]["text/markdown"] == "It is *so*."
    assert "ignored" not in json.dumps(values)


@pytest.mark.parametrize("role, shown", [
    ("{glue:}`n`", "300"),
    ("{glue}`n`", "300"),
    ("{glue:any}`n`", "300"),
    ("{glue:text}`rate:.2f`", "0.88"),
    ("{glue:text}`word`", "below"),  # the quotes of a string's repr go, as in the built book
    ("{glue:}`word`", "'below'"),  # ... and stay with the plain role, as in the built book
    ("{glue:md}`sentence`", "It is *so*."),
    ("{glue:}`sentence`", "It is *so*."),
    ("{glue:text}`name`", r"x\_1 \* y"),  # Markdown characters of a plain value are escaped
])
def test_each_glue_role_becomes_what_the_book_shows(role, shown):
    assert editions.fill_glue(f"a {role} b", editions.glued_values(NB)) == f"a {shown} b"


def test_a_missing_or_foreign_value_is_an_error_naming_the_place():
    with pytest.raises(ValueError, match=r"ch, cell 4: .*'missing'.*execute the notebook"):
        editions.fill_glue("{glue:}`missing`", {}, "ch, cell 4")
    with pytest.raises(ValueError, match="another notebook"):
        editions.fill_glue("{glue:}`07_real_pair.ipynb::best`", {}, "x")


# --- cross-references and citations -----------------------------------------------------------

def xref(text, page="05_bonus", pages=None):
    return editions.fill_cross_references(text, INDEX, page, INDEX.notebooks if pages is None else pages)


def test_citations_read_as_the_book_labels_them_and_link_the_work():
    assert xref("{cite:p}`leviathan2023fast`") == (
        r"\[[Leviathan et al., 2023](https://proceedings.mlr.press/v202/leviathan23a.html)\]")
    assert xref("{cite:t}`chen2023accelerating`") == r"Chen et al. \[[2023](https://arxiv.org/abs/2302.01318)\]"
    two = xref("{cite:p}`leviathan2023fast,chen2023accelerating`")
    assert two.count("](") == 2 and "; " in two
    with pytest.raises(ValueError, match="nobody2020"):
        xref("{cite:p}`nobody2020`")


def test_doc_ref_and_term_become_links_or_text():
    assert xref("{doc}`07_real_pair`") == f"[{INDEX.titles['07_real_pair']}](07_real_pair.ipynb)"
    assert xref("{doc}`chapter 9 <07_real_pair>`") == "[chapter 9](07_real_pair.ipynb)"
    assert xref("{doc}`the glossary <glossary>`", pages={"05_bonus"}) == "the glossary"  # not in the edition
    assert xref("{prf:ref}`thm-04-one-position`") == "[theorem “One position”](04_correction.ipynb)"
    assert xref("{ref}`intro-one-pass`").startswith("Does checking")  # a page of no edition: its title
    assert xref("{term}`residual <residual distribution>`") == "residual"
    # A label of the same page stays: jupyterlab-myst resolves it.
    assert xref("{prf:ref}`thm-04-one-position`", page="04_correction") == "{prf:ref}`thm-04-one-position`"
    with pytest.raises(ValueError, match="no-such-label"):
        xref("{ref}`no-such-label`")


def test_literalinclude_becomes_the_code_it_includes():
    text = "Before\n```{literalinclude} ../speclib/core/minimal.py\n:language: python\n:pyobject: _draw\n```\nAfter"
    out = editions.include_literals(text, ROOT / "book")
    assert out.startswith("Before\n```python\ndef _draw(") and out.endswith("\n```\nAfter")
    assert "{literalinclude}" not in out
    with pytest.raises(ValueError, match="emphasize-lines"):
        editions.include_literals("```{literalinclude} ../speclib/core/minimal.py\n:emphasize-lines: 2\n```",
                                  ROOT / "book")


# --- one notebook ----------------------------------------------------------------------------------

START, END = "```{solution-start} ex-1\n:class: dropdown\n```\n", "```{solution-end}\n```\n"
CHAPTER = {"cells": [md("# T\n\n{glue:}`n` tokens"), code("glue('n', 300)", [glued("n", "300")],
                                                          execution={"iopub.execute_input": "2026"}),
                     md("```{exercise} Q\n:label: ex-1\nAsk.\n```\n" + START), code("answer = 42"),
                     md("So 42.\n" + END)],
           "metadata": {"widgets": {"state": {}}, "kernelspec": {"name": "python3"}}}


def test_the_student_edition_drops_solutions_outputs_and_timings():
    out = editions.edition_notebook(CHAPTER, "student", "05_bonus", INDEX)
    text = json.dumps(out)
    assert "42" not in text and "300 tokens" in out["cells"][0]["source"]
    assert all(c.get("outputs", []) == [] and c.get("execution_count") is None for c in out["cells"]
               if c["cell_type"] == "code")
    assert '"execution":' not in text and "2026" not in text and "widgets" not in out["metadata"]
    assert CHAPTER["cells"][1]["outputs"]  # the book's notebook is left as it was


def test_the_instructor_edition_keeps_solutions():
    out = editions.edition_notebook(CHAPTER, "instructor", "05_bonus", INDEX)
    assert "answer = 42" in json.dumps(out) and "solution-start" in json.dumps(out)
    with pytest.raises(ValueError, match="edition"):
        editions.edition_notebook(CHAPTER, "teacher")


def test_a_marked_code_line_is_rewritten_and_every_notebook_ends_with_the_kernel_note():
    nb = {"cells": [code('x = 1\nLINKS = "myst"  # the notebook editions: LINKS = "notebook"\n'
                         '    y = 2  # the notebook editions: y = 3\nz = 4  # a comment')], "metadata": {}}
    for edition in editions.EDITIONS:
        out = editions.edition_notebook(nb, edition, "05_bonus", INDEX)
        assert out["cells"][0]["source"] == 'x = 1\nLINKS = "notebook"\n    y = 3\nz = 4  # a comment'
        assert [c["source"] for c in out["cells"][1:]] == [editions.KERNEL_NOTE]
    assert "Shut Down" in editions.KERNEL_NOTE and "memory" in editions.KERNEL_NOTE


def test_the_editions_instructors_page_links_the_notebooks():
    page = json.loads((ROOT / "instructor" / "instructors.ipynb").read_text(encoding="utf-8"))
    code_text = "\n".join(c["source"] for c in page["cells"] if c["cell_type"] == "code")
    assert 'LINKS = "notebook"' in code_text and 'LINKS = "myst"' not in code_text
    assert code_text.count("style=LINKS") == 5


# --- the committed editions ---------------------------------------------------------------------

@pytest.fixture(scope="module")
def generated(tmp_path_factory):
    out = tmp_path_factory.mktemp("editions")
    editions.write_editions(out)
    return out


def test_the_committed_editions_are_what_the_book_gives(generated):
    stale = editions.differences(generated, ROOT)
    assert stale == [], ("student/ or instructor/ is not what book/ gives; regenerate them with "
                         "`.venv/bin/python tools/editions.py` (or `python3 dev.py book`):\n" + "\n".join(stale))


def test_a_changed_or_stray_file_is_reported(generated, tmp_path):
    """Negative control for the test above: a difference, a missing and a stray file are all found."""
    import shutil

    copy = tmp_path / "copy"
    shutil.copytree(generated, copy)
    first = sorted((copy / "student").glob("*.ipynb"))[0]
    first.write_text(first.read_text() + " ")
    (copy / "instructor" / "extra.ipynb").write_text("{}")
    (copy / "student" / "README.md").unlink()
    found = editions.differences(generated, copy)
    assert any("differs" in f for f in found) and any("stray" in f for f in found) and any("missing" in f for f in found)


def notebooks(folder):
    return {p.name: json.loads(p.read_text(encoding="utf-8")) for p in sorted((ROOT / folder).glob("*.ipynb"))}


def lines(text):
    return [line.strip() for line in text.splitlines() if line.strip()]


def solution_lines(nb):
    """The lines of a notebook that lie inside a gated or plain solution (what the student edition drops)."""
    out, inside = [], False
    for cell in nb["cells"]:
        text = "".join(cell["source"])
        if cell["cell_type"] != "markdown":
            out += lines(text) if inside else []
            continue
        kept, inside = strip_markdown(text, inside)
        remaining = lines(kept)
        for line in lines(text):
            if line in remaining:
                remaining.remove(line)
            else:
                out.append(line)
    return out


def distinctive(solution, elsewhere):
    """Solution lines that say something (not a fence or a bracket) and occur nowhere outside a solution."""
    return {line for line in solution if len(re.sub(r"[\W_]", "", line)) > 8 and line not in elsewhere
            and "solution-" not in line}


def leaked(instructor_nb, student_nb):
    solution = solution_lines(instructor_nb)
    everything = [line for c in instructor_nb["cells"] for line in lines("".join(c["source"]))]
    outside = set(everything)
    for line in solution:  # a line that is only in solutions: drop it from "outside"
        if everything.count(line) == solution.count(line):
            outside.discard(line)
    student = {line for c in student_nb["cells"] for line in lines("".join(c["source"]))}
    return sorted(distinctive(solution, outside) & student)


def test_no_student_notebook_holds_solution_text():
    student, instructor = notebooks("student"), notebooks("instructor")
    assert set(student) == set(instructor) - {"instructors.ipynb"}
    checked = 0
    for name, nb in student.items():
        assert leaked(instructor[name], nb) == [], f"student/{name} holds solution text"
        checked += len(solution_lines(instructor[name]))
        assert "solution-start" not in json.dumps(nb) and "{solution}" not in json.dumps(nb)
    assert checked > 500  # the instructor edition does hold the solutions this test looks for


def test_the_leak_test_finds_a_solution_line():
    """Negative control: a solution line copied into a student notebook is found."""
    student, instructor = notebooks("student"), notebooks("instructor")
    nb = student["03_verification.ipynb"]
    secret = sorted(distinctive(solution_lines(instructor["03_verification.ipynb"]), set()))[0]
    nb["cells"].append(md(secret))
    assert leaked(instructor["03_verification.ipynb"], nb) == [secret]


def test_the_editions_hold_no_outputs_and_no_build_roles():
    for folder in ("student", "instructor"):
        for name, nb in notebooks(folder).items():
            markdown = "\n".join("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "markdown")
            assert not re.search(r"\{(glue[:\w]*|cite:\w+|doc|term|literalinclude)\}", markdown), f"{folder}/{name}"
            assert all(not c.get("outputs") for c in nb["cells"]), f"{folder}/{name} stores outputs"


def test_the_stubs_and_self_checks_are_in_the_student_edition():
    from speclib.book.course import book_exercises

    student = notebooks("student")
    for ex in book_exercises(ROOT):
        nb = student[f"{Path(ex.chapter).name}.ipynb"]
        assert f":label: {ex.label}" in json.dumps(nb), ex.label
    stubs = sum("NotImplementedError" in "".join(c["source"]) for nb in student.values() for c in nb["cells"])
    assert stubs >= 20
