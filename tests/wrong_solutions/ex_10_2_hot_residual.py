"""ex-10-2, wrong: the exact rule at temperature T (residual of the warmed rows), not the late one."""
import numpy as np

from speclib.core.warping import warp_distribution

EXERCISE = "ex-10-2"
HINT = r"that is the warped target, what a correct decoder emits"


def late_temperature_first_token(p, q, temperature):
    p_hot = warp_distribution(p, temperature)
    q_hot = warp_distribution(q, temperature)
    kept = np.minimum(p_hot, q_hot)
    residual = np.maximum(q_hot - p_hot, 0.0)
    return kept + residual
