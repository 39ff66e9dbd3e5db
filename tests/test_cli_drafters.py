"""``python -m speclib generate --pair neural --draft NAME`` for every drafter of speclib.lm.drafters."""

import re

import pytest

from speclib import __main__ as cli
from speclib.core.decoding import autoregressive_generate, speculative_generate
from speclib.lm import drafters
from speclib.lm.corpora import shared_vocabulary
from speclib.lm.transformer import load_pair


def _statistics(stdout):
    found = dict(re.findall(r"^  (new tokens|target passes|tokens per target pass|acceptance)\s+([0-9.]+)",
                            stdout, re.M))
    return {name: float(value) for name, value in found.items()}


def _available(name):
    return name not in drafters.DRAFTER_FILES or (drafters.DATA_DIR / drafters.DRAFTER_FILES[name]).is_file()


def test_every_drafter_is_offered():
    assert set(drafters.DRAFTER_NAMES) <= set(cli.DRAFTS)
    assert cli.NGRAM_DRAFT_ORDER == drafters.NGRAM_ORDER


@pytest.mark.parametrize("name", drafters.DRAFTER_NAMES)
def test_generate_with_each_drafter(name, capsys):
    if not _available(name):
        pytest.skip(f"{name}: weights not trained yet")
    assert cli.main(["generate", "--pair", "neural", "--draft", name, "--domain", "code",
                     "--new-tokens", "30", "--seed", "3", "--k", "3"]) == 0
    out = capsys.readouterr().out
    stats = _statistics(out)
    assert stats["new tokens"] == 30
    assert 0 <= stats["acceptance"] <= 1
    assert stats["tokens per target pass"] == pytest.approx(30 / stats["target passes"], abs=0.006)
    # the text is what the one loop writes with this drafter and seed
    drafter = drafters.load_drafter(name, 1.0, "code")
    vocab = shared_vocabulary()
    tokens, _ = speculative_generate(drafter.target, drafter, vocab.encode("def "), 30, 3, rng=3)
    assert out.startswith("def " + vocab.decode(tokens) + "\n")
    if name != "pair":
        assert f"draft: {'the order-7 n-gram' if name == 'ngram' else name}" in out


def test_greedy_eagle_writes_the_targets_greedy_text(capsys):
    if not _available("eagle"):
        pytest.skip("eagle: weights not trained yet")
    assert cli.main(["generate", "--pair", "neural", "--draft", "eagle", "--domain", "code", "--greedy",
                     "--new-tokens", "30"]) == 0
    out = capsys.readouterr().out
    want, _ = autoregressive_generate(load_pair(0.0)[0], shared_vocabulary().encode("def "), 30, rng=0)
    assert out.startswith("def " + shared_vocabulary().decode(want) + "\n")


@pytest.mark.parametrize("name", ["distilled", "medusa", "eagle", "early-exit"])
def test_a_target_drafter_needs_the_neural_target(name, capsys):
    with pytest.raises(SystemExit) as exit_:
        cli.main(["generate", "--pair", "ngram", "--draft", name])
    assert exit_.value.code == 2
    assert f"argument --draft: the {name} draft drafts for the neural target (--pair neural)" in capsys.readouterr().err
