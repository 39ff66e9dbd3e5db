#!/usr/bin/env python3
"""Build the book: the full edition, or the student edition without solutions.

    .venv/bin/python tools/build_book.py                  # -> _build/html, student/, instructor/
    .venv/bin/python tools/build_book.py --student        # -> _build_student/_build/html
    .venv/bin/python tools/build_book.py --output DIR     # build into DIR/_build/html (and DIR/student ...)

The full build also rewrites the two notebook editions that JupyterLab, Binder and Colab open,
student/ (no solutions) and instructor/, from the chapters in book/ (tools/editions.py): into
the repository, or with --output into DIR/student and DIR/instructor.

Both builds treat warnings as errors.  The student edition is built from a copy of the
sources in which every solution is removed: the `{solution}` directives, and in notebooks
every cell from a `{solution-start}` cell to its `{solution-end}` cell (sphinx-exercise's
own `hide_solutions` setting hides the directive but leaves the cells between the gates).
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
# speclib is copied for the listings that chapters read from its source (literalinclude).
SOURCES = ("book", "_ext", "_static", "speclib", "_config.yml", "_toc.yml", "references.bib")
SOLUTION_START = re.compile(r"^(`{3,}|:{3,})\{solution-start\}.*?^\1[ \t]*$\n?", re.M | re.S)
SOLUTION_END = re.compile(r"^(`{3,}|:{3,})\{solution-end\}[^\n]*\n\1[ \t]*$\n?", re.M)
SOLUTION_BLOCK = re.compile(r"^(`{3,}|:{3,})\{solution\}.*?^\1[ \t]*$\n?", re.M | re.S)


def strip_markdown(text: str, inside: bool) -> tuple[str, bool]:
    """Remove solution text from one Markdown cell.

    ``inside`` says whether the cell starts inside a gated solution.  Returns the text that
    remains and whether the cell ends inside a gated solution.  Exercise text before a
    ``{solution-start}`` and text after a ``{solution-end}`` in the same cell are kept.
    """
    kept, pos = [], 0
    while True:
        if inside:
            end = SOLUTION_END.search(text, pos)
            if end is None:
                return "".join(kept), True
            pos, inside = end.end(), False
        else:
            start = SOLUTION_START.search(text, pos)
            if start is None:
                kept.append(SOLUTION_BLOCK.sub("", text[pos:]))
                return "".join(kept), False
            kept.append(SOLUTION_BLOCK.sub("", text[pos:start.start()]))
            pos, inside = start.end(), True


def strip_notebook(nb: dict) -> int:
    """Remove every solution from a notebook; return how many cells were dropped or cut.

    Cells wholly between a ``{solution-start}`` and its ``{solution-end}`` are dropped
    (code cells included); Markdown cells that hold a gate lose only the solution part.
    """
    kept, inside, changed = [], False, 0
    for cell in nb["cells"]:
        text = "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
        if cell["cell_type"] != "markdown":
            if inside:
                changed += 1
            else:
                kept.append(cell)
            continue
        new, inside_after = strip_markdown(text, inside)
        inside = inside_after
        if new != text:
            changed += 1
            if not new.strip():
                continue
            cell["source"] = new
        kept.append(cell)
    if inside:
        raise ValueError("a {solution-start} has no matching {solution-end}")
    nb["cells"] = kept
    return changed


def student_sources(dest: Path) -> Path:
    """Copy the book's sources to dest/src with all solutions removed; return dest/src."""
    src = dest / "src"
    if src.exists():
        shutil.rmtree(src)
    src.mkdir(parents=True)
    for name in SOURCES:
        path = ROOT / name
        if path.is_dir():
            shutil.copytree(path, src / name, ignore=shutil.ignore_patterns(
                "_build", ".ipynb_checkpoints", "__pycache__", "*.npz"))
        else:
            shutil.copy2(path, src / name)
    for nb_path in (src / "book").rglob("*.ipynb"):
        nb = json.loads(nb_path.read_text(encoding="utf-8"))
        if strip_notebook(nb):
            nb_path.write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    for md_path in (src / "book").rglob("*.md"):
        text = md_path.read_text(encoding="utf-8")
        md_path.write_text(SOLUTION_BLOCK.sub("", text), encoding="utf-8")
    config = yaml.safe_load((src / "_config.yml").read_text())
    config["title"] = f"{config['title']} (student edition)"
    config.setdefault("sphinx", {}).setdefault("config", {})["hide_solutions"] = True
    (src / "_config.yml").write_text(yaml.safe_dump(config, sort_keys=False))
    return src


def build(source: Path, output: Path) -> int:
    jb = Path(sys.executable).parent / "jupyter-book"
    cmd = [str(jb), "build", str(source), "-W", "-n", "--keep-going", "--path-output", str(output)]
    print("+", " ".join(cmd), flush=True)
    return subprocess.run(cmd).returncode


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--student", action="store_true", help="build the student edition (no solutions)")
    parser.add_argument("--output", type=Path, help="where to put _build/ (default: the repository, or _build_student)")
    args = parser.parse_args(argv)
    if args.student:
        output = args.output or ROOT / "_build_student"
        code = build(student_sources(output), output)
    else:
        output = args.output or ROOT
        import editions

        written = editions.write_editions(output)
        print(f"wrote the notebook editions: {len(written)} files in {output / 'student'} and "
              f"{output / 'instructor'}", flush=True)
        code = build(ROOT, output)
    if code == 0:
        print(f"\nThe book is in {output / '_build' / 'html' / 'index.html'}")
    return code


if __name__ == "__main__":
    sys.exit(main())
