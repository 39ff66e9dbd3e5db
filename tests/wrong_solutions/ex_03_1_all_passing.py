"""ex-03-1, wrong: counts every draft that passes the test, also after the first rejection."""
import numpy as np

EXERCISE = "ex-03-1"
HINT = r"anywhere in the block"


def accepted_prefix(p_x, q_x, u):
    return int(np.sum(u < np.minimum(1.0, q_x / p_x)))
