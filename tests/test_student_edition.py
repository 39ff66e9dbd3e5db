"""The student edition removes solutions and keeps everything else."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools"))
from build_book import strip_markdown, strip_notebook  # noqa: E402

START = "```{solution-start} ex-1\n:class: dropdown\n```\n"
END = "```{solution-end}\n```\n"


def md(text):
    return {"cell_type": "markdown", "metadata": {}, "source": text}


def code(text):
    return {"cell_type": "code", "metadata": {}, "outputs": [], "source": text}


def test_exercise_text_in_the_same_cell_as_the_gate_survives():
    text = "```{exercise} Q\n:label: ex-1\nAsk.\n```\n\n" + START + "The answer is 42.\n"
    kept, inside = strip_markdown(text, False)
    assert "Ask." in kept and "{exercise}" in kept
    assert "42" not in kept and "solution-start" not in kept and inside


def test_cells_between_gates_are_dropped_and_text_after_the_end_is_kept():
    nb = {"cells": [md("Intro"), md("```{exercise} Q\n:label: ex-1\nAsk.\n```\n" + START), code("answer = 42"),
                    md("So 42.\n" + END + "\n## Next section"), code("print('kept')")]}
    strip_notebook(nb)
    sources = [c["source"] for c in nb["cells"]]
    assert sources[0] == "Intro" and "Ask." in sources[1]
    assert not any("42" in s for s in sources)
    assert "## Next section" in sources[2] and sources[3] == "print('kept')"


def test_whole_gate_in_one_cell_and_plain_solution_directive():
    nb = {"cells": [md("Before\n" + START + "secret\n" + END + "After"),
                    md("```{solution} ex-2\n:class: dropdown\nsecret two\n```\nTail")]}
    strip_notebook(nb)
    text = "\n".join(c["source"] for c in nb["cells"])
    assert "secret" not in text and "Before" in text and "After" in text and "Tail" in text


def test_unclosed_gate_is_an_error():
    import pytest

    with pytest.raises(ValueError, match="no matching"):
        strip_notebook({"cells": [md(START), code("x = 1")]})
