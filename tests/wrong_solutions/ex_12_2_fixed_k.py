"""ex-12-2, wrong: ignores the acceptance it observes and always drafts 4 tokens."""
EXERCISE = "ex-12-2"
HINT = r"the exercise asks for 1, a first probe"


class FixedFour:
    name = "fixed 4"

    def draft_length(self):
        return 4

    def keep_drafting(self, p, x):
        return True

    def update(self, n_drafted, n_accepted):
        pass


def make_controller(c, window):
    return FixedFour()
