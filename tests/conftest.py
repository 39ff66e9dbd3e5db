"""Shared fixtures: a second-order pair, whose context reaches past one token, for the exact
checks; and the book built once per test session, for every test that reads its pages."""

import os
import sys
from pathlib import Path

import numpy as np
import pytest

from speclib.book.broken import SecondOrderModel

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="session")
def built_book(tmp_path_factory) -> Path:
    """The full book built with warnings as errors (tools/build_book.py) into a temporary folder:
    its HTML root.  The tests read it and never change it.

    Built once per test run: when the suite runs on several workers (pytest-xdist), the first
    worker that needs it builds it in the folder the workers share, under a lock, and the
    others wait for it and read the same pages."""
    sys.path.insert(0, str(ROOT / "tools"))
    import build_book

    shared = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        shared = shared.parent  # the run's folder, above every worker's own
    out = shared / "built-book"
    with open(shared / "built-book.lock", "a") as lock:
        if os.name != "nt":
            import fcntl

            fcntl.flock(lock.fileno(), fcntl.LOCK_EX)  # released when the file closes
        done = out / "built.ok"
        if not done.exists():
            out.mkdir(exist_ok=True)
            assert build_book.build(ROOT, out) == 0, "the book does not build with warnings as errors"
            done.write_text("ok\n")
    return out / "_build" / "html"


@pytest.fixture(scope="session")
def smollm():
    """SmolLM2-135M-Instruct (speclib.lm.smollm) with its weights as float32, loaded once per worker
    (about two seconds and 540 MB).  Tests never change it: another temperature is a copy."""
    from speclib.lm.smollm import load_smollm2

    return load_smollm2(layout="f32")


@pytest.fixture(autouse=True)
def full_timing_loops(monkeypatch):
    """The unit tests check what the timing functions promise, so they run without the test
    suite's SPECLIB_QUICK (which shortens the chapters' timing cells: speclib._validate)."""
    monkeypatch.delenv("SPECLIB_QUICK", raising=False)


@pytest.fixture
def second_order_pair():
    rng = np.random.default_rng(11)
    q = rng.dirichlet(np.full(3, 0.4), size=(3, 3))
    p = rng.dirichlet(np.full(3, 1.0), size=(3, 3))
    return SecondOrderModel(q), SecondOrderModel(p)



@pytest.fixture
def eagle_state_error():
    """A function ``(other, reference) -> float``: feed two EAGLE drafters of the same weights
    (:class:`speclib.lm.drafters.EagleDrafter`) the same 200 random entries one to five at a
    time, as the loop feeds them after each verification and past the shipped drafter's
    127-entry window, and return the largest difference of their predicted states relative
    to the reference's largest state (at least 1)."""

    def error(other, reference) -> float:
        rng = np.random.default_rng(0)
        d = reference.target.model.config.d_model
        feats = rng.standard_normal((200, d)).astype(np.float32)
        tokens = rng.integers(0, reference.vocab_size, 200)
        worst, j = 0.0, 0
        while j < 200:
            n = 1 + j % 5
            a, b = other._pass(feats[j:j + n], tokens[j:j + n]), reference._pass(feats[j:j + n], tokens[j:j + n])
            worst = max(worst, float(np.abs(a - b).max()) / max(1.0, float(np.abs(b).max())))
            j += n
        return worst

    return error


@pytest.fixture
def record_checks(tmp_path):
    """Two checks every stored record's loader and checker must pass, as functions:
    ``refuses(check, record, mutate, message)`` damages a deep copy of ``record`` with
    ``mutate`` and expects ``check`` to raise a ValueError matching ``message``;
    ``names_bad_files(load, hint)`` expects ``load`` to name a missing file (with ``hint``,
    the script that writes it) and a file that is not JSON."""
    import copy

    def refuses(check, record, mutate, message):
        damaged = copy.deepcopy(record)
        mutate(damaged)
        with pytest.raises(ValueError, match=message):
            check(damaged)

    def names_bad_files(load, hint):
        with pytest.raises(FileNotFoundError, match=hint):
            load(tmp_path / "none.json")
        (tmp_path / "bad.json").write_text("{")
        with pytest.raises(ValueError, match="not JSON"):
            load(tmp_path / "bad.json")

    return refuses, names_bad_files
