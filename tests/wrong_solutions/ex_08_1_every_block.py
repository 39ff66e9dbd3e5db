"""ex-08-1, wrong: divides by all blocks at every position, not by the blocks that reached it."""
import numpy as np

EXERCISE = "ex-08-1"
HINT = r"which blocks should the denominator count"


def acceptance_by_position(outcomes, k):
    accepted = np.zeros(k)
    for block in outcomes:
        accepted[:len(block)] += block
    return accepted / len(outcomes)
