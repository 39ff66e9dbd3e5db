"""ex-02-1, wrong: drafts each token greedily (argmax) while reporting the row as if sampled."""
import numpy as np

EXERCISE = "ex-02-1"
HINT = r"\*sampled\* from its recorded row"


def propose(draft, prefix, k, rng):
    seq, p_rows = np.asarray(prefix), []
    for _ in range(k):
        p_row = draft(seq)[-1]
        p_rows.append(p_row)
        seq = np.append(seq, int(np.argmax(p_row)))
    return seq[len(prefix):], np.array(p_rows)
