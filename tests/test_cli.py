"""The command line, run the way a user runs it: ``python -m speclib generate ...`` in a subprocess."""

import io
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from speclib import __main__ as cli
from speclib.lm.corpora import shared_vocabulary
from speclib.lm.ngram import ngram_pair
from speclib.core.warping import greedy_generate

ROOT = Path(__file__).resolve().parents[1]
ANSI = re.compile(r"\033\[[0-9;]*m")


def run(*args, env=None, cwd=ROOT):
    full_env = {k: v for k, v in os.environ.items() if k != "NO_COLOR"}
    full_env.update(env or {})
    return subprocess.run([sys.executable, "-m", "speclib", *args], capture_output=True, text=True,
                          env=full_env, cwd=cwd, timeout=120)


def statistics(stdout):
    """The numbers of the statistics block, by name."""
    found = dict(re.findall(r"^  (new tokens|target passes|draft passes|tokens per target pass|acceptance)"
                            r"\s+([0-9.]+)", stdout, re.M))
    return {name: float(value) for name, value in found.items()}


def test_help_reads_well():
    out = run("generate", "--help")
    assert out.returncode == 0
    for option in ("--domain", "--pair", "--k", "--prompt", "--new-tokens", "--temperature", "--greedy",
                   "--seed"):
        assert option in out.stdout
    assert "green" in out.stdout and "examples:" in out.stdout
    assert max(len(line) for line in out.stdout.splitlines()) <= 100
    assert "generate" in run("--help").stdout


def test_generate_prints_plain_text_and_statistics_when_piped():
    out = run("generate", "--domain", "code", "--k", "4", "--prompt", "def ", "--new-tokens", "120",
              "--temperature", "1.0", "--seed", "0")
    assert out.returncode == 0, out.stderr
    assert not ANSI.search(out.stdout) and not ANSI.search(out.stderr)
    assert out.stdout.startswith("def ")
    stats = statistics(out.stdout)
    assert stats["new tokens"] == 120
    assert stats["draft passes"] <= 4 * stats["target passes"]
    assert stats["tokens per target pass"] == pytest.approx(120 / stats["target passes"], abs=0.006)
    assert 0 <= stats["acceptance"] <= 1
    assert "[" not in out.stderr  # no progress bar when stderr is not a terminal


def test_generated_text_is_what_the_library_generates():
    out = run("generate", "--domain", "prose", "--prompt", "The ", "--new-tokens", "80", "--seed", "3")
    from speclib.book.render import trace_generation

    vocab = shared_vocabulary()
    target, draft = ngram_pair("prose")
    trace = trace_generation(target, draft, vocab.encode("The "), 80, 4, 3)
    assert out.stdout.startswith("The " + vocab.decode(trace.tokens) + "\n")
    assert run("generate", "--new-tokens", "80", "--seed", "3").stdout == out.stdout  # the defaults
    assert run("generate", "--new-tokens", "80", "--seed", "4").stdout != out.stdout


def test_greedy_output_is_the_target_greedy_text():
    out = run("generate", "--domain", "code", "--greedy", "--prompt", "import ", "--new-tokens", "60")
    assert out.returncode == 0, out.stderr
    vocab = shared_vocabulary()
    target, _ = ngram_pair("code")
    tokens, _ = greedy_generate(target, vocab.encode("import "), 60)
    assert out.stdout.startswith("import " + vocab.decode(tokens) + "\n")
    assert "temperature 0" in out.stdout
    assert run("generate", "--domain", "code", "--temperature", "0", "--prompt", "import ",
               "--new-tokens", "60").stdout == out.stdout


def test_color_always_and_never():
    colored = run("generate", "--new-tokens", "60", "--color", "always").stdout
    assert ANSI.search(colored) and "accepted" in colored and "bonus" in colored
    plain_text = run("generate", "--new-tokens", "60").stdout.split("\n\n")[0]
    assert ANSI.sub("", colored).replace("\u21b5", "").startswith(plain_text)
    assert not ANSI.search(run("generate", "--new-tokens", "60", "--color", "never").stdout)


