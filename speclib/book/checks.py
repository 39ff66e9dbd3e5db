"""Self-checks for the book's exercises.

A check takes the student's function (or answer), runs it on cases whose right answer
speclib knows, and raises ``ExerciseError`` with a message that says *what* is wrong
(shape, a value off on which input, a distribution that drifts) without printing the
solution.  On success it prints a short confirmation.
"""

from __future__ import annotations


#: Width of a self-check's message lines: an output box in the book's column holds about 68
#: characters of code font in a 1200-pixel window with both sidebars shown (the narrowest
#: column of the wide layout; 82 at 1000 pixels, where the sidebar folds away, 88 at 1400).
MESSAGE_WIDTH = 66

_OPENING, _CLOSING = "([{", ")]}"


def _units(paragraph: str, width: int) -> list[str]:
    """The paragraph's words, with a bracketed or backquoted expression kept as one unit."""
    units: list[str] = []
    depth, in_code = 0, False
    for word in paragraph.split(" "):
        if units and (depth > 0 or in_code):
            units[-1] += " " + word
        else:
            units.append(word)
        for ch in word:
            if ch == "`":
                in_code = not in_code
            elif ch in _OPENING:
                depth += 1
            elif ch in _CLOSING:
                depth = max(depth - 1, 0)
    # An expression that never closes, or that no line could hold, falls back to plain words.
    out: list[str] = []
    for i, unit in enumerate(units):
        unclosed = i == len(units) - 1 and (depth > 0 or in_code)
        out += unit.split(" ") if len(unit) > width or unclosed else [unit]
    # An equation stays on one line: "k = 4", "alpha <= 1".
    joined: list[str] = []
    for unit in out:
        if joined and (unit in ("=", "==", "<=", ">=", "<", ">") or joined[-1].endswith(("=", "<", ">"))):
            joined[-1] += " " + unit
        else:
            joined.append(unit)
    return joined


def wrap_message(text: str, width: int = MESSAGE_WIDTH) -> str:
    """``text`` in lines of at most ``width`` characters, broken at sensible places.

    A line never breaks inside brackets or backquotes (an expression such as
    ``[[1, 0], [1, 1]]`` stays whole) or inside an equation such as ``k = 4``; a clause
    (ending with ``.``, ``:``, ``;``, ``?`` or ``!``) that does not fit on a line already
    half full starts the next line rather than being split.  Existing line breaks are
    kept; a unit longer than ``width`` (a long name) stays whole on its own line.

    Examples
    --------
    >>> print(wrap_message("for outcomes [[1, 1, 1], [1, 0]] and k = 3: wrong.", width=30))
    for outcomes
    [[1, 1, 1], [1, 0]] and k = 3:
    wrong.
    """
    if not isinstance(text, str):
        raise TypeError(f"text: expected a string, got {type(text).__name__}")
    lines: list[str] = []
    for paragraph in text.split("\n"):
        clauses: list[list[str]] = [[]]
        for unit in _units(paragraph, width):
            if unit:
                clauses[-1].append(unit)
                if unit[-1] in ".:;?!":
                    clauses.append([])
        line = ""
        for clause in (c for c in clauses if c):
            whole = " ".join(clause)
            if not line or len(line) + 1 + len(whole) <= width:
                if len(line) + 1 + len(whole) <= width or (not line and len(whole) <= width):
                    line = f"{line} {whole}" if line else whole
                    continue
            elif len(whole) <= width and len(line) >= width // 2:
                lines.append(line)
                line = whole
                continue
            for unit in clause:  # the clause cannot stay whole: fill the lines unit by unit
                if line and len(line) + 1 + len(unit) > width:
                    lines.append(line)
                    line = unit
                else:
                    line = f"{line} {unit}" if line else unit
        lines.append(line)
    return "\n".join(lines)


class ExerciseError(AssertionError):
    """Raised by a self-check, with a hint that does not give the answer away."""

    def _render_traceback_(self) -> list[str]:
        # IPython (and so Jupyter and the rendered book) shows these lines instead of the
        # traceback: the hint alone, without the check's own code, which would list its test
        # cases and the reference function it compares the student's answer with.  Wrapped
        # at sensible places, because an error box in the book's column holds short lines.
        text = wrap_message(f"ExerciseError: {self}")
        return ["\x1b[0;31mExerciseError\x1b[0m" + text[len("ExerciseError"):]]


def passed(message: str = "All checks passed.") -> None:
    """Print the confirmation a student sees when a check succeeds (wrapped like a hint)."""
    if not isinstance(message, str):
        raise TypeError(f"message: expected a string, got {type(message).__name__}")
    print(wrap_message(f"\u2714 {message}"))


def _parse_signature(signature: str) -> tuple[str, list[str], list[str]]:
    """``"f(a, b, *, c=1)"`` -> ``("f", ["a", "b"], ["c"])``: the name, positional and keyword parameters."""
    name, _, inside = signature.partition("(")
    positional, keywords, after_star = [], [], False
    for part in (p.strip() for p in inside.rstrip(")").split(",") if p.strip()):
        if part == "*":
            after_star = True
        elif after_star:
            keywords.append(part.split("=")[0].strip())
        elif "=" not in part:
            positional.append(part)
    return name.strip(), positional, keywords


def expect_function(fn, signature: str, check: str = "this check") -> None:
    """Refuse, with a hint, a student's answer that is not a function callable as ``signature``.

    ``signature`` is how the check calls the function, e.g. ``"speedup(alpha, k, c)"`` or
    ``"verify(draft_tokens, p_draft, q_target, rng, *, bonus=True)"`` (keywords after ``*``).
    A value instead of a function (the result of calling it, say) and a function whose
    parameters cannot receive those arguments are both told what ``check`` expected.

    Examples
    --------
    >>> expect_function(lambda alpha, k: 1.0, "speedup(alpha, k, c)", "check_speedup")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    speclib.book.checks.ExerciseError: check_speedup calls your function as speedup(alpha, k, c), ...
    """
    import inspect

    name, positional, keywords = _parse_signature(signature)
    if not callable(fn):
        raise ExerciseError(
            f"{check} expected a function {signature}, but was given {_describe(fn)}. Pass the "
            f"function itself, without calling it: {check}({name}), not {check}({name}(...))."
        )
    try:
        found = inspect.signature(fn)
    except (TypeError, ValueError):  # a builtin or extension function: nothing to read
        return
    try:
        found.bind(*positional, **{k: None for k in keywords})
    except TypeError:
        own = getattr(fn, "__name__", name)
        wanted = ", ".join(positional + (["*"] + [f"{k}=..." for k in keywords] if keywords else []))
        raise ExerciseError(
            f"{check} calls your function as {signature}, with {len(positional)} argument"
            f"{'s' if len(positional) != 1 else ''}{' and ' + ', '.join(keywords) + ' by keyword' if keywords else ''}, "
            f"but it is defined as {own}{found}. Give it the parameters ({wanted})."
        ) from None


def _expects(signature: str):
    """Decorate a check whose first argument is the student's function, called as ``signature``:
    :func:`expect_function` runs before the check does."""
    import functools

    def decorate(check):
        @functools.wraps(check)
        def run(fn, *args, **kwargs):
            expect_function(fn, signature, check.__name__)
            return check(fn, *args, **kwargs)

        run.expected_signature = signature
        return run

    return decorate


def call_student(fn, *args, **kwargs):
    """Call the student's function; a stub that is not done yet gets a friendly message."""
    try:
        return fn(*args, **kwargs)
    except NotImplementedError:
        name = getattr(fn, "__name__", "your function")
        raise ExerciseError(f"{name} still raises NotImplementedError: complete the stub, then run this check again.") from None


# --- Chapter 0: overview -------------------------------------------------------------------

@_expects("tokens_per_pass(tokens_per_step)")
def check_tokens_per_pass(tokens_per_pass) -> None:
    """Exercise ex-00-1: ``tokens_per_pass(tokens_per_step)`` from per-step token counts."""
    cases = [([5, 5, 5], 5.0), ([1], 1.0), ([3, 1, 2, 2], 2.0), ([5, 2, 1, 4, 3], 3.0)]
    for steps, want in cases:
        got = _as_float_or_fail(call_student(tokens_per_pass, list(steps)), f"for {steps}")
        if not abs(got - want) <= 1e-12:
            raise ExerciseError(
                f"for per-step counts {steps} you returned {got:g}. Each entry is one target pass; "
                "what is the total number of tokens, and how many passes produced them?"
            )
    passed("tokens_per_pass agrees with GenerationStats.tokens_per_target_pass on every case.")


class _CountingRandom:
    """A generator stand-in that counts the uniform numbers drawn from it."""

    def __init__(self, seed: int) -> None:
        import numpy as np

        self.rng, self.calls = np.random.default_rng(seed), 0

    def random(self) -> float:
        self.calls += 1
        return self.rng.random()


@_expects("random_draws(k_per_step, accepted_per_step)")
def check_random_draws(random_draws) -> None:
    """Exercise ex-00-1: how many uniform numbers a speculative run draws, from its per-step record.

    The reference is counted, not computed: the one-page algorithm of
    :mod:`speclib.core.minimal` runs with a generator that counts its draws, and the library's
    loop, given the same seed, supplies the per-step record (it draws in the same order).
    """
    from ..core.decoding import speculative_generate
    from ..core.minimal import _speculative_sample
    from ..lm.models import markov_pair

    for seed, k, n, noise in [(0, 4, 30, 0.3), (1, 1, 12, 0.6), (2, 3, 25, 0.05), (3, 6, 17, 0.9)]:
        target, draft = markov_pair(vocab_size=10, draft_noise=noise, seed=seed)
        counter = _CountingRandom(seed)
        _speculative_sample(target, draft, [0], n, k, counter)
        _, stats = speculative_generate(target, draft, [0], n, k=k, rng=seed)
        record = (list(stats.k_per_step), list(stats.accepted_per_step))
        got = _as_float_or_fail(call_student(random_draws, *record), f"for k = {k}")
        if got != counter.calls:
            raise ExerciseError(
                f"k = {k}, {n} tokens, draft noise {noise}: the run drew {counter.calls} uniform numbers "
                f"and you counted {got:g} (k_per_step = {record[0]}, accepted_per_step = {record[1]}). "
                "Per step: one per drafted token, one per acceptance test actually made (does the "
                "step test the drafts after a rejection?), and one for the token that ends the step."
            )
    passed("random_draws counts every uniform number the run drew, on every case tried.")


# --- Chapters 4-6: correction, bonus token, theory

def _call_numeric(fn, where: str, *args):
    """Call the student's function; a division by zero gets a hint instead of a traceback."""
    try:
        return call_student(fn, *args)
    except ZeroDivisionError:
        raise ExerciseError(f"{where}: your function divided by zero. Can the formula be written "
                            "without dividing by 1 - alpha?") from None


