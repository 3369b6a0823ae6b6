"""The ``hybrid-rag`` command line.

Each sub-command lives in its own module with a ``register(subparsers)`` function
that adds its parser and sets ``func`` (a callable taking the parsed namespace and
returning an exit code). Errors of the project's own kind are printed as one clear
line on stderr with exit code 2; nothing else is swallowed.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence
from typing import Any, TextIO

from tools.errors import HybridRagError
from tools.text import terminal_safe

# Modules that contribute sub-commands, in help order.
COMMAND_MODULES: tuple[str, ...] = (
    "cli.kb_commands",
    "cli.websearch_command",
    "cli.ask_commands",
    "cli.eval_commands",
    "cli.users_command",
    "cli.serve_command",
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="hybrid-rag",
        description="Answer questions from a private knowledge base and the live web.",
    )
    parser.add_argument(
        "--home",
        help="data directory (default: $HYBRID_RAG_HOME or ~/.local/share/hybrid-rag)",
    )
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(subparsers)
    return parser


class TerminalSafe:
    """A text stream that drops escape sequences and control characters on the way out.

    Everything the CLI prints may quote documents and web pages; filtering at the stream
    covers every print point at once (JSON output is unaffected: ``print_json`` escapes
    its controls). The progress bar redraws its line with a leading carriage return,
    which is kept; any other is dropped.
    """

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        redraw = "\r" if text.startswith("\r") else ""
        return self._stream.write(redraw + terminal_safe(text))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def main(argv: Sequence[str] | None = None) -> int:
    out, err = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = TerminalSafe(out), TerminalSafe(err)
    try:
        return _main(argv)
    finally:
        sys.stdout, sys.stderr = out, err


def _main(argv: Sequence[str] | None) -> int:
    try:
        parser = build_parser()  # reads the environment's defaults ($CHROMA_PORT, ...)
    except HybridRagError as exc:
        print(f"hybrid-rag: error: {exc}", file=sys.stderr)
        return 2
    args = parser.parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except HybridRagError as exc:
        print(f"hybrid-rag: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("hybrid-rag: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
