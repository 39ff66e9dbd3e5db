"""The reference article's tables, reproduced digit for digit with its seeds."""

import subprocess
import sys

import pytest

from speclib.book import article

# Printed in the reference article (../shared/reference), K sweep at noise 0.3:
ARTICLE_K_SWEEP = [  # K, acceptance, tokens/pass, theoretical
    (1, "0.843", "1.84", "1.84"),
    (2, "0.763", "2.53", "2.35"),
    (4, "0.654", "3.61", "2.55"),
    (8, "0.493", "4.94", "1.97"),
    (16, "0.319", "6.10", "1.47"),
]
ARTICLE_NOISE_SWEEP = [  # noise, acceptance, tokens/pass at K = 4
    (0.0, "1.000", "5.00"),
    (0.1, "0.861", "4.43"),
    (0.3, "0.654", "3.61"),
    (0.5, "0.505", "3.02"),
    (0.8, "0.307", "2.23"),
    (1.0, "0.200", "1.80"),
]


def test_k_sweep_digit_for_digit():
    rows = article.k_sweep()
    got = [(r.k, f"{r.acceptance:.3f}", f"{r.tokens_per_pass:.2f}", f"{r.theoretical:.2f}") for r in rows]
    assert got == ARTICLE_K_SWEEP


def test_noise_sweep_digit_for_digit():
    rows = article.noise_sweep()
    got = [(r.noise, f"{r.acceptance:.3f}", f"{r.tokens_per_pass:.2f}") for r in rows]
    assert got == ARTICLE_NOISE_SWEEP


def test_end_to_end_digit_for_digit():
    e = article.end_to_end()
    assert (e.speculative.tokens_generated, e.speculative.target_passes) == (500, 133)
    assert f"{e.speculative.tokens_per_target_pass:.2f}" == "3.76"
    assert (e.baseline.target_passes, f"{e.speedup:.2f}") == (500, "3.76")


def test_corrected_acceptance_tracks_alpha_not_k():
    """The article's acceptance falls with K; accepted / verified stays at alpha."""
    rows = article.k_sweep()
    alpha = rows[0].alpha
    assert all(r.alpha == alpha for r in rows)
    assert all(abs(r.acceptance_verified - alpha) < 0.02 for r in rows)
    assert rows[-1].acceptance < alpha - 0.4


def test_theory_at_alpha_matches_simulation():
    """With the right alpha the closed form agrees with the measured tokens per pass."""
    for r in article.k_sweep() + article.noise_sweep():
        assert abs(r.tokens_per_pass - r.theory_at_alpha) < 0.05 * r.theory_at_alpha + 0.05


def test_cli_prints_tables():
    out = subprocess.run([sys.executable, "-m", "speclib", "article"], capture_output=True, text=True, check=True)
    assert "0.654         3.61" in out.stdout.replace("  ", "  ")
    assert "500 tokens, 133 target passes, 3.76 tokens/pass" in out.stdout
    assert "acc/verified" in out.stdout


@pytest.mark.parametrize("bad", [dict(draft_noise=1.5), dict(draft_k=0), dict(vocab_size=1)])
def test_decoder_rejects_bad_settings(bad):
    with pytest.raises(ValueError):
        article.SpeculativeDecoder(**bad)


def test_a_sweep_of_no_tokens_blames_n_tokens_not_alpha():
    # Zero tokens make every rate 0 / 0; the error must name the argument the user passed.
    from speclib.book.article import end_to_end, k_sweep, noise_sweep

    for call in (lambda: k_sweep(n_tokens=0), lambda: noise_sweep(n_tokens=0), lambda: end_to_end(n_tokens=0)):
        with pytest.raises(ValueError, match="n_tokens: must be >= 1"):
            call()
    with pytest.raises(TypeError, match="ks: expected an integer"):
        k_sweep(ks=[float("nan")])
    with pytest.raises(ValueError, match="k: must be <= 10000"):
        end_to_end(k=10**12)
