"""``hybrid-rag doctor``: what this installation is set up with, for whoever sets it up.

Answers never name environment variables or ``pip install`` (``tools.policy.disclosure``):
a user reads "web search is not set up — ask your administrator". This command is where
the administrator reads what to set (issue 56).
"""

from __future__ import annotations

import argparse
import os
from typing import Any

from tools.settings import home_path
from tools.websearch import WebSearchSettings
from tools.websearch.web_settings import environment_variables


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "doctor",
        help="what this installation is set up with, and what to set (for its administrator)",
        description="Print the web search set-up (providers usable, the variables to set) "
        "and the data home; nothing is searched and no secret is printed.",
    )
    parser.set_defaults(func=run)


def web_report(settings: WebSearchSettings) -> list[str]:
    """The web search lines: the providers usable, or what to set."""
    chain = settings.chain()
    if chain:
        return [f"web search: set up ({', '.join(chain)})"]
    lines = ["web search: not set up", f"  to set it up: {settings.missing_message()}"]
    present = [name for name in environment_variables() if os.environ.get(name)]
    lines.append(f"  variables read: {', '.join(environment_variables())}")
    lines.append(f"  set now: {', '.join(present) or 'none'}")
    return lines


def run(args: argparse.Namespace) -> int:
    settings = WebSearchSettings.from_env()
    for line in web_report(settings):
        print(line)
    # The folder every command reads (--home, $HYBRID_RAG_HOME or the default), not the
    # flag as typed: without --home it printed "None".
    print(f"data home: {home_path(args.home).resolve()}")
    return 0