def _describe(value) -> str:
    """What a student's answer is, in a few words: ``None (did you forget return?)``, ``a string``..."""
    import numpy as np

    if value is None:
        return "None (is a return statement missing?)"
    if isinstance(value, (bool, np.bool_)):
        return f"{value!r}, a truth value"
    if isinstance(value, (str, bytes)):
        return f"{value!r}, a string"
    try:
        is_complex = isinstance(value, complex) or np.iscomplexobj(value)
    except Exception:  # noqa: BLE001 (ragged lists and other things numpy cannot read)
        is_complex = False
    if is_complex:
        return f"{value!r}, complex"
    text = repr(value)
    return (text if len(text) <= 60 else text[:57] + "...") + f" (a {type(value).__name__})"


def _as_float_or_fail(value, where: str) -> float:
    """The student's answer as a finite float, or an ExerciseError saying what it is instead.

    A single real number is expected: a truth value, a string (even "2.0"), a complex number,
    an array, None or a dict are refused, and so are NaN and infinity (which would compare
    false with every right answer).
    """
    import math
    import numbers

    import numpy as np

    if isinstance(value, np.ndarray) and value.ndim == 0:
        value = value[()]
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        raise ExerciseError(f"{where}: your function returned {_describe(value)}, not a number "
                            "(one real number is expected)")
    value = float(value)
    if not math.isfinite(value):
        raise ExerciseError(f"{where}: your function returned {value}, expected a finite number. "
                            "A division by zero somewhere, or 0 / 0?")
    return value


def _numbers_or_fail(value, where: str, what: str = "an array of numbers"):
    """The student's answer as a float array, refusing strings, complex numbers, None and objects."""
    import numpy as np

    try:
        arr = np.asarray(value)
    except Exception:  # noqa: BLE001 (anything a student returns, e.g. ragged lists)
        arr = None
    if arr is None or arr.dtype.kind not in "biuf":
        raise ExerciseError(f"{where}: your function returned {_describe(value)}, not {what}")
    return arr.astype(float)


@_expects("residual(p, q)")
def check_residual(residual) -> None:
    """Exercise ex-04-1: ``residual(p, q)``, the correction distribution ``max(0, q - p)/Z``."""
    import numpy as np

    from ..core.sampling import residual_distribution

    cases = [
        ([0.5, 0.5, 0.0], [0.25, 0.25, 0.5]),
        ([0.6, 0.3, 0.1], [0.2, 0.3, 0.5]),
        ([0.1, 0.2, 0.3, 0.4], [0.4, 0.3, 0.2, 0.1]),
        ([0.7, 0.1, 0.1, 0.1], [0.1, 0.2, 0.3, 0.4]),
    ]
    for p, q in cases:
        where = f"p = {p}, q = {q}"
        got = _numbers_or_fail(call_student(residual, np.array(p), np.array(q)), where)
        if got.shape != (len(q),):
            raise ExerciseError(f"{where}: expected one probability per token, shape ({len(q)},), got {got.shape}")
        if not np.all(np.isfinite(got)):
            raise ExerciseError(f"{where}: your residual contains NaN or inf")
        if (got < -1e-12).any():
            raise ExerciseError(f"{where}: your residual has a negative entry; probabilities cannot be negative")
        if abs(got.sum() - 1.0) > 1e-9:
            raise ExerciseError(f"{where}: your residual sums to {got.sum():.4f}, not 1. Did you normalise it?")
        covered = np.array(p) >= np.array(q)
        if (got[covered] > 1e-12).any():
            raise ExerciseError(
                f"{where}: your residual puts mass on a token where p >= q. Accepted drafts already "
                "deliver all of q there; the residual must leave such tokens alone."
            )
        if not np.allclose(got, residual_distribution(p, q), atol=1e-9):
            raise ExerciseError(f"{where}: right support, but the proportions between tokens are off")
    passed("residual matches max(0, q - p) / Z on every case.")


@_expects("expected_tokens(alpha, k)")
def check_expected_tokens_without_bonus(expected_tokens) -> None:
    """Exercise ex-05-1: ``expected_tokens(alpha, k)``, tokens per target pass with the bonus off."""
    from .bonus import expected_tokens_per_pass_without_bonus
    from ..core.theory import expected_tokens_per_pass

    for alpha in (0.0, 0.3, 0.5, 0.8, 0.95, 1.0):
        for k in (1, 2, 4, 7):
            where = f"alpha = {alpha}, k = {k}"
            got = _as_float_or_fail(_call_numeric(expected_tokens, where, alpha, k), where)
            want = expected_tokens_per_pass_without_bonus(alpha, k)
            if abs(got - want) <= 1e-9:
                continue
            if abs(got - expected_tokens_per_pass(alpha, k)) <= 1e-9:
                raise ExerciseError(f"alpha = {alpha}, k = {k}: that is the figure *with* the bonus token. "
                                    "Which step loses a token when the bonus is off, and how likely is it?")
            if alpha == 0.0:
                hint = "at alpha = 0 every draft is rejected: how many tokens does one step emit?"
            elif alpha == 1.0:
                hint = "at alpha = 1 every draft is kept and no bonus is added: how many tokens is that?"
            else:
                hint = (f"that is too {'high' if got > want else 'low'}. Position i + 1 of a step is "
                        "reached only when the first i drafts were all kept.")
            raise ExerciseError(f"alpha = {alpha}, k = {k}: you returned {got:.4f}; {hint}")
    passed("expected tokens per pass without the bonus are right for every alpha and k tried.")


@_expects("speedup(alpha, k, c)")
def check_speedup(speedup) -> None:
    """Exercise ex-06-1: ``speedup(alpha, k, c)``, the expected speed-up in target passes."""
    from ..core.theory import expected_tokens_per_pass, speedup_in_passes

    for alpha in (0.0, 0.5, 0.8, 1.0):
        for k in (1, 3, 8):
            for c in (0.0, 0.05, 0.5):
                where = f"alpha = {alpha}, k = {k}, c = {c}"
                got = _as_float_or_fail(_call_numeric(speedup, where, alpha, k, c), where)
                want = speedup_in_passes(alpha, k, c)
                if abs(got - want) <= 1e-9 * max(1.0, want):
                    continue
                if abs(got - expected_tokens_per_pass(alpha, k)) <= 1e-9 and c > 0:
                    raise ExerciseError(f"alpha = {alpha}, k = {k}, c = {c}: you returned the tokens per pass; "
                                        "what does one step cost, counting the draft passes?")
                raise ExerciseError(f"alpha = {alpha}, k = {k}, c = {c}: you returned {got:.4f}, which is off. "
                                    "Tokens per step divided by the cost of a step, in target passes.")
    passed("speedup agrees with speedup_in_passes on every (alpha, k, c) tried.")


# --- The reference article, revisited

@_expects("counter_limit(alpha, k)")
def check_counter_limit(counter_limit) -> None:
    """Exercise ex-07-1: ``counter_limit(alpha, k)``, what accepted / proposed tends to."""
    from .article_figures import accepted_per_proposed

    for alpha in (0.0, 0.3, 0.841, 0.9, 1.0):
        for k in (1, 2, 4, 16):
            where = f"alpha = {alpha}, k = {k}"
            got = _as_float_or_fail(_call_numeric(counter_limit, where, alpha, k), where)
            want = accepted_per_proposed(alpha, k)
            if abs(got - want) <= 1e-9:
                continue
            if abs(got - alpha) <= 1e-9:
                hint = ("that is alpha itself, what accepted / verified tends to. The counter divides by all k "
                        "drafts proposed, the ones thrown away unjudged included.")
            elif abs(got - k * want) <= 1e-9:
                hint = "that is the expected number of drafts a step keeps; the counter divides it by k."
            else:
                hint = (f"that is too {'high' if got > want else 'low'}. A step keeps at least j drafts "
                        "with probability alpha**j, for j = 1 .. k.")
            raise ExerciseError(f"{where}: you returned {got:.4f}; {hint}")
    passed("counter_limit agrees with article_figures.accepted_per_proposed for every alpha and k tried.")


# --- Chapters 1-3: why decoding is slow, drafting, verification

def _token_array(value, where: str):
    import numpy as np

    try:
        arr = np.asarray(value)
    except Exception:  # noqa: BLE001 (anything a student returns)
        raise ExerciseError(f"{where}: your function returned {_describe(value)}, not an array of token "
                            "ids") from None
    if arr.ndim != 1 or not (arr.size == 0 or np.issubdtype(arr.dtype, np.integer)):
        raise ExerciseError(f"{where}: expected a 1-D array of integer token ids, got "
                            f"{'shape ' + str(arr.shape) if arr.ndim != 1 else 'dtype ' + str(arr.dtype)}")
    return arr


@_expects("generate(model, prompt, n_new, rng)")
def check_autoregressive_loop(generate) -> None:
    """Exercise ex-01-1: ``generate(model, prompt, n_new, rng)``, plain decoding with one pass per token.

    Compared with :func:`speclib.core.decoding.autoregressive_generate` token for token (both
    use :func:`speclib.core.sampling.sample_token` with the same seed), and the model is
    counted: exactly ``n_new`` calls.
    """
    import numpy as np

    from ..core.cost import CountingModel
    from ..core.decoding import autoregressive_generate
    from ..lm.models import MarkovModel, markov_pair

    target, _ = markov_pair(vocab_size=6, seed=4)

    class _FullContext(MarkovModel):  # reads the whole prefix, as a transformer does
        context_length = None

    for model in (target, _FullContext(target.transition)):
        for seed, prompt, n_new in [(0, [1], 8), (3, [2, 5, 0], 12), (9, [4], 1), (5, [3], 0)]:
            where = f"seed {seed}, prompt {prompt}, n_new {n_new}"
            counted = CountingModel(model)
            got = _token_array(call_student(generate, counted, np.array(prompt), n_new,
                                            np.random.default_rng(seed)), where)
            want, _ = autoregressive_generate(model, prompt, n_new, rng=seed)
            if got.size == len(prompt) + n_new and np.array_equal(got[: len(prompt)], prompt):
                raise ExerciseError(f"{where}: return only the new tokens, not the prompt in front of them")
            if got.size != n_new:
                raise ExerciseError(f"{where}: expected {n_new} new tokens, got {got.size}")
            if counted.calls != n_new:
                raise ExerciseError(f"{where}: the model was called {counted.calls} times for {n_new} tokens; "
                                    "plain decoding makes exactly one forward pass per new token")
            if not np.array_equal(got, want):
                i = int(np.argmax(got != want))
                raise ExerciseError(
                    f"{where}: token {i} differs from the target's own sampling. Draw each token with "
                    "sample_token(row, rng): which row of the model's output is the distribution of the "
                    "next token, and does the sequence you pass in include the tokens generated so far?")
    passed("one forward pass per token, and the same tokens as autoregressive_generate.")


