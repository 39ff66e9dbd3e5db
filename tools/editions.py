#!/usr/bin/env python3
"""Write the two notebook editions that a clone, Binder or Colab opens in JupyterLab.

    .venv/bin/python tools/editions.py            # rewrite student/ and instructor/
    .venv/bin/python tools/editions.py --check    # say whether they are what book/ gives
    .venv/bin/python tools/editions.py --output DIR   # write DIR/student and DIR/instructor

Both are generated from the executed chapters in book/ and are never edited by hand
(`python3 dev.py book` rewrites them; tests/test_editions.py fails when they are stale):

- ``student/``: every chapter with its solutions removed (the same stripping as the HTML
  student edition, ``build_book.strip_notebook``); stubs and self-checks stay.
- ``instructor/``: every chapter with its solutions, and the instructors' page.

In both, the Markdown is rewritten into the MyST that JupyterLab's renderer (jupyterlab-myst,
pinned in requirements.txt) shows, since that renderer sees one notebook at a time and knows
nothing of the book's build:

- every ``{glue}``, ``{glue:}``, ``{glue:any}``, ``{glue:text}`` and ``{glue:md}`` role
  becomes the value the executed notebook glued (myst-nb keeps it in the stored outputs), so
  the prose shows its numbers;
- ``{cite:p}`` and ``{cite:t}`` become the book's author-year labels (_ext/bib_labels.py),
  linked to the work's address where references.bib gives one;
- ``{doc}`` becomes a link to the chapter's notebook in the same edition (or its title, for a
  page the edition does not hold), ``{ref}`` and ``{prf:ref}`` to another chapter's label
  become its title linked to that chapter, and ``{term}`` becomes its text;
- ``{literalinclude}`` becomes the code it includes.

Exercises, solutions, proofs, admonitions and references within one notebook stay MyST:
jupyterlab-myst renders them.  A code line that ends with ``# the notebook editions: NEW``
becomes ``NEW`` (the instructors' page uses it to link its tables to the chapters'
notebooks rather than through the book's roles), and every notebook ends with a note on
shutting its kernel down (:data:`KERNEL_NOTE`).

Neither edition keeps the stored outputs.  The chapters' outputs are 4.9 MB, most of it
figures, and they change at every re-execution; twice over they would make the repository
heavier at each change for what the reader's own run draws again in seconds.  Outputs stored
under a stub could also show what the removed solution computed.  The student's notebook
therefore shows the text with its numbers, the code, and what the student's own run prints:
the self-check's verdict on the student's code, not a stored one.  (The built book shows
every output.)
"""

from __future__ import annotations

import argparse
import copy
import json
import re
import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))
from build_book import strip_notebook  # noqa: E402

GLUE_PREFIX = "application/papermill.record/"  #: myst-nb's prefix for glue(..., display=False)
#: A glue role: its kind ("", ":", ":any", ":text", ":md") and its content.
GLUE_ROLE = re.compile(r"\{glue(?P<kind>:(?:any|text|md)?)?\}`(?P<content>[^`]+)`")
#: The cross-reference and citation roles an edition rewrites: the role and its content.
XREF_ROLE = re.compile(r"\{(?P<role>doc|ref|prf:ref|term|cite:p|cite:t)\}`(?P<content>[^`]+)`")
#: A role's content with explicit text: ``text <target>``.
_EXPLICIT = re.compile(r"^(?P<text>.*?)\s*<(?P<target>[^<>]+)>$", re.S)
#: A literalinclude directive with its options.
LITERALINCLUDE = re.compile(r"^(?P<fence>`{3,}|:{3,})\{literalinclude\}[ \t]*(?P<path>\S+)[ \t]*\n"
                            r"(?P<options>(?:[ \t]*:[\w-]+:.*\n)*)(?P=fence)[ \t]*$", re.M)
#: Characters that Markdown would read as markup if a glued plain-text value held them.
_MARKUP = re.compile(r"([\\`*_\[\]<>$|~])")
#: Pages of the table of contents that only instructors need.
INSTRUCTOR_ONLY = ("book/instructors",)
EDITIONS = ("student", "instructor")

#: A code line the editions rewrite: ``CODE  # the notebook editions: NEW`` becomes ``NEW``.
EDITION_LINE = re.compile(r"^(?P<indent>[ \t]*)\S.*?[ \t]+# the notebook editions: (?P<new>.+?)[ \t]*$", re.M)

