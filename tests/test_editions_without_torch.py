"""Chapters 14 and 16 of the student edition as a student without PyTorch runs them: the chapter
says in one line what to install, and every exercise still runs its self-check.

The kernel is made to lack PyTorch and transformers (``sys.modules[name] = None`` makes their
import fail as if they were not installed), which is what requirements.txt alone, and so Binder,
gives.  The student runs the chapter from the top; where a cell stops the chapter, they go on
at its exercises.
"""

import json
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parents[1]
BLOCK = "import sys\nfor name in ('torch', 'transformers'):\n    sys.modules[name] = None"


def run_as_student(path: Path):
    """Run the notebook cell by cell without PyTorch; after an error in a cell not tagged
    ``raises-exception`` (a stop), skip to the first code cell of the Exercises section.
    Returns (the stop's error output or None, {cell index: error output} of the other cells)."""
    nb = nbformat.read(path, as_version=4)
    nb.cells.insert(0, nbformat.v4.new_code_cell(BLOCK))
    exercises = next(i for i, c in enumerate(nb.cells) if c.cell_type == "markdown" and "## Exercises" in c.source)
    client = NotebookClient(nb, timeout=300, kernel_name="python3", allow_errors=True,
                            resources={"metadata": {"path": str(path.parent)}})
    stop, errors, i = None, {}, 0
    with client.setup_kernel():
        while i < len(nb.cells):
            cell = nb.cells[i]
            if cell.cell_type == "code":
                client.execute_cell(cell, i)
                error = next((o for o in cell.outputs if o.output_type == "error"), None)
                expected = "raises-exception" in cell.metadata.get("tags", [])
                if error is not None and not expected and stop is None and i < exercises:
                    stop, i = error, exercises
                    continue
                if error is not None:
                    errors[i] = error
            i += 1
    return nb, stop, errors


@pytest.mark.parametrize("chapter", ["16_models_and_engines"])
def test_without_pytorch_the_exercises_still_check(chapter):
    nb, stop, errors = run_as_student(ROOT / "student" / f"{chapter}.ipynb")
    printed = "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.outputs
                      if o.output_type == "stream")
    said = (stop.evalue if stop is not None else "") + printed
    assert "%pip install -r ../requirements-hf.txt" in said, "the chapter does not say what to install"
    if stop is not None:  # a stop is the chapter's own one-line message, nothing else
        assert stop.ename == "SystemExit" and "\n" not in stop.evalue, stop
    checked = [i for i, c in enumerate(nb.cells) if c.cell_type == "code" and "check_" in c.source
               and "raises-exception" in c.metadata.get("tags", [])]
    assert len(checked) >= 2, f"{chapter}: no self-check cells found"
    for i in checked:
        assert i in errors and errors[i].ename == "ExerciseError", (chapter, nb.cells[i].source, errors.get(i))
        assert "still raises NotImplementedError" in errors[i].evalue
    others = {i: f"{e.ename}: {e.evalue}" for i, e in errors.items() if i not in checked
              and "raises-exception" not in nb.cells[i].metadata.get("tags", [])}
    assert others == {}, f"{chapter}: cells fail without PyTorch"


def test_the_block_works():
    """Negative control: in a kernel run the same way, importing torch does fail."""
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(BLOCK), nbformat.v4.new_code_cell("import torch")]
    NotebookClient(nb, timeout=60, kernel_name="python3", allow_errors=True).execute()
    assert nb.cells[1].outputs[0]["ename"] in ("ImportError", "ModuleNotFoundError")