@_expects("propose(draft, prefix, k, rng)")
def check_draft_proposal(propose) -> None:
    """Exercise ex-02-1: ``propose(draft, prefix, k, rng)`` returns ``(tokens, p_rows)``.

    Three checks: the shapes; that row ``i`` is the draft's distribution given the prefix
    and the first ``i`` drafted tokens; and, over 3000 seeded runs, that the drafted tokens
    are really *sampled* from the recorded rows: the total-variation distance between the
    empirical frequencies of the first two drafted tokens and the average recorded rows
    must be below 0.06 (a correct sampler stays near 0.02 here).
    """
    import numpy as np

    from ..lm.models import markov_pair

    _, draft = markov_pair(vocab_size=5, draft_noise=0.3, seed=2)
    for seed, prefix, k in [(0, [1], 3), (4, [0, 3], 5), (8, [2], 1)]:
        where = f"seed {seed}, prefix {prefix}, k {k}"
        out = call_student(propose, draft, np.array(prefix), k, np.random.default_rng(seed))
        if not isinstance(out, tuple) or len(out) != 2:
            raise ExerciseError(f"{where}: return a pair (tokens, p_rows), got {type(out).__name__}")
        tokens = _token_array(out[0], where)
        p_rows = _numbers_or_fail(out[1], where, "p_rows, an array of probability rows")
        if tokens.shape != (k,):
            raise ExerciseError(f"{where}: expected {k} drafted tokens, got {tokens.size}")
        if p_rows.shape != (k, draft.vocab_size):
            raise ExerciseError(f"{where}: p_rows should have one row per drafted token, shape "
                                f"({k}, {draft.vocab_size}); got {p_rows.shape}")
        seq = np.concatenate([prefix, tokens])
        want = draft(seq)[len(prefix) - 1: len(prefix) - 1 + k]
        for i in range(k):
            if not np.allclose(p_rows[i], want[i]):
                raise ExerciseError(
                    f"{where}: row {i} is not the draft's distribution for the token at draft position {i}. "
                    "Record the row *before* you append the token sampled from it.")
    # Sampled, not chosen: compare frequencies with the recorded rows.
    runs, vocab = 3000, draft.vocab_size
    counts, expected = np.zeros((2, vocab)), np.zeros((2, vocab))
    for seed in range(runs):
        tokens, p_rows = call_student(propose, draft, np.array([0]), 2, np.random.default_rng(10_000 + seed))
        tokens, p_rows = np.asarray(tokens), np.asarray(p_rows, dtype=float)
        for i in range(2):
            counts[i, int(tokens[i])] += 1
            expected[i] += p_rows[i]
    tv = 0.5 * np.abs(counts / runs - expected / runs).sum(axis=1).max()
    if tv > 0.06:
        raise ExerciseError(
            f"over {runs} runs the drafted tokens do not follow the recorded rows (total-variation distance "
            f"{tv:.3f} > 0.06). Verification assumes each token was *sampled* from its recorded row: is the "
            "draft picking tokens some other way?")
    passed("rows are the draft's distributions, and the tokens are sampled from them.")


def _accepted_prefix_rules():
    """The rule of ex-03-1 and the mistakes a student's answer is told apart from: name -> rule."""
    import numpy as np

    def walk(p_x, q_x, u, keep, after_rejection):
        for i in range(len(p_x)):
            if not keep(u[i], q_x[i], p_x[i]):
                return after_rejection(i)
        return len(p_x)

    strict = lambda u, q, p: u < min(1.0, q / p)  # noqa: E731
    return {
        "right": lambda p, q, u: walk(p, q, u, strict, lambda i: i),
        # counts the draft that failed the test as kept (returns i + 1 at the first rejection)
        "rejected counted": lambda p, q, u: walk(p, q, u, strict, lambda i: i + 1),
        # counts every draft that passes the test, also after the first rejection
        "all passing": lambda p, q, u: int(np.sum(u < np.minimum(1.0, q / p))),
        # keeps a draft whose u equals its acceptance probability
        "u equal kept": lambda p, q, u: walk(p, q, u, lambda u_, q_, p_: u_ <= min(1.0, q_ / p_), lambda i: i),
        # the ratio upside down: p / q
        "upside down": lambda p, q, u: walk(p, q, u, lambda u_, q_, p_: u_ < min(1.0, p_ / q_), lambda i: i),
    }


_ACCEPTED_PREFIX_HINTS = {
    "rejected counted": "Your count is one too many in every block that has a rejection: the draft that "
                        "fails the test is counted as kept. What becomes of the rejected draft?",
    "all passing": "Your function counts the drafts that pass the test anywhere in the block. What "
                   "happens to the drafts after the first rejection?",
    "u equal kept": "Your function keeps a draft whose u equals its acceptance probability. Look at the "
                    "comparison when the two are equal: is that draft kept?",
    "upside down": "Your function keeps what an upside-down ratio would keep. Check the acceptance "
                   "probability: which probability goes on top of the ratio?",
}


@_expects("accepted_prefix(p_x, q_x, u)")
def check_accepted_prefix(accepted_prefix) -> None:
    """Exercise ex-03-1: ``accepted_prefix(p_x, q_x, u)``, how many drafts verification keeps.

    ``p_x[i]``, ``q_x[i]`` are the draft and target probabilities of draft ``i`` and ``u[i]``
    the uniform drawn for it; the answer is compared with the rule of
    :func:`speclib.core.sampling.verify` on hand-made and random cases.  A wrong answer is
    matched against the usual mistakes (the rejected draft counted, every passing draft
    counted, a tie kept, the ratio upside down) on every case, so the hint names the one the
    student made.
    """
    import numpy as np

    rng = np.random.default_rng(3)
    cases = [
        ([0.2, 0.2, 0.2], [0.3, 0.4, 0.5], [0.9, 0.99, 0.5]),  # q >= p: always kept
        ([0.5, 0.5, 0.5], [0.1, 0.4, 0.5], [0.15, 0.3, 0.1]),  # the first ratio is 0.2
        ([0.4, 0.4, 0.4], [0.2, 0.2, 0.2], [0.1, 0.7, 0.1]),  # rejected at 2, the third would pass
        ([0.4, 0.2], [0.2, 0.1], [0.5, 0.1]),  # u equal to the ratio is a rejection
        ([0.25], [0.05], [0.1]),  # ratio 0.2: rejected
    ]
    for _ in range(40):
        p = rng.uniform(0.01, 0.6, 6)
        cases.append((p, np.clip(p * rng.uniform(0.2, 1.6, 6), 0, 1), rng.random(6)))
    rules = _accepted_prefix_rules()
    answers, first_wrong = [], None
    for p_x, q_x, u in cases:
        p_x, q_x, u = (np.asarray(a, dtype=float) for a in (p_x, q_x, u))
        got = call_student(accepted_prefix, p_x.copy(), q_x.copy(), u.copy())
        if isinstance(got, (bool, np.bool_)) or not isinstance(got, (int, np.integer)):
            raise ExerciseError(f"return the number of accepted drafts as an int, got {_describe(got)}")
        answers.append(int(got))
        if first_wrong is None and got != rules["right"](p_x, q_x, u):
            first_wrong = len(answers) - 1
    if first_wrong is None:
        passed("accepted_prefix keeps the same drafts as speclib.core.sampling.verify on every case.")
        return
    p_x, q_x, u = (np.asarray(a, dtype=float) for a in cases[first_wrong])
    got, want = answers[first_wrong], rules["right"](p_x, q_x, u)
    where = (f"p(x) = {np.round(p_x, 3).tolist()}, q(x) = {np.round(q_x, 3).tolist()}, "
             f"u = {np.round(u, 3).tolist()}")
    for name, hint in _ACCEPTED_PREFIX_HINTS.items():
        rule = rules[name]
        if all(a == rule(*(np.asarray(x, dtype=float) for x in case)) for a, case in zip(answers, cases)):
            raise ExerciseError(f"{where}: you returned {got}, verification keeps {want}. {hint}")
    raise ExerciseError(f"{where}: you returned {got}, verification keeps {want}. Follow the block draft "
                        "by draft with this chapter's acceptance test; where does the count stop?")


# --- Chapter 8: real text
# The reference answers live in helpers away from the checks, so that the traceback a student
# sees when a check fails never shows them.

def _rates_or_fail(value, k: int, where: str, what: str = "one rate per draft position"):
    import numpy as np

    arr = _numbers_or_fail(value, where, f"an array of numbers ({what})")
    if arr.shape != (k,):
        raise ExerciseError(f"{where}: expected {what}, shape ({k},), got shape {arr.shape}")
    return arr


def _by_position_reference(outcomes, k: int):
    import numpy as np

    accepted, judged = np.zeros(k), np.zeros(k)
    for block in outcomes:
        accepted[: len(block)] += block
        judged[: len(block)] += 1
    with np.errstate(invalid="ignore", divide="ignore"):
        return accepted / judged, judged > 0


_BY_POSITION_CASES = [
    ([[1, 1, 1], [1, 0], [0]], 3),
    ([[0], [0], [1, 1], [1, 0]], 2),
    ([[1, 0], [1, 1, 1, 1], [0], [1, 1, 0]], 4),
    ([[0], [0]], 3),
]


@_expects("acceptance_by_position(outcomes, k)")
def check_acceptance_by_position(acceptance_by_position) -> None:
    """Exercise ex-08-1: ``acceptance_by_position(outcomes, k)`` from per-block accept/reject outcomes."""
    import numpy as np

    for outcomes, k in _BY_POSITION_CASES:
        where = f"for outcomes {outcomes} and k = {k}"
        got = _rates_or_fail(call_student(acceptance_by_position, [list(b) for b in outcomes], k), k, where)
        want, reached = _by_position_reference(outcomes, k)
        if np.isnan(got[reached]).any():
            raise ExerciseError(f"{where}: you returned NaN at a position some block reached.")
        if not np.all(np.isnan(got[~reached])):
            raise ExerciseError(f"{where}: no block reached position(s) {list(np.flatnonzero(~reached) + 1)}; "
                                "a rate there is undefined (return NaN).")
        if not np.allclose(got[reached], want[reached]):
            bad = int(np.flatnonzero(~np.isclose(got, want) & reached)[0]) + 1
            raise ExerciseError(f"{where}: the rate at position {bad} is {got[bad - 1]:.4g}, which is wrong. "
                                "A draft at position j is judged only if the drafts before it were accepted: "
                                "which blocks should the denominator count?")
    passed("acceptance_by_position agrees with speclib.book.render.acceptance_by_position on every case.")


def _interpolated_row_reference(counts, lower, discount: float):
    import numpy as np

    total = counts.sum()
    if total == 0:
        return lower
    return (np.maximum(counts - discount, 0) + discount * np.count_nonzero(counts) * lower) / total


def _interpolated_row_cases():
    import numpy as np

    return [
        (np.array([3.0, 1.0, 0.0, 0.0]), np.array([0.1, 0.2, 0.3, 0.4]), 0.5),
        (np.array([0.0, 5.0, 0.0]), np.array([1 / 3] * 3), 0.75),
        (np.array([2.0, 2.0, 1.0, 0.0, 0.0]), np.array([0.2] * 5), 0.3),
        (np.array([0.0, 0.0, 0.0]), np.array([0.5, 0.25, 0.25]), 0.5),
    ]


