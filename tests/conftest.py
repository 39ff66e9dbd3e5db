"""Shared fixtures: a second-order pair, whose context reaches past one token, for the exact
checks; and the book built once per test session, for every test that reads its pages."""

import sys
from pathlib import Path

import numpy as np
import pytest

from speclib.book.broken import SecondOrderModel

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="session")
def built_book(tmp_path_factory) -> Path:
    """The full book built with warnings as errors (tools/build_book.py) into a temporary folder:
    its HTML root.  The tests read it and never change it."""
    sys.path.insert(0, str(ROOT / "tools"))
    import build_book

    out = tmp_path_factory.mktemp("book")
    assert build_book.build(ROOT, out) == 0, "the book does not build with warnings as errors"
    return out / "_build" / "html"


@pytest.fixture
def second_order_pair():
    rng = np.random.default_rng(11)
    q = rng.dirichlet(np.full(3, 0.4), size=(3, 3))
    p = rng.dirichlet(np.full(3, 1.0), size=(3, 3))
    return SecondOrderModel(q), SecondOrderModel(p)

