"""The mutation check's own machinery (tools/mutants.py), on a project of two files.

The check itself (every fault against the real tests) takes minutes and is run by hand; here:
a fault whose text is gone is reported stale, never skipped; caught, missed and equivalent
faults are told apart; the working tree is never written; and every entry of the real list
still applies to today's source and names tests that exist.
"""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def mutants():
    spec = importlib.util.spec_from_file_location("mutants", ROOT / "tools" / "mutants.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["mutants"] = module  # dataclasses look their module up while the class is made
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def project(tmp_path):
    """A package with a tested function and an untested one, and its test."""
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "calc.py").write_text(
        "def add(a, b):\n    return a + b\n\n\ndef untested(a):\n    return a * 2\n\n\n"
        "def double(a):\n    return a + a\n")
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_calc.py").write_text(
        "from pkg.calc import add, double\n\n\ndef test_add():\n    assert add(2, 3) == 5\n\n\n"
        "def test_double():\n    assert double(4) == 8\n")
    return tmp_path


def test_a_fault_whose_text_is_gone_is_stale_not_skipped(mutants, project):
    Fault = mutants.Fault
    gone = Fault("gone", "pkg/calc.py", "return a - b", "return a + b", ("tests/test_calc.py",), "text gone")
    twice = Fault("twice", "pkg/calc.py", "return a", "return 0", ("tests/test_calc.py",), "ambiguous")
    missing = Fault("missing", "pkg/nowhere.py", "x", "y", ("tests/test_calc.py",), "no such file")
    ready = Fault("ready", "pkg/calc.py", "return a + b", "return a - b", ("tests/test_calc.py",), "ok")
    assert [mutants.status_of(f, project) for f in (gone, twice, missing, ready)] == ["stale"] * 3 + ["ready"]
    assert "not in the file" in mutants.stale_reason(gone, project)
    assert "occurs 3 times" in mutants.stale_reason(twice, project)
    results, problem = mutants.check([gone], project, sys.executable, say=lambda *a: None)
    assert problem == "" and [r.status for r in results] == ["stale"] and not results[0].ok


def test_caught_missed_and_equivalent_faults_are_told_apart(mutants, project, capsys, monkeypatch):
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")  # the little project needs no plugin: faster
    Fault = mutants.Fault
    tests = ("tests/test_calc.py",)
    faults = (
        Fault("caught", "pkg/calc.py", "return a + b", "return a - b", tests, "subtracts"),
        Fault("missed", "pkg/calc.py", "return a * 2", "return a * 3", tests, "untested"),
        Fault("equivalent", "pkg/calc.py", "return a + a", "return 2 * a", tests, "the same",
              equivalent="a + a == 2 * a for numbers"),
    )
    before = {p: p.read_bytes() for p in project.rglob("*") if p.is_file()}
    code = mutants.main(["--python", sys.executable], faults=faults, root=project)
    out = capsys.readouterr().out
    assert {p: p.read_bytes() for p in project.rglob("*") if p.is_file()} == before  # never written
    rows = {line.split("|")[1].strip(): line.split("|")[3].strip() for line in out.splitlines()
            if line.startswith("| ") and not line.startswith("| fault")}
    assert rows == {"caught": "caught", "missed": "**missed**", "equivalent": "equivalent"}
    assert code == 1  # a must-catch fault was missed
    result = mutants.Result
    assert result(faults[0], "caught").ok and result(faults[0], "timeout").ok and result(faults[2], "equivalent").ok
    assert not any(result(faults[0], s).ok for s in ("missed", "stale", "broken", "no tests"))
    assert not result(faults[2], "caught").ok  # an "equivalent" fault that a test catches: the entry is wrong
    with pytest.raises(SystemExit):
        mutants.main(["--only", "nonesuch"], faults=faults, root=project)


def test_every_listed_fault_applies_to_todays_source_and_names_existing_tests(mutants):
    names = [f.name for f in mutants.FAULTS]
    assert len(names) == len(set(names))
    for fault in mutants.FAULTS:
        assert mutants.status_of(fault, ROOT) == "ready", f"{fault.name}: {mutants.stale_reason(fault, ROOT)}"
        for test in fault.tests:
            path, _, name = test.partition("::")
            function = re.sub(r"\[.*\]$", "", name)
            assert (ROOT / path).is_file() and f"def {function}(" in (ROOT / path).read_text(), (fault.name, test)
    equivalent = [f for f in mutants.FAULTS if f.equivalent]
    assert [f.path for f in equivalent] == ["speclib/lm/batched.py"]  # the one documented in CONTRIBUTING.md
    assert "mutants.py" in (ROOT / "CONTRIBUTING.md").read_text()
