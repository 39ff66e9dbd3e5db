"""Every speed-up the prose states names its unit (issue: "1.11x" in simulated target passes was
quoted beside wall-clock figures without saying so).

A glued number whose name says it is a speed-up (``speedup``, ``speed_up``) must stand in a
sentence that says what it counts: wall-clock time (``wall``, ``clock``, ``seconds``,
``measured``) or target passes (``target pass``, ``passes``, ``simulated``, ``cost model``,
``c =``).  Sentences are cut at a full stop followed by a space or a line break, so a sentence may
span several lines of the Markdown.
"""

import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = sorted((ROOT / "book").glob("*.ipynb")) + sorted((ROOT / "book").glob("*.md"))
SPEEDUP = re.compile(r"\{glue(?::text)?:?\}`([^`]*speed_?up[^`]*)`", re.I)
UNIT = re.compile(r"wall|clock|seconds|measured|throughput|tokens? per second|target pass|passes|simulated|cost model|\bc\s*=|\$c", re.I)


def prose(path: Path) -> str:
    if path.suffix == ".md":
        return path.read_text(encoding="utf-8")
    nb = json.loads(path.read_text(encoding="utf-8"))
    return "\n\n".join("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "markdown")


def sentences(text: str):
    for paragraph in re.split(r"\n\s*\n", text):
        yield from re.split(r"(?<=[.!?])\s+(?=[A-Z{$(*])", paragraph)


def unitless(text: str) -> list[str]:
    return [" ".join(s.split())[:160] for s in sentences(text) if SPEEDUP.search(s) and not UNIT.search(s)]


def test_the_rule_sees_a_speed_up_without_its_unit():
    assert unitless("Speculation made {glue:}`speedup_best` here.") != []
    assert unitless("It ran {glue:}`speedup_best` faster in wall-clock time.") == []
    assert unitless("The cost model predicts {glue:}`sim_speedup` target passes.") == []
    assert unitless("A {glue:}`k_best` is best. It took {glue:}`speed_up_x` of the\nwall clock.") == []


@pytest.mark.parametrize("path", PAGES, ids=lambda p: p.name)
def test_every_glued_speed_up_names_its_unit(path):
    assert unitless(prose(path)) == [], f"{path.name}: a speed-up without its unit (wall clock or target passes)"
