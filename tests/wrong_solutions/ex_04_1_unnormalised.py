"""ex-04-1, wrong: returns max(0, q - p) without normalising it."""
import numpy as np

EXERCISE = "ex-04-1"
HINT = r"sums to 0\.5000, not 1\. Did you normalise it"


def residual(p, q):
    return np.maximum(np.asarray(q) - np.asarray(p), 0.0)
