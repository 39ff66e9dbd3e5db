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
    number: int | None = None  #: "Exercise N" as the chapter shows it (None: ``:nonumber:``)


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
    numbered = 0
    for match in _EXERCISE.finditer(text):
        body = match.group("body")
        label = _LABEL.search(body)
        if label is None:
            raise ValueError(f"{nb_path}: exercise {match.group('title')!r} has no :label:")
        # numbered in order on its page, as the book (sphinx-exercise) and JupyterLab (jupyterlab-myst) show it
        number = None if re.search(r"^:nonumber:", body, re.M) else (numbered := numbered + 1)
        meta = _META.search(body)
        kind = meta.group("kind") if meta else None
        if kind is not None and kind not in KINDS:
            raise ValueError(f"{nb_path}: exercise {label.group(1)} has kind {kind!r}; expected one of {KINDS}")
        out.append(Exercise(
            chapter, title, label.group(1), match.group("title").strip(),
            meta.group("goal").rstrip(".") if meta else None,
            int(meta.group("minutes")) if meta else None,
            kind, number,
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


def instructor_table(exercises: list[Exercise], links: bool = False, style: str = "myst") -> str:
    """Markdown listing the exercises per chapter: title, label, kind, estimated time and goal.

    One list item per exercise under a line per chapter with its count and total time (a list,
    not a table: a goal is a sentence, and a table cell holding one is too wide for the column).
    With ``links=True`` each exercise is named "Exercise N", the number the reader sees on the
    exercise itself, linked to its chapter: in the ``"myst"`` style by a ``{numref}``
    reference, which the book resolves and numbers (the cell showing the list must then render
    its Markdown as MyST); in the ``"notebook"`` style (:data:`LINK_STYLES`) by a Markdown link
    to the chapter's notebook, with the number counted as the notebook shows it.  Otherwise
    the label is shown as code.
    """
    if isinstance(exercises, (str, bytes)) or not hasattr(exercises, "__iter__"):
        raise TypeError(f"exercises: expected a list of Exercise (from book_exercises), got {type(exercises).__name__}")
    exercises = list(exercises)
    for i, ex in enumerate(exercises):
        if not isinstance(ex, Exercise):
            raise TypeError(f"exercises[{i}]: expected an Exercise (from book_exercises), got {type(ex).__name__}")
    from .._validate import as_bool

    links = as_bool(links, "links")
    style = _style(style)
    lines: list[str] = []
    chapter = None
    for ex in exercises:
        if ex.chapter != chapter:
            chapter = ex.chapter
            mine = [e for e in exercises if e.chapter == chapter]
            total = sum(e.minutes or 0 for e in mine)
            count = f"{len(mine)} exercise{'' if len(mine) == 1 else 's'}"
            lines += ["", f"**{ex.chapter_title}** ({count}, about {total} min)", ""]
        goal = ex.goal or "(no goal given)"
        time = f"~{ex.minutes} min" if ex.minutes else "time not given"
        if not links:
            name = f"{ex.title} (`{ex.label}`)"
        elif style == "myst":
            name = f"{{numref}}`Exercise {{number}} <{ex.label}>`: {ex.title}"
        else:
            shown = f"Exercise {ex.number}" if ex.number is not None else ex.title
            name = f"{_doc(ex.chapter, shown, style)}: {ex.title}"
        stop = "" if name.endswith(("?", "!", ".")) else "."  # a title that is a question keeps its mark
        lines.append(f"- {name}{stop} *{ex.kind or 'kind not given'}, {time}.* Goal: {goal}.")
    return "\n".join(lines).strip()


# --- the instructors' page: chapters, reading paths, launching, grading ------------------------

#: Reading speed used to estimate a chapter's reading time: about half the 238 words a minute
#: measured for adults reading non-fiction (Brysbaert, 2019), because these pages mix prose
#: with formulas and code that a student stops to follow.
WORDS_PER_MINUTE = 120

#: The 90-minute lecture: (chapter, minutes, what to show).  The generator checks that each
#: chapter is in the table of contents, so a restructured book fails loudly, not silently.
LECTURE = (
    ("book/00_overview", 20, "the algorithm: draft k, verify in one pass, correct, add the bonus"),
    ("book/01_why_slow", 10, "what a pass costs: every weight read once, arithmetic per token"),
    ("book/03_verification", 15, "the test min(1, q/p); a draft is kept with probability alpha"),
    ("book/04_correction", 20, "the residual max(0, q - p)/Z; why the output follows q exactly"),
    ("book/06_theory", 20, "tokens per pass, speed-up in target passes, best k, alpha > c"),
)
LECTURE_MINUTES = 90  #: the lecture's length; what LECTURE leaves over is for questions

#: How many weeks the module spreads the chapters over.
MODULE_WEEKS = 3

_HF_IMPORT = re.compile(r"^\s*(?:import (?:torch|transformers)\b|from (?:torch|transformers)\b|"
                        r"from speclib\.lm import hf\b)", re.M)
_SOLUTION = re.compile(r"^(`{3,}|:{3,})\{solution-start\}.*?^(`{3,}|:{3,})\{solution-end\}[^\n]*\n\2[ \t]*$|"
                       r"^(`{3,}|:{3,})\{solution\}.*?^\3[ \t]*$", re.M | re.S)
_REFERENCE = re.compile(r"\{(doc|ref|prf:ref|numref)\}`([^`]*)`")
_TARGET = re.compile(r"^\(([^()\s]+)\)=[ \t]*$|^[ \t]*:label:[ \t]*(\S+)", re.M)


class ChapterFacts(NamedTuple):
    """What an instructor plans a chapter by, all read from the chapter itself."""

    chapter: str  #: the notebook's path relative to the book root, without suffix
    title: str
    words: int  #: words of Markdown a student reads (solutions left out)
    read_minutes: int  #: words / WORDS_PER_MINUTE, rounded up to 5 minutes
    run_seconds: float | None  #: first cell started to last cell done, in the committed run
    exercises: int
    exercise_minutes: int
    refers_back: tuple[str, ...]  #: earlier chapters (table of contents order) its text refers to
    needs_hf: bool  #: imports PyTorch or transformers (requirements-hf.txt)


def _notebook(path: Path) -> dict:
    _markdown(path)  # the same checks: a readable notebook
    return json.loads(Path(path).read_text(encoding="utf-8"))


def reading_words(markdown: str) -> int:
    """Words a student reads in ``markdown``: everything but the solutions (which the student
    edition leaves out) and the directive options (``:label:``, ``:class:``)."""
    if not isinstance(markdown, str):
        raise TypeError(f"markdown: expected a string, got {type(markdown).__name__}")
    text = _SOLUTION.sub("", markdown)
    text = re.sub(r"^[ \t]*:[\w-]+:.*$", "", text, flags=re.M)
    return len(re.findall(r"\S+", text))


def reading_minutes(words: int) -> int:
    """Minutes to read ``words`` at WORDS_PER_MINUTE, rounded up to a multiple of 5 (at least 5)."""
    import math

    from .._validate import as_int

    words = as_int(words, "words", minimum=0)
    return max(5, 5 * math.ceil(words / WORDS_PER_MINUTE / 5))


def run_seconds(nb: dict) -> float | None:
    """Seconds from the first code cell's start to the last one's end in the notebook's stored run.

    Read from the timestamps the executing client stores in each cell (``metadata.execution``);
    None for a notebook stored without them.
    """
    from datetime import datetime

    stamps = []
    for cell in nb.get("cells", []):
        record = cell.get("metadata", {}).get("execution") or {}
        for key in ("iopub.execute_input", "shell.execute_reply"):
            if key in record:
                stamps.append(datetime.fromisoformat(record[key].replace("Z", "+00:00")))
    return (max(stamps) - min(stamps)).total_seconds() if stamps else None


def chapter_facts(root: Path) -> list[ChapterFacts]:
    """:class:`ChapterFacts` of every notebook chapter of the table of contents, in order."""
    root = _book_root(root)
    names = toc_chapters(root)
    labels: dict[str, str] = {}
    texts: dict[str, str] = {}
    for name in names:
        for suffix in (".ipynb", ".md"):
            path = root / f"{name}{suffix}"
            if path.is_file():
                texts[name] = _markdown(path) if suffix == ".ipynb" else path.read_text(encoding="utf-8")
                for match in _TARGET.finditer(texts[name]):
                    labels[match.group(1) or match.group(2)] = name
    exercises = book_exercises(root)
    out = []
    for position, name in enumerate(names):
        path = root / f"{name}.ipynb"
        if not path.is_file():
            continue
        nb = _notebook(path)
        text = texts[name]
        folder = str(Path(name).parent)
        cited = set()
        for role, content in _REFERENCE.findall(text):
            target = re.sub(r"^.*<([^<>]+)>$", r"\1", content, flags=re.S).strip()
            if role == "doc":
                cited.add(f"{folder}/{target}" if "/" not in target else target.lstrip("/"))
            elif target in labels:
                cited.add(labels[target])
        back = tuple(n for n in names[:position] if n in cited and (root / f"{n}.ipynb").is_file())
        heading = _TITLE.search(text)
        mine = [e for e in exercises if e.chapter == name]
        code = "\n".join("".join(c["source"]) for c in nb["cells"] if c.get("cell_type") == "code")
        words = reading_words(text)
        out.append(ChapterFacts(name, heading.group(1).strip() if heading else name, words, reading_minutes(words),
                                run_seconds(nb), len(mine), sum(e.minutes or 0 for e in mine), back,
                                bool(_HF_IMPORT.search(code))))
    return out


#: How the instructors' page links to chapters and exercises.  "myst": the book's roles
#: (``{doc}``, ``{numref}``), which Sphinx resolves, titles and numbers when it builds the page.
#: "notebook": Markdown links to the chapters' notebooks in the same folder, for the notebook
#: editions that JupyterLab opens, where nothing resolves those roles across notebooks
#: (jupyterlab-myst renders one notebook at a time: a ``{doc}`` link lacks ``.ipynb`` and a
#: ``{numref}`` shows "Exercise {number}").
LINK_STYLES = ("myst", "notebook")


def _style(style: object) -> str:
    if style not in LINK_STYLES:
        raise ValueError(f"style: expected one of {LINK_STYLES}, got {style!r}")
    return style


def _doc(chapter: str, text: str | None = None, style: str = "myst", title: str | None = None) -> str:
    """A link to ``chapter`` reading ``text`` (default: the chapter's title)."""
    name = Path(chapter).name
    if style == "notebook":
        return f"[{text or title or name}]({name}.ipynb)"
    return f"{{doc}}`{text} <{name}>`" if text else f"{{doc}}`{name}`"


def _number(chapter: str) -> str:
    return Path(chapter).name.split("_")[0]


def chapters_table(facts: list[ChapterFacts], style: str = "myst") -> str:
    """A Markdown table: each chapter, what it refers back to, and its reading and exercise times.

    The chapters are links in ``style`` (:data:`LINK_STYLES`; in the ``"myst"`` style the cell
    showing the table renders its Markdown as MyST).
    """
    style = _style(style)
    lines = ["| chapter | refers back to | reading | exercises |", "| --- | --- | --- | --- |"]
    for f in facts:
        back = ", ".join(_doc(b, _number(b), style) for b in f.refers_back) or "–"
        hf = " (PyTorch)" if f.needs_hf else ""
        ex = f"{f.exercises}, ~{f.exercise_minutes} min" if f.exercises else "–"
        lines.append(f"| {_doc(f.chapter, None, style, f.title)}{hf} | {back} | ~{f.read_minutes} min | {ex} |")
    return "\n".join(lines)


def lecture_table(facts: list[ChapterFacts], lecture=LECTURE, minutes: int = LECTURE_MINUTES,
                  style: str = "myst") -> str:
    """The 90-minute lecture as a Markdown table, chapters linked in ``style``; raises ValueError
    for a chapter the book lacks or a plan longer than ``minutes``."""
    style = _style(style)
    known = {f.chapter: f for f in facts}
    missing = [c for c, _, _ in lecture if c not in known]
    if missing:
        raise ValueError(f"lecture: {missing} are not chapters of the table of contents (update "
                         "speclib.book.course.LECTURE)")
    used = sum(m for _, m, _ in lecture)
    if used > minutes:
        raise ValueError(f"lecture: the plan takes {used} min, more than its {minutes}")
    lines = ["| minutes | chapter | what to show |", "| --- | --- | --- |"]
    lines += [f"| {m} | {_doc(c, None, style, known[c].title)} | {what} |" for c, m, what in lecture]
    if used < minutes:
        lines.append(f"| {minutes - used} | | questions |")
    return "\n".join(lines)


def module_weeks(facts: list[ChapterFacts], weeks: int = MODULE_WEEKS) -> list[list[ChapterFacts]]:
    """The chapters in their order, cut into ``weeks`` runs of consecutive chapters whose largest
    workload (reading and exercises, in minutes) is as small as it can be."""
    from .._validate import as_int

    weeks = as_int(weeks, "weeks", minimum=1)
    chapters = [f for f in facts if f.exercises]
    if len(chapters) < weeks:
        raise ValueError(f"weeks: {weeks} weeks for {len(chapters)} chapters with exercises")
    load = [f.read_minutes + f.exercise_minutes for f in chapters]
    n = len(load)
    prefix = [0]
    for x in load:
        prefix.append(prefix[-1] + x)
    # best[w][i]: the smallest largest week for the first i chapters in w weeks; cut[w][i]: its last cut
    inf = float("inf")
    best = [[inf] * (n + 1) for _ in range(weeks + 1)]
    cut = [[0] * (n + 1) for _ in range(weeks + 1)]
    best[0][0] = 0
    for w in range(1, weeks + 1):
        for i in range(1, n + 1):
            for j in range(w - 1, i):
                value = max(best[w - 1][j], prefix[i] - prefix[j])
                if value < best[w][i]:
                    best[w][i], cut[w][i] = value, j
    bounds, i = [], n
    for w in range(weeks, 0, -1):
        bounds.append((cut[w][i], i))
        i = cut[w][i]
    return [chapters[a:b] for a, b in reversed(bounds)]


def module_table(facts: list[ChapterFacts], weeks: int = MODULE_WEEKS, style: str = "myst") -> str:
    """The module as a Markdown table: per week, its chapters (linked in ``style``) and hours of
    reading and exercises."""
    style = _style(style)
    lines = ["| week | chapters | reading | exercises |", "| --- | --- | --- | --- |"]
    for w, chapters in enumerate(module_weeks(facts, weeks), start=1):
        names = ", ".join(_doc(f.chapter, _number(f.chapter), style) + (" (PyTorch)" if f.needs_hf else "")
                          for f in chapters)
        read = sum(f.read_minutes for f in chapters) / 60
        work = sum(f.exercise_minutes for f in chapters) / 60
        lines.append(f"| {w} | {names} | {read:.1f} h | {work:.1f} h |")
    return "\n".join(lines)


def repository_url(root: Path) -> tuple[str, str]:
    """``(url, branch)`` of the book's repository from ``root/_config.yml`` (url "" until it is set)."""
    import yaml

    config = yaml.safe_load((_book_root(root) / "_config.yml").read_text(encoding="utf-8")) or {}
    repo = config.get("repository") or {}
    return str(repo.get("url") or "").strip(), str(repo.get("branch") or "main").strip()


_GITHUB = re.compile(r"^https://github\.com/(?P<owner>[\w.-]+)/(?P<repo>[\w.-]+?)(?:\.git)?/?$")


def launch_links(url: str, branch: str = "main", notebook: str = "student/00_overview.ipynb") -> dict[str, str]:
    """Binder and Colab addresses that open ``notebook`` (a path in the repository) of the book's
    repository ``url`` in JupyterLab or Colab; {} while ``url`` is empty.

    Raises ValueError for an address that is not a GitHub repository's (Colab opens notebooks
    from GitHub only; Binder would need another provider's path).

    Examples
    --------
    >>> launch_links("https://github.com/o/r", "main", "student/03_verification.ipynb")["binder"]
    'https://mybinder.org/v2/gh/o/r/main?urlpath=lab/tree/student/03_verification.ipynb'
    """
    if not isinstance(url, str) or not isinstance(branch, str) or not isinstance(notebook, str):
        raise TypeError("url, branch and notebook: expected strings")
    if not url:
        return {}
    match = _GITHUB.match(url)
    if not match:
        raise ValueError(f"url: {url!r} is not a GitHub repository address (https://github.com/OWNER/REPO)")
    owner, repo = match.group("owner"), match.group("repo")
    return {"binder": f"https://mybinder.org/v2/gh/{owner}/{repo}/{branch}?urlpath=lab/tree/{notebook}",
            "colab": f"https://colab.research.google.com/github/{owner}/{repo}/blob/{branch}/{notebook}"}


def launch_markdown(root: Path, edition: str = "student") -> str:
    """How to open the ``edition`` notebooks: in a clone today, on Binder and Colab once the
    repository address (``repository.url`` in _config.yml) is set."""
    if edition not in ("student", "instructor"):
        raise ValueError(f"edition: expected 'student' or 'instructor', got {edition!r}")
    url, branch = repository_url(root)
    clone = (f"In a clone of the repository: `python3 dev.py test` (or `python3 dev.py book`) sets up "
             f"`.venv` with everything pinned, then `.venv/bin/jupyter lab {edition}/` opens the notebooks.")
    links = launch_links(url, branch, f"{edition}/00_overview.ipynb")
    if not links:
        return (clone + " Binder and Colab links appear here once the book has a public address "
                "(`python3 tools/set_repository.py URL` sets it).")
    return (clone + f" Or launch the {edition} edition without installing anything: "
            f"[on Binder]({links['binder']}) (JupyterLab, the repository's `requirements.txt`) or "
            f"[in Colab]({links['colab']}) (one notebook at a time; its first cell installs the companion "
            "package, and Colab shows the exercise and proof blocks as plain text).")


# Grading students' notebooks by these exercises' self-checks: speclib.book.grading (tools/grade.py).


def run_times(facts: list[ChapterFacts], style: str = "myst") -> str:
    """Each chapter's stored run time, as one Markdown line: ``{doc}`00 <00_overview>` 4 s · ...``."""
    style = _style(style)
    parts = [f"{_doc(f.chapter, _number(f.chapter), style)} {f.run_seconds:.0f} s" for f in facts
             if f.run_seconds is not None]
    return " · ".join(parts) if parts else "(no chapter holds a stored run)"


def torch_sentence(facts: list[ChapterFacts], style: str = "myst") -> str:
    """Which chapters import PyTorch or ``transformers``, as the subject and verb of a sentence:
    "Chapter 16 imports" or "Chapters 14 and 16 import", the numbers linked in ``style``."""
    style = _style(style)
    hf = [f for f in facts if f.needs_hf]
    if not hf:
        return "No chapter imports"
    names = [_doc(f.chapter, _number(f.chapter), style) for f in hf]
    listed = names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]
    return f"Chapter {listed} imports" if len(hf) == 1 else f"Chapters {listed} import"
