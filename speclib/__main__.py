"""Command line: ``python -m speclib <command>``.

``article``
    The reference article's tables, reproduced, with corrected acceptance figures.
``generate``
    Speculative generation from a model pair trained on text that ships with Python,
    printed with accepted, corrected and bonus tokens in colour, followed by its statistics.
``export DIR``
    The book's target, draft and the distilled and early-exit drafters in the Hugging Face
    format (``DIR/target``, ``DIR/draft``, ``DIR/distilled``, ``DIR/early-exit``);
    ``--min-head-dim 32`` widens a model with smaller heads to an equivalent one (vLLM on CPU).
"""

from __future__ import annotations

import os
import signal
import sys


def _interrupted_early(signum: int, frame: object) -> None:
    """Ctrl-C before :func:`run` takes over (while Python loads the modules): one line, status 130."""
    try:
        os.write(2, b"python -m speclib: interrupted\n")
    finally:
        os._exit(130)


if __name__ == "__main__":  # first thing: no traceback through the imports below
    signal.signal(signal.SIGINT, _interrupted_early)

import argparse  # noqa: E402
import math  # noqa: E402
import textwrap  # noqa: E402
import time  # noqa: E402
from typing import Callable, NamedTuple  # noqa: E402


class Pair(NamedTuple):
    """A draft / target pair the ``generate`` command can load."""

    load: Callable[[str], tuple]  #: domain -> (target, draft)
    description: str


def _ngram(domain: str) -> tuple:
    from .lm.ngram import ngram_pair

    return ngram_pair(domain)


def _neural(domain: str) -> tuple:
    from .lm.transformer import load_pair

    return load_pair()  # one pair, trained on both domains


#: Model pairs by name.  Each loads a (target, draft) pair for a domain.
PAIRS: dict[str, Pair] = {
    "ngram": Pair(_ngram, "7-gram target and 3-gram draft, Kneser-Ney smoothed"),
    "neural": Pair(_neural, "the book's small numpy transformers (chapter 9), one pair for both domains"),
}

#: The n-gram draft ``--draft ngram`` puts before the neural target: it reads the same 97-symbol
#: vocabulary (speclib.lm.corpora), as in chapter 9's comparison of drafts.
NGRAM_DRAFT_ORDER = 7

#: Drafts by name: "pair" is the pair's own draft; the others draft for the neural target
#: (speclib.lm.drafters.load_drafter, chapter "Better drafts").
DRAFTS = {"pair": "the pair's own draft",
          "ngram": f"the order-{NGRAM_DRAFT_ORDER} n-gram of the domain (with --pair neural)",
          "distilled": "a draft of the pair's draft's size distilled from the target (with --pair neural)",
          "medusa": "Medusa heads on the target's last hidden state (with --pair neural)",
          "eagle": "an EAGLE layer predicting the target's next hidden state (with --pair neural)",
          "early-exit": "the target's first block and an exit head (with --pair neural)"}

DEFAULT_PROMPTS = {"prose": "The ", "code": "def "}
MAX_NEW_TOKENS = 100_000
#: The largest draft length: speclib._validate.MAX_DRAFT_LENGTH (a test keeps the two equal; this
#: module does not import speclib's numerical code before it must).
MAX_K = 10_000
#: Seconds between two progress lines when standard error is not a terminal.
PROGRESS_SECONDS = 5.0