#: The last cell of every notebook of the editions: where its memory goes, and how to give it back.
KERNEL_NOTE = """\
```{note}
When you are done with this notebook, shut its kernel down: **File ▸ Close and Shut Down
Notebook**, or **Shut Down All** in the **Running Terminals and Kernels** panel of the left
sidebar. Closing the tab leaves the kernel running with everything this notebook computed
(its models, caches and arrays) in memory, and on Binder the kernels of all the notebooks you
have opened share one session's memory.
```"""

README = {
    "student": """\
# The student edition

The chapters of *Speculative Decoding, Step by Step* as notebooks, with every solution
removed: each exercise keeps its question, its stub and its self-check. Open them in
JupyterLab (`.venv/bin/jupyter lab student/` in a clone after `python3 dev.py book`, or on
Binder once the book has a public address; the repository's README says how) and run each
chapter from the top. **Run All** runs a chapter to its end: each exercise's stub and
self-check raise until you complete them (they are tagged `raises-exception`, so Run All goes
on past them), so you see every figure and every exercise's hint; then complete the exercises
one by one, running each one's cells again. When you finish a chapter, shut its kernel down
(**File ▸ Close and Shut Down Notebook**): a closed tab's kernel keeps its memory.

The numbers in the text are those of the book's own run; the outputs are not stored, so run
the cells to see the figures and tables. Generated from `book/` by `tools/editions.py`
(`python3 dev.py book`): do not edit these files, edit the chapters in `book/`.
""",
    "instructor": """\
# The instructor edition

The chapters of *Speculative Decoding, Step by Step* as notebooks, with every solution
under its exercise, and the instructors' page (`instructors.ipynb`). Hand out `student/`
(the same notebooks without solutions) instead of this folder.

The numbers in the text are those of the book's own run; the outputs are not stored, so run
the cells to see the figures and tables. Generated from `book/` by `tools/editions.py`
(`python3 dev.py book`): do not edit these files, edit the chapters in `book/`.
""",
}


def _text(value) -> str:
    return "".join(value) if isinstance(value, list) else str(value)


def glued_values(nb: dict) -> dict[str, dict[str, str]]:
    """Every value the executed notebook glued: name -> its MIME bundle (prefix removed).

    A name glued twice keeps its last value, as myst-nb does.
    """
    values: dict[str, dict[str, str]] = {}
    for cell in nb.get("cells", []):
        if cell.get("cell_type") != "code":
            continue
        for output in cell.get("outputs", []):
            record = output.get("metadata", {}).get("scrapbook")
            if not record:
                continue
            prefix = record.get("mime_prefix", "")
            values[record["name"]] = {mime[len(prefix):] if mime.startswith(prefix) else mime: _text(data)
                                      for mime, data in output.get("data", {}).items()}
    return values


def escape_markdown(text: str) -> str:
    """``text`` with the characters Markdown reads as markup backslash-escaped, so it shows as is."""
    return _MARKUP.sub(r"\\\1", text)


def glued_markdown(kind: str, content: str, values: dict[str, dict[str, str]], where: str) -> str:
    """The Markdown that stands for one glue role, as the built book shows it.

    ``{glue}`` (any) shows a value's Markdown, LaTeX or plain text (in that order of
    preference, which is myst-nb's for inline values); ``{glue:text}`` formats the plain text
    with the role's format specification (``name:.2f``) exactly as myst-nb does;
    ``{glue:md}`` shows the value's Markdown.  Raises ValueError, naming ``where``, for a
    name that was never glued or a value that has no form Markdown can hold (a figure).
    """
    from myst_nb.core.variables import format_plain_text

    kind = kind or ":"
    key, spec = content, None
    if kind in (":text", ":md") and ":" in content:
        key, spec = content.rsplit(":", 1)
    if "::" in key:
        raise ValueError(f"{where}: {{glue{kind}}}`{content}` glues from another notebook, which an "
                         "edition cannot resolve; glue the value in this notebook")
    if key not in values:
        raise ValueError(f"{where}: {{glue{kind}}}`{content}` names {key!r}, which no stored output glues "
                         "(execute the notebook: tools/execute_notebooks.py)")
    bundle = values[key]
    if kind == ":text":
        if "text/plain" not in bundle:
            raise ValueError(f"{where}: {key!r} has no plain-text form for {{glue:text}}")
        return escape_markdown(format_plain_text(bundle["text/plain"], spec or "s"))
    if kind == ":md" or "text/markdown" in bundle:
        if "text/markdown" not in bundle:
            raise ValueError(f"{where}: {key!r} has no Markdown form for {{glue:md}}")
        return bundle["text/markdown"].strip()
    if "text/latex" in bundle:
        latex = bundle["text/latex"].strip().strip("$").strip()
        return f"${latex}$"
    if set(bundle) - {"text/plain"}:
        raise ValueError(f"{where}: {key!r} is glued as {sorted(bundle)}, which Markdown cannot hold inline")
    return escape_markdown(bundle["text/plain"])


