"""speclib as an engine of the real model's benchmark (benchmarks/smollm_speclib.py).

Every speculative setting's greedy output is the plain greedy output (the loop is exact), the
run stops after the end-of-sequence token when asked, and the runner reports what the harness
checks (benchmarks/smollm_engines.py's Generation).
"""

import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

pytest.importorskip("numba")
from smollm_engines import _checked  # noqa: E402
from smollm_speclib import SpeclibRunner  # noqa: E402


@pytest.fixture(scope="module")
def runner():
    from speclib.lm.smollm import model_path

    try:
        model_path()
    except FileNotFoundError as error:
        pytest.skip(str(error))
    return SpeclibRunner(lookups=(3,), drafts=())


def test_greedy_lookup_repeats_plain_and_stops_at_the_end_token(runner):
    tok = runner.model.tokenizer
    text = tok.render_chat([{"role": "user", "content": "Repeat exactly: the cat sat on the mat."}])
    prompt = runner.tokenize(text)
    plain = _checked(runner.generate(prompt, "plain", 40, 0.0, 0, True), runner, "plain", 40)
    lookup = _checked(runner.generate(prompt, "lookup-3", 40, 0.0, 0, True), runner, "lookup-3", 40)
    assert lookup.tokens == plain.tokens
    assert plain.tokens[-1] == runner.eos and runner.eos not in plain.tokens[:-1]  # stopped at the end of turn
    assert lookup.extra["target_passes"] < len(lookup.tokens)  # copied tokens came several a pass
    unstopped = runner.generate(prompt, "plain", len(plain.tokens) + 3, 0.0, 0, False)
    assert unstopped.tokens[:len(plain.tokens)] == plain.tokens and len(unstopped.tokens) == len(plain.tokens) + 3


def test_sampling_is_repeatable_by_seed_and_settings_are_checked(runner):
    prompt = runner.tokenize(runner.model.tokenizer.render_chat([{"role": "user", "content": "Say hi."}]))
    a = runner.generate(prompt, "lookup-3", 12, 1.0, 7, False)
    b = runner.generate(prompt, "lookup-3", 12, 1.0, 7, False)
    assert a.tokens == b.tokens and len(a.tokens) == 12
    with pytest.raises(ValueError, match="setting: 'draft-3' is not one of"):
        runner.generate(prompt, "draft-3", 4, 0.0, 0, True)
    assert np.isfinite(a.seconds) and 0 < a.prefill_seconds <= a.seconds
