"""ex-10-3, wrong: believes every call is exact."""
EXERCISE = "ex-10-3"
HINT = r"includes a call whose output does not follow"

exact_calls = {"a", "b", "c", "d"}