def _generate_parser(commands) -> argparse.ArgumentParser:
    pairs = "; ".join(f"{name}: {pair.description}" for name, pair in PAIRS.items())
    parser = commands.add_parser(
        "generate",
        help="speculative generation of prose or code, coloured by what the verifier did",
        description=textwrap.fill(
            "Generate text with speculative decoding from a model pair trained on text that ships "
            "with Python (its documentation for 'prose', its standard library for 'code'), then print "
            "the statistics of the run. The new text is coloured by token: green = a draft the target "
            "accepted, red = a correction drawn after a rejection, blue = the bonus token after a "
            "fully accepted block.", width=88),
        epilog="examples:\n"
        "  python -m speclib generate --domain code --k 4 --prompt 'def ' --new-tokens 200\n"
        "  python -m speclib generate --domain prose --greedy --new-tokens 100\n\n"
        "Colour is used when standard output is a terminal and NO_COLOR is not set. Progress is\n"
        "shown on standard error: a bar when it is a terminal, otherwise (a log file, a pipe) one\n"
        f"line every {PROGRESS_SECONDS:g} seconds once a run lasts that long.\n"
        f"Limits: --new-tokens at most {MAX_NEW_TOKENS}, --k at most {MAX_K}.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--domain", choices=("prose", "code"), default="prose",
                        help="which text the models were trained on (default: prose)")
    parser.add_argument("--pair", choices=sorted(PAIRS), default="ngram",
                        help=f"which draft / target pair to use (default: ngram). {pairs}")
    parser.add_argument("--draft", choices=sorted(DRAFTS), default="pair",
                        help="which draft proposes the tokens (default: pair). "
                        + "; ".join(f"{name}: {text}" for name, text in DRAFTS.items()))
    parser.add_argument("--k", type=int, default=4, metavar="K",
                        help="draft length: tokens the draft proposes per target pass (default: 4)")
    parser.add_argument("--prompt", default=None,
                        help="text to continue (default: 'The ' for prose, 'def ' for code)")
    parser.add_argument("--new-tokens", type=int, default=200, metavar="N",
                        help="how many characters to generate (default: 200)")
    parser.add_argument("--temperature", type=float, default=None, metavar="T",
                        help="sampling temperature, 0 for greedy (default: 1)")
    parser.add_argument("--greedy", action="store_true", help="greedy decoding (the same as --temperature 0)")
    parser.add_argument("--seed", type=int, default=0, help="random seed (default: 0)")
    parser.add_argument("--color", choices=("auto", "always", "never"), default="auto",
                        help="colour the text: auto (terminal and no NO_COLOR), always or never "
                        "(default: auto)")
    return parser


def _check_generate(parser: argparse.ArgumentParser, args: argparse.Namespace) -> float:
    """Validate the generate options (argparse style: one line, exit code 2); return the temperature."""
    if not 1 <= args.k <= MAX_K:
        parser.error(f"argument --k: must lie between 1 and {MAX_K}, got {args.k}")
    if not 0 <= args.new_tokens <= MAX_NEW_TOKENS:
        parser.error(f"argument --new-tokens: must lie between 0 and {MAX_NEW_TOKENS}, got {args.new_tokens}")
    if args.seed < 0:
        parser.error(f"argument --seed: must be a non-negative integer, got {args.seed}")
    if args.greedy and args.temperature not in (None, 0.0):
        parser.error(f"argument --greedy: contradicts --temperature {args.temperature:g} "
                     "(greedy is temperature 0)")
    temperature = 0.0 if args.greedy else (1.0 if args.temperature is None else args.temperature)
    if not math.isfinite(temperature) or temperature < 0:
        parser.error(f"argument --temperature: must be a finite number >= 0, got {temperature:g}")
    if args.prompt == "":
        parser.error("argument --prompt: must contain at least one character")
    if args.draft == "ngram" and args.pair != "neural":
        parser.error(f"argument --draft: the n-gram draft drafts for the neural target (--pair neural); the "
                     f"{args.pair} pair's own draft is already an n-gram")
    if args.draft not in ("pair", "ngram") and args.pair != "neural":
        parser.error(f"argument --draft: the {args.draft} draft drafts for the neural target (--pair neural)")
    if args.prompt is not None:
        _check_text(parser, args.prompt)
    return temperature


def _models(args: argparse.Namespace, temperature: float) -> tuple:
    """(target, draft) for the options, at ``temperature``.

    The transformers change temperature themselves (:meth:`Transformer.with_temperature`), so
    they keep their key/value caches and the loop reads them incrementally; n-grams are warped.
    """
    from .core.warping import warp

    if args.pair == "neural":
        from .lm.drafters import load_drafter

        drafter = load_drafter(args.draft, temperature, args.domain)
        return drafter.target, drafter  # Medusa and EAGLE read the hidden states of drafter.target
    target, draft = PAIRS[args.pair].load(args.domain)
    if temperature != 1.0:
        target, draft = warp(target, temperature=temperature), warp(draft, temperature=temperature)
    return target, draft


