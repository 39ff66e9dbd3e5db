"""Shared fixture: a second-order pair, whose context reaches past one token, for the exact checks."""

import numpy as np
import pytest

from speclib.book.broken import SecondOrderModel


@pytest.fixture
def second_order_pair():
    rng = np.random.default_rng(11)
    q = rng.dirichlet(np.full(3, 0.4), size=(3, 3))
    p = rng.dirichlet(np.full(3, 1.0), size=(3, 3))
    return SecondOrderModel(q), SecondOrderModel(p)

