"""Traces of speculative generation: token kinds, acceptance statistics, coloured text."""

import html
import re

import numpy as np
import pytest

from speclib.lm.corpora import shared_vocabulary
from speclib.core.decoding import speculative_generate
from speclib.lm.models import FixedContextModel, MarkovModel, fixed_pair, markov_pair
from speclib.lm.ngram import ngram_pair
from speclib.book.render import (ACCEPTED, BONUS, CORRECTED, KINDS, Trace, acceptance_by_position,
                            acceptance_probabilities, ansi_legend, expected_tokens_along_text,
                            expected_tokens_renewal, implied_acceptance_correlation, pooled_acceptance,
                            to_ansi, to_html, trace_betas, trace_generation, verified_betas,
                            batch_means_interval, markdown_table, repeating_tail)
from speclib.core.sampling import acceptance_rate
from speclib.core.theory import expected_tokens_per_pass

VOCAB = shared_vocabulary()
ANSI = re.compile(r"\033\[[0-9;]*m")


def sticky_pair(stay=0.95):
    """Two regimes that persist: in tokens {0, 1} the draft equals the target, in {2, 3} it is far off.

    Acceptance then comes in runs (easy stretches and hard stretches): the clustering that a
    fixed-context pair cannot show.
    """
    q = np.array([[stay / 2, stay / 2, (1 - stay) / 2, (1 - stay) / 2]] * 2
                 + [[(1 - stay) / 2, (1 - stay) / 2, stay / 2, stay / 2]] * 2)
    p = q.copy()
    p[2:] = [[0.05, 0.05, 0.85, 0.05]] * 2  # in the hard regime the draft piles onto token 2
    return MarkovModel(q), MarkovModel(p / p.sum(axis=1, keepdims=True))


@pytest.mark.parametrize("pair", [lambda: markov_pair(vocab_size=8, draft_noise=0.4, seed=1),
                                  lambda: ngram_pair("code")])
def test_trace_reproduces_speculative_generate(pair):
    target, draft = pair()
    prompt = [1, 2, 3]
    tokens, stats = speculative_generate(target, draft, prompt, 157, k=3, rng=5)
    trace = trace_generation(target, draft, prompt, 157, k=3, rng=5)
    np.testing.assert_array_equal(trace.tokens, tokens)
    assert trace.stats.summary() == stats.summary()


def test_kinds_follow_the_blocks():
    target, draft = markov_pair(vocab_size=8, draft_noise=0.5, seed=2)
    trace = trace_generation(target, draft, [0], 301, k=4, rng=3)
    assert len(trace.kinds) == 301 and set(trace.kinds) <= set(KINDS)
    assert trace.kinds.count(ACCEPTED) == trace.stats.accepted
    rejected = sum(b.n_accepted < b.k for b in trace.blocks)
    assert trace.kinds.count(CORRECTED) == rejected
    # Every block ends in exactly one correction or bonus token (the last may be cut off).
    ends = [i for i, kind in enumerate(trace.kinds) if kind != ACCEPTED]
    assert len(ends) in (len(trace.blocks), len(trace.blocks) - 1)
    emitted = np.cumsum([b.n_accepted + 1 for b in trace.blocks])
    np.testing.assert_array_equal(np.array(ends), emitted[: len(ends)] - 1)


def test_block_betas_are_the_acceptance_rates_of_the_rows():
    target, draft = fixed_pair(vocab_size=16, draft_noise=0.4, seed=0)
    alpha = acceptance_rate(draft.dist, target.dist)
    trace = trace_generation(target, draft, [0], 60, k=3, rng=0)
    np.testing.assert_allclose(verified_betas(trace), alpha)
    assert verified_betas(trace).size == trace.stats.draft_verified


def test_acceptance_is_flat_by_position_when_acceptances_are_independent():
    target, draft = fixed_pair(vocab_size=16, draft_noise=0.5, seed=0)
    alpha = acceptance_rate(draft.dist, target.dist)
    trace = trace_generation(target, draft, [0], 6000, k=4, rng=11)
    rate, judged = acceptance_by_position(trace)
    sigma = np.sqrt(alpha * (1 - alpha) / judged)
    assert np.all(np.abs(rate - alpha) < 4 * sigma), "more than 4 standard errors from alpha"


