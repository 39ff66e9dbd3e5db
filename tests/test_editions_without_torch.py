"""Chapter 16 of the notebook editions, Run All in a kernel without PyTorch and transformers (what
requirements.txt alone, and so Binder, gives): it runs to its end and through its exercises.

JupyterLab's Run All stops at the first cell that raises, unless the cell is tagged
``raises-exception`` (the exercises' stubs and self-checks are); nbclient with errors not allowed
stops at the same cells, so a run that ends is a Run All that ends.  The kernel is made to lack
the packages by ``sys.modules[name] = None``, which makes their import fail as if they were not
installed.  The student's run must: say in its first code cell what to install, with the
CPU-only index; skip each cell that needs the packages with one line; raise no SystemExit; and
reach every self-check, which reports the untouched stub.  The instructor's run must pass every
self-check without the packages.
"""

import copy
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

from speclib.book import optional

ROOT = Path(__file__).resolve().parents[1]
CHAPTER = "16_models_and_engines"
BLOCK = "import sys\nfor name in ('torch', 'transformers'):\n    sys.modules[name] = None"


def run_all_without_torch(nb, folder: Path):
    """Run All, as JupyterLab does, with the packages blocked; returns the executed notebook
    (nbclient raises CellExecutionError where Run All would stop)."""
    nb = copy.deepcopy(nb)
    nb.cells.insert(0, nbformat.v4.new_code_cell(BLOCK))
    NotebookClient(nb, timeout=300, kernel_name="python3", allow_errors=False,
                   resources={"metadata": {"path": str(folder)}}).execute()
    return nb


def printed(cell) -> str:
    return "".join(o.get("text", "") for o in cell.outputs if o.output_type == "stream")


def read(edition: str):
    return nbformat.read(ROOT / edition / f"{CHAPTER}.ipynb", as_version=4)


def exercises_start(nb) -> int:
    return next(i for i, c in enumerate(nb.cells) if c.cell_type == "markdown" and c.source.startswith("## Exercises"))


@pytest.fixture(scope="module")
def instructor():
    """The whole chapter with its solutions (one run: the chapter takes tens of seconds)."""
    return run_all_without_torch(read("instructor"), ROOT / "instructor")


def test_run_all_reaches_the_end_and_the_first_code_cell_says_what_to_install(instructor):
    code = [c for c in instructor.cells[1:] if c.cell_type == "code"]
    assert all(c.execution_count is not None for c in code), "Run All stopped before the end"
    first = next(c for c in code if "speclib set-up cell" not in c.source)
    assert printed(first).strip() == optional.MISSING
    assert "%pip install -r ../requirements-hf.txt --extra-index-url https://download.pytorch.org/whl/cpu" \
        in printed(first)
    errors = [o for c in code for o in c.outputs if o.output_type == "error"]
    assert not [e for e in errors if e.ename == "SystemExit"]


def test_each_cell_that_needs_torch_skips_with_one_line(instructor):
    marked = [c for c in instructor.cells if c.cell_type == "code" and c.source.startswith("%%needs_torch")]
    assert len(marked) >= 10
    for cell in marked:
        assert [o.output_type for o in cell.outputs] == ["stream"] and printed(cell) == optional.SKIPPED + "\n"


def test_the_instructor_edition_passes_every_check_without_torch(instructor):
    solved = [c for c in instructor.cells if c.cell_type == "code" and "check_" in c.source
              and "raises-exception" not in c.metadata.get("tags", [])]
    assert len(solved) >= 3
    for cell in solved:
        assert "\u2714" in printed(cell), cell.source


def test_the_student_s_run_all_reaches_every_exercise_and_its_check_runs():
    """The student edition holds the same cells as the instructor's down to the exercises (so its
    Run All gets there, as the instructor's run above shows); from there its stubs' self-checks
    run, each reporting the untouched stub, and Run All goes on to the end."""
    student, teacher = read("student"), read("instructor")
    head = exercises_start(student)
    assert head == exercises_start(teacher)
    assert [(c.cell_type, c.source) for c in student.cells[:head]] == \
        [(c.cell_type, c.source) for c in teacher.cells[:head]]
    setup = [c for c in student.cells[:head] if c.cell_type == "code"][:3]  # set-up, first cell, imports
    assert "import inspect" in setup[2].source
    short = copy.deepcopy(student)
    short.cells = setup + student.cells[head:]
    nb = run_all_without_torch(short, ROOT / "student")
    checks = [c for c in nb.cells if c.cell_type == "code" and "check_" in c.source]
    assert len(checks) >= 3, "no self-check cells found"
    for cell in checks:
        (error,) = [o for o in cell.outputs if o.output_type == "error"]
        assert error.ename == "ExerciseError" and "still raises NotImplementedError" in error.evalue


def test_the_block_works():
    """Negative control: in a kernel run the same way, importing torch does fail, and a Run All
    whose cell raises stops there."""
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(BLOCK), nbformat.v4.new_code_cell("import torch")]
    NotebookClient(nb, timeout=60, kernel_name="python3", allow_errors=True).execute()
    assert nb.cells[1].outputs[0]["ename"] in ("ImportError", "ModuleNotFoundError")
    from nbclient.exceptions import CellExecutionError

    with pytest.raises(CellExecutionError):
        NotebookClient(nb, timeout=60, kernel_name="python3", allow_errors=False).execute()
