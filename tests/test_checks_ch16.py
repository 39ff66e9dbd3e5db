"""Self-checks of chapter 16's exercises, with the mistakes each must catch."""

import numpy as np
import pytest

from speclib.book import broken
from speclib.book.checks import ExerciseError, check_book_ratios, check_fixed_widen
from speclib.book.engines import verified_from_counters
from speclib.lm.export import widen
from speclib.lm.transformer import TransformerConfig, random_transformer


# --- ex-16-1: an engine's counters into the book's ratios ---------------------------------------

def book_ratios(num_drafts, accepted_per_pos):
    k, accepted = len(accepted_per_pos), sum(accepted_per_pos)
    verified = num_drafts + sum(accepted_per_pos[:-1])
    return accepted / (k * num_drafts), accepted / verified, 1 + accepted / num_drafts


def test_the_right_ratios_pass(capsys):
    check_book_ratios(book_ratios)
    assert "right ratios" in capsys.readouterr().out


def test_the_library_counts_the_same_judged_drafts():
    for drafts, per_pos in ((100, [80, 60, 45, 30]), (7, [5, 2])):
        k = len(per_pos)
        verified = verified_from_counters(drafts, k * drafts, per_pos, k)
        assert book_ratios(drafts, per_pos)[1] == pytest.approx(sum(per_pos) / verified)
    with pytest.raises(ValueError, match="accepted_per_pos"):
        verified_from_counters(10, 40, [1, 2], 4)


@pytest.mark.parametrize("wrong, hint", [
    (lambda n, a: (sum(a) / (len(a) * n),) * 2 + (1 + sum(a) / n,), "unjudged"),
    (lambda n, a: (sum(a) / (len(a) * n), sum(a) / (n + sum(a)), 1 + sum(a) / n), "too large"),
    (lambda n, a: (sum(a) / (len(a) * n), sum(a) / (n + sum(a[:-1])), sum(a) / n), "count it"),
    (lambda n, a: (0.5, 0.5, 2.0), "off"),
    (lambda n, a: 0.5, "three numbers"),
    (lambda n, a: (0.5, "x", 2.0), "not a number"),
])
def test_each_mistake_gets_its_hint(wrong, hint):
    def book_ratios(num_drafts, accepted_per_pos):
        return wrong(num_drafts, accepted_per_pos)

    with pytest.raises(ExerciseError, match=hint):
        check_book_ratios(book_ratios)


def test_a_stub_is_told_to_finish():
    def book_ratios(num_drafts, accepted_per_pos):
        raise NotImplementedError

    with pytest.raises(ExerciseError, match="NotImplementedError"):
        check_book_ratios(book_ratios)


# --- ex-16-2: the widened export -----------------------------------------------------------------

def test_the_library_widen_passes_and_the_shipped_one_fails(capsys):
    check_fixed_widen(lambda model, factor: widen(model, factor))
    assert "original rows" in capsys.readouterr().out
    with pytest.raises(ExerciseError, match="sharper"):
        check_fixed_widen(lambda model, factor: broken.shipped_widen(model, factor))


def test_the_shipped_widen_is_wrong_only_in_its_final_norm():
    cfg = TransformerConfig(vocab_size=9, block_size=8, d_model=8, n_layers=1, n_heads=2)
    model = random_transformer(cfg, seed=1)
    good, bad = widen(model, 2), broken.shipped_widen(model, 2)
    differ = [name for name in good.params if not np.array_equal(good.params[name], bad.params[name])]
    assert differ == ["ln_f.g", "ln_f.b"]
    ids = np.arange(6)
    np.testing.assert_allclose(bad.logits(ids), 2 * model.logits(ids), rtol=1e-4, atol=1e-4)


def test_a_model_of_the_wrong_width_is_named():
    def fixed_widen(model, factor):
        return model

    with pytest.raises(ExerciseError, match="dimensions"):
        check_fixed_widen(fixed_widen)
    with pytest.raises(ExerciseError, match="Transformer"):
        check_fixed_widen(lambda model, factor: None)
