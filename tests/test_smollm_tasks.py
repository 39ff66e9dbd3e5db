"""The real model's task set (speclib.lm.smollm_tasks) and its stored file (tools/smollm_tasks.py).

The stored file is checked for its layout and promises (every family, disjoint sets), the
builder for determinism, and the file against what the builder gives on the Python that wrote
it.  Each promise of check_tasks is broken by hand once (negative controls).
"""

import copy
import json
import sys
from pathlib import Path

import pytest

from speclib.lm import smollm_tasks
from speclib.lm.smollm_tasks import (FAMILIES, GROUNDED, TASKS_PATH, build_tasks, check_tasks,
                                     evaluation_prompts, load_tasks, training_prompts)

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))


@pytest.fixture(scope="module")
def stored():
    return load_tasks()


@pytest.fixture(scope="module")
def built():
    return build_tasks()


def test_the_stored_set_has_five_evaluation_prompts_per_family_and_a_larger_training_set(stored):
    assert [p["family"] for p in evaluation_prompts(stored)] == [f for f in FAMILIES for _ in range(5)]
    assert GROUNDED == FAMILIES[:3]
    assert len(training_prompts(stored)) >= 1000
    for family in FAMILIES:
        assert len(training_prompts(stored, family)) >= 100, family
    assert [p["family"] for p in evaluation_prompts(stored, per_family=1)] == list(FAMILIES)
    assert all(p["family"] == "quote" for p in evaluation_prompts(stored, "quote"))


def test_grounded_prompts_carry_their_source_text_and_open_ones_do_not(stored):
    for prompt in evaluation_prompts(stored):
        content = prompt["messages"][-1]["content"]
        if prompt["family"] == "code_edit":
            assert "```python\ndef " in content
        elif prompt["family"] in ("summary", "quote"):
            assert content.count("\n") > 8
        else:
            assert "\n" not in content and len(content) < 200


def test_the_builder_is_deterministic_and_its_seed_only_moves_the_training_choices(built):
    check_tasks(built)
    assert build_tasks() == built
    other = build_tasks(seed=1)
    assert other["evaluation"] == built["evaluation"]
    assert other["training"] != built["training"]
    assert [p["source"] for p in other["training"]] == [p["source"] for p in built["training"]]


def test_what_a_running_program_adds_to_builtins_does_not_change_the_set(built, monkeypatch):
    import builtins

    # IPython adds display() to builtins when a shell starts in the process (as a test may).
    monkeypatch.setattr(builtins, "display", lambda *args: None, raising=False)
    assert build_tasks() == built


def test_the_stored_file_is_what_the_script_writes_on_the_python_that_wrote_it(stored, built):
    import smollm_tasks as script

    if stored["python"] != built["python"]:
        pytest.skip(f"the file was written by Python {stored['python']}, whose standard library "
                    f"differs from this {built['python']}'s; its layout is checked above")
    assert TASKS_PATH.read_text(encoding="utf-8") == script.dumps(built)
    assert script.main(["--check"]) == 0


def test_the_script_check_reports_a_differing_file(tmp_path, capsys):
    import smollm_tasks as script

    path = tmp_path / "tasks.json"
    assert script.main(["--output", str(path)]) == 0
    assert script.main(["--check", "--output", str(path)]) == 0
    tasks = json.loads(path.read_text())
    tasks["evaluation"][0]["messages"][0]["content"] += " "
    path.write_text(script.dumps(tasks))
    assert script.main(["--check", "--output", str(path)]) == 1
    assert "DIFFERS" in capsys.readouterr().out


def test_evaluation_and_training_are_disjoint_by_source_prompt_and_long_line(stored):
    evaluation, training = evaluation_prompts(stored), training_prompts(stored)
    assert not {p["source"] for p in evaluation} & {p["source"] for p in training}
    text = [json.dumps(p["messages"]) for p in training]
    assert not {json.dumps(p["messages"]) for p in evaluation} & set(text)
    # The near-copies that the builder leaves out exist in the standard library: without the
    # shared-line rule, _siftup_max (a copy of the evaluation's _siftup) would be in training.
    assert not any("_siftup_max" in p["source"] for p in training)
    assert any("_siftdown_max" in p["source"] for p in training)


@pytest.mark.parametrize("fault, message", [
    (lambda t: t["training"].append(copy.deepcopy(t["evaluation"][3]) | {"id": "x"}), "in both"),
    (lambda t: t["training"].append(copy.deepcopy(t["evaluation"][0]) | {"id": "x", "source": "y"}), "in both"),
    (lambda t: t["training"].append({"id": "x", "family": "summary", "source": "z", "messages": [
        {"role": "user", "content": "Summarise.\n\n" + t["evaluation"][5]["messages"][0]["content"]
         .split("\n\n", 1)[1].splitlines()[3]}]}), "shares the line"),
    (lambda t: t["training"].append(copy.deepcopy(t["training"][0])), "used twice"),
    (lambda t: t["evaluation"][0]["messages"][0].update(role="robot"), "known role"),
    (lambda t: t["evaluation"][0]["messages"][0].update(content=" "), "non-empty content"),
    (lambda t: t["evaluation"][0]["messages"][0].update(content="x" * 4000), "more than"),
    (lambda t: t["evaluation"][0].update(family="poetry"), "is not one of"),
    (lambda t: t.update(evaluation=[p for p in t["evaluation"] if p["family"] != "open"]), "no prompt of"),
    (lambda t: t.update(format=99), "format"),
    (lambda t: t.pop("training"), "missing 'training'"),
])
def test_check_tasks_names_each_broken_promise(stored, fault, message):
    tasks = copy.deepcopy(stored)
    fault(tasks)
    with pytest.raises(ValueError, match=message):
        check_tasks(tasks)


def test_the_shared_line_rule_catches_a_long_line_and_ignores_short_ones():
    assert smollm_tasks.long_lines("    return h, s, v\n") == set()
    line = "x" * smollm_tasks.SHARED_LINE_CHARS
    assert smollm_tasks.long_lines(f"  {line}  \nshort") == {line}


def test_bad_arguments_are_refused_by_name(stored, tmp_path):
    with pytest.raises(ValueError, match="family"):
        evaluation_prompts(stored, "poetry")
    with pytest.raises(ValueError, match="per_family"):
        evaluation_prompts(stored, per_family=0)
    with pytest.raises(FileNotFoundError, match="tools/smollm_tasks.py"):
        load_tasks(tmp_path / "none.json")
    (tmp_path / "bad.json").write_text("{")
    with pytest.raises(ValueError, match="not JSON"):
        load_tasks(tmp_path / "bad.json")
    with pytest.raises(ValueError, match="seed"):
        build_tasks(seed=-1)
    with pytest.raises(ValueError, match="tasks: expected a task set"):
        training_prompts({"evaluation": []})
    with pytest.raises(TypeError, match="text"):
        smollm_tasks.long_lines(None)
