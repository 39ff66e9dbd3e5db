"""ex-08-3, wrong: discounts the counts but gives the freed mass to nobody (the row sums below 1)."""
import numpy as np

EXERCISE = "ex-08-3"
HINT = r"handed to the lower order"


def interpolated_row(counts, lower, discount):
    counts = np.asarray(counts, dtype=float)
    total = counts.sum()
    if total == 0:
        return lower
    return np.maximum(counts - discount, 0) / total
