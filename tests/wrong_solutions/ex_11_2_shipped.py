"""ex-11-2, wrong: the verifier as shipped, unrepaired."""
from speclib.book.broken import shipped_verify_b as fixed_verify  # noqa: F401

EXERCISE = "ex-11-2"
HINT = r"agree with the n_accepted it reports"