def fill_glue(text: str, values: dict[str, dict[str, str]], where: str = "the Markdown") -> str:
    """``text`` with every glue role replaced by its value (see :func:`glued_markdown`)."""
    return GLUE_ROLE.sub(lambda m: glued_markdown(m.group("kind"), m.group("content"), values, where), text)


def _markdown_cells(nb: dict) -> str:
    return "\n".join(_text(c.get("source", "")) for c in nb.get("cells", []) if c.get("cell_type") == "markdown")


#: A label target and the heading or directive it names: ``(label)=`` then ``## Title`` or ``:::{admonition} Title``.
_TARGET = re.compile(r"^\((?P<label>[^()\s]+)\)=[ \t]*\n+(?:#+|(?:`{3,}|:{3,})\{[\w:-]+\})[ \t]+(?P<title>.+)$", re.M)
_DIRECTIVE = re.compile(r"^(?:`{3,}|:{3,})\{(?P<kind>exercise|prf:\w+)\}[ \t]*(?P<title>[^\n]*)\n"
                        r"(?:[ \t]*:[\w-]+:.*\n)*?[ \t]*:label:[ \t]*(?P<label>\S+)", re.M)
_HEADING = re.compile(r"^#[ \t]+(.+)$", re.M)


class BookIndex:
    """What the cross-references of one chapter need from the rest of the book.

    ``titles``: each page's title (its first ``#`` heading), by name (``03_verification``);
    ``notebooks``: the names of the pages that are notebooks;
    ``labels``: each label -> (page, the text a reference to it shows);
    ``citations``: each references.bib key -> (who, year, address or "").
    """

    def __init__(self, root: Path = ROOT):
        self.root = root
        self.titles: dict[str, str] = {}
        self.notebooks = {p.stem for p in (root / "book").glob("*.ipynb")}
        self.labels: dict[str, tuple[str, str]] = {}
        for path in sorted((root / "book").glob("*.ipynb")) + sorted((root / "book").glob("*.md")):
            text = path.read_text(encoding="utf-8")
            if path.suffix == ".ipynb":
                text = _markdown_cells(json.loads(text))
            heading = _HEADING.search(text)
            self.titles[path.stem] = _plain_heading(heading.group(1)) if heading else path.stem
            for match in _TARGET.finditer(text):
                self.labels[match.group("label")] = (path.stem, _plain_heading(match.group("title")))
            for match in _DIRECTIVE.finditer(text):
                kind = match.group("kind").split(":")[-1]
                title = match.group("title").strip()
                shown = f"{kind} “{title}”" if title else kind
                self.labels[match.group("label")] = (path.stem, shown)
        self.citations = _citations(root)


def _plain_heading(text: str) -> str:
    """A heading's text without its Markdown (``**``, backquotes) and trailing markers."""
    return re.sub(r"[*`]", "", text).strip()


def _citations(root: Path) -> dict[str, tuple[str, str, str]]:
    """key -> (who, year, address): the labels the built book shows (a, b, ... included)."""
    from pybtex.database import parse_file

    sys.path.insert(0, str(root / "_ext"))
    import bib_labels

    bib = parse_file(str(root / "references.bib"))
    style = bib_labels.AuthorYearStyle()
    out = {}
    for entry in style.format_entries(style.sort(bib.entries.values())):
        who, year = bib_labels.split_label(entry.label)
        fields = bib.entries[entry.key].fields
        url = fields.get("url", "") or (f"https://doi.org/{fields['doi']}" if fields.get("doi") else "")
        named = bib.entries[entry.key].persons.get("author") or bib.entries[entry.key].persons.get("editor")
        out[entry.key] = (who if named else f"*{who}*", year, url)
    return out


def _link(text: str, target: str) -> str:
    return f"[{text}]({target})" if target else text


