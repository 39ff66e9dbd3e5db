"""Corpora from text that ships with Python, and the shared character vocabulary."""

import sys

import numpy as np
import pytest

from speclib.lm import corpora
from speclib.lm.corpora import (DOMAINS, CODE_FILES, Corpus, Vocabulary, documents, load_corpus, load_text,
                             shared_vocabulary)


@pytest.mark.parametrize("domain", DOMAINS)
def test_text_is_moderate_and_deterministic(domain):
    text = load_text(domain)
    assert 300_000 < len(text) < 1_500_000, "each corpus should stay between 0.3 and 1.5 MB"
    assert load_text(domain) == text


def test_domains_are_prose_and_code():
    assert DOMAINS == ("prose", "code")
    prose, code = load_text("prose"), load_text("code")
    assert "def " in code and "import " in code
    assert code.count("def ") / len(code) > 10 * prose.count("def ") / len(prose)
    assert " the " in prose


@pytest.mark.parametrize("domain", DOMAINS)
def test_split_is_by_whole_documents(domain):
    corpus = load_corpus(domain)
    assert isinstance(corpus, Corpus) and corpus.domain == domain
    docs = documents(domain)
    held = [d for i, d in enumerate(docs) if i % 10 == 9]
    assert corpus.heldout == "\n\n".join(held)
    assert corpus.train == "\n\n".join(d for i, d in enumerate(docs) if i % 10 != 9)
    # The held-out part is roughly the requested share of the characters.
    share = len(corpus.heldout) / (len(corpus.train) + len(corpus.heldout))
    assert 0.04 < share < 0.2
    assert load_corpus(domain) == corpus


def test_heldout_fraction_changes_the_split():
    a, b = load_corpus("code", 0.1), load_corpus("code", 0.25)
    assert len(b.heldout) > len(a.heldout)
    assert len(b.train) + len(b.heldout) == len(a.train) + len(a.heldout)


@pytest.mark.parametrize("bad, error", [(0.0, ValueError), (0.6, ValueError), (-0.1, ValueError),
                                        ("0.1", TypeError), (float("nan"), ValueError)])
def test_heldout_fraction_is_validated(bad, error):
    with pytest.raises(error, match="heldout_fraction"):
        load_corpus("prose", bad)


@pytest.mark.parametrize("bad, error", [("poetry", ValueError), (None, TypeError), (1, TypeError)])
def test_domain_is_validated(bad, error):
    with pytest.raises(error, match="domain"):
        load_text(bad)
    with pytest.raises(error, match="domain"):
        load_corpus(bad)


def test_missing_pydoc_data_gives_a_clear_error(monkeypatch):
    monkeypatch.setitem(sys.modules, "pydoc_data.topics", None)  # makes the import fail
    with pytest.raises(RuntimeError, match="pydoc_data"):
        load_text("prose")


def test_missing_sources_give_a_clear_error(monkeypatch, tmp_path):
    monkeypatch.setattr(corpora, "stdlib_directory", lambda: tmp_path)
    with pytest.raises(RuntimeError, match=r"abc\.py.*" + str(len(CODE_FILES) - 5) + " more"):
        load_text("code")


def test_vocabulary_is_fixed():
    vocab = shared_vocabulary()
    assert isinstance(vocab, Vocabulary) and shared_vocabulary() is vocab
    assert vocab.size == vocab.vocab_size == len(vocab) == 97
    assert vocab.chars[0] == "\n" and vocab.chars[1:] == "".join(map(chr, range(32, 127)))
    assert vocab.unk_id == 96


def test_encode_decode_round_trip_on_ascii():
    vocab = shared_vocabulary()
    text = "def f(x):\n    return x ** 2  # ~{}|\\"
    ids = vocab.encode(text)
    assert ids.dtype == np.int64 and ids.shape == (len(text),)
    assert vocab.decode(ids) == text


def test_unknown_characters_map_to_one_id():
    vocab = shared_vocabulary()
    ids = vocab.encode("a\tb\u00e9c\u2603")
    a, b, c = (vocab.chars.index(ch) for ch in "abc")
    assert ids.tolist() == [a, 96, b, 96, c, 96]
    assert vocab.decode(ids) == "a\ufffdb\ufffdc\ufffd"


@pytest.mark.parametrize("domain", DOMAINS)
def test_corpora_are_almost_all_in_vocabulary(domain):
    vocab = shared_vocabulary()
    ids = vocab.encode(load_text(domain))
    assert (ids == vocab.unk_id).mean() < 1e-3
    assert "\u2019" not in load_text(domain)  # typographic quotes are written in ASCII


def test_vocabulary_rejects_bad_input():
    vocab = shared_vocabulary()
    with pytest.raises(TypeError, match="text"):
        vocab.encode(b"bytes")
    with pytest.raises(ValueError, match="ids"):
        vocab.decode([0, 97])
    with pytest.raises(TypeError, match="ids"):
        vocab.decode([0.5])