@_expects("interpolated_row(counts, lower, discount)")
def check_interpolated_row(interpolated_row) -> None:
    """Exercise ex-08-3: ``interpolated_row(counts, lower, discount)``, absolute discounting done right."""
    import numpy as np

    for counts, lower, d in _interpolated_row_cases():
        where = f"for counts {counts.tolist()}, lower {np.round(lower, 3).tolist()}, discount {d}"
        got = _rates_or_fail(call_student(interpolated_row, counts.copy(), lower.copy(), d), counts.size, where,
                             "one probability per token")
        want = _interpolated_row_reference(counts, lower, d)
        if not np.isfinite(got).all():
            raise ExerciseError(f"{where}: your row contains NaN or infinity. What should a context "
                                "that was never seen predict?")
        if abs(got.sum() - 1) > 1e-9:
            raise ExerciseError(f"{where}: your row sums to {got.sum():.6g}, not 1. How much mass does the "
                                "discount remove in total, and is exactly that much handed to the lower order?")
        if (got <= 0).any():
            raise ExerciseError(f"{where}: your row gives probability 0 to a token. Speculative decoding "
                                "divides by draft probabilities; the lower-order row must reach every token.")
        if not np.allclose(got, want):
            raise ExerciseError(f"{where}: the row sums to 1 and has no zeros, but its values are off. "
                                "Check the weight that multiplies the lower-order row.")
    passed("interpolated_row matches interpolated absolute discounting on every case.")


# --- Chapters 10-11: sampling controls, the bug zoo

def _row_or_fail(value, size: int, where: str):
    import numpy as np

    row = _numbers_or_fail(value, where, "an array of probabilities")
    if row.shape != (size,):
        raise ExerciseError(f"{where}: expected a row of shape ({size},), got shape {row.shape}")
    if not np.isfinite(row).all():
        raise ExerciseError(f"{where}: your row contains NaN or infinity")
    return row


@_expects("top_p_row(q, top_p)")
def check_top_p_row(top_p_row) -> None:
    """Exercise ex-10-1: ``top_p_row(q, top_p)``, nucleus filtering of one row."""
    import numpy as np

    from ..core.warping import warp_distribution

    cases = [
        ([0.5, 0.3, 0.2], 0.8), ([0.5, 0.3, 0.2], 0.81), ([0.5, 0.3, 0.2], 0.4), ([0.1, 0.2, 0.3, 0.4], 0.6),
        ([0.25, 0.25, 0.25, 0.25], 0.6), ([0.0, 0.7, 0.0, 0.3], 1.0), ([0.2, 0.5, 0.3], 0.5),
    ]
    for q, top_p in cases:
        q = np.array(q)
        where = f"for q = {q.tolist()} and top_p = {top_p}"
        got = _row_or_fail(call_student(top_p_row, q.copy(), top_p), q.size, where)
        want = warp_distribution(q, top_p=top_p)
        if (got < 0).any() or abs(got.sum() - 1) > 1e-9:
            raise ExerciseError(f"{where}: your row is not a distribution (it sums to {got.sum():.6g}). "
                                "Did you renormalise the tokens you kept?")
        kept, want_kept = np.count_nonzero(got), np.count_nonzero(want)
        if kept != want_kept:
            more = "more" if kept > want_kept else "fewer"
            raise ExerciseError(f"{where}: you kept {kept} tokens, {more} than the nucleus holds. The nucleus is "
                                "the smallest set of most likely tokens whose mass reaches top_p.")
        if not np.allclose(got, want, atol=1e-12):
            raise ExerciseError(f"{where}: you kept the right number of tokens but not the right ones or "
                                "not in the right proportions. Among equally likely tokens, keep the lower id.")
    passed("top_p_row agrees with speclib.core.warping.warp_distribution(q, top_p=...) on every case.")


def _late_temperature_reference(p, q, temperature: float):
    """First token of a k = 1 step that verifies warped rows but warps the *raw* residual."""
    import numpy as np

    from ..core.warping import warp_distribution

    p_hot, q_hot = warp_distribution(p, temperature), warp_distribution(q, temperature)
    kept = np.minimum(p_hot, q_hot)
    raw_residual = np.maximum(q - p, 0.0)
    late = warp_distribution(raw_residual / raw_residual.sum(), temperature)
    return kept + (1.0 - kept.sum()) * late


@_expects("late_temperature_first_token(p, q, temperature)")
def check_late_temperature_first_token(late_temperature_first_token) -> None:
    """Exercise ex-10-2: ``late_temperature_first_token(p, q, temperature)``.

    The decoder verifies with the warped rows but computes the residual from the raw rows
    and applies the temperature to it afterwards.  The reference is computed here from
    ``warp_distribution``; only whether the student's row matches is reported.
    """
    import numpy as np

    from ..core.warping import warp_distribution

    rng = np.random.default_rng(10)
    # Residuals with two or more unequal entries: warping a one-hot or flat residual changes nothing.
    cases = [(np.array([0.6, 0.1, 0.1, 0.2]), np.array([0.2, 0.3, 0.4, 0.1]), 0.5),
             (np.array([0.8, 0.1, 0.1]), np.array([0.3, 0.5, 0.2]), 0.7),
             (np.array([0.7, 0.2, 0.1, 0.0]), np.array([0.1, 0.2, 0.3, 0.4]), 2.0)]
    cases += [(*rng.dirichlet(np.ones(4), size=2), t) for t in (0.6, 1.5)]
    for p, q, temperature in cases:
        where = (f"for p = {np.round(p, 3).tolist()}, q = {np.round(q, 3).tolist()}, "
                 f"temperature = {temperature}")
        got = _row_or_fail(call_student(late_temperature_first_token, p.copy(), q.copy(), temperature), p.size,
                           where)
        want = _late_temperature_reference(p, q, temperature)
        if (got < -1e-12).any() or abs(got.sum() - 1) > 1e-9:
            raise ExerciseError(f"{where}: your row is not a distribution (it sums to {got.sum():.6g}). The kept "
                                "drafts and the replacements must account for all the probability.")
        if np.allclose(got, want, atol=1e-9):
            continue
        if np.allclose(got, warp_distribution(q, temperature), atol=1e-9):
            raise ExerciseError(f"{where}: that is the warped target, what a correct decoder emits. This "
                                "decoder builds its replacement differently: from which rows is its residual "
                                "computed, and when is the temperature applied to it?")
        raise ExerciseError(f"{where}: not what this decoder emits. Which rows decide whether the draft is kept, "
                            "and which distribution is the replacement drawn from?")
    passed("late_temperature_first_token matches the faulty step on every case.")


def _exact_calls():
    """Chapter 10's four speculative configurations: (target model, draft model) for each letter."""
    from ..core.warping import warp

    from ..lm.models import markov_pair

    target, draft = markov_pair(vocab_size=3, draft_noise=0.6, seed=4)
    hot = warp(target, temperature=0.7)
    configurations = {
        "a": (hot, warp(draft, temperature=0.7)),
        "b": (hot, draft),
        "c": (target, warp(draft, temperature=0.7)),
        "d": (hot, warp(draft, temperature=0.0)),
    }
    return hot, configurations


def check_exact_calls(exact_calls) -> None:
    """Exercise ex-10-3: the set of letters whose call samples exactly from ``warp(target, 0.7)``.

    The right set is not stored anywhere: the check enumerates each configuration with
    :mod:`speclib.core.exact` and compares it with the warped target.
    """
    import numpy as np

    from ..core.exact import output_distribution, target_sequence_distribution

    if callable(exact_calls):
        exact_calls = call_student(exact_calls)
    if exact_calls is None:
        raise ExerciseError("exact_calls is still None: set it to the set of letters whose call is exact, "
                            "for example {'a'}, then run this check again.")
    try:
        answer = {str(letter).strip().lower() for letter in exact_calls}
    except TypeError:
        raise ExerciseError(f"expected a set of letters such as {{'a', 'c'}}, got {exact_calls!r}") from None
    hot, configurations = _exact_calls()
    unknown = answer - set(configurations)
    if unknown:
        raise ExerciseError(f"{sorted(unknown)} are not among the calls; choose from {sorted(configurations)}")
    want = target_sequence_distribution(hot, [0], 3)
    truth = {letter for letter, (t, d) in configurations.items()
             if np.abs(output_distribution(t, d, [0], 3, 2) - want).max() < 1e-12}
    if answer - truth:
        raise ExerciseError("your set includes a call whose output does not follow warp(target, 0.7). "
                            "In each call, which model does the verifier compare the drafts against?")
    if truth - answer:
        raise ExerciseError("your set leaves out a call that is exact. The theorem asks nothing of the draft "
                            "except that the verifier is told the row each draft token came from.")
    passed("Right: exactly those calls follow warp(target, 0.7) (checked by exact enumeration).")


@_expects("fixed_verify(draft_tokens, p_draft, q_target, rng, *, bonus=True)")
def check_fixed_verifier(fixed_verify) -> None:
    """Exercise ex-11-2: a repaired ``shipped_verify_b`` with the signature of ``verify``."""
    import numpy as np

    from . import broken
    from ..core.audit import AUDIT_LEVEL, audit
    from ..core.decoding import speculative_generate
    from ..core.exact import target_sequence_distribution

    p = np.array([[0.5, 0.5, 0.0], [0.2, 0.3, 0.5], [0.5, 0.5, 0.0]])
    out = call_student(fixed_verify, np.array([1, 2, 0]), p, np.vstack([p, [[0.0, 0.0, 1.0]]]),
                       np.random.default_rng(0))
    if not isinstance(out, tuple) or len(out) != 2:
        raise ExerciseError(f"your verifier returned {_describe(out)}; return a pair (tokens, n_accepted) as "
                            "verify() does")
    tokens, n_accepted = _token_array(out[0], "the tokens your verifier returned"), out[1]
    if isinstance(n_accepted, (bool, np.bool_)) or not isinstance(n_accepted, (int, np.integer)):
        raise ExerciseError(f"your verifier returned n_accepted = {_describe(n_accepted)}; expected an int, the "
                            "number of drafts kept")
    if n_accepted != 3 or tokens.tolist() != [1, 2, 0, 2]:
        raise ExerciseError("when p equals q every draft must be kept and the bonus drawn from the last target "
                            f"row; with drafts [1, 2, 0] and a bonus row [0, 0, 1] you returned {tokens.tolist()}")
    target, draft = broken.zoo_pair()
    reference = target_sequence_distribution(target, [0], 3)
    try:
        result = audit(lambda n, rng: speculative_generate(target, draft, [0], n, 3, rng, verifier=fixed_verify),
                       reference, n_samples=1500, rng=2024)
    except ValueError as error:  # the loop refuses an answer that contradicts itself
        raise ExerciseError(f"the decoding loop refused what your verifier returned: {error}. Do the tokens "
                            "it emits agree with the n_accepted it reports?") from None
    if not result.passed:
        raise ExerciseError(f"the audit (k = 3, 1500 samples of 3 tokens) rejects your verifier: p-value "
                            f"{result.pvalue:.2g} < {AUDIT_LEVEL:g}. What may a step emit after its first rejection?")
    passed(f"The repaired verifier passes the audit (p-value {result.pvalue:.2f}).")


