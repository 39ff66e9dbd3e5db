"""ex-01-1, wrong: samples from the model's first row instead of its last (the context is lost)."""
import numpy as np

from speclib.core.sampling import sample_token

EXERCISE = "ex-01-1"
HINT = r"which row of the model's output is the distribution of the next token"


def generate(model, prompt, n_new, rng):
    tokens = np.asarray(prompt)
    for _ in range(n_new):
        q = model(tokens)[0]
        tokens = np.append(tokens, sample_token(q, rng))
    return tokens[len(prompt):]
