#!/usr/bin/env python3
"""The mutation check: put known faults into a scratch copy of the tree, one at a time, and see
whether the tests that cover each one catch it.

    python3 tools/mutants.py                 # every fault (a few minutes)
    python3 tools/mutants.py --only NAME ... # some of them (--list shows the names)

Each fault in :data:`FAULTS` is one exact text replacement in one file, with the tests that
must catch it.  The working tree is never written: the files git knows of (tracked, and new
files it does not ignore) are copied to a temporary folder, a clean run of the selected
tests there must pass first, then each fault is applied to the copy, its tests run there
(``pytest -x``), and the file is restored.  The report is a table: ``caught``, ``missed``,
``stale`` (the text to replace is no longer in the file, or occurs more than once: the entry
must be updated, never silently skipped), ``timeout`` (counted as caught: the tests did not
pass), ``broken`` (the mutated tree does not even collect, or a test id does not exist: the
entry must be fixed), and for a fault listed as equivalent (it changes nothing observable;
the entry says why) ``equivalent`` when no test notices it.  The exit status is 1 when a
must-catch fault is missed, an entry is stale or broken, an equivalent fault is caught after
all, or the clean run fails; 0 otherwise.  See CONTRIBUTING.md, "The mutation check".
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: Environment of every test run: one thread per library (the runs are timed against a limit),
#: no bytecode written into the copy (a mutated file is always compiled afresh).
ENVIRONMENT = {"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
               "NUMBA_NUM_THREADS": "1", "PYTHONDONTWRITEBYTECODE": "1"}
TIMEOUT = 600  #: seconds one fault's tests may run


@dataclass(frozen=True)
class Fault:
    """One fault: replace ``old`` (exactly once in ``path``) by ``new``; ``tests`` must then fail."""

    name: str
    path: str  #: the file, relative to the root
    old: str
    new: str
    tests: tuple[str, ...]  #: pytest node ids (relative to the root) that must catch it
    what: str  #: what the fault does, in one line
    equivalent: str = ""  #: non-empty for a fault that changes nothing observable: why


T = "tests/"
FAULTS: tuple[Fault, ...] = (
    # --- speclib/core ---------------------------------------------------------------------------
    Fault("sequences-row-layout", "speclib/core/decoding.py",
          "sequence_nodes(tree, m)], axis=1)", "tree.draws.reshape(m, -1)], axis=1)",
          (T + "test_exact_laws.py::test_every_shape_is_exact_through_the_loop[second-order-sequences]",),
          "a proposer's (m, k) sequences read with the wrong layout (rows of the wrong nodes)"),
    Fault("batch-takes-a-proposer", "speclib/core/variants.py",
          '    if hasattr(draft, "propose"):\n        raise TypeError(f"draft: batch_generate',
          '    if False:\n        raise TypeError(f"draft: batch_generate',
          (T + "test_batched.py::test_the_batch_driver_refuses_a_proposer",),
          "the batch driver takes a proposer (one shared by every sequence; a tree scored as a chain)"),
    Fault("tree-zero-probability-node", "speclib/core/variants.py",
          "if not p_draft[np.arange(n), tree.tokens].min(initial=1.0) > 0:", "if False:",
          (T + "test_tree.py::test_a_node_with_probability_zero_under_its_own_row_is_refused",),
          "multi_draft_verify keeps a node its own row never proposes (0/0 is kept)"),
    Fault("batch-draft-passes-cumulative", "speclib/core/variants.py",
          "stats.draft_passes += run.stats.draft_passes - passes", "stats.draft_passes += run.stats.draft_passes",
          (T + "test_batched.py::test_batch_counters_are_the_sums_of_the_lone_runs",),
          "BatchStats.draft_passes adds each sequence's cumulative count at every step"),
    Fault("user-tree-rows-trusted", "speclib/core/tree.py",
          'trusted = rows_trusted(cache) and "extend_tree" in vars(type(cache))', "trusted = True",
          (T + "test_tree.py::test_a_user_caches_tree_rows_are_checked",),
          "the rows a user's cache returns for a tree are not checked"),
    Fault("wrapped-tree-rows-trusted", "speclib/core/tree.py",
          'trusted = rows_trusted(cache) and "extend_tree" in vars(type(cache))', "trusted = rows_trusted(cache)",
          (T + "test_tree.py::test_a_user_caches_tree_rows_are_checked",),
          "a user's cache, wrapped by the loop to check extend, has its extend_tree rows trusted"),
    Fault("path-scoring-rollback", "speclib/core/tree.py",
          "cache.rollback(base + f)  # every path", "cache.rollback(base)  # every path",
          (T + "test_tree.py::test_path_by_path_scoring_feeds_each_path_once_and_keeps_the_text",
           T + "test_tree.py::test_a_path_by_path_target_holds_the_accepted_text_after_every_step"),
          "path-by-path scoring leaves the cache without the fed text (read again at every step)"),
    Fault("path-scoring-rollback-to-zero", "speclib/core/tree.py",
          "cache.rollback(base + f)  # every path", "cache.rollback(0)  # every path",
          (T + "test_tree.py::test_path_by_path_scoring_feeds_each_path_once_and_keeps_the_text",
           T + "test_tree.py::test_a_path_by_path_target_holds_the_accepted_text_after_every_step"),
          "path-by-path scoring empties the cache (the whole text read again at every step)"),
    Fault("top-b-zero-probability", "speclib/core/proposers.py",
          "for x in order[p[order] > 0]:", "for x in order:",
          (T + "test_proposers.py::test_top_b_children_are_the_likeliest_tokens_with_positive_probability",),
          "a top-b tree proposes tokens its draft gives probability 0"),
    Fault("sampled-children-with-replacement", "speclib/core/proposers.py",
          "            left[x] = 0.0\n", "",
          (T + "test_proposers.py::test_sampled_children_are_drawn_without_replacement",),
          "a sampled tree draws a node's children with replacement (siblings repeat)"),
    Fault("prompt-lookup-other-text", "speclib/core/proposers.py",
          "if size < old or (old and int(text[old - 1]) != seen[old - 1]):", "if size < old:",
          (T + "test_proposers.py::test_prompt_lookup_proposes_what_lookup_draft_finds_whatever_the_text",),
          "a prompt-lookup index is not rebuilt when asked about another text"),
    Fault("prompt-lookup-start", "speclib/core/proposers.py",
          '        as_tokens(prompt, "prompt", self.vocab_size, allow_empty=False)\n        self._reset()\n',
          '        as_tokens(prompt, "prompt", self.vocab_size, allow_empty=False)\n',
          (T + "test_proposers.py::test_prompt_lookup_proposes_what_lookup_draft_finds_whatever_the_text",),
          "start() keeps the index of the previous generation"),
    Fault("user-tree-structure-unchecked", "speclib/core/proposers.py",
          "            token_tree(tree.tokens, tree.parents, tree.draws)\n        except",
          "            pass\n        except",
          (T + "test_tree.py::test_a_user_proposers_malformed_tree_is_refused_naming_it",),
          "a user proposer's tree is verified without checking its parents' order and distinct siblings"),
    Fault("tree-draft-rereads-the-text", "speclib/core/proposers.py",
          "cache.accept_tree(f - 1)  # keep the text read", "cache.rollback(len(cache))  # keep the text read",
          (T + "test_proposers.py::test_a_tree_draft_reads_each_token_once[grow]",),
          "a tree draft that grows its tree forgets the text: its draft reads the whole text every step"),
    Fault("tree-draft-levels-reread-the-text", "speclib/core/proposers.py",
          "            keep_branch(cache, text.size, scored, -1)\n", "            cache.rollback(len(cache))\n",
          (T + "test_proposers.py::test_a_tree_draft_reads_each_token_once[levels]",),
          "a tree draft scored level by level forgets the text: its draft reads the whole text every step"),
    # --- speclib/lm -----------------------------------------------------------------------------
    Fault("batched-pass-at-temperature-1", "speclib/lm/batched.py",
          "temperature = caches[0].model.temperature if caches and isinstance(caches[0], KVCache) else 1.0",
          "temperature = 1.0",
          (T + "test_batched.py::test_batched_rows_are_at_the_models_temperature",),
          "the batched pass returns rows at temperature 1 whatever the model's"),
    Fault("batched-pass-without-features", "speclib/lm/batched.py",
          '        if getattr(cache, "keep_features", False):\n            cache._grow',
          "        if False:\n            cache._grow",
          (T + "test_batched.py::test_a_batched_pass_writes_the_features_a_lone_pass_writes",),
          "the stacked pass does not write the hidden states of a cache that keeps them"),
    Fault("batched-join-strict", "speclib/lm/batched.py",
          "and pos + n <= start + cache.model.config.block_size)",
          "and pos + n < start + cache.model.config.block_size)",
          (T + "test_batched.py::test_a_cache_that_exactly_fills_its_window_joins_the_stacked_pass",),
          "a cache that exactly fills its window takes a separate pass"),
    Fault("batched-join-without-reread-check", "speclib/lm/batched.py",
          "return (start == cache._start and cache._start + cache._filled == pos\n",
          "return (start == cache._start\n",
          (T + "test_batched.py::test_each_sequence_gets_its_own_rows_and_cache",
           T + "test_batched.py::test_a_cache_that_exactly_fills_its_window_joins_the_stacked_pass"),
          "the join test drops its 'no re-read needed' condition",
          equivalent="KVCache keeps _start + _filled == len(cache) whenever len(cache) is read through the "
                     "window starting at _start (extend, rollback, accept_tree and the window switch all keep "
                     "it), so once start == cache._start holds the dropped condition is always true"),
    Fault("medusa-previous-state", "speclib/lm/drafters.py",
          "self.head_logits(self.features_cache.features[-1:], m)[0]",
          "self.head_logits(self.features_cache.features[-2:-1], m)[0]",
          (T + "test_drafters.py::test_the_loop_drafts_the_teacher_forced_rows[medusa-0.7]",),
          "Medusa's heads read the hidden state one position early"),
    Fault("eagle-state-token-pairing", "speclib/lm/drafters.py",
          "self._pass(self.features_cache.features[self._real:], text[self._real + 1:])",
          "self._pass(self.features_cache.features[self._real:], text[self._real:-1])",
          (T + "test_drafters.py::test_the_loop_drafts_the_teacher_forced_rows[eagle-0.7]",),
          "EAGLE pairs the target's state j with token j instead of token j + 1"),
    Fault("eagle-real-entries-kept", "speclib/lm/drafters.py",
          "        self._real = self._count\n        tokens = np.empty(k, dtype=np.int64)\n",
          "        tokens = np.empty(k, dtype=np.int64)\n",
          (T + "test_drafters.py::test_feature_drafters_count_their_passes_and_entries[eagle]",),
          "EAGLE never records the entries built from the target's states: it reads them all again"),
    Fault("eagle-draft-passes", "speclib/lm/drafters.py",
          "                return Proposal(tokens, rows, k)\n",
          "                return Proposal(tokens, rows, k + 1)\n",
          (T + "test_drafters.py::test_feature_drafters_count_their_passes_and_entries[eagle]",),
          "EAGLE reports k + 1 draft passes for k drafts"),
    Fault("feature-drafters-ready-on-empty", "speclib/lm/drafters.py",
          "return n >= 1 and n == text.size - 1", "return n == text.size - 1",
          (T + "test_drafters.py::test_one_token_prompts_are_exact",),
          "Medusa and EAGLE draft before the target has read anything (a one-token prompt)"),
    Fault("loaded-drafter-temperature", "speclib/lm/drafters.py",
          "model = place(load_drafter_model(name, path, target).with_temperature(temperature))",
          "model = place(load_drafter_model(name, path, target))",
          (T + "test_drafters.py::test_the_loop_drafts_the_teacher_forced_rows[distilled-0.7]",),
          "a loaded distilled or early-exit drafter drafts at temperature 1 whatever it was asked"),
    Fault("medusa-head-missing", "speclib/lm/drafters.py",
          'for i in range(header["heads"])])', 'for i in range(header["heads"] - 1)])',
          (T + "test_drafters.py::test_shipped_drafters_accept_at_least_their_recorded_rate[medusa]",),
          "one Medusa head fewer loaded than the file holds"),
    Fault("teacher-forced-medusa-rows", "speclib/lm/drafters.py",
          "[logits[:n - i - 1, i].astype(np.float64) for i in range(drafter.heads)]",
          "[logits[1:n - i, i].astype(np.float64) for i in range(drafter.heads)]",
          (T + "test_drafters.py::test_shipped_drafters_accept_at_least_their_recorded_rate[medusa]",),
          "teacher-forced Medusa rows paired with the target's rows one position off"),
    Fault("tree-window-check", "speclib/lm/transformer.py",
          "deepest = length + int(depth.max()) - 1", "deepest = length + int(depth.max())",
          (T + "test_tree.py::test_a_tree_that_ends_on_the_windows_last_slot_takes_one_pass",),
          "a tree whose deepest node ends the window is scored path by path (extra tokens run)"),
    Fault("tree-free-slots", "speclib/lm/transformer.py",
          "        if filled + n > self._keys.shape[2]:  # more nodes than the slots beyond the window\n"
          "            return self._tree_by_paths(tokens, parents)\n", "",
          (T + "test_tree.py::test_a_tree_larger_than_the_free_slots_is_scored_path_by_path[False]",),
          "a tree with more nodes than the free key slots is written past them"),
    Fault("grown-tree-free-slots", "speclib/lm/transformer.py",
          "\n                or slot + n_old + n > self._keys.shape[2]):", "):",
          (T + "test_tree.py::test_a_tree_larger_than_the_free_slots_is_scored_path_by_path[True]",),
          "a grown tree with more nodes than the free key slots is written past them"),
    # --- speclib/book: what the book's numbers are made of (issue 38) ---------------------------
    Fault("ranking-overlap-by-estimate", "speclib/book/render.py",
          "group = [r for r in rows if r[2] >= leader[1]]", "group = [r for r in rows if r[0] >= leader[1]]",
          (T + "test_ranking.py::test_an_interval_that_reaches_the_leader_keeps_it_from_being_named",),
          "ranking_sentence judges overlap by the other estimate instead of its upper bound"),
    Fault("accelerator-best-by-prediction", "speclib/book/accelerator.py",
          'best = max(rows, key=lambda n: rows[n]["speedup"])', 'best = max(rows, key=lambda n: rows[n]["predicted"])',
          (T + "test_accelerator_record.py::test_the_best_drafter_is_the_fastest_measured_not_the_fastest_predicted",),
          "the accelerator summary names as best the drafter with the highest predicted speed-up"),
    Fault("accelerator-medusa-r-at-k", "speclib/book/accelerator.py",
          "r = r_dev[drafts + 1]", "r = r_dev[k + 1]",
          (T + "test_accelerator_record.py::test_medusa_past_its_heads_is_predicted_from_the_pass_it_makes",),
          "Medusa's prediction reads r(k+1) instead of r(min(k, heads)+1)"),
    Fault("accelerator-ks-by-length", "speclib/book/accelerator.py",
          'if _need(run, "ks", f"drafters.{name}") != ks:', 'if len(_need(run, "ks", f"drafters.{name}")) != len(ks):',
          (T + "test_accelerator_record.py::test_a_drafter_measured_at_other_draft_lengths_is_refused",),
          "the record check compares a drafter's ks with settings.ks by length only"),
    # --- speclib/lm: the real model (SmolLM2-135M-Instruct) ---------------------------------------
    Fault("llama-rotary-sign", "speclib/lm/llama.py", "    out += partner * s\n", "    out -= partner * s\n",
          (T + "test_smollm.py::test_logits_and_greedy_choices_match_transformers_stored_reference[prose]",),
          "the rotary embedding turns every pair the wrong way"),
    Fault("llama-query-groups", "speclib/lm/llama.py",
          "qk[:, :h].reshape(n, kv, rep, dh).transpose(1, 2, 0, 3)", "qk[:, :h].reshape(n, rep, kv, dh).transpose(2, 1, 0, 3)",
          (T + "test_smollm.py::test_grouped_query_heads_read_their_own_key_value_head",),
          "in a pass over several tokens, query head h reads key/value head h % n_kv_heads"),
    Fault("llama-causal-mask", "speclib/lm/llama.py", "k=filled + 1)", "k=filled + 2)",
          (T + "test_smollm.py::test_logits_and_greedy_choices_match_transformers_stored_reference[prose]",),
          "in a pass over several tokens, each token also sees the next one"),
    Fault("llama-rms-eps", "speclib/lm/llama.py", "    ms += np.float32(eps)\n", "",
          (T + "test_smollm.py::test_logits_and_greedy_choices_match_transformers_stored_reference[code]",),
          "RMSNorm without its epsilon (1e-5)"),
    Fault("llama-float64-scale", "speclib/lm/llama.py",
          "self._scale = np.float32(1.0 / math.sqrt(config.head_dim))", "self._scale = 1.0 / np.sqrt(config.head_dim)",
          (T + "test_smollm.py::test_every_activation_is_float32",),
          "the attention scale is numpy 2's float64 scalar, which promotes the attention to float64"),
    Fault("llama-grow-forgets", "speclib/lm/llama.py", "            grown[:, :, :old.shape[2]] = old\n", "",
          (T + "test_smollm.py::test_extending_in_pieces_equals_one_pass_and_rollback_equals_fresh",),
          "a cache that grows its key/value arrays loses the keys and values it held"),
    Fault("llama-tree-depth", "speclib/lm/llama.py", "length + depths(parents) - 1, mask)", "length + depths(parents), mask)",
          (T + "test_smollm.py::test_a_token_tree_scores_every_branch_in_one_pass",),
          "a token tree's nodes are rotated one position too far"),
    Fault("llama-tree-keys-stay", "speclib/lm/llama.py",
          "        self._keys[:, :, start:end] = self._keys[:, :, slots]\n", "",
          (T + "test_smollm.py::test_a_token_tree_scores_every_branch_in_one_pass",),
          "accept_tree keeps the kept branch's values but leaves the keys of the tree's first nodes"),
    Fault("smollm-digits-not-split", "speclib/lm/tokenizer.py", 'if pre == "smollm" else byte_level', "if False else byte_level",
          (T + "test_smollm.py::test_digits_are_split_one_by_one_before_the_byte_level_pattern",),
          "SmolLM2's pre-tokenizer without its digit split (GPT-2's pattern alone)"),
    Fault("gguf-tensor-past-the-end", "speclib/lm/gguf_file.py", "if start + offset + nbytes > size:", "if False:",
          (T + "test_smollm.py::test_a_truncated_copy_is_refused_by_name[None-truncated]",),
          "a file cut inside its last tensor is read, and fails deep inside numpy"),
    # --- the classroom: self-checks and the grader ----------------------------------------------
    Fault("counter-limit-tolerance", "speclib/book/checks.py",
          "            want = accepted_per_proposed(alpha, k)\n            if abs(got - want) <= 1e-9:",
          "            want = accepted_per_proposed(alpha, k)\n            if abs(got - want) <= 1e-2:",
          (T + "test_checks_ch07.py::test_an_approximate_answer_is_not_accepted",),
          "check_counter_limit accepts an answer that is only close (rounded to two decimals)"),
    Fault("grade-mark-outranks-error", "speclib/book/grading.py",
          '    if error is not None:\n        name, value = error.get("ename", ""),',
          '    if error is not None and "\\u2714" not in text:\n        name, value = error.get("ename", ""),',
          (T + "test_grading.py::test_a_check_mark_then_an_error_is_not_a_pass",),
          "a check cell that prints one check mark and then raises is graded passed"),
    Fault("ranking-below-the-whole-group", "speclib/book/render.py",
          "below_all = [r for r in rest if all(r[2] < g[1] for g in group)]", "below_all = list(rest)",
          (T + "test_render.py::test_ranking_says_below_only_of_the_intervals_that_separate",),
          "ranking_sentence says a setting is below the whole leading group when only the leader's "
          "interval separates from it"),
    Fault("llama-eagle-slot", "speclib/lm/smollm_draft.py", "        slot = self._count - self._first\n",
          "        slot = self._count\n",
          (T + "test_smollm_draft.py::test_the_loop_drafts_the_teacher_forced_rows[2]",),
          "the real model's draft writes its entries' keys at their positions in the text, past the slots "
          "it attends to, when it reads only the prompt's last tokens"),
    Fault("llama-eagle-vocab-columns", "speclib/lm/smollm_draft.py",
          "        row[self.vocab] = self._rows(self.draft_logits(f))[0]\n",
          "        row[self.vocab[::-1]] = self._rows(self.draft_logits(f))[0]\n",
          (T + "test_smollm_draft.py::test_draft_rows_live_on_the_draft_vocabulary[1.0]",),
          "the draft's probabilities land on the wrong tokens of its vocabulary"),
    Fault("eagle-loop-first-entry", "speclib/lm/smollm_draft.py", "        return max(0, prompt_length - self.context)\n",
          "        return max(0, prompt_length - self.context - 1)\n",
          (T + "test_smollm_draft.py::test_passes_and_entries_are_counted_as_the_loop_drafts",),
          "the real model's draft reads one prompt token more than it was trained to"),
    Fault("batch-means-half-width", "speclib/core/stats.py", "    half = (ci.high - ci.low) / 2\n",
          "    half = (ci.high - ci.low) / 4\n",
          (T + "test_smollm_draft.py::test_the_batch_means_interval_covers_the_true_ratio",),
          "the batch-means interval is half as wide as its batches say"),
)


class Result:
    """The outcome of one fault: ``status`` and what the run printed."""

    def __init__(self, fault: Fault, status: str, seconds: float = 0.0, output: str = "") -> None:
        self.fault, self.status, self.seconds, self.output = fault, status, seconds, output

    @property
    def ok(self) -> bool:
        """Whether this outcome leaves the check passing."""
        if self.fault.equivalent:
            return self.status == "equivalent"
        return self.status in ("caught", "timeout")


def project_files(root: Path) -> list[Path]:
    """The files of the project: git's tracked and untracked-but-not-ignored files, else a walk."""
    try:
        out = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=root, check=True,
                             capture_output=True, text=True).stdout
        names = [Path(n) for n in out.split("\0") if n]
    except (OSError, subprocess.CalledProcessError):  # not a git checkout: everything but the usual clutter
        skip = {".git", ".venv", "_build", "_build_student", "__pycache__", ".pytest_cache", ".hypothesis"}
        names = [p.relative_to(root) for p in root.rglob("*")
                 if p.is_file() and not skip & set(p.relative_to(root).parts)]
    return [n for n in names if (root / n).is_file()]