@_expects("kept_rejection_two_tokens(p, q)")
def check_kept_rejection_two_tokens(kept_rejection_two_tokens) -> None:
    """Exercise ex-11-3: the first two tokens when a rejected draft is kept before its correction.

    One step with ``k = 1`` and context-free rows: the draft ``x ~ p`` is kept with
    probability ``min(1, q(x)/p(x))`` and followed by the bonus ``~ q``; the faulty verifier
    emits ``x`` *and* the residual draw after a rejection.  The reference is the step's
    enumeration, computed here; only agreement is reported.
    """
    import numpy as np

    rng = np.random.default_rng(12)
    cases = [(np.array([0.5, 0.3, 0.2]), np.array([0.2, 0.3, 0.5])),
             (np.array([0.6, 0.4, 0.0]), np.array([0.7, 0.1, 0.2]))]
    cases += [tuple(rng.dirichlet(np.ones(4), size=2)) for _ in range(3)]
    for p, q in cases:
        where = f"for p = {np.round(p, 3).tolist()}, q = {np.round(q, 3).tolist()}"
        got = _numbers_or_fail(call_student(kept_rejection_two_tokens, p.copy(), q.copy()), where,
                               "a matrix of probabilities")
        if got.shape != (p.size, p.size):
            raise ExerciseError(f"{where}: expected a matrix of shape ({p.size}, {p.size}) whose entry [x, y] is "
                                f"the probability that the output starts x, y; got shape {got.shape}")
        if not np.isfinite(got).all() or (got < -1e-12).any() or abs(got.sum() - 1) > 1e-9:
            raise ExerciseError(f"{where}: your matrix is not a distribution over pairs (it sums to "
                                f"{got.sum():.6g}); every step emits two tokens here, kept or not.")
        with np.errstate(divide="ignore", invalid="ignore"):
            keep = np.where(p > 0, np.minimum(1.0, q / np.where(p > 0, p, 1.0)), 0.0)
        residual = np.maximum(q - p, 0.0)
        residual /= residual.sum()
        want = p[:, None] * (keep[:, None] * q[None, :] + (1 - keep)[:, None] * residual[None, :])
        if np.allclose(got, want, atol=1e-9):
            continue
        if np.allclose(got, np.outer(q, q), atol=1e-9):
            raise ExerciseError(f"{where}: that is the target's own distribution, what a correct decoder emits. "
                                "Which token comes first in this decoder's output, kept or rejected?")
        if not np.allclose(got.sum(axis=1), p, atol=1e-9):
            raise ExerciseError(f"{where}: the first token of your pairs is not distributed as it should be. "
                                "What is the first token of every step of this decoder?")
        raise ExerciseError(f"{where}: the first token is right, but not what follows it. What comes after a kept "
                            "draft, and what after a rejected one?")
    passed("kept_rejection_two_tokens matches the exact enumeration of the faulty step.")


# --- Chapters 12-13: adaptive draft length, production variants

@_expects("oracle_speedup(accepted_per_step, c)")
def check_oracle_speedup(oracle_speedup) -> None:
    """Exercise ex-12-1: ``oracle_speedup(accepted_per_step, c)``, the hindsight ceiling for ``0 <= c < 1``."""
    import numpy as np

    from ..core.adaptive import hindsight_oracle

    rng = np.random.default_rng(12)
    cases = [([0, 3, 4, 1], 0.2), ([4, 4, 4], 0.0), ([0, 0, 0], 0.5), ([2], 0.9)]
    cases += [(rng.integers(0, 7, size=12).tolist(), float(rng.uniform(0, 0.9))) for _ in range(4)]
    for n, c in cases:
        where = f"for accepted_per_step = {n}, c = {c:.3g}"
        got = _as_float_or_fail(call_student(oracle_speedup, list(n), c), where)
        want = hindsight_oracle(n, max(max(n), 1), c).speedup(c)
        if abs(got - want) <= 1e-9:
            continue
        n_arr = np.asarray(n)
        if abs(got - (n_arr + 1).sum() / n_arr.size) <= 1e-9 and c > 0:
            raise ExerciseError(f"{where}: you returned tokens per target pass. The oracle also pays c for "
                                "every draft pass it makes; which k would it choose, and what does that cost?")
        if abs(got - n_arr.sum() / (n_arr.size + c * n_arr.sum())) <= 1e-9:
            raise ExerciseError(f"{where}: every step emits one token more than it accepted drafts "
                                "(a correction or the bonus). Count it.")
        raise ExerciseError(f"{where}: you returned {got:.6g}. For a step that accepted n drafts, which k "
                            "would you pick in hindsight, how many tokens would it emit, and at what cost?")
    passed("oracle_speedup matches speclib.core.adaptive.hindsight_oracle on every case.")


@_expects("multi_draft_acceptance(p, q, m)")
def check_multi_draft_acceptance(multi_draft_acceptance) -> None:
    """Exercise ex-13-1: ``multi_draft_acceptance(p, q, m)``, recursive rejection with ``m`` candidates."""
    import numpy as np

    from ..core.sampling import acceptance_rate
    from ..core.variants import multi_draft_acceptance as reference

    rng = np.random.default_rng(13)
    cases = [(np.array([0.6, 0.3, 0.1]), np.array([0.2, 0.3, 0.5]), m) for m in (1, 2, 3)]
    cases += [(rng.dirichlet(np.ones(5) * 0.5), rng.dirichlet(np.ones(5) * 0.5), int(rng.integers(1, 5)))
              for _ in range(6)]
    for p, q, m in cases:
        where = f"for p = {np.round(p, 3).tolist()}, q = {np.round(q, 3).tolist()}, m = {m}"
        got = _as_float_or_fail(call_student(multi_draft_acceptance, p.copy(), q.copy(), m), where)
        want = reference(p, q, m)
        if abs(got - want) <= 1e-9:
            continue
        alpha = acceptance_rate(p, q)
        if m == 1:
            raise ExerciseError(f"{where}: with one candidate the answer is the ordinary acceptance rate "
                                f"sum(min(p, q)); you returned {got:.6g}.")
        if abs(got - (1 - (1 - alpha) ** m)) <= 1e-9:
            raise ExerciseError(f"{where}: you treated the candidates as independent tries against q. After a "
                                "rejection, what distribution is the next candidate tested against?")
        raise ExerciseError(f"{where}: you returned {got:.6g}. Follow the residual from candidate to candidate.")
    passed("multi_draft_acceptance matches speclib.core.variants.multi_draft_acceptance on every case.")


@_expects("lookup_proposal(tokens, k)")
def check_lookup_proposal(lookup_proposal) -> None:
    """Exercise ex-14v-1: prompt lookup's proposal (the last 3, 2 or 1 tokens found earlier)."""
    import numpy as np

    from ..core.proposers import lookup_draft

    cases = [([5, 6, 7, 8, 1, 5, 6], 3), ([1, 2, 3, 1, 2, 3, 1, 2], 4), ([4, 1, 2, 9, 1, 2, 7, 3, 1, 2], 2),
             ([7, 7, 7, 7], 2), ([1, 2, 3], 3), ([3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5], 3),
             ([2, 5, 2, 8, 2, 5, 2], 5)]
    for tokens, k in cases:
        where = f"lookup_proposal({tokens}, k={k})"
        got = _token_array(call_student(lookup_proposal, np.array(tokens), k), where)
        want = lookup_draft(tokens, k)
        if np.array_equal(got, want):
            continue
        if got.size > k:
            raise ExerciseError(f"{where} proposed {got.size} tokens; at most k = {k}.")
        if not want.size:
            raise ExerciseError(f"{where} = {got.tolist()}, but the last token never occurred earlier: "
                                "propose nothing (an empty array).")
        for n in (3, 2, 1):
            tail, arr = tokens[-n:], np.array(tokens)
            hits = [i for i in range(len(tokens) - n) if list(arr[i:i + n]) == tail]
            if hits and np.array_equal(got, arr[hits[0] + n:hits[0] + n + k]) and hits[0] != hits[-1]:
                raise ExerciseError(f"{where} = {got.tolist()} copies from the first earlier occurrence; "
                                    f"the expected proposal {want.tolist()} follows the most recent one.")
        raise ExerciseError(f"{where} = {got.tolist()}, expected {want.tolist()}. Try the longest tail "
                            "first (3 tokens, then 2, then 1) and copy what followed its most recent "
                            "earlier occurrence.")
    passed("lookup_proposal matches speclib.core.proposers.lookup_draft on every case.")


# --- Chapter 9: a real model pair

@_expects("predicted_speedup(alpha, k, c, verify_ratio)")
def check_predicted_speedup(predicted_speedup) -> None:
    """Exercise ex-09-1: ``predicted_speedup(alpha, k, c, verify_ratio)`` with a costly verification pass."""
    from ..core.theory import expected_tokens_per_pass, speedup_in_passes
    from ..lm.transformer import speedup_with_costs

    for alpha in (0.0, 0.5, 0.8, 1.0):
        for k in (1, 3, 8):
            for c, r in ((0.0, 1.0), (0.05, 1.4), (0.2, 2.5)):
                where = f"alpha = {alpha}, k = {k}, c = {c}, verify_ratio = {r}"
                got = _as_float_or_fail(_call_numeric(predicted_speedup, where, alpha, k, c, r), where)
                want = speedup_with_costs(alpha, k, c, r)
                if abs(got - want) <= 1e-9 * max(1.0, want):
                    continue
                if r != 1.0 and abs(got - speedup_in_passes(alpha, k, c)) <= 1e-9:
                    raise ExerciseError(f"{where}: you returned the textbook speed-up, which assumes a "
                                        "verification pass costs one single-token pass. Where does verify_ratio go?")
                if abs(got - expected_tokens_per_pass(alpha, k) / ((k + 1) * c + r)) <= 1e-9:
                    raise ExerciseError(f"{where}: how many draft passes does one step make?")
                raise ExerciseError(f"{where}: you returned {got:.4f}, which is off. Expected tokens per step, "
                                    "divided by the cost of a step in single-token target passes.")
    passed("predicted_speedup agrees with speclib.lm.transformer.speedup_with_costs on every case tried.")



