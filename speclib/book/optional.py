"""Chapters with cells that need PyTorch and transformers, run where they are not installed.

``requirements.txt`` (and so Binder) leaves PyTorch and ``transformers`` out; a chapter that
uses them in some sections must still run as opened.  Its first code cell after the set-up
cell calls
:func:`use_hf_cells`, which says once, with the install line, what is missing; each cell that
needs the packages starts with the cell magic ``%%needs_torch`` and, where they are missing,
prints one line and runs nothing.  No cell raises, so JupyterLab's Run All goes on to the
chapter's exercises, which need neither.
"""

from __future__ import annotations

import ast

#: PyTorch's index of CPU-only wheels: ``requirements-hf.txt`` pins a torch version that the
#: public index serves as a multi-gigabyte CUDA build on Linux; this index serves its CPU build.
CPU_INDEX = "https://download.pytorch.org/whl/cpu"
#: What a notebook of the repository (one folder below its root: book/, student/, instructor/)
#: runs to install the packages the ``%%needs_torch`` cells use.
HF_INSTALL = f"%pip install -r ../requirements-hf.txt --extra-index-url {CPU_INDEX}"
#: The modules those cells need.
HF_MODULES = ("torch", "transformers")
#: The name of the cell magic.
MAGIC = "needs_torch"

MISSING = ("This chapter's cells marked %%needs_torch need PyTorch and transformers, which are not "
           "installed: they will print one line and skip, and the rest of the chapter and its exercises "
           "run. To run them too, install the CPU build (a few hundred MB), then restart the kernel:\n"
           f"{HF_INSTALL}")
SKIPPED = ("Skipped: this cell needs PyTorch and transformers (the cell after the set-up cell, at the top "
           "of the chapter, says how to install them).")


def hf_available() -> bool:
    """Whether PyTorch and transformers import."""
    for name in HF_MODULES:
        try:
            __import__(name)
        except ImportError:
            return False
    return True


def run_source(shell, source: str):
    """Run ``source`` as the body of a cell in ``shell``'s namespace; return the value of its last
    line when that line is an expression (IPython shows it as the cell's result), else None."""
    code = shell.transform_cell(source)
    tree = ast.parse(code)
    last = tree.body.pop() if tree.body and isinstance(tree.body[-1], ast.Expr) else None
    filename = shell.compile.cache(code)  # so a traceback shows the cell's lines
    exec(compile(tree, filename, "exec"), shell.user_ns)
    if last is not None:
        return eval(compile(ast.Expression(last.value), filename, "eval"), shell.user_ns)
    return None


def needs_torch(line: str, cell: str):
    """The cell magic ``%%needs_torch``: run the cell where PyTorch and transformers import,
    otherwise print :data:`SKIPPED` and run nothing."""
    from IPython import get_ipython

    if line.strip():
        raise ValueError(f"%%{MAGIC}: takes nothing after its name, got {line.strip()!r}")
    if not hf_available():
        print(SKIPPED)
        return None
    return run_source(get_ipython(), cell)


def use_hf_cells(shell=None) -> bool:
    """Register ``%%needs_torch`` in ``shell`` (default: the running IPython) and return whether
    PyTorch and transformers import; when they do not, print :data:`MISSING` (what to install).

    Raises RuntimeError outside IPython, where there are no cells.
    """
    if shell is None:
        from IPython import get_ipython

        shell = get_ipython()
    if shell is None:
        raise RuntimeError("use_hf_cells: no IPython shell is running (call it from a notebook)")
    shell.register_magic_function(needs_torch, magic_kind="cell", magic_name=MAGIC)
    available = hf_available()
    if not available:
        print(MISSING)
    return available
