"""Grading students' notebooks by the exercises' self-checks, whatever a submission holds.

A submission is compared with its *handout*, the notebook the student was given (the chapter
of ``student/``): the handout says which exercises it has, their numbers as the student sees
them ("Exercise 2"), which self-check each ends with and what its stub cells held.  The
submission is run top to bottom in a fresh kernel, one cell at a time, with errors allowed;
each exercise has a time limit for all its cells together (every other cell has the same
limit on its own), and a kernel that dies or does not stop when interrupted is replaced by a
fresh one that runs the notebook again without the cells that stopped it.  Each exercise then
gets one verdict (:data:`VERDICTS`), in the manner of nbgrader's and otter-grader's
reports: one row per student and exercise.

Used by ``tools/grade.py``; tested by running that script on a batch of bad submissions
(tests/test_grade.py).
"""

from __future__ import annotations

import json
import queue
import re
import subprocess
import tempfile
from collections import defaultdict
from pathlib import Path
from time import monotonic
from typing import NamedTuple

from .course import _EXERCISE, _LABEL

#: Every verdict an exercise can get, in the order a summary lists them.
VERDICTS = (
    "passed",  # the self-check printed its check mark and raised nothing
    "failed",  # the self-check raised ExerciseError: its hint is the message
    "not attempted",  # the exercise's cells are as handed out, or the stub still raises NotImplementedError
    "error",  # any other exception, or a check cell that printed no verdict
    "timed out",  # a cell of the exercise ran past the time limit and was stopped
    "kernel died",  # the kernel stopped (exit, crash) while running a cell of the exercise
    "check removed",  # the exercise or its self-check cell is not in the submission
    "unreadable",  # the file is not a notebook (damaged JSON, not nbformat)
    "not run",  # the grader could not run the cell (the kernel died too often, or did not start)
)

#: Seconds a kernel is given to stop after an interrupt before it is replaced by a fresh one.
GRACE_SECONDS = 5.0
#: Runs of one notebook at most (each after a kernel that died or did not stop).
MAX_RUNS = 4
#: Characters of streamed text kept per cell (a loop that prints is cut, not stored whole).
MAX_STREAM = 100_000

_CHECK_CALL = re.compile(r"\b(check_\w+)\(")


class Grade(NamedTuple):
    """What one exercise of one submission got."""

    label: str  #: the exercise's label in the book (``ex-10-2``)
    status: str  #: one of VERDICTS
    message: str  #: the check's confirmation or hint, the error, or what stopped the exercise
    number: int | None = None  #: its number in the chapter as the student sees it ("Exercise 2")
    title: str = ""

    @property
    def exercise(self) -> str:
        """The exercise as the student sees it: "Exercise 2" (or its label, without a handout)."""
        return f"Exercise {self.number}" if self.number is not None else self.label


class Handout(NamedTuple):
    """One exercise as handed out."""

    label: str
    number: int | None  #: None for an exercise marked ``:nonumber:``
    title: str
    checks: tuple[str, ...]  #: the self-check functions its cells call (empty: graded by hand)
    cells: tuple[str, ...]  #: its code cells' sources, normalised (see :func:`_normal`)


def _source(cell) -> str:
    source = cell.get("source", "")
    return "".join(source) if isinstance(source, list) else str(source)


def _normal(source: str) -> str:
    """A cell's source without trailing spaces and blank lines: edits that change nothing."""
    return "\n".join(line.rstrip() for line in source.strip().splitlines() if line.strip())


def exercise_regions(nb: dict) -> dict[int, str]:
    """Code cell index -> label of the exercise it belongs to.

    A code cell belongs to the last exercise above it, until a Markdown heading ends the
    exercise (an exercise directive in a cell counts before a heading in the same cell).
    """
    out: dict[int, str] = {}
    current = None
    for i, cell in enumerate(nb.get("cells", [])):
        text = _source(cell)
        if cell.get("cell_type") == "markdown":
            labels = [_LABEL.search(m.group("body")) for m in _EXERCISE.finditer(text)]
            if labels and labels[-1] is not None:
                current = labels[-1].group(1)
            elif re.search(r"^#{1,6}\s", text, re.M):
                current = None
        elif cell.get("cell_type") == "code" and current is not None:
            out[i] = current
    return out


