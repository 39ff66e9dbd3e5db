"""Shared fixtures: small context-dependent model pairs for exact and statistical checks."""

import numpy as np
import pytest

from speclib.models import MarkovModel, markov_pair


class SecondOrderModel:
    """A model whose next token depends on the last *two* tokens (a table lookup).

    Used so that the exactness checks cover a context that reaches past one token.
    """

    context_length = 2

    def __init__(self, table: np.ndarray) -> None:
        self.table = table  # shape (V, V, V): table[a, b] = distribution after "... a b"
        self.vocab_size = table.shape[-1]

    def __call__(self, tokens):
        tokens = np.asarray(tokens)
        prev = np.concatenate([[0], tokens[:-1]])
        return self.table[prev, tokens]


@pytest.fixture
def small_markov_pair():
    """V = 3 Markov target and a poor draft: acceptance differs strongly by context."""
    return markov_pair(vocab_size=3, draft_noise=0.7, seed=3)


@pytest.fixture
def second_order_pair():
    rng = np.random.default_rng(11)
    q = rng.dirichlet(np.full(3, 0.4), size=(3, 3))
    p = rng.dirichlet(np.full(3, 1.0), size=(3, 3))
    return SecondOrderModel(q), SecondOrderModel(p)


def identity_markov(vocab_size: int) -> MarkovModel:
    return MarkovModel(np.full((vocab_size, vocab_size), 1.0 / vocab_size))