def test_acceptance_rises_by_position_when_acceptances_cluster():
    # Negative control for the flat-curve test: the same statistic sees the clustering.
    target, draft = sticky_pair()
    trace = trace_generation(target, draft, [0], 6000, k=4, rng=11)
    rate, judged = acceptance_by_position(trace)
    assert rate[-1] - rate[0] > 0.15
    assert judged[0] > judged[-1] > 0


def markov_sample(model, n, rng):
    """A sample path of a Markov model (quicker than a decoding loop for long paths)."""
    tokens = [0]
    cdf = np.cumsum(model.transition, axis=1)
    for u in rng.random(n - 1):
        tokens.append(int(np.searchsorted(cdf[tokens[-1]], u, side="right")))
    return np.array(tokens)


def test_implied_correlation_matches_simulated_coins():
    target, draft = sticky_pair()
    rng = np.random.default_rng(0)
    tokens = markov_sample(target, 20_000, rng)
    beta = acceptance_probabilities(target, draft, tokens)
    coins = (rng.random(beta.size) < beta).astype(float)
    simulated = np.corrcoef(coins[:-1], coins[1:])[0, 1]
    assert implied_acceptance_correlation(beta) > 0.2
    assert abs(implied_acceptance_correlation(beta) - simulated) < 0.03  # ~4 standard errors


def test_implied_correlation_is_zero_without_structure():
    assert implied_acceptance_correlation([0.3] * 50) == pytest.approx(0.0, abs=1e-12)
    rng = np.random.default_rng(1)
    assert abs(implied_acceptance_correlation(rng.random(20_000))) < 0.03


def test_expected_tokens_along_text_and_renewal_reduce_to_the_formula():
    for alpha in (0.0, 0.3, 0.8, 1.0):
        for k in (1, 4):
            formula = expected_tokens_per_pass(alpha, k)
            assert expected_tokens_along_text([alpha] * 50, k) == pytest.approx(formula)
            assert expected_tokens_renewal([alpha] * 20_000, k) == pytest.approx(formula, rel=1e-3)


def test_expected_tokens_by_hand():
    # Betas 1, 0, 1, 0 with k = 2: a block at an odd position stops at once (1 token);
    # at an even position it keeps one draft and is rejected on the next (2 tokens).
    assert expected_tokens_along_text([1, 0, 1, 0], 2) == pytest.approx((2 + 1 + 2) / 3)
    # Tiling: blocks start at 0 and 2 (both "1 then rejected"): 4 tokens in 2 blocks.
    assert expected_tokens_renewal([1, 0, 1, 0], 2) == pytest.approx(2.0)


def test_renewal_predicts_the_measured_tokens_per_pass():
    target, draft = sticky_pair()
    trace = trace_generation(target, draft, [0], 8000, k=4, rng=4)
    beta = acceptance_probabilities(target, draft, np.concatenate([[0], trace.tokens]))[:-1]
    measured = trace.stats.tokens_per_target_pass
    assert expected_tokens_renewal(beta, 4) == pytest.approx(measured, rel=0.03)
    # Averaging the independence formula over contexts misses by far more.
    averaged = float(np.mean(expected_tokens_per_pass(beta, 4)))
    assert abs(averaged - measured) > 3 * abs(expected_tokens_renewal(beta, 4) - measured)


def ngram_trace():
    target, draft = ngram_pair("prose")
    return trace_generation(target, draft, VOCAB.encode("Line <1>\n& "), 400, k=4, rng=0)


def test_ansi_text_strips_to_the_plain_text():
    trace = ngram_trace()
    plain = to_ansi(trace, VOCAB, color=False)
    assert plain == VOCAB.decode(np.concatenate([trace.prompt, trace.tokens]))
    colored = to_ansi(trace, VOCAB)
    assert ANSI.search(colored)
    assert ANSI.sub("", colored).replace("\u21b5", "") == plain
    for line in colored.split("\n"):  # no style runs across a line break
        assert line.count("\033[0m") == len(ANSI.findall(line)) / 2