def exercise_cells(nb: dict) -> dict[str, list[int]]:
    """label -> indices of the code cells that call a self-check (``check_...(``) under that exercise,
    for every exercise of the notebook (an empty list for one without such a cell)."""
    out: dict[str, list[int]] = {label: [] for label, _, _ in _labels(nb)}
    for i, label in exercise_regions(nb).items():
        if _CHECK_CALL.search(_source(nb["cells"][i])):
            out.setdefault(label, []).append(i)
    return out


def _labels(nb: dict) -> list[tuple[str, str, bool]]:
    """(label, title, numbered) of every exercise directive, in order."""
    found = []
    for cell in nb.get("cells", []):
        if cell.get("cell_type") == "markdown":
            for m in _EXERCISE.finditer(_source(cell)):
                label = _LABEL.search(m.group("body"))
                if label is not None:
                    found.append((label.group(1), m.group("title").strip(),
                                  not re.search(r"^:nonumber:", m.group("body"), re.M)))
    return found


def exercise_numbers(nb: dict) -> dict[str, int | None]:
    """label -> the number the exercise shows ("Exercise 2"): its place among the notebook's
    numbered exercises, as jupyterlab-myst numbers them in a notebook and the book on its page
    (None for one marked ``:nonumber:``)."""
    out, n = {}, 0
    for label, _, numbered in _labels(nb):
        if numbered:
            n += 1
        out[label] = n if numbered else None
    return out


def handout(nb: dict) -> dict[str, Handout]:
    """label -> :class:`Handout` for every exercise of the handed-out notebook, in order."""
    regions = exercise_regions(nb)
    numbers = exercise_numbers(nb)
    out = {}
    for label, title, _ in _labels(nb):
        mine = [i for i, owner in regions.items() if owner == label]
        sources = [_source(nb["cells"][i]) for i in mine]
        checks = sorted({name for s in sources for name in _CHECK_CALL.findall(s)})
        out[label] = Handout(label, numbers[label], title, tuple(checks),
                             tuple(n for n in map(_normal, sources) if n))
    return out


def read_notebook(path: Path) -> dict:
    """The notebook at ``path`` (nbformat 4, validated); ValueError saying what is wrong with a
    file that is not one (damaged JSON, missing cells), FileNotFoundError for no file."""
    import nbformat

    from .._validate import as_path

    path = as_path(path, "path")
    if not path.is_file():
        raise FileNotFoundError(f"path: no notebook file at {path}")
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as error:
        raise ValueError(f"not a notebook: it is not UTF-8 text ({error.reason} at byte {error.start})") from None
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as error:
        raise ValueError(f"not a notebook: damaged JSON ({error.msg}, line {error.lineno} column {error.colno})") \
            from None
    if not isinstance(raw, dict) or not isinstance(raw.get("cells"), list):
        raise ValueError("not a notebook: it has no list of cells")
    try:
        nb = nbformat.reads(text, as_version=4)
        nbformat.validate(nb)
    except Exception as error:  # noqa: BLE001 (nbformat raises several kinds)
        first = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise ValueError(f"not a valid notebook: {first}") from None
    return nb


# --- running a submission ----------------------------------------------------------------------