def test_auto_color_follows_the_terminal_and_no_color(monkeypatch, capsys):
    monkeypatch.setattr(sys.stdout, "isatty", lambda: True)
    monkeypatch.delenv("NO_COLOR", raising=False)
    assert cli.main(["generate", "--new-tokens", "30"]) == 0
    assert ANSI.search(capsys.readouterr().out)
    monkeypatch.setenv("NO_COLOR", "1")
    assert cli.main(["generate", "--new-tokens", "30"]) == 0
    assert not ANSI.search(capsys.readouterr().out)


def test_progress_bar_only_on_a_terminal(monkeypatch, capsys):
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)
    assert cli.main(["generate", "--new-tokens", "40"]) == 0
    err = capsys.readouterr().err
    assert "40/40 tokens" in err and err.endswith("\r\033[K")


def test_a_long_run_shows_progress_lines_when_stderr_is_not_a_terminal(monkeypatch, capsys):
    """A log file or a pipe gets a plain line every PROGRESS_SECONDS (here 0: every block)."""
    monkeypatch.setattr(cli, "PROGRESS_SECONDS", 0.0)
    assert cli.main(["generate", "--new-tokens", "40"]) == 0
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) >= 5  # one per block of at most k + 1 = 5 tokens, and no bar
    assert all(re.fullmatch(r"python -m speclib: \d+/40 tokens, \d+ s", line) for line in lines), lines
    assert lines[-1].startswith("python -m speclib: 40/40 tokens")


def test_progress_lines_come_every_few_seconds_and_not_for_a_short_run():
    now = [0.0]
    stream = io.StringIO()
    progress = cli._ProgressLines(1000, stream, every=5.0, clock=lambda: now[0])
    for t, done in [(1.0, 10), (4.9, 40), (5.0, 50), (6.0, 60), (9.9, 99), (10.5, 105), (30.0, 1200)]:
        now[0] = t
        progress(done)
    assert stream.getvalue().splitlines() == ["python -m speclib: 50/1000 tokens, 5 s",
                                              "python -m speclib: 105/1000 tokens, 10 s",
                                              "python -m speclib: 1000/1000 tokens, 30 s"]
    assert "every 5 seconds" in run("generate", "--help").stdout.replace("\n", " ")


def test_the_command_lines_limits_are_the_librarys():
    from speclib._validate import MAX_DRAFT_LENGTH

    assert cli.MAX_K == MAX_DRAFT_LENGTH  # --k is checked up front, not by a traceback from the loop


def test_importing_speclib_loads_no_numerical_code():
    """What makes Ctrl-C during start-up one line: numpy loads only after the handler is in place."""
    out = subprocess.run([sys.executable, "-c", "import sys, speclib; print(sorted(m for m in sys.modules "
                          "if m.split('.')[0] in ('numpy', 'scipy')))"], capture_output=True, text=True,
                         cwd=ROOT, timeout=60)
    assert out.stdout.strip() == "[]", out.stderr
    from speclib import speculative_generate, verify  # the names still import, on first use
    assert callable(speculative_generate) and callable(verify)


@pytest.mark.parametrize("args, message", [
    (["--k", "0"], "argument --k: must lie between 1 and 10000"),
    (["--k", "20000"], "argument --k: must lie between 1 and 10000, got 20000"),
    (["--new-tokens", "100001"], "argument --new-tokens: must lie between 0 and 100000"),
    (["--k", "four"], "argument --k: invalid int value"),
    (["--new-tokens", "-5"], "argument --new-tokens"),
    (["--temperature", "-1"], "argument --temperature"),
    (["--temperature", "nan"], "argument --temperature"),
    (["--greedy", "--temperature", "0.7"], "argument --greedy: contradicts"),
    (["--domain", "poetry"], "argument --domain: invalid choice"),
    (["--pair", "gpt"], "argument --pair: invalid choice"),
    (["--prompt", ""], "argument --prompt"),
    (["--seed", "-1"], "argument --seed"),
])
def test_bad_options_give_one_line_and_exit_code_2(args, message):
    out = run("generate", *args)
    assert out.returncode == 2
    assert "Traceback" not in out.stderr
    assert out.stderr.strip().splitlines()[-1].startswith("python -m speclib generate: error: " + message)


