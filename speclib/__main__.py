"""Command line: ``python -m speclib <command>``."""

from __future__ import annotations

import argparse
import sys


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
    args = parser.parse_args(argv)
    if args.command == "article":
        from .article import report

        print(report())
        return 0
    parser.print_help()
    return 2


if __name__ == "__main__":
    sys.exit(main())
