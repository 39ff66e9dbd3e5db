"""ex-03-1, wrong: counts the draft that failed the test as kept (i + 1 at the first rejection)."""
EXERCISE = "ex-03-1"
HINT = r"one too many in every block that has a rejection"


def accepted_prefix(p_x, q_x, u):
    for i in range(len(p_x)):
        if not u[i] < min(1.0, q_x[i] / p_x[i]):
            return i + 1
    return len(p_x)
