"""The book stays finishable: the main line within MAIN_LINE_WORDS, the whole book within BOOK_WORDS.

The table of contents has a main line (the introduction, the part captioned "The main line")
that teaches the whole method and its use, a second part that each chapter of it says what it
needs from the main line, and an appendix.  Words are counted in the prose a reader reads: the
Markdown of the pages and of the notebooks' Markdown cells, exercises and solutions included,
code blocks left out (a glued number counts as one word).
"""

import json
import re
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
MAIN_LINE_WORDS = 25_000
BOOK_WORDS = 45_000
MAIN_CAPTION = "The main line"
FURTHER_CAPTION = "Going further"

FENCE = re.compile(r"^(`{3,}|~{3,})(?!\{(?:exercise|solution|prf:|note|admonition|tip|warning|important|"
                   r"glossary|figure|math|dropdown|margin|seealso|epigraph|card|div))[^\n]*\n.*?^\1[ \t]*$",
                   re.M | re.S)
ROLE = re.compile(r"\{[\w:-]+\}`[^`]*`")
WORD = re.compile(r"[A-Za-z0-9]+(?:['’-][A-Za-z0-9]+)*")


def words(markdown: str) -> int:
    """Words of prose in a Markdown text (code blocks out, a role counts as one word)."""
    text = FENCE.sub(" ", markdown)
    text = ROLE.sub(" X ", text)
    text = re.sub(r"^(?:`{3,}|:{3,})\{[^}]*\}", " ", text, flags=re.M)  # a directive's name (its title stays)
    text = re.sub(r"^:[\w-]+:.*$", " ", text, flags=re.M)  # its options
    return len(WORD.findall(text))


def page_words(path: Path) -> int:
    if path.suffix == ".md":
        return words(path.read_text(encoding="utf-8"))
    nb = json.loads(path.read_text(encoding="utf-8"))
    return sum(words("".join(c["source"])) for c in nb["cells"] if c["cell_type"] == "markdown")


def page_path(name: str) -> Path:
    for suffix in (".ipynb", ".md"):
        if (ROOT / f"{name}{suffix}").is_file():
            return ROOT / f"{name}{suffix}"
    raise AssertionError(f"_toc.yml names {name}, which is neither a notebook nor a Markdown page")


def parts() -> dict[str, list[Path]]:
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text(encoding="utf-8"))
    out = {"root": [page_path(toc["root"])]}
    for part in toc.get("parts", []):
        out[part["caption"]] = [page_path(ch["file"]) for ch in part["chapters"]]
    return out


def test_word_counting_leaves_code_out_and_counts_roles_once():
    assert words("Two words.") == 2
    assert words("A {glue:}`speedup_best` x speed-up") == 4
    assert words("Text\n```python\nx = 1 + 2  # many words in a comment\n```\nmore") == 2
    assert words("```{exercise} A title here\n:label: ex-1\nDo this.\n```") == 5


def test_the_main_line_and_the_book_fit_their_budgets():
    found = parts()
    assert MAIN_CAPTION in found and FURTHER_CAPTION in found, f"_toc.yml parts: {list(found)}"
    counts = {p.name: page_words(p) for ps in found.values() for p in ps}
    main = sum(counts[p.name] for p in found["root"] + found[MAIN_CAPTION])
    total = sum(counts.values())
    detail = ", ".join(f"{n} {c}" for n, c in counts.items())
    assert main <= MAIN_LINE_WORDS, f"the main line has {main:,} words (budget {MAIN_LINE_WORDS:,}): {detail}"
    assert total <= BOOK_WORDS, f"the book has {total:,} words (budget {BOOK_WORDS:,}): {detail}"


def test_every_going_further_chapter_says_what_it_needs():
    for path in parts()[FURTHER_CAPTION]:
        if path.suffix != ".ipynb":
            continue
        nb = json.loads(path.read_text(encoding="utf-8"))
        first = next("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "markdown")
        assert re.search(r"\*\*What this chapter needs", first), (
            f"{path.name}: a chapter of the second part opens by saying what it needs from the main line "
            "(a paragraph starting '**What this chapter needs**')")