def test_html_escapes_and_keeps_the_text():
    trace = ngram_trace()
    page = to_html(trace, VOCAB, width=10**6)  # unfolded (folding: the next tests)
    assert "<1>" not in page and "&lt;1&gt;" in page
    pre = re.search(r"<pre[^>]*>(.*)</pre>", page, re.S).group(1)
    text = html.unescape(re.sub(r"<[^>]+>", "", pre)).replace("\u21b5", "")
    assert text == to_ansi(trace, VOCAB, color=False)
    for kind in KINDS:
        assert f"spec-{kind}" in page or kind not in trace.kinds


def test_a_rejected_newline_is_visible():
    target, draft = sticky_pair()
    trace = Trace(np.array([0]), VOCAB.encode("a\nb"), [ACCEPTED, CORRECTED, BONUS], [], 2, None)
    assert "\u21b5" in to_ansi(trace, VOCAB) and "\u21b5" in to_html(trace, VOCAB)
    assert "\u21b5" not in to_ansi(trace, VOCAB, color=False)


def test_legend_names_every_kind():
    assert all(kind in ansi_legend() for kind in KINDS)


@pytest.mark.parametrize("call", [lambda: acceptance_by_position("trace"), lambda: verified_betas(None),
                                  lambda: to_ansi([1, 2], VOCAB), lambda: to_html({}, VOCAB)])
def test_functions_want_a_trace(call):
    with pytest.raises(TypeError, match="trace"):
        call()


@pytest.mark.parametrize("call, error, match", [
    (lambda: implied_acceptance_correlation([0.5, 1.5, 0.2]), ValueError, "beta"),
    (lambda: implied_acceptance_correlation([0.5, 0.5]), ValueError, "beta"),
    (lambda: implied_acceptance_correlation([0.5] * 5, lag=0), ValueError, "lag"),
    (lambda: expected_tokens_along_text([0.5], 2), ValueError, "beta"),
    (lambda: expected_tokens_renewal([], 2), ValueError, "beta"),
    (lambda: expected_tokens_renewal([0.5], 0), ValueError, "k"),
    (lambda: trace_generation(*markov_pair(4), [0], 5, k=0, rng=0), ValueError, "k"),
    (lambda: acceptance_probabilities(FixedContextModel([0.5, 0.5]), FixedContextModel([1 / 3] * 3), [0]),
     ValueError, "draft"),
])
def test_bad_arguments_are_named(call, error, match):
    with pytest.raises(error, match=match):
        call()


def test_trace_betas_cover_the_verified_positions():
    target, draft = markov_pair(vocab_size=6, draft_noise=0.5, seed=3)
    trace = trace_generation(target, draft, [0, 1], 200, k=3, rng=2)
    beta = trace_betas(target, draft, trace)
    assert beta.shape == (200,)
    # Each accepted draft and each correction sits at a verified position: the betas match there.
    position, verified = 0, []
    for block in trace.blocks:
        verified.extend(range(position, position + block.beta.size))
        position += block.n_accepted + 1
    verified = [i for i in verified if i < 200]
    np.testing.assert_allclose(beta[verified], verified_betas(trace)[: len(verified)])


def test_pooled_acceptance_pools_runs():
    target, draft = fixed_pair(vocab_size=16, draft_noise=0.5, seed=0)
    alpha = acceptance_rate(draft.dist, target.dist)
    pooled = pooled_acceptance(target, draft, [[0]] * 40, 50, k=4, seed=1)
    assert abs(pooled - alpha) < 0.05  # ~1200 verified drafts: about 3.5 standard errors
    with pytest.raises(ValueError, match="prompts"):
        pooled_acceptance(target, draft, [], 10, k=2)


