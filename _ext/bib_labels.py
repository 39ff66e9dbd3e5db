"""Citations and bibliography labels that read as author and year: "Leviathan et al., 2023".

pybtex's default "alpha" labels are abbreviations ("LKM23"), and for an entry whose author is
an organisation or missing they degrade into fragments of the key.  This extension registers

* a label style, ``author_year``: the first author's last name (or the organisation), "et al."
  for three authors or more, "&" for two, a comma and the year, with a, b, ... appended to the
  year of labels that would otherwise repeat ("vLLM project, 2026a"); an entry that names no
  author keeps its title in their place, and one that names no date has no year (the reference
  article of chapter 7, whose copy names neither, is cited by its title alone);
* a formatting style, ``author_year``, that uses it (``bibtex_default_style`` in
  ``_config.yml``);
* a referencing style, ``author_year_label`` (``bibtex_reference_style``), whose in-text
  citations are made of the same two parts as the label: ``[vLLM project, 2026a]`` for
  ``{cite:p}`` and ``vLLM project [2026a]`` for ``{cite:t}``.  sphinxcontrib-bibtex's own
  ``author_year`` style builds the citation from the author and year fields alone, so two
  entries of one organisation in one year read the same in the text although their labels
  differ.  ``{cite:author}`` and ``{cite:year}`` are not offered: alone, either part could
  read the same for two entries.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field

from pybtex.plugin import register_plugin
from pybtex.richtext import Tag, Text
from pybtex.style.formatting.unsrt import Style as UnsrtStyle
from pybtex.style.labels import BaseLabelStyle
from sphinx.application import Sphinx
from sphinxcontrib.bibtex.plugin import register_plugin as register_bibtex_plugin
from sphinxcontrib.bibtex.style.referencing import BaseReferenceStyle, BracketStyle, GroupReferenceStyle
from sphinxcontrib.bibtex.style.referencing.extra_empty import ExtraEmptyReferenceStyle
from sphinxcontrib.bibtex.style.referencing.extra_label import ExtraLabelReferenceStyle
from sphinxcontrib.bibtex.style.template import join, join2, node, post_text, pre_text, reference

#: The year at the end of a label, with its a, b, ... suffix.
_YEAR = re.compile(r", (?P<year>\d{4}[a-z]?|n\.d\.[a-z]?)$")


def _last_name(person) -> str:
    # An organisation is written {{name}}: pybtex keeps it whole as one last name.
    return " ".join(part.strip("{}") for part in person.last_names) or str(person)


def _title(entry) -> str:
    return " ".join(entry.fields.get("title", entry.key).replace("{", "").replace("}", "").split())


def label_parts(entry) -> tuple[str, str]:
    """``("Leviathan et al.", "2023")``: who wrote the entry and when, as the label shows them.

    An entry without author or editor is named by its title; an entry without a year has an
    empty year (its copy names no date, and the label says nothing rather than "n.d.").
    """
    people = entry.persons.get("author") or entry.persons.get("editor") or []
    if not people:
        who = _title(entry)
    elif len(people) == 1:
        who = _last_name(people[0])
    elif len(people) == 2:
        who = f"{_last_name(people[0])} & {_last_name(people[1])}"
    else:
        who = f"{_last_name(people[0])} et al."
    return who, entry.fields.get("year", "")


def author_year_label(entry) -> str:
    """``Leviathan et al., 2023``, ``Chen & Goodman, 1999``, ``vLLM project, 2026``, or the title."""
    who, year = label_parts(entry)
    return f"{who}, {year}" if year else who


def split_label(label: str) -> tuple[str, str]:
    """A label back into its two parts: ``"vLLM project, 2026a"`` -> ``("vLLM project", "2026a")``."""
    match = _YEAR.search(label)
    return (label[: match.start()], match.group("year")) if match else (label, "")


class AuthorYearLabelStyle(BaseLabelStyle):
    def format_labels(self, sorted_entries):
        entries = list(sorted_entries)
        labels = [author_year_label(e) for e in entries]
        counts, seen = Counter(labels), Counter()
        for label in labels:
            if counts[label] > 1:
                seen[label] += 1
                suffix = "abcdefghijklmnopqrstuvwxyz"[seen[label] - 1]
                label += suffix if _YEAR.search(label) else f" ({suffix})"
            yield label


class AuthorYearStyle(UnsrtStyle):
    default_label_style = "author_year"
    default_sorting_style = "author_year_title"


# --- in-text citations from the label -------------------------------------------------------

def _parts(data) -> tuple[Text, str]:
    """The label's two parts for one citation; a title (no author) in italics."""
    who, year = split_label(data["formatted_entry"].label)
    entry = data["entry"]
    named = entry.persons.get("author") or entry.persons.get("editor")
    return (Text(who) if named else Tag("em", who)), year


@node
def label_parenthetical(children, data):
    """``vLLM project, 2026a``, linked to the entry: the label itself."""
    who, year = _parts(data)
    body = Text(who, ", ", year) if year else who
    return join2(sep1=" ", sep2=", ")[pre_text, reference[body], post_text].format_data(data)


@node
def label_textual(children, data):
    """``vLLM project [2026a]`` with the year linked; an undated entry: its title, linked."""
    who, year = _parts(data)
    if not year:
        return join2(sep1=" ", sep2=", ")[pre_text, reference[who], post_text].format_data(data)
    cited = join2(sep1=" ", sep2=", ")[pre_text, reference[Text(year)], post_text]
    return join(sep=" ")[who, join["[", cited, "]"]].format_data(data)


@dataclass
class _Parenthetical(BaseReferenceStyle):
    bracket: BracketStyle = field(default_factory=lambda: BracketStyle(sep="; "))

    def role_names(self):
        return [f"{alt}p{full}" for alt in ("", "al") for full in ("", "s")]

    def outer(self, role_name, children):
        return self.bracket.outer(children, brackets="al" not in role_name, capfirst=False)

    def inner(self, role_name):
        return label_parenthetical


@dataclass
class _Textual(BaseReferenceStyle):
    bracket: BracketStyle = field(default_factory=lambda: BracketStyle(sep="; "))

    def role_names(self):
        return [f"{cap}t{full}" for cap in ("", "c") for full in ("", "s")]

    def outer(self, role_name, children):
        return self.bracket.outer(children, brackets=False, capfirst="c" in role_name)

    def inner(self, role_name):
        return label_textual


@dataclass
class AuthorYearLabelReferenceStyle(GroupReferenceStyle):
    """``{cite:p}`` and ``{cite:t}`` read the entry's label; ``{cite:label}`` is the label."""

    def __post_init__(self):
        self.styles.extend([_Parenthetical(), _Textual(), ExtraLabelReferenceStyle(), ExtraEmptyReferenceStyle()])
        super().__post_init__()


register_plugin("pybtex.style.labels", "author_year", AuthorYearLabelStyle)
register_plugin("pybtex.style.formatting", "author_year", AuthorYearStyle)
register_bibtex_plugin("sphinxcontrib.bibtex.style.referencing", "author_year_label",
                       AuthorYearLabelReferenceStyle)


def setup(app: Sphinx) -> dict:
    return {"parallel_read_safe": True, "parallel_write_safe": True}
