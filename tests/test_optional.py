"""speclib.book.optional: the cell magic %%needs_torch runs a cell where PyTorch and transformers are
installed and skips it with one line where they are not; the first code cell says what to install.
(tests/test_editions_without_torch.py runs chapter 16 without them.)"""

import pytest
from IPython.core.interactiveshell import InteractiveShell

from speclib.book import optional


@pytest.fixture
def shell():
    shell = InteractiveShell.instance()
    yield shell
    shell.reset()


def run(shell, source):
    result = shell.run_cell(source, store_history=False)
    return result


def test_with_the_packages_a_marked_cell_runs_as_a_cell(shell, monkeypatch, capsys):
    monkeypatch.setattr(optional, "hf_available", lambda: True)
    assert optional.use_hf_cells(shell) is True
    assert capsys.readouterr().out == ""
    result = run(shell, "%%needs_torch\nx = 40\nprint('ran')\nx + 2")
    assert result.success and result.result == 42 and shell.user_ns["x"] == 40
    assert capsys.readouterr().out.startswith("ran")
    result = run(shell, "%%needs_torch\ny = 1\nfor i in range(3):\n    y += i")
    assert result.success and result.result is None and shell.user_ns["y"] == 4


def test_an_error_in_a_marked_cell_is_the_cell_s_error(shell, monkeypatch):
    monkeypatch.setattr(optional, "hf_available", lambda: True)
    optional.use_hf_cells(shell)
    result = run(shell, "%%needs_torch\n1 / 0")
    assert isinstance(result.error_in_exec, ZeroDivisionError)


def test_without_the_packages_one_line_says_what_to_install_and_each_cell_skips(shell, monkeypatch, capsys):
    monkeypatch.setattr(optional, "hf_available", lambda: False)
    assert optional.use_hf_cells(shell) is False
    said = capsys.readouterr().out
    assert said.strip().endswith(optional.HF_INSTALL) and "--extra-index-url https://download.pytorch.org/whl/cpu" \
        in said
    result = run(shell, "%%needs_torch\nz = 1\nraise RuntimeError('ran')")
    assert result.success and "z" not in shell.user_ns
    assert capsys.readouterr().out == optional.SKIPPED + "\n"


def test_the_magic_takes_no_argument(shell, monkeypatch):
    monkeypatch.setattr(optional, "hf_available", lambda: True)
    optional.use_hf_cells(shell)
    assert isinstance(run(shell, "%%needs_torch now\n1").error_in_exec, ValueError)


def test_hf_available_sees_a_module_that_will_not_import(monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "transformers", None)  # as if it were not installed
    assert optional.hf_available() is False


def test_outside_ipython_it_says_so(monkeypatch):
    import IPython

    monkeypatch.setattr(IPython, "get_ipython", lambda: None)
    with pytest.raises(RuntimeError, match="no IPython shell"):
        optional.use_hf_cells()


def test_the_chapter_states_the_same_install_line():
    """Chapter 16's first code cell shows the line the module prints (they cannot drift apart)."""
    import json
    from pathlib import Path

    nb = json.loads((Path(__file__).resolve().parents[1] / "book" / "16_models_and_engines.ipynb").read_text())
    first = next("".join(c["source"]) for c in nb["cells"][2:] if c["cell_type"] == "code")
    assert "use_hf_cells()" in first and optional.HF_INSTALL.lstrip("%") in first
