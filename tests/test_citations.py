"""In-text citations name one bibliography entry each, and read as its label (_ext/bib_labels.py).

sphinxcontrib-bibtex's own author_year referencing style builds a citation from the author and
year fields, so the four 2026 pages of the vLLM project all read "vLLM project, 2026" in the
text while the bibliography tells them apart with a, b, c, d.  The book's style reads both
from the label.  tests/test_rendered_html.py checks the same on the built pages.
"""

import sys
from collections import defaultdict
from pathlib import Path

import pybtex.plugin
import pytest
from pybtex.database import parse_file

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "_ext"))
import bib_labels  # noqa: E402


@pytest.fixture(scope="module")
def entries():
    """(entry, label) for every entry of references.bib, in the bibliography's order."""
    data = parse_file(str(ROOT / "references.bib"))
    style = pybtex.plugin.find_plugin("pybtex.style.formatting", "author_year")()
    ordered = style.sort(list(data.entries.values()))
    return list(zip(ordered, style.format_labels(ordered)))


def _texts(entries, cite):
    """Citation text -> keys of the entries cited with that text."""
    out = defaultdict(set)
    for entry, label in entries:
        out[cite(entry, label)].add(entry.key)
    return out


def _book_p(entry, label):  # {cite:p}: the label itself
    return label


def _book_t(entry, label):  # {cite:t}: "who [year]", or the title alone
    who, year = bib_labels.split_label(label)
    return f"{who} [{year}]" if year else who


def _fields_only(entry, label):  # what a style reading only the author and year fields prints
    who, year = bib_labels.label_parts(entry)
    return f"{who}, {year or 'n.d.'}"


@pytest.mark.parametrize("cite", [_book_p, _book_t])
def test_no_two_entries_share_a_citation_text(entries, cite):
    shared = {text: sorted(keys) for text, keys in _texts(entries, cite).items() if len(keys) > 1}
    assert shared == {}


def test_a_citation_built_from_the_fields_alone_would_repeat(entries):
    """Negative control: without the label's suffixes the organisations' pages collide."""
    shared = {text for text, keys in _texts(entries, _fields_only).items() if len(keys) > 1}
    assert "vLLM project, 2026" in shared and "Hugging Face, 2026" in shared


def test_the_citation_reads_as_the_label(entries):
    for entry, label in entries:
        who, year = bib_labels.split_label(label)
        assert (f"{who}, {year}" if year else who) == label
        assert who == bib_labels.label_parts(entry)[0]


def test_vllm_pages_get_suffixes_in_the_year(entries):
    labels = {label for entry, label in entries if label.startswith("vLLM project")}
    assert labels == {f"vLLM project, 2026{s}" for s in "abcde"}


def test_the_reference_article_is_named_by_its_title_not_anonymous(entries):
    """Its copy names no author, date or address: it is cited by its title, with no "n.d."."""
    ((entry, label),) = [(e, label) for e, label in entries if e.key == "draftmodelarticle"]
    assert label == "Implement Speculative Decoding with a Draft Model in Python"
    assert "author" not in entry.persons and "year" not in entry.fields
    assert "names no author, date or address" in entry.fields["note"]
