"""Command line: ``python -m speclib <command>``.

``article``
    The reference article's tables, reproduced, with corrected acceptance figures.
``generate``
    Speculative generation from a model pair trained on text that ships with Python,
    printed with accepted, corrected and bonus tokens in colour, followed by its statistics.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import textwrap
from typing import Callable, NamedTuple


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

DEFAULT_PROMPTS = {"prose": "The ", "code": "def "}
MAX_NEW_TOKENS = 100_000


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
        "Colour is used when standard output is a terminal and NO_COLOR is not set; a progress bar\n"
        "is shown on standard error when it is a terminal.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--domain", choices=("prose", "code"), default="prose",
                        help="which text the models were trained on (default: prose)")
    parser.add_argument("--pair", choices=sorted(PAIRS), default="ngram",
                        help=f"which draft / target pair to use (default: ngram). {pairs}")
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
    if args.k < 1:
        parser.error(f"argument --k: must be at least 1, got {args.k}")
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
    return temperature


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
    head = (f"{args.pair} pair: {PAIRS[args.pair].description}\n"
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
    from .core.warping import warp

    vocab = shared_vocabulary()
    prompt_text = DEFAULT_PROMPTS[args.domain] if args.prompt is None else args.prompt
    prompt = vocab.encode(prompt_text)
    unknown = int((prompt == vocab.unk_id).sum())
    if unknown:
        print(f"note: {unknown} prompt character(s) outside the vocabulary are read as the unknown symbol",
              file=sys.stderr)
    try:
        target, draft = PAIRS[args.pair].load(args.domain)
    except RuntimeError as error:  # e.g. a Python installation without its documentation topics
        parser.exit(1, f"{parser.prog}: error: {error}\n")
    if temperature != 1.0:
        target, draft = warp(target, temperature=temperature), warp(draft, temperature=temperature)

    progress = _ProgressBar(args.new_tokens, sys.stderr) if sys.stderr.isatty() else None
    try:
        trace = trace_generation(target, draft, prompt, args.new_tokens, args.k, args.seed, progress=progress)
    finally:
        if progress is not None:
            progress.close()

    terminal = sys.stdout.isatty() and not os.environ.get("NO_COLOR")
    color = args.color == "always" or (args.color == "auto" and terminal)
    print(_printable(to_ansi(trace, vocab, color=color), sys.stdout))
    print()
    if color:
        print(ansi_legend())
    print(_statistics(trace, args, temperature))
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
    args = parser.parse_args(argv)
    if args.command == "article":
        from .book.article import report

        print(report())
        return 0
    if args.command == "generate":
        return _generate(generate, args)
    parser.print_help()
    return 2


if __name__ == "__main__":
    sys.exit(main())