def cross_reference(role: str, content: str, index: BookIndex, page: str, pages: set[str], where: str) -> str | None:
    """The Markdown that stands for one cross-reference or citation role in ``page``.

    ``pages``: the pages the edition holds (a link can point only at those).  Returns None
    for a reference jupyterlab-myst resolves itself (a label of the same page).  Raises
    ValueError, naming ``where``, for a label, page or citation the book does not define.
    """
    explicit = _EXPLICIT.match(content)
    text, target = (explicit.group("text"), explicit.group("target")) if explicit else (None, content)
    if role == "term":
        return text or content
    if role in ("cite:p", "cite:t"):
        parts = []
        for key in (k.strip() for k in content.split(",")):
            if key not in index.citations:
                raise ValueError(f"{where}: {{{role}}}`{content}` cites {key!r}, which references.bib lacks")
            who, year, url = index.citations[key]
            if role == "cite:p":
                parts.append(_link(f"{who}, {year}" if year else who, url))
            else:
                parts.append(f"{who} \\[{_link(year, url)}\\]" if year else _link(who, url))
        return f"\\[{'; '.join(parts)}\\]" if role == "cite:p" else "; ".join(parts)
    if role == "doc":
        name = target.strip().removeprefix("/").removeprefix("book/")
        if name not in index.titles:
            raise ValueError(f"{where}: {{doc}}`{content}` names {name!r}, which is no page of book/")
        return _link(text or index.titles[name], f"{name}.ipynb" if name in pages else "")
    label = target.strip()
    if label not in index.labels:
        raise ValueError(f"{where}: {{{role}}}`{content}` names the label {label!r}, which no page defines")
    home, shown = index.labels[label]
    if home == page:
        return None
    return _link(text or shown, f"{home}.ipynb" if home in pages else "")


def fill_cross_references(text: str, index: BookIndex, page: str, pages: set[str], where: str = "the Markdown") -> str:
    """``text`` with every cross-reference and citation role rewritten (see :func:`cross_reference`)."""
    def replace(match: re.Match) -> str:
        new = cross_reference(match.group("role"), match.group("content"), index, page, pages, where)
        return match.group(0) if new is None else new

    return XREF_ROLE.sub(replace, text)


def include_literals(text: str, folder: Path, where: str = "the Markdown") -> str:
    """``text`` with every ``{literalinclude}`` replaced by a fenced block of what it includes.

    Supports the options the book uses (``:language:``, ``:pyobject:`` for a top-level
    function or class, ``:lines:``); any other option is an error rather than a silent change.
    """
    import ast

    def replace(match: re.Match) -> str:
        options = dict(re.findall(r"^[ \t]*:([\w-]+):[ \t]*(.*?)[ \t]*$", match.group("options"), re.M))
        unknown = set(options) - {"language", "pyobject", "lines"}
        if unknown:
            raise ValueError(f"{where}: literalinclude option(s) {sorted(unknown)} are not supported by the editions")
        path = (folder / match.group("path")).resolve()
        if not path.is_file():
            raise ValueError(f"{where}: literalinclude names {match.group('path')}, which does not exist")
        source = path.read_text(encoding="utf-8")
        lines = source.splitlines()
        if "pyobject" in options:
            found = [n for n in ast.parse(source).body if getattr(n, "name", None) == options["pyobject"]]
            if not found:
                raise ValueError(f"{where}: {match.group('path')} defines no {options['pyobject']}")
            lines = lines[found[0].lineno - 1:found[0].end_lineno]
        if "lines" in options:
            first, _, last = options["lines"].partition("-")
            lines = lines[int(first) - 1:int(last or first)]
        fence = "`" * max(3, 1 + max((len(r) for r in re.findall(r"`+", "\n".join(lines))), default=0))
        return f"{fence}{options.get('language', '')}\n" + "\n".join(lines) + f"\n{fence}"

    return LITERALINCLUDE.sub(replace, text)


