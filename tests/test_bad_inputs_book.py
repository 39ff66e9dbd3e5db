"""Bad input to the book's helpers, self-checks and files, each case of issue 24 outside the loop.

Each case is a clear error naming the argument (or, for a self-check, an ``ExerciseError`` saying
what the check expected), or it is accepted because it is valid: numpy's own spellings of
True, False and integers are.  Everything here is refused before any work starts, so the file
runs in a few seconds.
"""

from __future__ import annotations

import contextlib
import inspect
import io
import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from speclib._validate import MAX_REPEATS
from speclib.book import checks

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    import matplotlib.pyplot as plt

    plt.close("all")


@pytest.fixture(scope="module")
def pair():
    from speclib.lm.models import markov_pair

    return markov_pair(vocab_size=6, draft_noise=0.3, seed=0)


@pytest.fixture(scope="module")
def tiny():
    from speclib.lm.transformer import TransformerConfig, random_transformer

    return random_transformer(TransformerConfig(vocab_size=12, block_size=16, d_model=8, n_layers=1, n_heads=2), 0)


# --- numpy's spellings are valid spellings -----------------------------------------------------

def test_numpy_scalars_build_a_transformer_config_that_saves(tmp_path):
    from speclib.lm.transformer import TransformerConfig, load_transformer, random_transformer, save_transformer

    config = TransformerConfig(np.int64(12), np.int32(16), np.int64(8), np.int64(1), np.int64(2), tied=np.True_)
    assert config == TransformerConfig(12, 16, 8, 1, 2, tied=True)
    assert type(config.tied) is bool and type(config.vocab_size) is int  # stored as Python values
    save_transformer(random_transformer(config, 0), tmp_path / "m.npz")  # JSON needs Python values
    assert load_transformer(tmp_path / "m.npz").config == config
    for flag in ("True", 1, None):
        with pytest.raises(TypeError, match="tied: expected True or False"):
            TransformerConfig(12, 16, 8, 1, 2, tied=flag)


def test_numpy_booleans_and_integers_are_accepted_by_the_plots_and_the_course():
    from speclib.book.course import book_exercises, instructor_table
    from speclib.book.plots import plot_tokens_per_step, plot_verification_block, plot_verification_blocks
    from speclib.book.widgets import verification_view

    plot_tokens_per_step([1, 2, 2], [0.5, 0.5], legend=np.False_)
    views = [verification_view(block) for block in (0, 1, 2)]
    plot_verification_block(views[0], legend=np.bool_(True))
    plot_verification_blocks(views, ncols=np.int64(2))
    table = instructor_table(book_exercises(ROOT)[:2], links=np.True_)
    assert "{numref}" in table
    with pytest.raises(TypeError, match="legend: expected True or False"):
        plot_tokens_per_step([1, 2, 2], [0.5, 0.5], legend="False")
    with pytest.raises(TypeError, match="ncols: expected an integer"):
        plot_verification_blocks(views, ncols=2.0)
    with pytest.raises(ValueError, match="ncols: must be >= 1"):
        plot_verification_blocks(views, ncols=np.int64(0))


# --- sizes without a limit ---------------------------------------------------------------------

def _refused_at_once(call, name, limit):
    start = time.perf_counter()
    with pytest.raises(ValueError, match=f"{name}: must be <= {limit}") as caught:
        call()
    assert time.perf_counter() - start < 1.0
    return str(caught.value)