class _Kernel:
    """A fresh python3 kernel in ``cwd``, over local IPC sockets in a folder of its own (no TCP
    port is opened, so the kernel has no unencrypted network socket to warn about)."""

    def __init__(self, cwd: Path, folder: Path, startup: float = 60.0):
        from jupyter_client import KernelManager

        self.log = open(folder / "kernel.log", "wb")
        self.km = KernelManager(kernel_name="python3", transport="ipc", ip=str(folder / "kernel"))
        self.km.start_kernel(cwd=str(cwd), extra_arguments=["--HistoryManager.hist_file=:memory:"],
                             stdout=self.log, stderr=subprocess.STDOUT)
        self.kc = self.km.blocking_client()
        self.kc.start_channels()
        try:
            self.kc.wait_for_ready(timeout=startup)
        except RuntimeError:
            self.close()
            raise

    def run(self, source: str, limit: float, grace: float = GRACE_SECONDS):
        """Run one cell; return (outputs, execution count, what stopped it: None, "timed out" (it
        stopped within ``grace`` seconds of an interrupt at ``limit`` seconds), "stuck" (it did
        not) or "died")."""
        from nbformat.v4 import output_from_msg

        msg_id = self.kc.execute(source, store_history=True, allow_stdin=False, stop_on_error=False)
        outputs: list = []
        count, clear_next, interrupted = None, False, False
        deadline = monotonic() + limit
        while True:
            now = monotonic()
            if now >= deadline:
                if interrupted:
                    return outputs, count, "stuck"
                self.km.interrupt_kernel()
                interrupted, deadline = True, now + grace
                continue
            try:
                msg = self.kc.get_iopub_msg(timeout=min(0.5, deadline - now))
            except queue.Empty:
                if not self.km.is_alive():
                    return outputs, count, "died"
                continue
            if msg["parent_header"].get("msg_id") != msg_id:
                continue
            kind, content = msg["msg_type"], msg["content"]
            if kind == "status" and content.get("execution_state") == "idle":
                break
            if kind == "execute_input":
                count = content.get("execution_count")
            elif kind == "clear_output":
                if content.get("wait"):
                    clear_next = True
                else:
                    outputs = []
            elif kind in ("stream", "display_data", "execute_result", "error"):
                if clear_next:
                    outputs, clear_next = [], False
                output = output_from_msg(msg)
                last = outputs[-1] if outputs else None
                if kind == "stream" and last is not None and last.output_type == "stream" \
                        and last.name == output.name:
                    last.text = (last.text + output.text)[-MAX_STREAM:]
                else:
                    outputs.append(output)
        self._drain_shell()
        return outputs, count, "timed out" if interrupted else None

    def _drain_shell(self) -> None:
        while True:
            try:
                self.kc.get_shell_msg(timeout=0.05)
            except queue.Empty:
                return

    def exit_code(self) -> int | None:
        provisioner = getattr(self.km, "provisioner", None)
        process = getattr(provisioner, "process", None)
        return process.poll() if process is not None else None

    def close(self) -> None:
        try:
            self.kc.stop_channels()
        except Exception:  # noqa: BLE001 (closing what may be half started)
            pass
        try:
            if self.km.has_kernel:
                self.km.shutdown_kernel(now=True)
        finally:
            self.km.cleanup_resources()
            self.log.close()


class RunEvent(NamedTuple):
    """Why a cell has no outputs of its own run: it timed out, its kernel died, or it was not run."""

    status: str  #: "timed out", "kernel died" or "not run"
    message: str