# --------------------------------------------------- batch means, loops, Markdown tables
def ar1(rng, n, phi):
    """A stationary AR(1) sequence with mean 0: neighbours correlated with coefficient ``phi``."""
    x = np.empty(n)
    x[0] = rng.normal() / np.sqrt(1 - phi**2)
    noise = rng.normal(size=n)
    for i in range(1, n):
        x[i] = phi * x[i - 1] + noise[i]
    return x


def test_batch_means_interval_covers_the_mean_of_a_correlated_sequence():
    """Seeded: 300 AR(1) sequences (phi = 0.6) of 2000 values, true mean 0.

    Batch means should cover 0 about 95% of the time; we require at least 90%.  Negative
    control: the Student-t interval over single values, which assumes independence, covers
    only about 67% (its half-width is too small by a factor of 2); we require at most 80%.
    """
    from speclib.core.stats import mean_confidence_interval

    rng = np.random.default_rng(2024)
    batch = naive = 0
    for _ in range(300):
        x = ar1(rng, 2000, 0.6)
        ci = batch_means_interval(x)
        batch += ci.low <= 0 <= ci.high
        single = mean_confidence_interval(x)
        naive += single.low <= 0 <= single.high
        assert ci.mean == pytest.approx(x.mean())
    assert batch / 300 >= 0.90
    assert naive / 300 <= 0.80


def test_batch_means_interval_matches_student_t_on_batch_means():
    from speclib.core.stats import mean_confidence_interval

    x = np.arange(40.0)
    ci = batch_means_interval(x, n_batches=4, level=0.9)
    ref = mean_confidence_interval([4.5, 14.5, 24.5, 34.5], 0.9)
    assert (ci.mean, ci.level) == (19.5, 0.9)
    assert ci.high - ci.low == pytest.approx(ref.high - ref.low)


@pytest.mark.parametrize("values, kwargs, error, match", [
    ([1.0] * 5, dict(n_batches=10), ValueError, "values"),
    ([1.0, np.nan] * 20, {}, ValueError, "NaN"),
    ([[1.0] * 30], {}, ValueError, "1-D"),
    ([1.0] * 30, dict(n_batches=1), ValueError, "n_batches"),
    ("abc", {}, TypeError, "values"),
])
def test_batch_means_interval_validates(values, kwargs, error, match):
    with pytest.raises(error, match=match):
        batch_means_interval(values, **kwargs)


def test_repeating_tail_finds_the_loop():
    unit, length = repeating_tail(VOCAB.encode("The end of it all" + " ab" * 10))
    assert VOCAB.decode(unit) == " ab" and length == 30
    unit, length = repeating_tail(VOCAB.encode("x = 1" + " " * 40))
    assert VOCAB.decode(unit) == " " and length == 40
    # Negative control: text that does not end in a loop.
    assert repeating_tail(VOCAB.encode("no loop at the end here"))[1] == 0
    assert repeating_tail([])[1] == 0
    with pytest.raises(ValueError, match="max_period"):
        repeating_tail([1, 1], max_period=0)


def test_greedy_ngram_generation_ends_in_a_loop():
    from speclib.core.warping import greedy_generate

    target, _ = ngram_pair("prose")
    tokens, _ = greedy_generate(target, VOCAB.encode("The "), 200)
    unit, length = repeating_tail(tokens)
    assert length >= 100 and 1 <= unit.size <= 16


def test_markdown_table():
    assert markdown_table(["x", "y"], [[1, 2.5], ["a", "b"]]).splitlines() == [
        "| x | y |", "| --- | --- |", "| 1 | 2.5 |", "| a | b |"]
    with pytest.raises(ValueError, match="row 0"):
        markdown_table(["x", "y"], [[1]])


