"""ex-09b-1, wrong: the k = 1 formula for every k, and never nan nor clamped to [0, 1]."""
EXERCISE = "ex-09b-1"
HINT = r"no acceptance rate reaches the goal"


def needed_alpha_closed(k, c, r, goal):
    return goal * (k * c + r) - 1.0