def run_submission(nb, cwd: Path, limit: float, grace: float = GRACE_SECONDS, max_runs: int = MAX_RUNS,
                   progress=None) -> dict[int, RunEvent]:
    """Run the code cells of ``nb`` in place (their outputs replaced) and return what stopped any.

    Each exercise (:func:`exercise_regions`) may spend ``limit`` seconds over all its cells; any
    other cell ``limit`` seconds on its own.  A cell past its time is interrupted; a kernel that
    dies, or does not stop within ``grace`` seconds of the interrupt, is replaced by a fresh one
    that runs the notebook again from the top without the cells that stopped the earlier ones
    (at most ``max_runs`` runs).  ``progress(i, seconds)`` is called after each cell.
    """
    regions = exercise_regions(nb)
    events: dict[int, RunEvent] = {}
    code = [i for i, c in enumerate(nb.cells) if c.cell_type == "code"]
    stopped_at = None
    for _ in range(max_runs):
        stopped_at = None
        with tempfile.TemporaryDirectory(prefix="grade-kernel-") as folder:
            try:
                kernel = _Kernel(Path(cwd), Path(folder))
            except Exception as error:  # noqa: BLE001 (a kernel that cannot start)
                for i in code:
                    events.setdefault(i, RunEvent("not run", f"the kernel did not start: {error}"))
                return events
            try:
                spent: dict = defaultdict(float)
                for i in code:
                    cell = nb.cells[i]
                    if i in events:
                        cell.outputs, cell.execution_count = [], None
                        continue
                    key = regions.get(i, i)
                    left = limit - spent[key]
                    if left <= 0:
                        cell.outputs, cell.execution_count = [], None
                        events[i] = RunEvent("timed out", f"{_cell_name(cell)} was not run: the exercise's "
                                             f"{limit:g} s were spent")
                        continue
                    start = monotonic()
                    outputs, count, what = kernel.run(_source(cell), left, grace)
                    spent[key] += monotonic() - start
                    cell.outputs, cell.execution_count = outputs, count
                    if progress is not None:
                        progress(i, monotonic() - start)
                    what_limit = f"the exercise's limit of {limit:g} s" if i in regions else f"the {limit:g} s limit"
                    if what == "timed out":
                        events[i] = RunEvent("timed out", f"{_cell_name(cell)} ran past {what_limit} and was "
                                             "interrupted")
                    elif what == "stuck":
                        events[i] = RunEvent("timed out", f"{_cell_name(cell)} ran past {what_limit} and did not "
                                             "stop when interrupted; the notebook was run again without it")
                        stopped_at = i
                        break
                    elif what == "died":
                        exit_code = kernel.exit_code()
                        how = f" (exit code {exit_code})" if exit_code is not None else ""
                        events[i] = RunEvent("kernel died", f"the kernel stopped{how} while running "
                                             f"{_cell_name(cell)}; the notebook was run again without it")
                        stopped_at = i
                        break
            finally:
                kernel.close()
        if stopped_at is None:
            return events
    for i in code:  # the last run stopped too: what comes after it is not graded on stale outputs
        if i > stopped_at and i not in events:
            nb.cells[i].outputs, nb.cells[i].execution_count = [], None
            events[i] = RunEvent("not run", f"not run: the kernel stopped {max_runs} times")
    return events


def _cell_name(cell) -> str:
    """A cell as a student finds it: by its first line."""
    first = next((line.strip() for line in _source(cell).splitlines() if line.strip()), "")
    return f"the cell `{first[:50]}{'...' if len(first) > 50 else ''}`" if first else "an empty cell"


# --- verdicts ---------------------------------------------------------------------------------

def _plain(text: str) -> str:
    return re.sub(r"\x1b\[[0-9;]*m", "", text)


def _one_line(text: str) -> str:
    """A message wrapped for a notebook's column, as one line (the CSV keeps all of it)."""
    return " ".join(line.strip() for line in _plain(text).strip().splitlines() if line.strip())


def _check_verdict(cell, unchanged: bool) -> tuple[str, str]:
    """(status, message) that one executed check cell shows.  An error outranks a check mark
    printed before it: a cell that prints one check's mark and then raises has failed."""
    outputs = cell.get("outputs", [])
    error = next((o for o in outputs if o.get("output_type") == "error"), None)
    text = "".join(_text(o.get("text", "")) for o in outputs if o.get("output_type") == "stream")
    if error is not None:
        name, value = error.get("ename", ""), _one_line(str(error.get("evalue", "")))
        message = f"{name}: {value}"
        if name == "ExerciseError":
            stub = "still raises NotImplementedError" in value
            return ("not attempted" if stub or unchanged else "failed"), message
        if name == "NotImplementedError" or unchanged:
            return "not attempted", message
        return "error", message
    if "\u2714" in text:
        return "passed", _one_line(text)
    return "error", "the check cell ran and printed no verdict"