@_expects("speedup_with_fixed(alpha, k, c, verify_ratio, n, fixed_plain, fixed_spec)")
def check_speedup_with_fixed(speedup_with_fixed) -> None:
    """Exercise ex-09-3: the speed-up of a whole run, with the passes of other sizes it pays."""
    from ..book.wallclock import speedup_with_fixed as reference
    from ..lm.transformer import speedup_with_costs

    for alpha in (0.0, 0.6, 0.9):
        for k in (1, 4):
            for n, f0, f1 in ((50, 0.0, 0.0), (100, 8.0, 12.0), (20, 30.0, 5.0)):
                c, r = 0.08, 1.6
                where = (f"alpha = {alpha}, k = {k}, c = {c}, verify_ratio = {r}, n = {n}, "
                         f"fixed_plain = {f0}, fixed_spec = {f1}")
                got = _as_float_or_fail(_call_numeric(speedup_with_fixed, where, alpha, k, c, r, n, f0, f1),
                                        where)
                want = reference(alpha, k, c, r, n, f0, f1)
                if abs(got - want) <= 1e-9 * max(1.0, want):
                    continue
                if (f0 or f1) and abs(got - speedup_with_costs(alpha, k, c, r)) <= 1e-9:
                    raise ExerciseError(f"{where}: you returned the speed-up of one step, which leaves the "
                                        "fixed passes out. Add them to the cost of each whole run.")
                if abs(got - (f0 + n) / (f1 + n * (k * c + r))) <= 1e-9:
                    raise ExerciseError(f"{where}: a run of n tokens takes fewer than n steps. How many "
                                        "tokens does a step emit on average?")
                raise ExerciseError(f"{where}: you returned {got:.4f}, which is off. Write the cost of a "
                                    "plain run and of a speculative run, both in single-token target passes.")
    passed("speedup_with_fixed agrees with speclib.book.wallclock.speedup_with_fixed on every case tried.")


def _pass_log_cases():
    """Pass logs ``(name, n_tokens, seconds)`` as the decoding loops record them, with the traps:
    a prompt pass, a slow outlier, a catch-up pass of the draft."""
    plain = [("model", 40, 9.0)] + [("model", 1, t) for t in (1.0, 1.1, 0.9, 1.0, 25.0, 1.0, 1.05)]
    spec = ([("target", 40, 9.5), ("draft", 40, 4.0)]
            + [("target", 4, t) for t in (1.5, 1.4, 1.6, 30.0, 1.5)]
            + [("draft", 1, t) for t in (0.1, 0.12, 0.09, 0.1, 5.0, 0.11)] + [("draft", 2, 0.3)])
    yield plain, spec, 3
    plain2 = [("model", 8, 2.0)] + [("model", 1, t) for t in (2.0, 2.2, 1.8)]
    spec2 = [("target", 8, 2.5), ("target", 6, 3.0), ("target", 6, 3.2), ("draft", 8, 1.0),
             ("draft", 1, 0.5), ("draft", 1, 0.6), ("draft", 1, 0.4)]
    yield plain2, spec2, 5


def _costs_reference(plain, spec, k):
    import numpy as np

    t1 = np.median([t for name, n, t in plain if name == "model" and n == 1])
    c = np.median([t for name, n, t in spec if name == "draft" and n == 1]) / t1
    r = np.median([t for name, n, t in spec if name == "target" and n == k + 1]) / t1
    return float(c), float(r)


@_expects("costs_from_passes(plain_passes, spec_passes, k)")
def check_costs_from_passes(costs_from_passes) -> None:
    """Exercise ex-09-1: ``(c, r(k+1))`` from the pass logs of a plain and a speculative run."""
    import numpy as np

    for plain, spec, k in _pass_log_cases():
        where = f"k = {k}, {len(plain)} plain passes, {len(spec)} speculative passes"
        got = call_student(costs_from_passes, list(plain), list(spec), k)
        if not isinstance(got, (tuple, list)) or len(got) != 2:
            raise ExerciseError(f"{where}: expected a pair (c, r), got {_describe(got)}.")
        for value, name in zip(got, ("c", "r")):
            if isinstance(value, (float, np.floating)) and np.isnan(value):
                raise ExerciseError(f"{where}: your {name} is nan, which is what the median of no passes at all "
                                    "gives: no pass in the log has the name and the size you selected. Which "
                                    "passes does each log hold, and over how many tokens?")
        c, r = (_as_float_or_fail(v, f"{where}, {name}") for v, name in zip(got, ("c", "r")))
        want_c, want_r = _costs_reference(plain, spec, k)
        if abs(c - want_c) <= 1e-9 and abs(r - want_r) <= 1e-9:
            continue
        t1_mean = np.mean([t for name, n, t in plain if name == "model" and n == 1])
        if abs(c - want_c * np.median([t for nm, n, t in plain if nm == "model" and n == 1]) / t1_mean) < 1e-9:
            hint = "one slow pass moved your unit t1: take the median of the one-token passes, not the mean."
        elif abs(r - want_r) > 1e-9 and abs(c - want_c) <= 1e-9:
            hint = ("r(k+1) is the cost of an ordinary verification pass, over k + 1 tokens; leave out the "
                    "passes of other sizes (the prompt) and take the median.")
        else:
            hint = ("the unit is t1, the median one-token pass of plain decoding ('model'); c is the median "
                    "one-token 'draft' pass and r the median 'target' pass over k + 1 tokens, both over t1.")
        raise ExerciseError(f"{where}: you returned c = {c:.4f}, r = {r:.4f}. {hint}")
    passed("costs_from_passes reads c and r(k+1) from the pass logs on every case tried.")



@_expects("outside_ms(ms_per_token, tokens_per_pass, draft_passes_per_token, target_ms, verify_ratio, draft_ms)")
def check_outside_ms(outside_ms) -> None:
    """Exercise ex-14-1: the milliseconds per token a run spends outside the forward passes."""
    from .hf_bench import outside_ms_per_token

    cases = [(4.5, 1.0, 0.0, 2.9, 1.0, 0.75), (5.0, 2.67, 1.44, 2.88, 1.11, 0.75),
             (3.4, 2.96, 1.29, 2.88, 1.11, 0.75), (1.0, 4.0, 0.8, 0.9, 1.6, 0.1), (2.0, 1.5, 0.5, 0.0, 1.0, 1.0)]
    for args in cases:
        where = ("ms_per_token = {}, tokens_per_pass = {}, draft_passes_per_token = {}, target_ms = {}, "
                 "verify_ratio = {}, draft_ms = {}").format(*args)
        got = _as_float_or_fail(call_student(outside_ms, *args), where)
        want = outside_ms_per_token(*args)
        if abs(got - want) > 1e-9:
            ms, tpp, dpt, t, r, d = args
            if abs(got - (ms - t * r - d * dpt)) < 1e-9 and tpp != 1:
                hint = "You charged a whole verification pass to every token; how many tokens share one pass?"
            elif abs(got - (ms - t / tpp - d * dpt)) < 1e-9 and r != 1:
                hint = "A verification pass over k + 1 tokens costs verify_ratio one-token passes, not one."
            else:
                hint = ("Per token: what share of a verification pass, and how many draft passes, does a "
                        "run pay for? Subtract both from the measured time.")
            raise ExerciseError(f"{where}: you returned {got:.4f}. {hint}")
    passed("outside_ms agrees with speclib.book.hf_bench.outside_ms_per_token on every case tried.")


# --- Chapter 9b: better drafts -------------------------------------------------------------

#: Heads of ex-09b-3: three context-free rows over the bug zoo's three tokens.
HEAD_ROWS_09B = ((0.5, 0.3, 0.2), (0.2, 0.5, 0.3), (0.1, 0.3, 0.6))


def _speedup_at(alpha: float, k: int, c: float, r: float) -> float:
    from ..core.theory import expected_tokens_per_pass

    return float(expected_tokens_per_pass(alpha, k)) / (k * c + r)


def _needed_alpha_reference(k: int, c: float, r: float, goal: float) -> float:
    """The smallest alpha whose speed-up E(alpha, k) / (k c + r) reaches ``goal`` (bisection), nan if none."""
    import math

    if _speedup_at(1.0, k, c, r) < goal:
        return math.nan
    lo, hi = 0.0, 1.0
    if _speedup_at(0.0, k, c, r) >= goal:
        return 0.0
    for _ in range(80):
        mid = (lo + hi) / 2
        lo, hi = (lo, mid) if _speedup_at(mid, k, c, r) >= goal else (mid, hi)
    return hi


#: (k, c, r, goal): a goal out of reach, k = 1 in and out of reach, a goal met with no accepted
#: draft at all, and longer drafts where only a root finder answers.
_NEEDED_ALPHA_CASES = ((1, 0.1, 1.3, 1.5), (1, 0.05, 1.0, 1.5), (1, 0.02, 1.1, 1.2), (2, 0.0, 1.0, 1.0),
                       (3, 0.1, 1.45, 1.5), (4, 0.05, 1.2, 2.0), (8, 0.05, 1.9, 1.5), (8, 0.3, 2.0, 2.0),
                       (5, 0.02, 1.0, 3.5))


@_expects("needed_alpha_closed(k, c, r, goal)")
def check_needed_alpha_closed(needed_alpha_closed) -> None:
    """Exercise ex-09b-1: ``needed_alpha_closed(k, c, r, goal)``, the acceptance rate a speed-up goal needs.

    Compared, to 1e-6, with a bisection on cases where the goal is out of reach (nan), met
    at alpha = 0, met in closed form (k = 1) and met only numerically; a wrong answer is told
    by the speed-up it gives, never by the right alpha.
    """
    import math
    import numbers

    import numpy as np

    for k, c, r, goal in _NEEDED_ALPHA_CASES:
        where = f"k = {k}, c = {c}, r = {r}, goal = {goal}"
        got = call_student(needed_alpha_closed, k, c, r, goal)
        if isinstance(got, np.ndarray) and got.ndim == 0:
            got = got[()]
        if isinstance(got, (bool, np.bool_)) or not isinstance(got, numbers.Real):
            raise ExerciseError(f"{where}: your function returned {_describe(got)}, not a number "
                                "(an acceptance rate, or nan)")
        got = float(got)
        want = _needed_alpha_reference(k, c, r, goal)
        if math.isnan(want):
            if not math.isnan(got):
                raise ExerciseError(f"{where}: you returned {got:.4g}, but no acceptance rate reaches the "
                                    f"goal here: even alpha = 1 gives a speed-up of {_speedup_at(1.0, k, c, r):.3f}. "
                                    "Return nan when the goal is out of reach.")
            continue
        if math.isnan(got):
            raise ExerciseError(f"{where}: you returned nan, but the goal can be reached: alpha = 1 gives "
                                f"a speed-up of {_speedup_at(1.0, k, c, r):.3f}.")
        if not 0.0 <= got <= 1.0:
            raise ExerciseError(f"{where}: you returned {got:.4g}, which is not an acceptance rate in "
                                "[0, 1]. What if the formula's answer falls outside that range?")
        if abs(got - want) <= 1e-6:
            continue
        reached = _speedup_at(got, k, c, r)
        if reached < goal:
            raise ExerciseError(f"{where}: at your alpha = {got:.4f} the speed-up is {reached:.4f}, below "
                                "the goal: the goal is not reached yet.")
        raise ExerciseError(f"{where}: at your alpha = {got:.4f} the speed-up is already {reached:.4f}, "
                            "above the goal: a smaller alpha reaches it too. The smallest one is asked for.")
    passed("needed_alpha_closed agrees with a bisection on every (k, c, r, goal) tried, "
           "out-of-reach goals included.")