def test_timing_repetitions_are_capped_with_the_limit_stated(tiny, pair):
    from speclib.book import hf_bench
    from speclib.book.wallclock import wallclock_experiment
    from speclib.lm.transformer import pass_times, time_pass

    huge = 10**12
    target, draft = pair
    cases = [
        (lambda: time_pass(tiny, 2, 4, reps=huge), "reps"),
        (lambda: pass_times(tiny, (1, 2), repeats=huge, prefix_length=4), "repeats"),
        (lambda: wallclock_experiment(target, draft, [[0, 1]], 5, ks=(2,), reps=huge), "reps"),
        (lambda: hf_bench.pass_ms(target, [0, 1], [2], reps=huge), "reps"),
        (lambda: hf_bench.pass_costs({"t": (target, 1)}, [0, 1], [2], rounds=huge), "rounds"),
        (lambda: hf_bench.time_settings({"s": lambda prompt, seed: None}, [[0, 1]], reps=huge), "reps"),
    ]
    for call, name in cases:
        assert "timings settle long before" in _refused_at_once(call, name, MAX_REPEATS)
    _refused_at_once(lambda: wallclock_experiment(target, draft, [[0, 1]], 5, ks=(10**12,), reps=1), "ks", 10_000)
    assert time_pass(tiny, 2, 4, reps=np.int64(2)).shape == (2,)  # the limit is no obstacle to real use


def test_sequences_given_as_one_number_are_refused_with_a_hint(tiny, pair):
    from speclib.book import broken
    from speclib.book.correction import exactness_grid
    from speclib.book.wallclock import position_alphas
    from speclib.lm.transformer import pass_times

    target, draft = pair
    with pytest.raises(TypeError, match=r"ks: expected a sequence of integers, got 3 \(int\); for one value write \[3\]"):
        exactness_grid(broken.RESAMPLE_FROM_TARGET, ks=3)
    with pytest.raises(TypeError, match=r"temperatures: expected a sequence of real numbers.*write \[0.5\]"):
        position_alphas(target, {"d": draft}, [0, 1, 2], temperatures=0.5)
    with pytest.raises(TypeError, match="n_tokens: expected a sequence of integers"):
        pass_times(tiny, n_tokens=3)
    with pytest.raises(ValueError, match="n_tokens: must contain at least one value"):
        pass_times(tiny, n_tokens=())
    with pytest.raises(TypeError, match="bonus: expected True or False"):
        exactness_grid(broken.RESAMPLE_FROM_TARGET, ks=(1,), vocab_sizes=(2,), bonus="yes")


# --- files -------------------------------------------------------------------------------------

def test_save_transformer_refuses_paths_it_would_have_changed(tiny, tmp_path):
    from speclib.lm.transformer import save_transformer

    cases = [(tmp_path, ValueError, "is a directory; expected a file name ending in .npz"),
             ("", ValueError, "path: expected a file path, got an empty string"),
             (None, TypeError, "path: expected a file path"),
             (tmp_path / "model", ValueError, "expected a file name ending in .npz"),
             (tmp_path / "no" / "model.npz", FileNotFoundError, "the folder .* does not exist")]
    for path, error, message in cases:
        with pytest.raises(error, match=message):
            save_transformer(tiny, path)
    assert sorted(p.name for p in tmp_path.iterdir()) == []  # nothing written anywhere
    assert not Path("..npz").exists()


def test_load_transformer_says_what_a_wrong_file_is(tmp_path):
    from speclib.lm.transformer import load_transformer

    (tmp_path / "notes.txt").write_text("not a model")
    np.save(tmp_path / "array.npy", np.zeros(3))
    np.savez(tmp_path / "other.npz", x=np.zeros(3))
    (tmp_path / "cut.npz").write_bytes(b"PK\x03\x04 truncated")
    for name, detail in [("notes.txt", "it is not an .npz archive"), ("array.npy", "it is not an .npz archive"),
                         ("other.npz", "missing or unreadable entry"), ("cut.npz", "a damaged .npz archive")]:
        with pytest.raises(ValueError, match="is not a model file written by save_transformer") as caught:
            load_transformer(tmp_path / name)
        assert detail in str(caught.value) and "pickle" not in str(caught.value)
    with pytest.raises(FileNotFoundError, match="path: no model file at"):
        load_transformer(tmp_path / "absent.npz")