def test_unknown_prompt_characters_are_reported():
    out = run("generate", "--prompt", "caf\u00e9 ", "--new-tokens", "10")
    assert out.returncode == 0 and "outside the vocabulary" in out.stderr


def test_a_console_that_is_not_utf8_gets_question_marks_not_a_crash():
    # The unknown symbol and the arrow of a corrected newline are not ASCII.
    out = run("generate", "--prompt", "caf\u00e9 ", "--new-tokens", "60", "--color", "always",
              env={"PYTHONIOENCODING": "ascii"})
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("caf? ") and "Traceback" not in out.stderr


def test_works_from_a_fresh_copy_outside_the_repository(tmp_path):
    """The package alone, away from the repository, needs nothing but Python's own files."""
    site = tmp_path / "site"
    shutil.copytree(ROOT / "speclib", site / "speclib", ignore=shutil.ignore_patterns("__pycache__"))
    out = run("generate", "--domain", "code", "--new-tokens", "30", env={"PYTHONPATH": str(site)},
              cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert statistics(out.stdout)["new tokens"] == 30
    where = subprocess.run([sys.executable, "-c", "import speclib; print(speclib.__file__)"],
                           capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(site)},
                           cwd=tmp_path).stdout
    assert where.startswith(str(site))


def test_pairs_registry_loads_a_pair_per_domain():
    for name, pair in cli.PAIRS.items():
        for domain in ("prose", "code"):
            target, draft = pair.load(domain)
            assert target.vocab_size == draft.vocab_size == shared_vocabulary().size


