"""ex-00-1, wrong: forgets the draw of the bonus or correction token after each step."""
EXERCISE = "ex-00-1"
HINT = r"one for the token that ends the step"


def random_draws(k_per_step, accepted_per_step):
    return sum(k + a + (a < k) for k, a in zip(k_per_step, accepted_per_step))