def test_the_course_tools_say_what_folder_or_file_they_expected(tmp_path):
    from speclib.book.course import book_exercises, notebook_exercises, toc_chapters

    with pytest.raises(FileNotFoundError, match="root: no folder at .*expected the book's folder"):
        book_exercises(tmp_path / "absent")
    with pytest.raises(FileNotFoundError, match="root: .* holds no _toc.yml"):
        toc_chapters(tmp_path)
    (tmp_path / "notes.txt").write_text("hello")
    with pytest.raises(ValueError, match=r"nb_path: .*notes.txt is not a Jupyter notebook \(.ipynb\): it is not JSON"):
        notebook_exercises(tmp_path / "notes.txt")
    (tmp_path / "list.ipynb").write_text(json.dumps([1, 2]))
    with pytest.raises(ValueError, match="it has no list of cells"):
        notebook_exercises(tmp_path / "list.ipynb")
    with pytest.raises(FileNotFoundError, match="nb_path: no notebook file at"):
        notebook_exercises(tmp_path / "absent.ipynb")
    assert len(book_exercises(ROOT)) > 10  # the real book still reads


# --- self-checks: a function is expected, called with a known signature --------------------------

FUNCTION_CHECKS = sorted(name for name, fn in inspect.getmembers(checks, inspect.isfunction)
                         if name.startswith("check_") and hasattr(fn, "expected_signature"))


def test_every_self_check_but_the_one_taking_a_value_declares_its_signature():
    every = {name for name, fn in inspect.getmembers(checks, inspect.isfunction)
             if name.startswith("check_") and fn.__module__ == checks.__name__}
    assert every - set(FUNCTION_CHECKS) == {"check_exact_calls"}  # it takes the set of letters itself


def _hint(check, answer):
    with pytest.raises(checks.ExerciseError) as caught, contextlib.redirect_stdout(io.StringIO()) as printed:
        check(answer)
    assert "\u2714" not in printed.getvalue()
    return str(caught.value)


@pytest.mark.parametrize("name", FUNCTION_CHECKS)
def test_a_value_instead_of_a_function_is_told_a_function_was_expected(name):
    check = getattr(checks, name)
    signature = check.expected_signature
    function = signature.split("(")[0]
    for value in (np.zeros(3), 2.5, None, "speedup"):
        text = _hint(check, value)
        assert f"{name} expected a function {signature}" in text
        assert f"{name}({function}), not {name}({function}(...))" in text


@pytest.mark.parametrize("name", FUNCTION_CHECKS)
def test_a_function_with_the_wrong_parameters_is_told_the_expected_signature(name):
    check = getattr(checks, name)
    signature = check.expected_signature
    n = len(checks._parse_signature(signature)[1])
    for wrong in ((lambda: None), (lambda a, b, c, d, e, f, g, h: None)) + (((lambda a: None),) if n > 1 else ()):
        text = _hint(check, wrong)
        assert f"{name} calls your function as {signature}" in text and "but it is defined as" in text


def test_a_function_that_can_take_the_arguments_is_not_refused():
    for fn in (lambda alpha, k, c: 1.0, lambda alpha, k, c, extra=0: 1.0, lambda *args: 1.0, max):
        checks.expect_function(fn, "speedup(alpha, k, c)", "check_speedup")  # no error
    checks.expect_function(lambda d, p, q, rng, bonus=True: None, "verify(d, p, q, rng, *, bonus=True)")
    with pytest.raises(checks.ExerciseError, match="and bonus by keyword, but it is defined as"):
        checks.expect_function(lambda d, p, q, rng: None, "verify(d, p, q, rng, *, bonus=True)")


# --- book helpers: the kind of object given -----------------------------------------------------