def copy_tree(root: Path, dest: Path) -> None:
    """Copy the project's files (:func:`project_files`) under ``dest``."""
    for name in project_files(root):
        target = dest / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(root / name, target)


def status_of(fault: Fault, tree: Path) -> str:
    """``"ready"`` when ``fault.old`` occurs exactly once in its file under ``tree``, else ``"stale"``."""
    path = tree / fault.path
    if not path.is_file() or fault.old == fault.new:
        return "stale"
    return "ready" if path.read_text().count(fault.old) == 1 else "stale"


def stale_reason(fault: Fault, tree: Path) -> str:
    path = tree / fault.path
    if not path.is_file():
        return f"{fault.path} does not exist"
    if fault.old == fault.new:
        return "the replacement is the text itself"
    count = path.read_text().count(fault.old)
    return "the text to replace is not in the file" if count == 0 else f"the text to replace occurs {count} times"


def run_tests(tree: Path, tests: list[str], python: str, timeout: float) -> tuple[str, float, str]:
    """Run ``tests`` in ``tree``: ``("passed" | "failed" | "timeout", seconds, output)``."""
    env = dict(os.environ)
    for name, value in ENVIRONMENT.items():
        env.setdefault(name, value)
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env["PYTHONPATH"] = str(tree)
    command = [python, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", "-o", "addopts=", *tests]
    t0 = time.perf_counter()
    try:
        done = subprocess.run(command, cwd=tree, env=env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as error:
        out = error.stdout.decode() if isinstance(error.stdout, bytes) else (error.stdout or "")
        return "timeout", time.perf_counter() - t0, out
    seconds = time.perf_counter() - t0
    # pytest's exit codes: 0 passed, 1 a test failed, 2 interrupted (a collection error: the mutant
    # does not import, which no test needed to notice), 3 internal error, 4 usage (a test id that
    # does not exist), 5 nothing collected.
    outcome = {0: "passed", 1: "failed", 5: "no tests"}.get(done.returncode, "broken")
    return outcome, seconds, done.stdout + done.stderr


def imports_from(tree: Path, python: str) -> Path:
    """Where ``import speclib`` resolves when the tests run in ``tree`` (it must be the copy)."""
    env = dict(os.environ, PYTHONPATH=str(tree), PYTHONDONTWRITEBYTECODE="1")
    out = subprocess.run([python, "-c", "import speclib, sys; sys.stdout.write(speclib.__file__)"], cwd=tree,
                         env=env, capture_output=True, text=True)
    return Path(out.stdout.strip()).resolve() if out.returncode == 0 else Path()


def check(faults: list[Fault], root: Path = ROOT, python: str | None = None, timeout: float = TIMEOUT,
          say=print) -> tuple[list[Result], str]:
    """Run the mutation check; return one :class:`Result` per fault and the clean run's problem ("" if none)."""
    python = python or default_python(root)
    with tempfile.TemporaryDirectory(prefix="mutants-") as scratch:
        tree = Path(scratch) / "tree"
        copy_tree(root, tree)
        results, ready = [], []
        for fault in faults:
            if status_of(fault, tree) == "stale":
                results.append(Result(fault, "stale", output=stale_reason(fault, tree)))
            else:
                ready.append(fault)
        if (tree / "speclib").is_dir() and tree.resolve() not in imports_from(tree, python).parents:
            where = imports_from(tree, python)
            return results, f"the tests in the copy would import speclib from {where}, not from the copy"
        tests = sorted({t for f in ready for t in f.tests})
        if tests:
            say(f"clean run of {len(tests)} tests ...")
            outcome, seconds, output = run_tests(tree, tests, python, timeout)
            if outcome != "passed":
                return results, f"the tests fail without any fault ({outcome}, {seconds:.0f} s):\n{output[-3000:]}"
        for fault in ready:
            path = tree / fault.path
            original = path.read_text()
            path.write_text(original.replace(fault.old, fault.new, 1))
            try:
                outcome, seconds, output = run_tests(tree, list(fault.tests), python, timeout)
            finally:
                path.write_text(original)
            status = {"failed": "caught", "passed": "missed", "timeout": "timeout"}.get(outcome, outcome)
            if fault.equivalent and status == "missed":
                status = "equivalent"
            result = Result(fault, status, seconds, output)
            say(f"{fault.name}: {status} ({seconds:.0f} s)")
            results.append(result)
    order = {f.name: i for i, f in enumerate(faults)}
    return sorted(results, key=lambda r: order[r.fault.name]), ""


def default_python(root: Path) -> str:
    """The project's interpreter (``.venv``) when there is one, else this one."""
    for candidate in (root / ".venv" / "bin" / "python", root / ".venv" / "Scripts" / "python.exe"):
        if candidate.is_file():
            return str(candidate)
    return sys.executable


def first_failure(output: str, width: int = 150) -> str:
    """How a fault was caught: the first failing test (pytest's short summary) and its first error line."""
    lines = output.splitlines()
    test = next((line.split(" ", 1)[1].split(" - ", 1)[0] for line in lines if line.startswith(("FAILED ", "ERROR "))),
                "")
    error = next((line[1:].strip() for line in lines if line.startswith("E ") and line[1:].strip()), "")
    text = f"{test.rsplit('/', 1)[-1]}: {error}" if test else error
    text = text.replace("|", "/")
    return text if len(text) <= width else text[:width - 3] + "..."


def table(results: list[Result]) -> str:
    """The report: one row per fault, with what it does and the first test that failed."""
    lines = ["| fault | file | result | s | what it does | first failure |", "|---|---|---|---|---|---|"]
    for r in results:
        status = r.status if r.ok else f"**{r.status}**"
        note = r.fault.what if r.status != "stale" else f"{r.fault.what} (stale: {r.output})"
        lines.append(f"| {r.fault.name} | {r.fault.path} | {status} | {r.seconds:.0f} | {note} | "
                     f"{first_failure(r.output) if r.status != 'stale' else ''} |")
    caught = sum(r.status in ("caught", "timeout") for r in results if not r.fault.equivalent)
    must = sum(not r.fault.equivalent for r in results)
    lines.append("")
    lines.append(f"{caught} of {must} faults caught; {sum(r.status == 'equivalent' for r in results)} equivalent.")
    return "\n".join(lines)


def main(argv: list[str] | None = None, faults: tuple[Fault, ...] = FAULTS, root: Path = ROOT) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", action="append", metavar="NAME", help="check this fault only (repeatable)")
    parser.add_argument("--list", action="store_true", help="list the faults and exit")
    parser.add_argument("--python", help="the interpreter that runs the tests (default: .venv's)")
    parser.add_argument("--timeout", type=float, default=TIMEOUT, help="seconds one fault's tests may run")
    parser.add_argument("--verbose", action="store_true", help="print the output of every missed fault's tests")
    args = parser.parse_args(argv)
    names = [f.name for f in faults]
    if len(set(names)) != len(names):
        parser.error("two faults share a name")
    if args.list:
        for f in faults:
            print(f"{f.name:40} {f.path:30} {f.what}{' (equivalent)' if f.equivalent else ''}")
        return 0
    chosen = list(faults)
    if args.only:
        unknown = [n for n in args.only if n not in names]
        if unknown:
            parser.error(f"--only: no fault named {', '.join(unknown)} (--list shows them)")
        chosen = [f for f in faults if f.name in args.only]
    results, problem = check(chosen, root, args.python, args.timeout)
    print(table(results))
    for r in results:
        if r.fault.equivalent:
            print(f"\n{r.fault.name} is listed as equivalent: {r.fault.equivalent}.")
        if args.verbose and r.status == "missed":
            print(f"\n--- {r.fault.name}: the tests passed ---\n{r.output[-2000:]}")
    if problem:
        print(f"\nmutants.py: {problem}", file=sys.stderr)
        return 1
    return 0 if all(r.ok for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