def test_ranking_names_a_leader_only_when_its_interval_separates():
    from speclib.book.render import ranking_sentence

    apart = ranking_sentence({"eagle": (0.80, 0.78, 0.82), "pair": (0.70, 0.68, 0.72), "medusa": (0.4, 0.38, 0.42)})
    assert apart.startswith("eagle has the highest rate") and "cannot be told apart" not in apart
    close = ranking_sentence({"eagle": (0.75, 0.70, 0.80), "pair": (0.74, 0.69, 0.79)})
    assert "cannot be told apart" in close and "highest" not in close
    # negative control: the same values with intervals narrow enough do get a leader
    assert "highest" in ranking_sentence({"eagle": (0.75, 0.745, 0.755), "pair": (0.74, 0.735, 0.745 - 1e-9)})
    with pytest.raises(ValueError, match="low <= value <= high"):
        ranking_sentence({"a": (0.5, 0.6, 0.7), "b": (0.4, 0.3, 0.5)})
    with pytest.raises(ValueError, match="at least two"):
        ranking_sentence({"a": (0.5, 0.4, 0.6)})


def test_ranking_says_below_only_of_the_intervals_that_separate():
    """Chapter 12's case: a setting below the leader's interval that still overlaps the other two
    of the leading group is below the leader only, not "below them"."""
    from speclib.book.render import ranking_sentence

    estimates = {"heuristic": (1.02, 0.98, 1.06), "p_min": (0.94, 0.90, 0.98),
                 "fallback": (0.88, 0.75, 1.01), "fixed": (0.86, 0.76, 0.97)}
    sentence = ranking_sentence(estimates, what="speed-up")
    assert "below them" not in sentence and "below both" not in sentence, sentence
    assert "fixed at 0.86 (0.76 to 0.97) is below heuristic, and its interval overlaps those of p_min and fallback" \
        in sentence
    # negative control: a setting below every interval of the group is below all of them
    estimates["fixed"] = (0.60, 0.55, 0.65)
    assert "fixed is below them at 0.60 (0.55 to 0.65)" in ranking_sentence(estimates, what="speed-up")


def test_bounded_prints_a_bound_for_what_rounding_decides():
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).parent))
    from test_portable_outputs import residues
    from speclib.book.render import bounded

    # Residues of any size below the bound become the bound, which the portability rule accepts.
    for residue in (3.8e-17, -6.1e-17, 5.4e-231, 0.0):
        assert bounded(residue) == "below 1e-12" and residues(f"distance {bounded(residue)}") == []
    assert bounded(3.2e-08, bound=1e-4) == "below 1e-04"
    # Values at or above the bound keep their digits (negative control: the rule sees a residue).
    assert bounded(0.031) == "0.031" and bounded(1e-4, bound=1e-4) == "0.0001"
    assert residues(f"distance {bounded(3.8e-17, bound=1e-20, spec='.1e')}") == ["3.8e-17"]
    with pytest.raises(ValueError, match="bound: must be > 0"):
        bounded(0.1, bound=0)
    with pytest.raises(TypeError, match="value"):
        bounded("0.1")
    with pytest.raises(ValueError, match="spec"):
        bounded(0.5, spec="q")


def test_fold_lines_keeps_every_line_within_the_width_and_its_indentation():
    from speclib.book.render import fold_lines

    text = ("    return the_first_value + the_second_value + the_third_value + the_fourth\n"
            "short line\n" + "x" * 50)
    folded = fold_lines(text, width=30)
    lines = folded.split("\n")
    assert all(len(line) <= 30 for line in lines[:-1])  # the last has no space to break at
    assert lines[-1] == "x" * 50
    assert lines[1].startswith("      ") and lines[0].startswith("    return")  # continuations indented
    assert folded.replace("\n      ", " ") == text  # nothing but the breaks changed
    assert fold_lines("short", width=30) == "short"


def test_to_html_folds_the_trace_like_fold_lines():
    from speclib.book.render import fold_lines

    trace = ngram_trace()

    def shown(page):
        pre = re.search(r"<pre[^>]*>(.*)</pre>", page, re.S).group(1)
        return html.unescape(re.sub(r"<[^>]+>", "", pre))

    whole = shown(to_html(trace, VOCAB, width=10**6))
    assert shown(to_html(trace, VOCAB, width=20)) == fold_lines(whole, width=20) != whole