def edition_notebook(nb: dict, edition: str, name: str = "the notebook", index: BookIndex | None = None,
                     pages: set[str] | None = None) -> dict:
    """The notebook ``name`` (its page name, ``03_verification``) as ``edition`` holds it.

    ``edition`` is "student" or "instructor"; ``pages``, the pages of that edition (links to
    other chapters point only at those).  The Markdown is rewritten for JupyterLab (glued
    values, citations, cross-references and included code written out); code cells keep
    their source and tags but no outputs, execution counts or timings; the student edition
    has no solutions.
    """
    if edition not in EDITIONS:
        raise ValueError(f"edition: expected one of {EDITIONS}, got {edition!r}")
    index = index or BookIndex()
    pages = set(index.notebooks) if pages is None else pages
    values = glued_values(nb)
    out = copy.deepcopy(nb)
    if edition == "student":
        strip_notebook(out)
    for i, cell in enumerate(out["cells"]):
        source = _text(cell.get("source", ""))
        if cell["cell_type"] == "markdown":
            where = f"{name}, cell {i}"
            source = include_literals(source, index.root / "book", where)
            source = fill_glue(source, values, where)
            source = fill_cross_references(source, index, name, pages, where)
        elif cell["cell_type"] == "code":
            cell["outputs"] = []
            cell["execution_count"] = None
            source = EDITION_LINE.sub(lambda m: m.group("indent") + m.group("new"), source)
        cell["source"] = source
        cell.get("metadata", {}).pop("execution", None)
    out["cells"].append({"cell_type": "markdown", "id": "kernel-note", "metadata": {}, "source": KERNEL_NOTE})
    metadata = out.setdefault("metadata", {})
    metadata.pop("widgets", None)  # saved widget state belongs to the outputs that are gone
    return out


def dumps(nb: dict) -> str:
    """A notebook as nbformat writes it (so opening and saving it changes nothing)."""
    return json.dumps(nb, indent=1, sort_keys=True, ensure_ascii=False) + "\n"


def chapters(root: Path = ROOT) -> list[str]:
    """The notebooks of the table of contents, in reading order (without suffix)."""
    sys.path.insert(0, str(root))
    from speclib.book.course import toc_chapters

    return [name for name in toc_chapters(root) if (root / f"{name}.ipynb").is_file()]


def write_editions(output: Path, root: Path = ROOT) -> list[Path]:
    """Write output/student and output/instructor from root/book; return the files written.

    Each edition folder is emptied first, so a chapter removed from the book leaves none behind.
    """
    written = []
    index = BookIndex(root)
    for edition in EDITIONS:
        folder = output / edition
        if folder.exists():
            shutil.rmtree(folder)
        folder.mkdir(parents=True)
        (folder / "README.md").write_text(README[edition], encoding="utf-8")
        written.append(folder / "README.md")
        names = [n for n in chapters(root) if edition != "student" or n not in INSTRUCTOR_ONLY]
        pages = {Path(n).name for n in names}
        for name in names:
            nb = json.loads((root / f"{name}.ipynb").read_text(encoding="utf-8"))
            path = folder / f"{Path(name).name}.ipynb"
            path.write_text(dumps(edition_notebook(nb, edition, Path(name).name, index, pages)), encoding="utf-8")
            written.append(path)
    return written


def _files(folder: Path) -> dict[Path, Path]:
    """The files of an edition folder by relative path, leaving out hidden ones (JupyterLab's
    .ipynb_checkpoints, which git ignores too)."""
    if not folder.is_dir():
        return {}
    return {p.relative_to(folder.parent): p for p in folder.rglob("*")
            if p.is_file() and not any(part.startswith(".") for part in p.relative_to(folder).parts)}


def differences(expected: Path, actual: Path) -> list[str]:
    """Files that differ between two edition trees, one line each (empty when identical)."""
    out = []
    for edition in EDITIONS:
        a, b = _files(expected / edition), _files(actual / edition)
        out += [f"{rel}: missing" for rel in sorted(set(a) - set(b))]
        out += [f"{rel}: not generated from book/ (stray)" for rel in sorted(set(b) - set(a))]
        out += [f"{rel}: differs from what book/ gives" for rel in sorted(set(a) & set(b))
                if a[rel].read_bytes() != b[rel].read_bytes()]
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output", type=Path, default=ROOT, help="folder to write student/ and instructor/ into")
    parser.add_argument("--check", action="store_true", help="only say whether the committed editions are current")
    args = parser.parse_args(argv)
    if args.check:
        with tempfile.TemporaryDirectory() as tmp:
            write_editions(Path(tmp))
            stale = differences(Path(tmp), ROOT)
        for line in stale:
            print(line)
        print("the editions are current" if not stale else
              "the editions are stale: run `.venv/bin/python tools/editions.py` (or `python3 dev.py book`)")
        return 1 if stale else 0
    written = write_editions(args.output)
    print(f"wrote {len(written)} files into {args.output / 'student'} and {args.output / 'instructor'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
