"""ex-07-3, wrong: correlates the sequence with itself (lag 0), which is always 1."""
import numpy as np

EXERCISE = "ex-07-3"
HINT = r"1 only for a sequence compared with itself"


def lag1_autocorrelation(x):
    x = np.asarray(x, dtype=float)
    return float(np.corrcoef(x, x)[0, 1])
