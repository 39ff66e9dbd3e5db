"""ex-17-1, wrong: multiplies x by the whole of w at once, the product the blocks are there to avoid."""
import numpy as np

EXERCISE = "ex-17-1"
HINT = r"columns of w at once"


def blocks_product(x, w, width):
    return np.asarray(x) @ w