def test_neural_pair_generates():
    """The transformer pair of chapter 9 is available to the command line."""
    out = subprocess.run([sys.executable, "-m", "speclib", "generate", "--pair", "neural", "--domain", "code",
                          "--new-tokens", "30", "--k", "3", "--seed", "1"], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert "neural pair" in out.stdout and "new tokens              30" in out.stdout


# --- the manners of a Unix tool ---------------------------------------------------------------

def unix(command, **kwargs):
    """Run a shell command line in which $SPECLIB is ``python -m speclib``."""
    env = {k: v for k, v in os.environ.items() if k != "NO_COLOR"}
    env["SPECLIB"] = f"{sys.executable} -m speclib"
    return subprocess.run(["sh", "-c", command], capture_output=True, env=env, cwd=ROOT, timeout=120, **kwargs)


def test_an_undecodable_byte_in_the_prompt_is_an_option_error():
    out = subprocess.run([sys.executable, "-m", "speclib", "generate", "--prompt", b"ab\xffc", "--new-tokens", "5"],
                         capture_output=True, cwd=ROOT, timeout=120)
    err = out.stderr.decode()
    assert out.returncode == 2 and "Traceback" not in err
    assert err.strip().splitlines()[-1].startswith(
        "python -m speclib generate: error: argument --prompt: is not valid ")
    assert "byte 0xff at character 3" in err


def test_a_reader_that_stops_reading_ends_the_program_quietly():
    read, write = os.pipe()
    os.close(read)  # nobody will ever read: the first write is a broken pipe
    try:
        out = subprocess.run([sys.executable, "-m", "speclib", "generate", "--new-tokens", "50"], stdout=write,
                             stderr=subprocess.PIPE, text=True, cwd=ROOT, timeout=120)
    finally:
        os.close(write)
    assert out.returncode == 141 and out.stderr == ""  # 128 + SIGPIPE, as `yes | head` reports


def _without_progress(err: bytes) -> list[bytes]:
    """Standard error's lines less the progress lines a slow (busy) machine may add."""
    return [line for line in err.splitlines() if not re.match(rb"python -m speclib: \d+/\d+ tokens, \d+ s$", line)]


def test_piping_into_head_prints_no_traceback():
    out = unix("$SPECLIB generate --new-tokens 5000 | head -c 100")
    assert out.returncode == 0 and len(out.stdout) == 100 and _without_progress(out.stderr) == []


def test_closed_standard_output_is_one_line():
    out = unix("$SPECLIB generate --new-tokens 20 >&-")
    assert out.returncode == 1
    assert out.stderr.decode() == "python -m speclib: error: standard output is closed\n"


def test_closed_standard_error_is_no_crash():
    out = unix("$SPECLIB generate --prompt 'caf\u00e9' --new-tokens 20 2>&-")
    assert out.returncode == 0 and statistics(out.stdout.decode())["new tokens"] == 20


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
@pytest.mark.parametrize("command", ["generate --new-tokens 20", "article"])
def test_a_full_disk_is_one_line(command):
    out = unix(f"$SPECLIB {command} >/dev/full")
    assert out.returncode == 1
    assert out.stderr.decode() == ("python -m speclib: error: cannot write to standard output: "
                                   "No space left on device\n")


@pytest.mark.skipif(os.name == "nt", reason="POSIX signals")
@pytest.mark.parametrize("when", ["argparse", "numpy._utils"])
def test_ctrl_c_while_the_modules_load_is_one_line(when):
    """Interrupted while Python loads the command line's modules (the first fraction of a second).

    ``-X importtime`` reports each module as its import ends, so the signal is sent at a known
    point: right after ``argparse`` (the command line's own first import) or inside numpy's.
    """
    import signal

    child = subprocess.Popen([sys.executable, "-X", "importtime", "-m", "speclib", "generate",
                              "--new-tokens", str(cli.MAX_NEW_TOKENS)], stdout=subprocess.DEVNULL,
                             stderr=subprocess.PIPE, text=True, cwd=ROOT,
                             preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        for line in child.stderr:
            if line.startswith("import time:") and line.rsplit("|", 1)[-1].strip() == when:
                child.send_signal(signal.SIGINT)
                break
        else:
            pytest.fail(f"{when} was never imported")
        assert child.wait(60) == 130
        rest = [line for line in child.stderr.read().splitlines() if not line.startswith("import time:")]
        assert rest == ["python -m speclib: interrupted"]
    finally:
        child.kill()
        child.wait()


@pytest.mark.skipif(os.name == "nt", reason="POSIX signals")
def test_ctrl_c_exits_130_with_one_line():
    import signal

    child = subprocess.Popen([sys.executable, "-m", "speclib", "generate", "--prompt", "caf\u00e9",
                              "--new-tokens", str(cli.MAX_NEW_TOKENS)], stdout=subprocess.DEVNULL,
                             stderr=subprocess.PIPE, text=True, cwd=ROOT,
                             preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        assert "outside the vocabulary" in child.stderr.readline()  # main() is running: interrupt it
        child.send_signal(signal.SIGINT)
        assert child.wait(60) == 130
        assert child.stderr.read() == "python -m speclib: interrupted\n"
    finally:
        child.kill()
        child.wait()


# --- the neural pair: the cached loop, one BLAS thread, an n-gram draft ------------------------

def _spy_on_the_neural_run(monkeypatch):
    """Count the key/value caches the loop opens and record the BLAS thread counts it asks for."""
    from speclib.lm import transformer

    seen = {"caches": 0, "threads": []}
    real_cache, real_threads = transformer.Transformer.cache, transformer.blas_threads

    def cache(self):
        seen["caches"] += 1
        return real_cache(self)

    class threads(real_threads):
        def __init__(self, n=1):
            seen["threads"].append(n)
            super().__init__(n)

    monkeypatch.setattr(transformer.Transformer, "cache", cache)
    monkeypatch.setattr(transformer, "blas_threads", threads)
    return seen


def test_the_neural_pair_runs_the_cached_loop_on_one_blas_thread(monkeypatch, capsys):
    from speclib.book.render import trace_generation
    from speclib.lm.transformer import load_pair

    seen = _spy_on_the_neural_run(monkeypatch)
    assert cli.main(["generate", "--pair", "neural", "--domain", "code", "--new-tokens", "40", "--k", "3",
                     "--seed", "2", "--temperature", "0.8"]) == 0
    out = capsys.readouterr().out
    assert seen["threads"] and set(seen["threads"]) == {1}  # the run, and any product plan it measures first
    assert seen["caches"] >= 2  # target and draft are read through their key/value caches
    target, draft = load_pair(0.8)
    trace = trace_generation(target, draft, shared_vocabulary().encode("def "), 40, 3, 2)
    assert out.startswith("def " + shared_vocabulary().decode(trace.tokens) + "\n")
    assert "temperature 0.8" in out and statistics(out)["new tokens"] == 40


def test_an_ngram_draft_for_the_neural_target(monkeypatch, capsys):
    from speclib.book.render import trace_generation
    from speclib.lm.ngram import train_ngram
    from speclib.lm.transformer import load_pair

    seen = _spy_on_the_neural_run(monkeypatch)
    assert cli.main(["generate", "--pair", "neural", "--draft", "ngram", "--domain", "prose",
                     "--new-tokens", "40", "--seed", "5"]) == 0
    out = capsys.readouterr().out
    target, _ = load_pair()
    draft = train_ngram("prose", cli.NGRAM_DRAFT_ORDER)
    assert draft.vocab_size == target.vocab_size == shared_vocabulary().size
    trace = trace_generation(target, draft, shared_vocabulary().encode("The "), 40, 4, 5)
    assert out.startswith("The " + shared_vocabulary().decode(trace.tokens) + "\n")
    assert f"order-{cli.NGRAM_DRAFT_ORDER} n-gram of the prose text" in out
    assert seen["threads"] and set(seen["threads"]) == {1}  # the run, and any product plan it measures first and seen["caches"] >= 1  # the target still reads its cache
    greedy = run("generate", "--pair", "neural", "--draft", "ngram", "--greedy", "--new-tokens", "30")
    assert greedy.returncode == 0, greedy.stderr
    target0, _ = load_pair(0.0)
    from speclib.core.decoding import autoregressive_generate

    want, _ = autoregressive_generate(target0, shared_vocabulary().encode("The "), 30, rng=0)
    assert greedy.stdout.startswith("The " + shared_vocabulary().decode(want) + "\n")  # greedy = the target's


def test_an_ngram_draft_needs_the_neural_target():
    out = run("generate", "--draft", "ngram")
    assert out.returncode == 2
    assert "argument --draft: the n-gram draft drafts for the neural target" in out.stderr


def test_the_recording_verifier_runs_the_trusted_core(monkeypatch):
    """trace_generation records through verify.step, the loop's own core, not the checking wrapper."""
    from speclib.book import render
    from speclib.core import sampling
    from speclib.core.decoding import speculative_generate

    calls = {"step": 0, "checked": 0}
    real_step = sampling.verify.step

    def step(*args, **kwargs):
        calls["step"] += 1
        return real_step(*args, **kwargs)

    def checked(*args, **kwargs):
        calls["checked"] += 1
        return sampling.verify(*args, **kwargs)

    monkeypatch.setattr(sampling.verify, "step", step)
    monkeypatch.setattr(render, "verify", checked)
    checked.step = step
    target, draft = ngram_pair("code")
    trace = render.trace_generation(target, draft, shared_vocabulary().encode("def "), 60, 4, 7)
    assert calls["step"] == len(trace.blocks) > 0 and calls["checked"] == 0
    assert np.array_equal(trace.tokens, speculative_generate(target, draft, shared_vocabulary().encode("def "),
                                                             60, 4, 7)[0])