def _check_text(parser: argparse.ArgumentParser, text: str) -> None:
    """Refuse a prompt with bytes the command line could not decode (they arrive as lone surrogates)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as error:
        code = ord(text[error.start])
        what = (f"byte 0x{code - 0xDC00:02x}" if 0xDC80 <= code <= 0xDCFF else f"code point U+{code:04X}")
        parser.error(f"argument --prompt: is not valid {sys.getfilesystemencoding()} text ({what} at "
                     f"character {error.start + 1})")


def _note(message: str) -> None:
    """One line on standard error (nothing when standard error is closed)."""
    if sys.stderr is not None:
        try:
            print(message, file=sys.stderr, flush=True)
        except (OSError, ValueError):
            pass


class _OutputError(Exception):
    """Standard output cannot be written (a full disk, a closed descriptor): ``error`` says why."""

    def __init__(self, error: OSError) -> None:
        super().__init__(error)
        self.error = error


def _out(text: str = "") -> None:
    """Print a line on standard output; a broken pipe propagates, other write errors become _OutputError."""
    try:
        sys.stdout.write(text + "\n")
    except BrokenPipeError:
        raise
    except OSError as error:
        raise _OutputError(error) from None


class _ProgressBar:
    """A one-line progress bar on a terminal stream."""

    def __init__(self, total: int, stream) -> None:
        self.total, self.stream = total, stream

    def __call__(self, done: int) -> None:
        done = min(done, self.total)
        filled = 30 * done // max(self.total, 1)
        self.stream.write(f"\r[{'#' * filled}{'.' * (30 - filled)}] {done}/{self.total} tokens")
        self.stream.flush()

    def close(self) -> None:
        self.stream.write("\r\033[K")
        self.stream.flush()


class _ProgressLines:
    """Progress for a stream that is not a terminal (a log file, a pipe): one line every
    ``every`` seconds, none for a run shorter than that."""

    def __init__(self, total: int, stream, every: float | None = None, clock=time.monotonic) -> None:
        self.total, self.stream, self.clock = total, stream, clock
        self.every = PROGRESS_SECONDS if every is None else every
        self.start = self.clock()
        self.next = self.start + self.every

    def __call__(self, done: int) -> None:
        now = self.clock()
        if now >= self.next:
            self.next = now + self.every
            try:
                self.stream.write(f"python -m speclib: {min(done, self.total)}/{self.total} tokens, "
                                  f"{now - self.start:.0f} s\n")
                self.stream.flush()
            except (OSError, ValueError):  # a closed or full stream: progress is optional
                pass

    def close(self) -> None:
        pass


def _statistics(trace, args: argparse.Namespace, temperature: float) -> str:
    stats = trace.stats
    verified = stats.draft_verified
    acceptance = f"{stats.acceptance_rate:.3f}" if verified else "n/a"
    rows = [
        ("new tokens", f"{stats.tokens_generated}"),
        ("target passes", f"{stats.target_passes}"),
        ("draft passes", f"{stats.draft_passes}"),
        ("tokens per target pass", f"{stats.tokens_per_target_pass:.2f}" if stats.target_passes else "n/a"),
        ("acceptance", f"{acceptance} ({stats.accepted} of {verified} verified drafts kept)"),
    ]
    drafted = ("" if args.draft == "pair" else
               f"\ndraft: the order-{NGRAM_DRAFT_ORDER} n-gram of the {args.domain} text (same vocabulary)"
               if args.draft == "ngram" else f"\ndraft: {args.draft}, {DRAFTS[args.draft].split(' (')[0]}")
    head = (f"{args.pair} pair: {PAIRS[args.pair].description}{drafted}\n"
            f"domain {args.domain}, k = {args.k}, temperature {temperature:g}, seed {args.seed}")
    return head + "\n" + "\n".join(f"  {name:<24}{value}" for name, value in rows)


def _printable(text: str, stream) -> str:
    """``text`` with what ``stream`` cannot encode replaced by "?" (a console that is not UTF-8)."""
    encoding = getattr(stream, "encoding", None) or "utf-8"
    return text.encode(encoding, errors="replace").decode(encoding)


def _generate(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    temperature = _check_generate(parser, args)
    from .lm.corpora import shared_vocabulary
    from .book.render import ansi_legend, to_ansi, trace_generation
    from .lm.transformer import blas_threads

    vocab = shared_vocabulary()
    prompt_text = DEFAULT_PROMPTS[args.domain] if args.prompt is None else args.prompt
    prompt = vocab.encode(prompt_text)
    unknown = int((prompt == vocab.unk_id).sum())
    if unknown:
        _note(f"note: {unknown} prompt character(s) outside the vocabulary are read as the unknown symbol")
    try:
        target, draft = _models(args, temperature)
    except RuntimeError as error:  # e.g. a Python installation without its documentation topics
        parser.exit(1, f"{parser.prog}: error: {error}\n")

    progress = None
    if sys.stderr is not None:
        progress = (_ProgressBar if sys.stderr.isatty() else _ProgressLines)(args.new_tokens, sys.stderr)
    try:
        # One BLAS thread, as chapter 9 measures: a decoding stream's small products gain nothing
        # from more, and threads that wait for each other on a busy machine only slow them down.
        with blas_threads(1):
            trace = trace_generation(target, draft, prompt, args.new_tokens, args.k, args.seed,
                                     progress=progress)
    finally:
        if progress is not None:
            progress.close()

    terminal = sys.stdout.isatty() and not os.environ.get("NO_COLOR")
    color = args.color == "always" or (args.color == "auto" and terminal)
    _out(_printable(to_ansi(trace, vocab, color=color), sys.stdout))
    _out()
    if color:
        _out(ansi_legend())
    _out(_statistics(trace, args, temperature))
    return 0


def _export(directory: str, min_head_dim: int | None = None) -> int:
    try:
        from .lm.export import export_pair_files

        folders = export_pair_files(directory, min_head_dim=min_head_dim)
    except ImportError as exc:
        _note(f"python -m speclib export: needs PyTorch and transformers (pip install -r requirements-hf.txt): {exc}")
        return 1
    except (FileExistsError, OSError) as exc:
        _note(f"python -m speclib export: {exc}")
        return 1
    for name, folder in folders.items():
        _out(f"{name}: {folder}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m speclib",
        description="Companion code of 'Speculative Decoding, Step by Step'.",
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    commands.add_parser(
        "article",
        help="reproduce the reference article's tables, with corrected acceptance figures beside them",
        description="Print the reference article's three tables, digit for digit, with the "
        "corrected acceptance (accepted / verified), alpha = sum min(p, q) and the theory at alpha.",
    )
    generate = _generate_parser(commands)
    export = commands.add_parser(
        "export",
        help="write the book's models in the Hugging Face format (DIR/target, DIR/draft, ...)",
        description="Save the book's numpy target, its draft and the distilled and early-exit "
        "drafters as transformers GPT2LMHeadModel folders, each with a tokenizer for the 97-symbol "
        "character vocabulary (built locally, nothing downloaded). Needs requirements-hf.txt.",
    )
    export.add_argument("directory", metavar="DIR", help="a new or empty folder")
    export.add_argument("--min-head-dim", type=int, default=None, metavar="N",
                        help="widen a model whose attention heads are smaller than N dimensions to an "
                        "equivalent wider one (vLLM's CPU attention needs N = 32)")
    args = parser.parse_args(argv)
    if args.command == "article":
        from .book.article import report

        _out(report())
        return 0
    if args.command == "generate":
        return _generate(generate, args)
    if args.command == "export":
        if args.min_head_dim is not None and args.min_head_dim < 1:
            export.error(f"--min-head-dim: expected a whole number >= 1, got {args.min_head_dim}")
        return _export(args.directory, args.min_head_dim)
    parser.print_help()
    return 2


def _silence_stdout() -> None:
    """Point standard output at the null device, so that the interpreter's last flush of what
    could not be written raises nothing more at exit."""
    try:
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, sys.stdout.fileno())
        os.close(null)
    except (OSError, ValueError, AttributeError):
        pass


def run(argv: list[str] | None = None) -> int:
    """:func:`main` with the manners of a Unix tool, for ``python -m speclib``.

    A reader that stops reading (``| head``) ends the program quietly (exit status 141, as a
    program killed by SIGPIPE); Ctrl-C ends it with one line and exit status 130; standard
    output closed or not writable (a full disk) is one line on standard error and exit status 1.
    """
    prog = "python -m speclib"
    if signal.getsignal(signal.SIGINT) is _interrupted_early:
        signal.signal(signal.SIGINT, signal.default_int_handler)  # from here, KeyboardInterrupt below
    if sys.stdout is None:
        _note(f"{prog}: error: standard output is closed")
        return 1
    try:
        code = main(argv)
        try:
            sys.stdout.flush()
        except BrokenPipeError:
            raise
        except OSError as error:
            raise _OutputError(error) from None
        return code
    except BrokenPipeError:
        _silence_stdout()
        return 141
    except _OutputError as failure:
        _silence_stdout()
        _note(f"{prog}: error: cannot write to standard output: {failure.error.strerror or failure.error}")
        return 1
    except KeyboardInterrupt:
        _silence_stdout()
        _note(f"\n{prog}: interrupted" if sys.stderr is not None and sys.stderr.isatty() else f"{prog}: interrupted")
        return 130


if __name__ == "__main__":
    sys.exit(run())
