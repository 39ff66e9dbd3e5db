"""speclib.book.article_figures: the accountings, break-even and figures of the article chapter."""

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
from scipy import stats as sps  # noqa: E402

from speclib import tokens_per_step_pmf, tokens_per_step_variance, speedup_in_passes
from speclib.book import article  # noqa: E402
from speclib.book import article_figures as af  # noqa: E402

# Threshold of every statistical test below: |estimate - prediction| <= Z_MAX standard errors.
Z_MAX = 4.0


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


@pytest.fixture(scope="module")
def k_rows():
    return article.k_sweep()


# --- accepted / proposed: the formula ---------------------------------------------------------

def test_accepted_per_proposed_hand_computed():
    assert af.accepted_per_proposed(0.5, 1) == 0.5
    assert af.accepted_per_proposed(0.5, 3) == pytest.approx((0.5 + 0.25 + 0.125) / 3)
    assert af.accepted_per_proposed(0.0, 5) == 0.0
    assert af.accepted_per_proposed(1.0, 5) == 1.0
    np.testing.assert_allclose(af.accepted_per_proposed(np.array([0.0, 0.5]), 2), [0.0, 0.375])


@pytest.mark.parametrize("alpha", [0.2, 0.6, 0.841, 0.97])
@pytest.mark.parametrize("k", [1, 2, 5, 16])
def test_accepted_per_proposed_agrees_with_step_pmf(alpha, k):
    """Independent route: a step emits n tokens with n - 1 accepted drafts (theory.tokens_per_step_pmf)."""
    pmf = tokens_per_step_pmf(alpha, k)
    expected_accepted = pmf @ np.arange(k + 1)
    assert af.accepted_per_proposed(alpha, k) == pytest.approx(expected_accepted / k)
    # and accepted / verified is alpha: E[verified] = E[min(A + 1, k)]
    expected_verified = pmf @ np.minimum(np.arange(k + 1) + 1, k)
    assert expected_accepted / expected_verified == pytest.approx(alpha)


def test_gap_is_zero_at_k1_and_grows_with_k():
    gaps = [af.accounting_gap(0.841, k) for k in range(1, 33)]
    assert gaps[0] == 0.0
    assert all(b > a for a, b in zip(gaps, gaps[1:]))
    assert gaps[-1] < 0.841


@pytest.mark.parametrize("k", [2, 4, 8, 16])
def test_alpha_from_accepted_per_proposed_round_trips(k):
    for alpha in (0.1, 0.5, 0.841, 0.99):
        rate = af.accepted_per_proposed(alpha, k)
        assert af.alpha_from_accepted_per_proposed(rate, k) == pytest.approx(alpha, abs=1e-10)
    assert af.alpha_from_accepted_per_proposed(0.0, k) == 0.0
    assert af.alpha_from_accepted_per_proposed(1.0, k) == 1.0


# --- the formula against the article's own decoder (statistical, seeded) ------------------------

N_STEPS = 3000


@pytest.fixture(scope="module")
def simulated_steps():
    """Steps of the article's decoder at noise 0.3 for several K (seed 5, not the article's)."""
    return {k: af.step_sizes(0.3, k=k, n_steps=N_STEPS, seed=5) for k in (2, 4, 8, 16)}


@pytest.mark.parametrize("k", [2, 4, 8, 16])
def test_accepted_per_proposed_matches_simulation(simulated_steps, k):
    alpha = article.SpeculativeDecoder(draft_noise=0.3, seed=5).alpha()
    n_acc = simulated_steps[k] - 1
    measured = af.accountings(n_acc, k)
    # Each block's accepted count has the variance of the step's token count.
    se_proposed = np.sqrt(tokens_per_step_variance(alpha, k) / N_STEPS) / k
    assert abs(measured.accepted_per_proposed - af.accepted_per_proposed(alpha, k)) <= Z_MAX * se_proposed
    # Judged drafts are independent Bernoulli(alpha) trials: accepted / verified estimates alpha.
    n_verified = np.minimum(n_acc + 1, k).sum()
    se_verified = np.sqrt(alpha * (1 - alpha) / n_verified)
    assert abs(measured.accepted_per_verified - alpha) <= Z_MAX * se_verified
    # Negative control: the same test rejects the article's reading, accepted / proposed ~ alpha.
    assert abs(measured.accepted_per_proposed - alpha) > Z_MAX * se_proposed


