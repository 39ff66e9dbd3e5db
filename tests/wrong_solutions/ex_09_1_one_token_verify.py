"""ex-09-1, wrong: times the verification pass over one token instead of k + 1."""
import numpy as np

EXERCISE = "ex-09-1"
HINT = r"median of no passes at all"


def costs_from_passes(plain_passes, spec_passes, k):
    def median(log, name, n):
        return np.median([t for who, m, t in log if who == name and m == n])
    t1 = median(plain_passes, "model", 1)
    return median(spec_passes, "draft", 1) / t1, median(spec_passes, "target", 1) / t1
