"""No explorer can hang a headless run.

One headless run of chapter 2 in thirteen hung after ``drafting_explorer()``, kernel and client
both idle.  ``ipywidgets.interact`` draws into an Output widget, and nbclient (which executes
the notebooks, and which tests and graders use) mirrors an Output widget by sending its
outputs back to the kernel as a comm message while the cell is still running; the explorers
now draw into an Image or HTML widget, whose value only goes from the kernel to the front
end.  These tests run every explorer, and chapter 2 itself, headless several times, each cell
with a time limit, and check the mechanism itself: nbclient never sends the kernel an Output
widget's state (with ``interact`` as the negative control, where it does).
"""

import inspect
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient
from nbclient.output_widget import OutputWidget

from speclib.book import widgets

ROOT = Path(__file__).resolve().parents[1]
EXPLORERS = sorted(name for name, fn in inspect.getmembers(widgets, inspect.isfunction)
                   if name.endswith("_explorer") and fn.__module__ == widgets.__name__)
ROUNDS = 3  #: runs of each explorer
CHAPTER_ROUNDS = 2  #: runs of chapter 2 (about ten seconds each)
LIMIT = 120  #: seconds a cell may run (an explorer draws in about one)


@pytest.fixture
def mirrored(monkeypatch):
    """Every time nbclient sends an Output widget's state back to the kernel."""
    sent = []
    original = OutputWidget.sync_state

    def sync_state(self):
        sent.append(self.comm_id)
        return original(self)

    monkeypatch.setattr(OutputWidget, "sync_state", sync_state)
    return sent


def run(cells: list[str]):
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(c) for c in cells]
    NotebookClient(nb, timeout=LIMIT, kernel_name="python3", allow_errors=False).execute()
    return nb


def test_every_explorer_runs_headless_again_and_again_without_mirroring(mirrored):
    nb = run(["from speclib.book import widgets"] + [f"widgets.{name}()" for name in EXPLORERS] * ROUNDS)
    views = [o for c in nb.cells[1:] for o in c.outputs if "application/vnd.jupyter.widget-view+json" in o.get("data", {})]
    assert len(views) == len(EXPLORERS) * ROUNDS, "each explorer showed its box every time"
    assert mirrored == [], "nbclient sent an Output widget's state to the kernel during a cell"


def test_interact_is_mirrored_back_to_the_kernel(mirrored):
    """Negative control: with ipywidgets.interact, nbclient does send (what could hang)."""
    run(["import ipywidgets", "ipywidgets.interact(lambda x: print(x), x=1)"])
    assert mirrored


@pytest.mark.parametrize("round_", range(CHAPTER_ROUNDS))
def test_chapter_2_runs_headless(round_, mirrored):
    """The chapter where the hang was seen, as the grader and the tests run it (errors allowed:
    its stubs raise), with a time limit on every cell."""
    path = ROOT / "student" / "02_drafting.ipynb"
    nb = nbformat.read(path, as_version=4)
    NotebookClient(nb, timeout=LIMIT, kernel_name="python3", allow_errors=True,
                   resources={"metadata": {"path": str(path.parent)}}).execute()
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert all(c.execution_count is not None for c in code)
    assert mirrored == []