def test_step_sizes_follow_the_truncated_geometric(simulated_steps):
    """Chi-square goodness of fit at level 0.001; the pmf at the article's acceptance is rejected."""
    k, sizes = 4, simulated_steps[4]
    alpha = article.SpeculativeDecoder(draft_noise=0.3, seed=5).alpha()
    observed = np.bincount(sizes, minlength=k + 2)[1:]
    assert sps.chisquare(observed, N_STEPS * tokens_per_step_pmf(alpha, k)).pvalue > 1e-3
    wrong = af.accountings(sizes - 1, k).accepted_per_proposed
    assert sps.chisquare(observed, N_STEPS * tokens_per_step_pmf(wrong, k)).pvalue < 1e-3


def test_step_sizes_noise_zero_always_full():
    assert (af.step_sizes(0.0, k=3, n_steps=20) == 4).all()


def test_step_sizes_reproduce_the_article_loop():
    """Same stream as the article's Figure 2 loop: one decoder, consecutive steps."""
    dec = article.SpeculativeDecoder(draft_noise=0.8, draft_k=4, seed=0)
    want = [len(dec.speculative_step(article.CONTEXT_ID)[0]) for _ in range(50)]
    np.testing.assert_array_equal(af.step_sizes(0.8, k=4, n_steps=50, seed=0), want)


# --- accountings, outcomes, autocorrelation -----------------------------------------------------

def test_accountings_hand_computed():
    assert af.accountings([4, 0, 2], 4) == (0.5, 0.75)
    assert af.accountings([3, 3], 3) == (1.0, 1.0)
    assert af.accountings([0, 0, 0], 2) == (0.0, 0.0)
    assert af.accountings([1], 1) == (1.0, 1.0)


def test_acceptance_outcomes_hand_computed():
    np.testing.assert_array_equal(af.acceptance_outcomes([2, 3, 0], 3), [1, 1, 0, 1, 1, 1, 0])
    out = af.acceptance_outcomes([4, 0, 2], 4)
    assert out.mean() == af.accountings([4, 0, 2], 4).accepted_per_verified


def test_lag1_autocorrelation_iid_and_sticky():
    """Seeded; threshold Z_MAX / sqrt(n).  A sticky chain (negative control) is caught."""
    rng = np.random.default_rng(3)
    n = 5000
    iid = (rng.random(n) < 0.8).astype(int)
    assert abs(af.lag1_autocorrelation(iid)) <= Z_MAX / np.sqrt(n)
    sticky = np.empty(n, dtype=int)
    sticky[0] = 1
    for i in range(1, n):
        sticky[i] = sticky[i - 1] if rng.random() < 0.9 else 1 - sticky[i - 1]
    assert af.lag1_autocorrelation(sticky) > Z_MAX / np.sqrt(n)


def test_article_outcomes_are_uncorrelated(simulated_steps):
    out = af.acceptance_outcomes(simulated_steps[8] - 1, 8)
    assert abs(af.lag1_autocorrelation(out)) <= Z_MAX / np.sqrt(out.size)


# --- break-even and the z-scores -----------------------------------------------------------------

@pytest.mark.parametrize("alpha, k", [(0.3, 4), (0.5, 1), (0.841, 8), (0.95, 3)])
def test_break_even_c_is_where_speedup_is_one(alpha, k):
    c = af.break_even_c(alpha, k)
    assert speedup_in_passes(alpha, k, c) == pytest.approx(1.0)
    assert speedup_in_passes(alpha, k, 0.99 * c) > 1.0 > speedup_in_passes(alpha, k, 1.01 * c)


def test_break_even_c_at_k1_is_alpha():
    assert af.break_even_c(0.37, 1) == pytest.approx(0.37)
    np.testing.assert_allclose(af.break_even_c(np.array([0.0, 1.0]), 4), [0.0, 1.0])


def test_tokens_per_pass_se_hand_computed():
    assert af.tokens_per_pass_se(0.5, 1, 100) == pytest.approx(0.05)
    assert af.tokens_per_pass_se(1.0, 4, 10) == 0.0


def test_article_rows_fit_the_formula_at_alpha(k_rows):
    """|z| <= Z_MAX for every row at alpha; the article's own 'Theoretical' column fails it."""
    rows = [r for r in k_rows + article.noise_sweep(k=16) if r.alpha < 1 - af.ALPHA_ONE_TOL]
    assert len(rows) == 10
    assert all(abs(af.tokens_per_pass_z(r, 2000)) <= Z_MAX for r in rows)
    at_article = [r._replace(theory_at_alpha=r.theoretical) for r in k_rows if r.k >= 4]
    assert all(abs(af.tokens_per_pass_z(r, 2000)) > Z_MAX for r in at_article)


