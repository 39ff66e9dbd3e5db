"""Bibliography labels that read as author and year: "Leviathan et al. 2023".

pybtex's default "alpha" labels are abbreviations ("LKM23"), and for an entry whose author is
an organisation or missing they degrade into fragments of the key.  This extension registers
a label style that prints the first author's last name (or the organisation), "et al." for
three authors or more, "&" for two, and the year ("n.d." when there is none), with a, b, ...
appended to labels that would otherwise repeat; and a formatting style, ``author_year``,
that uses it, for ``bibtex_default_style`` in ``_config.yml``.
"""

from __future__ import annotations

from collections import Counter

from pybtex.plugin import register_plugin
from pybtex.style.formatting.unsrt import Style as UnsrtStyle
from pybtex.style.labels import BaseLabelStyle
from sphinx.application import Sphinx


def _last_name(person) -> str:
    # An organisation is written {{name}}: pybtex keeps it whole as one last name.
    return " ".join(part.strip("{}") for part in person.last_names) or str(person)


def author_year_label(entry) -> str:
    """``Leviathan et al. 2023``, ``Chen & Goodman 1999``, ``vllm-project/vllm 2024``."""
    people = entry.persons.get("author") or entry.persons.get("editor") or []
    year = entry.fields.get("year", "n.d.")
    if not people:
        return f"{entry.fields.get('key', entry.key)} {year}"
    if len(people) == 1:
        names = _last_name(people[0])
    elif len(people) == 2:
        names = f"{_last_name(people[0])} & {_last_name(people[1])}"
    else:
        names = f"{_last_name(people[0])} et al."
    return f"{names} {year}"


class AuthorYearLabelStyle(BaseLabelStyle):
    def format_labels(self, sorted_entries):
        entries = list(sorted_entries)
        labels = [author_year_label(e) for e in entries]
        counts, seen = Counter(labels), Counter()
        for label in labels:
            if counts[label] > 1:
                seen[label] += 1
                label += "abcdefghijklmnopqrstuvwxyz"[seen[label] - 1]
            yield label


class AuthorYearStyle(UnsrtStyle):
    default_label_style = "author_year"
    default_sorting_style = "author_year_title"


register_plugin("pybtex.style.labels", "author_year", AuthorYearLabelStyle)
register_plugin("pybtex.style.formatting", "author_year", AuthorYearStyle)


def setup(app: Sphinx) -> dict:
    return {"parallel_read_safe": True, "parallel_write_safe": True}
