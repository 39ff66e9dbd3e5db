"""Every exercise with code to write is checked where it runs: its stub and at least one wrong
solution (kept in tests/wrong_solutions/) go through its self-check from speclib.book.checks and
get an ExerciseError whose hint says what is wrong; no exercise checks itself with a bare assert."""

import ast
import importlib.util
import json
import re
from pathlib import Path

import numpy as np
import pytest

from speclib.book import checks
from speclib.book.checks import ExerciseError
from speclib.book.course import book_exercises

ROOT = Path(__file__).resolve().parents[1]
WRONG = Path(__file__).resolve().parent / "wrong_solutions"


def exercise_segments():
    """label -> the code cells between the exercise's statement and its solution (the student's part)."""
    out = {}
    for ex in book_exercises(ROOT):
        cells = json.loads((ROOT / f"{ex.chapter}.ipynb").read_text(encoding="utf-8"))["cells"]
        start = next(i for i, c in enumerate(cells) if c["cell_type"] == "markdown"
                     and f":label: {ex.label}" in "".join(c["source"]))
        end = next((i for i, c in enumerate(cells) if i >= start  # the same cell: no code between
                    and f"{{solution-start}} {ex.label}" in "".join(c["source"])), len(cells))
        out[ex.label] = [c for c in cells[start + 1:end] if c["cell_type"] == "code"]
    return out


SEGMENTS = exercise_segments()


def _check_call(node):
    """(check name, argument name) when ``node`` is ``check_x(name)`` or ``checks.check_x(name)``."""
    if not (isinstance(node, ast.Expr) and isinstance(node.value, ast.Call)):
        return None
    func, args = node.value.func, node.value.args
    name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
    if name.startswith("check_") and len(args) == 1 and isinstance(args[0], ast.Name):
        return name, args[0].id
    return None


def checked_exercises():
    """label -> (check name, the name it is called with, the student's namespace of that exercise).

    The namespace holds what the exercise's own cells define (the stub): their imports, function
    and class definitions and assignments of constants, run without the cells' other statements
    (which print, or read variables the chapter made earlier).  The check is the one a cell tagged
    ``raises-exception`` calls: the cell a student runs on the stub.
    """
    out = {}
    for label, cells in SEGMENTS.items():
        calls, kept = [], []
        for cell in cells:
            stub = "raises-exception" in cell.get("metadata", {}).get("tags", [])
            for node in ast.parse("".join(cell["source"])).body:
                call = _check_call(node)
                if call and stub:
                    calls.append(call)
                elif isinstance(node, (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.ClassDef)) or (
                        isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant)):
                    kept.append(node)
        if not calls:
            continue
        namespace = {"np": np, "checks": checks}
        exec(compile(ast.Module(body=kept, type_ignores=[]), label, "exec"), namespace)
        assert len({c for c, _ in calls}) == 1, f"{label}: several checks {calls}"
        out[label] = (*calls[0], namespace)
    return out


CHECKED = checked_exercises()


def test_every_code_exercise_has_a_self_check_from_the_library():
    code = [e.label for e in book_exercises(ROOT) if e.kind == "code"]
    assert [label for label in code if label not in CHECKED] == []
    for label, (check, _, _) in CHECKED.items():
        assert callable(getattr(checks, check, None)), f"{label}: {check} is not in speclib.book.checks"
    assert len(CHECKED) >= len(code)  # negative control: the scan finds them


def test_no_exercise_checks_itself_with_an_assert():
    """A bare assert prints its expression's values, the expected answer among them (ex-09b-1 once did)."""
    asserting = [label for label, cells in SEGMENTS.items() for c in cells
                 if any(isinstance(n, ast.Assert) for n in ast.walk(ast.parse("".join(c["source"]))))]
    assert asserting == []


def _message(check, value):
    with pytest.raises(ExerciseError) as caught:
        getattr(checks, check)(value)
    message = str(caught.value)
    rendered = "".join(caught.value._render_traceback_())
    assert "Traceback" not in rendered and "File " not in rendered
    return message


@pytest.mark.parametrize("label", sorted(CHECKED))
def test_the_stub_fails_its_check_with_a_hint(label):
    check, name, namespace = CHECKED[label]
    message = _message(check, namespace[name])
    if callable(namespace[name]):
        assert re.search(r"still raises NotImplementedError: complete the stub", message), message
    else:  # an answer to fill in (a set of letters), not a function
        assert len(message) > 20, message


def wrong_solutions():
    out = []
    for path in sorted(WRONG.glob("ex_*.py")):
        spec = importlib.util.spec_from_file_location(f"wrong_{path.stem}", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        out.append(pytest.param(module, id=path.stem))
    return out


WRONG_SOLUTIONS = wrong_solutions()


def test_every_checked_exercise_has_a_wrong_solution_and_every_wrong_solution_an_exercise():
    covered = {p.values[0].EXERCISE for p in WRONG_SOLUTIONS}
    assert sorted(set(CHECKED) - covered) == [], "exercises without a wrong solution in tests/wrong_solutions"
    assert sorted(covered - set(CHECKED)) == [], "wrong solutions of exercises the book no longer checks"


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # a wrong solution may take the median of nothing
@pytest.mark.parametrize("module", WRONG_SOLUTIONS)
def test_a_wrong_solution_fails_with_the_hint_that_names_its_mistake(module):
    check, name, _ = CHECKED[module.EXERCISE]
    message = _message(check, getattr(module, name))
    assert re.search(module.HINT, message), f"{module.__doc__.strip()}\nThe check said: {message}"
    assert "NotImplementedError" not in message