def test_book_helpers_refuse_the_wrong_kind_of_object_naming_it():
    from speclib.book.article import end_to_end, k_sweep
    from speclib.book.article_figures import article_tables, corrected_table, tokens_per_pass_z
    from speclib.book.plots import plot_controller_comparison, plot_pass_times

    rows = k_sweep(n_tokens=40, ks=(1,))
    cases = [
        (lambda: plot_pass_times(times=None), TypeError, "times: expected a PassTimes"),
        (lambda: plot_pass_times(times=[1, 2]), TypeError, "times: expected a PassTimes"),
        (lambda: article_tables(rows, rows, e2e=[]), TypeError, "e2e: expected an EndToEnd"),
        (lambda: article_tables([], rows, end_to_end(n_tokens=20)), ValueError, "k_rows: expected at least one"),
        (lambda: article_tables(rows[0], rows, None), TypeError, "k_rows: expected a list of SweepRow"),
        (lambda: corrected_table([None], 40), TypeError, r"rows\[0\]: expected a SweepRow"),
        (lambda: tokens_per_pass_z(row=None, n_tokens=40), TypeError, "row: expected a SweepRow"),
        (lambda: plot_controller_comparison("..."), TypeError, "comparison: expected a Comparison"),
    ]
    for call, error, message in cases:
        with pytest.raises(error, match=message):
            call()
    assert "Speedup" in article_tables(rows, rows, end_to_end(n_tokens=20))  # the right kinds still work


def test_the_fallback_trace_refuses_a_nan_cost_and_rates_outside_0_1():
    from speclib.book.plots import plot_fallback_trace

    good = dict(estimates=[np.nan, 0.5, 0.75], history=[True, True, False], c=0.3, tokens_per_step=[2, 3, 1])
    plot_fallback_trace(**good)  # NaN: no estimate before the first verified draft
    plot_fallback_trace(**{**good, "history": [np.True_, np.True_, np.False_]})
    for change, error, message in [
        ({"c": float("nan")}, ValueError, "c: must be finite"),
        ({"estimates": [0.5, 1.5, 0.2]}, ValueError, r"estimates: acceptance rates must lie in \[0, 1\]"),
        ({"estimates": [0.5, -0.1, 0.2]}, ValueError, "estimates: acceptance rates"),
        ({"history": [1, 1, 0]}, TypeError, "history: expected True or False"),
        ({"tokens_per_step": [2, 3]}, ValueError, "one entry per step each, got 3, 3 and 2"),
        ({"tokens_per_step": [2, -3, 1]}, ValueError, "tokens_per_step: expected one non-negative"),
        ({"estimates": "high"}, TypeError, "estimates: expected acceptance rates"),
    ]:
        with pytest.raises(error, match=message):
            plot_fallback_trace(**{**good, **change})


def test_a_batch_means_interval_too_close_to_certainty_is_refused_not_infinite():
    from speclib.book.render import MAX_LEVEL, batch_means_interval

    values = np.arange(100.0) % 7
    for level in (1 - 1e-16, 1.0, 0.0):
        with pytest.raises(ValueError, match=r"level: must lie in \(0, 0.999999999\]"):
            batch_means_interval(values, 10, level)
    ci = batch_means_interval(values, 10, MAX_LEVEL)
    assert np.isfinite([ci.low, ci.high]).all() and ci.low < ci.mean < ci.high
    constant = batch_means_interval(np.ones(40), 4, MAX_LEVEL)  # zero spread: width 0, not NaN
    assert constant.low == constant.high == 1.0


# --- chapter 14 without PyTorch -----------------------------------------------------------------

def test_chapter_14_without_pytorch_says_how_to_install_from_the_notebook():
    code = ("import sys\nsys.modules['torch'] = None\nsys.modules['transformers'] = None\n"
            "try:\n    import speclib.lm.hf\nexcept ImportError as exc:\n    print(exc)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert "%pip install -r ../requirements-hf.txt" in out.stdout, out.stderr
    assert (ROOT / "book" / ".." / "requirements-hf.txt").is_file()  # the path is right from book/