# --- tables -------------------------------------------------------------------------------------

def test_article_tables_layout(k_rows):
    text = af.article_tables(k_rows, article.noise_sweep(), article.end_to_end())
    for r in k_rows:
        assert f"{r.k:>4}  {r.acceptance:>12.3f}  {r.tokens_per_pass:>12.2f}  {r.theoretical:>12.2f}" in text
    assert "133 target passes" in text


def test_z_is_undefined_when_the_draft_equals_the_target():
    row = article.noise_sweep(k=2, noises=(0.0,))[0]
    with pytest.raises(ValueError, match=r"row: alpha = 1 \(the draft equals the target\), so the standard error is 0"):
        af.tokens_per_pass_z(row, 2000)
    assert "| n/a |" in af.corrected_table([row], 2000, by="noise")


def test_corrected_table_has_a_row_per_sweep_row(k_rows):
    text = af.corrected_table(k_rows, 2000)
    lines = text.splitlines()
    assert len(lines) == 2 + len(k_rows)
    assert all(line.count("|") == 9 for line in lines)
    assert f"| {k_rows[2].acceptance_verified:.3f} |" in lines[4]
    assert "| noise " in af.corrected_table(article.noise_sweep(), 2000, by="noise")


# --- bad input ----------------------------------------------------------------------------------

@pytest.mark.parametrize(
    "call, error, message",
    [
        (lambda: af.accepted_per_proposed(1.2, 4), ValueError, r"alpha: must lie in \[0, 1\]"),
        (lambda: af.accepted_per_proposed(0.5, 0), ValueError, r"k: must be >= 1"),
        (lambda: af.accounting_gap(0.5, 2.0), TypeError, r"k: expected an integer"),
        (lambda: af.alpha_from_accepted_per_proposed(-0.1, 4), ValueError, r"rate: must lie"),
        (lambda: af.accountings([1, 5], 4), ValueError, r"n_accepted: every count must lie in \[0, k\]"),
        (lambda: af.accountings([], 4), ValueError, r"n_accepted: expected a non-empty"),
        (lambda: af.accountings([0.5, 1], 4), TypeError, r"n_accepted: counts must be integers"),
        (lambda: af.acceptance_outcomes([[1]], 2), ValueError, r"n_accepted: expected a non-empty 1-D"),
        (lambda: af.lag1_autocorrelation([1, 1, 1, 1]), ValueError, r"x: the sequence is constant"),
        (lambda: af.lag1_autocorrelation([1, 0]), ValueError, r"x: need a 1-D sequence of at least 3"),
        (lambda: af.break_even_c(np.nan, 4), ValueError, r"alpha: contains NaN"),
        (lambda: af.tokens_per_pass_se(0.5, 4, 0), ValueError, r"n_passes: must be >= 1"),
        (lambda: af.step_sizes(1.5), ValueError, r"draft_noise: must be <= 1"),
        (lambda: af.step_sizes(0.3, n_steps=0), ValueError, r"n_steps: must be >= 1"),
        (lambda: af.corrected_table([], 2000, by="K"), ValueError, r"by: expected 'k' or 'noise'"),
        (lambda: af.plot_k_sweep([], axes=plt.subplots(1, 3)[1]), ValueError, r"axes: expected 2 axes"),
    ],
)
def test_bad_input_is_named(call, error, message):
    with pytest.raises(error, match=message):
        call()


# --- figures ------------------------------------------------------------------------------------

def _labels(ax):
    return [t.get_text() for t in ax.get_legend().get_texts()]


def test_plot_k_sweep_article_and_corrected(k_rows):
    ax1, ax2 = af.plot_k_sweep(k_rows)
    assert len(ax1.lines) == 1 and len(ax2.lines) == 2
    ax1, ax2 = af.plot_k_sweep(k_rows, corrected=True)
    assert len(ax1.lines) == 3 and len(ax2.lines) == 3
    assert "accepted / verified" in _labels(ax1)
    assert ax2.get_ylabel() == "tokens per target pass" and ax1.get_title()
    np.testing.assert_allclose(ax2.lines[2].get_ydata(), [r.theory_at_alpha for r in k_rows])