def _text(value) -> str:
    return "".join(value) if isinstance(value, list) else str(value)


def grade_outputs(nb, given: dict[str, Handout] | None = None,
                  events: dict[int, RunEvent] | None = None) -> list[Grade]:
    """The verdict of each exercise of the handout ``given`` in the executed notebook ``nb``.

    Without a handout, ``nb``'s own exercises with a self-check are graded (then an exercise
    cannot be found missing, and an untouched stub is "not attempted" only when it raises
    NotImplementedError).  ``events``: what :func:`run_submission` reported.  Exercises whose
    handout has no self-check (derivations, computations) are graded by hand and left out.
    """
    events = events or {}
    mine = handout(nb)
    compare = given is not None  # an untouched exercise is one whose cells are as handed out
    given = mine if given is None else given
    regions = exercise_regions(nb)
    grades = []
    for label, h in given.items():
        if not h.checks:
            continue
        grade = lambda status, message: Grade(label, status, message, h.number, h.title)  # noqa: E731
        if label not in mine:
            grades.append(grade("check removed", f"the exercise ({label}) is not in the notebook: its text and "
                                "cells were deleted"))
            continue
        cells = sorted(i for i, owner in regions.items() if owner == label)
        checks = [i for i in cells if set(_CHECK_CALL.findall(_source(nb.cells[i]))) & set(h.checks)]
        if not checks:
            grades.append(grade("check removed", f"the self-check cell ({', '.join(h.checks)}) is not in the "
                                "notebook: it was deleted or no longer calls the check"))
            continue
        unchanged = compare and mine[label].cells == h.cells
        last = checks[-1]
        if last in events:
            grades.append(grade(events[last].status, events[last].message))
            continue
        status, message = _check_verdict(nb.cells[last], unchanged)
        if status != "passed":
            stopped = [events[i] for i in cells if i in events]
            if stopped:
                first = next((e for e in stopped if e.status == "kernel died"), stopped[0])
                status, message = first.status, f"{first.message}; then the check said: {message}"
        grades.append(grade(status, message))
    return grades


def grade_notebook(path: Path, timeout: float = 120, given: Path | dict | None = None,
                   cwd: Path | None = None) -> list[Grade]:
    """Run a student's notebook (see :func:`run_submission`) and grade each exercise of its
    handout ``given`` (a handed-out notebook's path, or :func:`handout`'s result; None: the
    submission's own exercises).  The submission file is not changed; it runs in ``cwd``
    (default: its own folder).  A file that is not a notebook gets "unreadable" for every
    exercise of the handout (one row labelled "" without one).
    """
    from .._validate import as_path, as_real

    path = as_path(path, "path")
    timeout = as_real(timeout, "timeout", low=0.1)
    if isinstance(given, (str, Path)):
        given = handout(read_notebook(Path(given)))
    if not path.is_file():
        raise FileNotFoundError(f"path: no notebook file at {path}")
    try:
        nb = read_notebook(path)
    except ValueError as error:
        if not given:
            return [Grade("", "unreadable", str(error))]
        return [Grade(h.label, "unreadable", str(error), h.number, h.title) for h in given.values() if h.checks]
    events = run_submission(nb, cwd or path.parent, timeout)
    return grade_outputs(nb, given, events)


def summary(rows) -> list[tuple[str, dict[str, int]]]:
    """Per exercise, in the order first met: (its name, verdict -> how many submissions got it).

    ``rows``: (chapter, Grade) pairs; an exercise is named as the student sees it, with its
    chapter and label: "08 Exercise 2 (ex-10-2)".
    """
    out: dict[str, dict[str, int]] = {}
    for chapter, g in rows:
        name = f"{chapter} {g.exercise} ({g.label})" if g.label else f"{chapter} (the whole file)"
        counts = out.setdefault(name, dict.fromkeys(VERDICTS, 0))
        counts[g.status] += 1
    return list(out.items())
