"""The book's exercises as data, for the instructor page and the classroom tests.

Every exercise in a chapter notebook is a sphinx-exercise ``{exercise}`` directive whose body
ends with one line of metadata::

    *Goal:* <learning goal>. *Time:* ~<N> min. *Kind:* <computation|derivation|find-the-bug|code>.

:func:`book_exercises` reads them in table-of-contents order, so the instructor page can
never disagree with the chapters.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import NamedTuple

KINDS = ("computation", "derivation", "find-the-bug", "code")

_EXERCISE = re.compile(r"^(?P<fence>`{3,}|:{3,})\{exercise(?:-start)?\}[ \t]*(?P<title>[^\n]*)\n(?P<body>.*?)^(?P=fence)[ \t]*$",
                       re.M | re.S)
_LABEL = re.compile(r"^:label:\s*(\S+)", re.M)
_META = re.compile(r"\*Goal:\*\s*(?P<goal>.+?)\s*\*Time:\*\s*~?\s*(?P<minutes>\d+)\s*min\.?\s*"
                   r"\*Kind:\*\s*(?P<kind>[\w-]+)")
_TITLE = re.compile(r"^#\s+(.+)$", re.M)


class Exercise(NamedTuple):
    """One exercise: where it is, what it asks, and what its metadata line says."""

    chapter: str  #: the notebook's path relative to the book root, without suffix
    chapter_title: str
    label: str
    title: str
    goal: str | None  #: None when the metadata line is missing
    minutes: int | None
    kind: str | None


def _path(value: object, name: str) -> Path:
    from .._validate import as_path

    return as_path(value, name)


def _book_root(root: object) -> Path:
    """``root`` as the folder of a book: an existing directory holding ``_toc.yml``."""
    root = _path(root, "root")
    if not root.is_dir():
        raise FileNotFoundError(f"root: no folder at {root}; expected the book's folder (the one holding _toc.yml)")
    if not (root / "_toc.yml").is_file():
        raise FileNotFoundError(f"root: {root} holds no _toc.yml; expected the book's folder (the one holding "
                                "_toc.yml, the book's repository)")
    return root


def _markdown(nb_path: Path) -> str:
    nb_path = _path(nb_path, "nb_path")
    if not nb_path.is_file():
        raise FileNotFoundError(f"nb_path: no notebook file at {nb_path}")
    not_a_notebook = f"nb_path: {nb_path} is not a Jupyter notebook (.ipynb)"
    try:
        nb = json.loads(nb_path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ValueError(f"{not_a_notebook}: it is not JSON ({error})") from None
    if not isinstance(nb, dict) or not isinstance(nb.get("cells"), list):
        raise ValueError(f"{not_a_notebook}: it has no list of cells")
    try:
        return "\n".join("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "markdown")
    except (KeyError, TypeError) as error:
        raise ValueError(f"{not_a_notebook}: a cell lacks its type or source ({error!r})") from None


def notebook_exercises(nb_path: Path, chapter: str | None = None) -> list[Exercise]:
    """The exercises of one notebook, in order.

    Raises
    ------
    ValueError
        If an exercise has no ``:label:`` or its metadata names an unknown kind.
    """
    text = _markdown(nb_path)
    heading = _TITLE.search(text)
    chapter = chapter or Path(nb_path).stem
    title = heading.group(1).strip() if heading else chapter
    out = []
    for match in _EXERCISE.finditer(text):
        body = match.group("body")
        label = _LABEL.search(body)
        if label is None:
            raise ValueError(f"{nb_path}: exercise {match.group('title')!r} has no :label:")
        meta = _META.search(body)
        kind = meta.group("kind") if meta else None
        if kind is not None and kind not in KINDS:
            raise ValueError(f"{nb_path}: exercise {label.group(1)} has kind {kind!r}; expected one of {KINDS}")
        out.append(Exercise(
            chapter, title, label.group(1), match.group("title").strip(),
            meta.group("goal").rstrip(".") if meta else None,
            int(meta.group("minutes")) if meta else None,
            kind,
        ))
    return out


def toc_chapters(root: Path) -> list[str]:
    """Chapter files named in ``root/_toc.yml``, in order (without suffix)."""
    import yaml

    toc = yaml.safe_load((_book_root(root) / "_toc.yml").read_text())
    files = [toc["root"]]
    for part in toc.get("parts", [{"chapters": toc.get("chapters", [])}]):
        for chapter in part.get("chapters", []):
            files.append(chapter["file"])
            files += [s["file"] for s in chapter.get("sections", [])]
    return files


def book_exercises(root: Path) -> list[Exercise]:
    """Every exercise of every notebook chapter in the table of contents, in reading order."""
    root = _book_root(root)
    out = []
    for name in toc_chapters(root):
        path = root / f"{name}.ipynb"
        if path.exists():
            out += notebook_exercises(path, chapter=name)
    return out


def instructor_table(exercises: list[Exercise], links: bool = False) -> str:
    """A Markdown table per chapter: label, title, kind, goal and estimated time.

    With ``links=True`` each exercise is named by a MyST ``{numref}`` reference, which the
    book renders as a link reading "Exercise N", the number the reader sees on the
    exercise itself (the cell showing the table must then render its Markdown as MyST).
    Otherwise the label is shown as code.
    """
    if isinstance(exercises, (str, bytes)) or not hasattr(exercises, "__iter__"):
        raise TypeError(f"exercises: expected a list of Exercise (from book_exercises), got {type(exercises).__name__}")
    exercises = list(exercises)
    for i, ex in enumerate(exercises):
        if not isinstance(ex, Exercise):
            raise TypeError(f"exercises[{i}]: expected an Exercise (from book_exercises), got {type(ex).__name__}")
    from .._validate import as_bool

    links = as_bool(links, "links")
    lines: list[str] = []
    chapter = None
    for ex in exercises:
        if ex.chapter != chapter:
            chapter = ex.chapter
            mine = [e for e in exercises if e.chapter == chapter]
            total = sum(e.minutes or 0 for e in mine)
            lines += ["", f"**{ex.chapter_title}** ({len(mine)} exercises, about {total} min)", "",
                      "| exercise | kind | learning goal | time |", "| --- | --- | --- | --- |"]
        goal = ex.goal or "(no goal given)"
        time = f"~{ex.minutes} min" if ex.minutes else "?"
        name = (f"{{numref}}`Exercise {{number}} <{ex.label}>`: {ex.title}" if links
                else f"{ex.title} (`{ex.label}`)")
        lines.append(f"| {name} | {ex.kind or '?'} | {goal} | {time} |")
    return "\n".join(lines).strip()