@_expects("fixed_topk_block(head_rows, choose, top_k)")
def check_fixed_topk_block(fixed_topk_block) -> None:
    """Exercise ex-09b-3: a top-k heads block whose output follows the target exactly.

    The block drives :class:`speclib.book.broken.HeadsBlockProposer` in the one loop on the bug
    zoo's pair; the exact enumerator replays every branch (k = 3, three tokens) and the law
    must equal the target's.  With ``top_k = 1`` every draft must still be the head's most
    likely token (the fix keeps the truncation; it reports the row it drew from).
    """
    import numpy as np

    from . import broken
    from ..core.exact import output_distribution, target_sequence_distribution
    from ..core.sampling import Sampler

    rows = np.array(HEAD_ROWS_09B)
    out = call_student(fixed_topk_block, rows, Sampler(np.random.default_rng(0)), 1)
    if not isinstance(out, tuple) or len(out) != 2:
        raise ExerciseError(f"your block returned {_describe(out)}; return a pair (tokens, rows)")
    tokens = _token_array(out[0], "the tokens your block returned")
    if tokens.tolist() != rows.argmax(axis=1).tolist():
        raise ExerciseError(f"with top_k = 1 every draft should be its head's most likely token "
                            f"{rows.argmax(axis=1).tolist()}; yours drafted {tokens.tolist()}. Keep the truncation: "
                            "the bug is in what the block reports, not in how it drafts")
    target, _ = broken.zoo_pair()
    try:
        law = output_distribution(target, broken.HeadsBlockProposer(fixed_topk_block, rows, top_k=2),
                                  [0], 3, k=3)
    except (TypeError, ValueError) as error:
        raise ExerciseError(f"the decoding loop refused what your block returned: {error}") from None
    gap = float(np.abs(law - target_sequence_distribution(target, [0], 3)).max())
    if gap > 1e-9:
        raise ExerciseError(f"the exact law of the loop with your block differs from the target's by up to "
                            f"{gap:.3g} in probability: which row was each draft drawn from?")
    passed("The loop's exact law with your block equals the target's (every gap below 1e-9), and "
           "top_k = 1 still drafts the heads' favourites.")


# --- Chapter 15: serving, speculation in a batch ---------------------------------------------

#: A pass table measured on the book's pair (ms; rows: B = 1, 2, 4, 8, 16, 32; columns: n = 1, 2,
#: 4, 7 tokens per request), with its one-row pass on the faster matrix-vector routine.
_MEASURED_PASS_MS = ((2.68, 6.20, 6.84, 7.93), (6.41, 6.73, 7.50, 8.86), (7.22, 8.59, 9.88, 11.43),
                     (8.63, 11.90, 13.64, 18.56), (11.45, 16.06, 21.84, 36.02), (16.97, 27.37, 43.79, 62.32))

#: The mistakes ex-15-1's check recognises, each with the hint it gives.
_POLICY_MISTAKES = {
    "never_off": "your policy never turns speculation off. When no draft length is predicted to beat "
                 "plain decoding (a speed-up above 1), what should it return?",
    "draft_once": "your policy prices the draft as if one draft pass served the whole batch. The draft runs "
                  "request by request: how many draft passes does one step make at batch size B?",
    "c_at_1": "your policy prices the draft as it costs at B = 1. In a batch every request drafts, while the "
              "target's pass over B tokens grows more slowly: what is c_B?",
    "no_r": "your policy prices the verification pass as a pass over one token per request. Which entry of "
            "pass_seconds is the target's pass in a speculative step?",
    "r_at_1": "your policy prices the extra tokens of the verification pass as they cost at B = 1. Read the "
              "pass over B requests: what the extra tokens cost depends on the batch size.",
    "k_plus_1": "how many draft passes does a step that drafts k tokens make?",
    "no_bonus": "how many tokens does a request keep per step on average? Count the bonus token when all k "
                "drafts are accepted.",
}


def _policy_speedups(alpha: float, b: int, table: dict, t_draft: float, ks, mistake: str | None = None):
    """The batch cost model's speed-up of every ``k`` in ``ks`` at batch size ``b``, or a mistaken one."""
    from ..core.theory import expected_tokens_per_pass

    out = []
    for k in ks:
        tokens = float(expected_tokens_per_pass(alpha, k)) - (alpha**k if mistake == "no_bonus" else 0.0)
        drafts = k + 1 if mistake == "k_plus_1" else k
        per_step = {"draft_once": t_draft, "c_at_1": t_draft * table[(b, 1)] / table[(1, 1)]}.get(mistake,
                                                                                                  b * t_draft)
        verify = {"no_r": table[(b, 1)],
                  "r_at_1": table[(b, 1)] * table[(1, k + 1)] / table[(1, 1)]}.get(mistake, table[(b, k + 1)])
        out.append(tokens * table[(b, 1)] / (drafts * per_step + verify))
    return out


def _policy_choice(alpha: float, b: int, table: dict, t_draft: float, ks, mistake: str | None = None) -> int:
    import numpy as np

    s = _policy_speedups(alpha, b, table, t_draft, ks, mistake)
    best = int(np.argmax(s))
    return ks[best] if s[best] > 1.0 or mistake == "never_off" else 0


def _policy_cases():
    """``(alpha, B, pass_seconds, draft_seconds, ks)`` for ex-15-1: the measured table at every batch
    size, then tables from a line ``t0 + beta B n`` with noise (and sometimes a cheaper one-row
    pass), skipping cases whose best speed-up lies within 1% of 1 or of the runner-up."""
    import numpy as np

    batches, widths = (1, 2, 4, 8, 16, 32), (1, 2, 4, 7)
    measured = {(b, n): _MEASURED_PASS_MS[i][j] / 1e3
                for i, b in enumerate(batches) for j, n in enumerate(widths)}
    candidates = [(0.71, b, measured, 0.33e-3, (1, 3, 6)) for b in batches]
    rng = np.random.default_rng(15)
    for _ in range(40):
        t0 = rng.uniform(1.0, 10.0) * 1e-3
        beta = t0 / rng.uniform(4.0, 128.0)
        ks = ((1, 3, 6), (1, 2, 4), (2, 3))[int(rng.integers(3))]
        ns = sorted({1} | {k + 1 for k in ks})
        table = {(b, n): (t0 + beta * b * n) * float(rng.lognormal(0.0, 0.05)) for b in batches for n in ns}
        if rng.random() < 0.3:
            table[(1, 1)] *= rng.uniform(0.4, 0.9)
        candidates.append((round(float(rng.uniform(0.5, 0.95)), 2), int(rng.choice(batches)), table,
                           float(t0 * rng.uniform(0.005, 0.1)), ks))
    cases = []
    for alpha, b, table, t_draft, ks in candidates:
        s = sorted(_policy_speedups(alpha, b, table, t_draft, ks), reverse=True)
        if abs(s[0] - 1.0) > 0.01 and s[0] - s[1] > 0.01 * s[0]:
            cases.append((alpha, b, table, t_draft, ks))
    return cases


@_expects("turn_down_k(alpha, B, pass_seconds, draft_seconds, ks)")
def check_turn_down_policy(turn_down_k) -> None:
    """Exercise ex-15-1: ``turn_down_k(alpha, B, pass_seconds, draft_seconds, ks)``, the draft length
    the batch cost model predicts fastest at batch size ``B`` (0: speculation off).

    The reference is :func:`speclib.book.serving.k_for_batch` on the same pass table; a policy
    that agrees with one recognised mistake on every case is told that mistake.
    """
    import numpy as np

    from .serving import PassGrid, k_for_batch

    cases = _policy_cases()
    answers, wrong = [], []
    for i, (alpha, b, table, t_draft, ks) in enumerate(cases):
        where = (f"case {i + 1} of {len(cases)} (alpha = {alpha}, B = {b}, draft_seconds = {t_draft:.3g}, "
                 f"ks = {list(ks)})")
        got = _as_float_or_fail(call_student(turn_down_k, alpha, b, dict(table), t_draft, list(ks)), where)
        if got not in (0, *ks):
            raise ExerciseError(f"{where}: you returned {got:g}, which is neither 0 (speculation off) nor "
                                "one of the draft lengths in ks.")
        bs, ns = sorted({bb for bb, _ in table}), sorted({n for _, n in table})
        grid = PassGrid(np.array(bs), np.array(ns), np.array([[table[(bb, n)] for n in ns] for bb in bs]))
        answers.append(int(got))
        if int(got) != k_for_batch(alpha, b, grid, t_draft, ks):
            wrong.append((where, int(got)))
    if not wrong:
        passed(f"turn_down_k agrees with k_for_batch on all {len(cases)} cases tried.")
        return
    (where, got), off = wrong[0], f"your choice differs from the cost model's in {len(wrong)} of {len(cases)}"
    for mistake, hint in _POLICY_MISTAKES.items():
        if all(_policy_choice(*case, mistake=mistake) == a for case, a in zip(cases, answers)):
            raise ExerciseError(f"{where}: you chose k = {got}; {off} cases. {hint[0].upper()}{hint[1:]}")
    raise ExerciseError(f"{where}: you chose k = {got}, which is not the choice with the largest "
                        f"predicted speed-up (0 when none exceeds 1); {off} cases. For every k in ks, "
                        "divide the tokens a request keeps per step, times the plain pass t_T(B, 1), by what "
                        "the step costs: the drafts of all B requests and one target pass over k + 1 tokens "
                        "per request.")


def _batched_pass_rounds():
    """Batches of ex-15-2 on a small transformer (a window of 16 positions, so windows move often):
    ``(model, prefixes, feeds)`` per round; the first round has no window that moves."""
    import numpy as np

    from ..lm.transformer import TransformerConfig, random_transformer

    model = random_transformer(TransformerConfig(vocab_size=11, block_size=16, d_model=16, n_layers=2,
                                                 n_heads=2, tied=False), seed=15)
    rng = np.random.default_rng(15)
    tokens = lambda n: rng.integers(0, 11, n)  # noqa: E731
    rounds = [([tokens(n) for n in (2, 5, 3, 6)], [tokens(n) for n in (3, 1, 2, 4)]),
              ([tokens(n) for n in (3, 14, 9, 2, 7)], [tokens(n) for n in (2, 4, 3, 1, 2)]),
              ([tokens(n) for n in (4, 6, 30, 5)], [tokens(n) for n in (2, 0, 4, 3)])]
    for _ in range(4):
        rounds.append(([tokens(int(rng.integers(1, 40))) for _ in range(6)],
                       [tokens(int(rng.integers(0, 6))) for _ in range(6)]))
    return model, rounds


@_expects("fixed_batched_extend_logits(caches, feeds)")
def check_batched_pass(fixed_batched_extend_logits) -> None:
    """Exercise ex-15-2: a batched pass whose every request gets its own rows, windows moving or not.

    Each round feeds a batch of caches (of a small transformer whose 16-position window moves
    often) and compares every request's rows and cache with its own unbatched pass
    (``KVCache.extend_logits``), up to float32 rounding.
    """
    import numpy as np

    from ..lm.batched import _joins_batch

    model, rounds = _batched_pass_rounds()
    moved = 0
    for r, (prefixes, feeds) in enumerate(rounds):
        caches, alone = [model.cache() for _ in prefixes], [model.cache() for _ in prefixes]
        for c, a, p in zip(caches, alone, prefixes):
            c.extend(p)
            a.extend(p)
        own = [i for i, (c, f) in enumerate(zip(caches, feeds)) if not (f.size and _joins_batch(c, f.size))]
        moved += bool(own)
        want = [a.extend_logits(f) for a, f in zip(alone, feeds)]
        who = (f"request{'s' if len(own) > 1 else ''} {', '.join(map(str, own))} cannot join the stacked "
               "pass (its window moves, or it has nothing to feed)" if own
               else "every request joins the stacked pass")
        where = (f"batch {r + 1} of {len(rounds)}, {len(caches)} requests of {[len(c) for c in caches]} "
                 f"tokens fed {[f.size for f in feeds]} tokens; {who}")
        out = call_student(fixed_batched_extend_logits, caches, [f.copy() for f in feeds])
        if not isinstance(out, (list, tuple)) or len(out) != len(caches):
            raise ExerciseError(f"{where}: your function returned {_describe(out)}; expected a list of "
                                f"{len(caches)} row arrays, rows[i] for feeds[i], in the order of the "
                                "caches.")
        for i, (row, f) in enumerate(zip(out, feeds)):
            got = _numbers_or_fail(row, f"{where}, rows[{i}]", "an array of scores")
            if got.shape == (f.size, model.vocab_size) and np.allclose(got, want[i], atol=2e-5, rtol=1e-4):
                continue
            other = [j for j, w in enumerate(want) if j != i and got.shape == w.shape
                     and np.allclose(got, w, atol=2e-5, rtol=1e-4)]
            if other:
                raise ExerciseError(f"{where}: rows[{i}] are the rows of request {other[0]}, not of request "
                                    f"{i}. Which list decides where each request's rows go?")
            if got.shape != want[i].shape:
                raise ExerciseError(f"{where}: rows[{i}] has shape {got.shape}; request {i} was fed {f.size} "
                                    f"tokens, so its rows have shape {want[i].shape}.")
            gap = float(np.nanmax(np.abs(got - want[i])))
            raise ExerciseError(f"{where}: rows[{i}] differ from request {i}'s own pass by up to {gap:.3g}: "
                                "which cache read which tokens?")
        for i, (c, a) in enumerate(zip(caches, alone)):
            if len(c) != len(a) or not np.array_equal(c.tokens, a.tokens):
                raise ExerciseError(f"{where}: after the pass cache {i} holds {len(c)} tokens; its own pass "
                                    f"leaves {len(a)}, the prefix and its feed. Feed each cache once.")
    passed(f"Each request got its own rows and cache in all {len(rounds)} batches; {moved} had a request "
           "outside the stacked pass.")


# --- Chapter 16: engines -----------------------------------------------------------------------

#: Counters as an engine reports them: (number of draft blocks, accepted drafts at each position).
_COUNTER_CASES = ((100, (80, 60, 45, 30)), (10, (10, 10, 10, 10)), (50, (0, 0, 0, 0)), (7, (5, 2)),
                  (1, (1,)), (40, (31, 17, 9)))


def _book_ratios_reference(num_drafts: int, accepted_per_pos, mistake: str | None = None):
    """Accepted per drafted token, accepted per verified draft, tokens per verification pass."""
    from .engines import verified_from_counters

    k, accepted = len(accepted_per_pos), sum(accepted_per_pos)
    verified = verified_from_counters(num_drafts, k * num_drafts, accepted_per_pos, k)
    if mistake == "verified_is_drafted":
        verified = k * num_drafts
    elif mistake == "verified_all":
        verified = num_drafts + sum(accepted_per_pos)
    tokens = 1 + accepted / num_drafts if mistake != "no_extra_token" else accepted / num_drafts
    return accepted / (k * num_drafts), accepted / verified, tokens


_RATIO_HINTS = {
    "verified_is_drafted": "your second ratio equals the first. After the first rejection in a block "
                           "the engine throws the remaining drafts away unjudged: how many drafts did the "
                           "target judge at position i + 1?",
    "verified_all": "your count of judged drafts is too large when every draft of a block is accepted. "
                    "A block of k drafts is judged at positions 0 to k - 1: which counter says how many "
                    "blocks reached position i + 1?",
    "no_extra_token": "every verification pass also emits one token of the target's own (the correction "
                      "or the bonus): count it.",
}


@_expects("book_ratios(num_drafts, accepted_per_pos)")
def check_book_ratios(book_ratios) -> None:
    """Exercise ex-16-1: an engine's counters into the book's two ratios and tokens per pass."""
    import numpy as np

    for num_drafts, per_pos in _COUNTER_CASES:
        where = f"for num_drafts = {num_drafts} and accepted_per_pos = {list(per_pos)}"
        out = call_student(book_ratios, num_drafts, list(per_pos))
        if not isinstance(out, (tuple, list)) or len(out) != 3:
            raise ExerciseError(f"{where}: your function returned {_describe(out)}; return three numbers "
                                "(per drafted, per verified, tokens per pass)")
        got = np.array([_as_float_or_fail(v, where) for v in out])
        want = np.array(_book_ratios_reference(num_drafts, per_pos))
        if np.allclose(got, want, rtol=1e-9, atol=1e-12):
            continue
        for mistake, hint in _RATIO_HINTS.items():
            if np.allclose(got, _book_ratios_reference(num_drafts, per_pos, mistake), rtol=1e-9, atol=1e-12):
                raise ExerciseError(f"{where}: {hint}")
        names = ("accepted per drafted", "accepted per verified", "tokens per pass")
        wrong = [n for n, a, b in zip(names, got, want) if not np.isclose(a, b, rtol=1e-9, atol=1e-12)]
        raise ExerciseError(f"{where}: {', '.join(wrong)} {'is' if len(wrong) == 1 else 'are'} off "
                            f"(you returned {', '.join(f'{v:.4g}' for v in got)})")
    passed(f"All {len(_COUNTER_CASES)} sets of counters give the right ratios.")


@_expects("fixed_widen(model, factor)")
def check_fixed_widen(fixed_widen) -> None:
    """Exercise ex-16-2: a widened export that computes the original model's rows."""
    import numpy as np

    from ..lm.transformer import Transformer, TransformerConfig, random_transformer

    for tied in (True, False):
        for factor in (2, 3):
            cfg = TransformerConfig(vocab_size=11, block_size=16, d_model=8, n_layers=2, n_heads=2, tied=tied)
            model = random_transformer(cfg, seed=5, scale=2.0)
            where = f"for a model with {'tied' if tied else 'separate'} output embeddings and factor = {factor}"
            wide = call_student(fixed_widen, model, factor)
            if not isinstance(wide, Transformer):
                raise ExerciseError(f"{where}: your function returned {_describe(wide)}; return the widened "
                                    "Transformer")
            if wide.config.head_dim != factor * cfg.head_dim:
                raise ExerciseError(f"{where}: the widened heads have {wide.config.head_dim} dimensions, "
                                    f"expected {factor * cfg.head_dim}")
            ids = np.arange(20) % 11
            mine, theirs = model.logits(ids), wide.logits(ids)
            gap = float(np.abs(theirs - mine).max())
            if gap > 1e-4:
                spread = float(np.std(theirs) / np.std(mine))
                sharper = " Your rows are sharper than the original's, as if read at a lower temperature." \
                    if spread > 1.2 else ""
                raise ExerciseError(f"{where}: the widened model's scores differ from the original's by up to "
                                    f"{gap:.3g}.{sharper} Which parameters decide the scale of what the "
                                    "copies add up to?")
    passed("The widened models give the original rows (tied and separate output embeddings, "
           "factors 2 and 3).")


# --- Chapter 17: machine notes -----------------------------------------------------------------

@_expects("blocks_product(x, w, width)")
def check_blocks_product(blocks_product) -> None:
    """Exercise ex-17-1: ``blocks_product(x, w, width)``, ``x @ w`` one block of ``width`` columns at a time.

    Compared with ``x @ w`` on float32 rows and matrices whose column count is and is not a
    multiple of ``width``; ``w`` is handed over as a watched array that records the width of
    every matrix product it takes part in, so a product over more than ``width`` columns of
    ``w`` at once is caught.
    """
    import numpy as np

    class _Watched(np.ndarray):  # a view of w that notes every product it takes part in
        widths: list = []

        def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
            if ufunc is np.matmul:
                for a in inputs:
                    if isinstance(a, _Watched):
                        _Watched.widths.append(a.shape[-1] if a.ndim > 1 else 1)
            plain = [a.view(np.ndarray) if isinstance(a, _Watched) else a for a in inputs]
            return getattr(ufunc, method)(*plain, **kwargs)

        def __array_function__(self, func, types, args, kwargs):
            if func in (np.dot, np.inner, np.tensordot, np.matmul):
                for a in args:
                    if isinstance(a, _Watched):
                        _Watched.widths.append(a.shape[-1] if a.ndim > 1 else 1)
            return super().__array_function__(func, types, args, kwargs)

        def __matmul__(self, other):
            _Watched.widths.append(self.shape[-1] if self.ndim > 1 else 1)
            return np.matmul(self.view(np.ndarray), other)

        def __rmatmul__(self, other):
            _Watched.widths.append(self.shape[-1] if self.ndim > 1 else 1)
            return np.matmul(other, self.view(np.ndarray))

    rng = np.random.default_rng(17)
    for rows, inner, outer, width in [(4, 32, 48, 16), (3, 24, 50, 16), (1, 8, 7, 3), (9, 16, 40, 64),
                                      (2, 12, 33, 1)]:
        x = rng.standard_normal((rows, inner)).astype(np.float32)
        w = rng.standard_normal((inner, outer)).astype(np.float32)
        where = f"x of shape {x.shape}, w of shape {w.shape}, width {width}"
        _Watched.widths = []
        got = call_student(blocks_product, x, w.view(_Watched), width)
        if got is None:
            raise ExerciseError(f"{where}: blocks_product returned None (a return statement missing?)")
        got = _numbers_or_fail(got, where, "an array of numbers (x @ w)")
        if not np.isfinite(got).all():
            raise ExerciseError(f"{where}: the result holds NaN or infinite values; x @ w has none")
        if got.shape != (rows, outer):
            raise ExerciseError(f"{where}: expected a result of shape {(rows, outer)}, got {got.shape}. "
                                "Does the last block, narrower than the others, go in too?")
        if not np.allclose(got, x @ w, rtol=1e-4, atol=1e-4):
            raise ExerciseError(f"{where}: the result differs from x @ w. Are the blocks joined side by "
                                "side (columns), in order?")
        if _Watched.widths and max(_Watched.widths) > width:
            raise ExerciseError(f"{where}: a product took {max(_Watched.widths)} columns of w at once. "
                                f"Multiply x by one block of at most {width} columns at a time, "
                                "w[:, j:j + width], and join the results.")
    passed("blocks_product is x @ w, computed one block of columns at a time.")
