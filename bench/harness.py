"""What every bench shares, in one place: the repository's paths, the data folder, the
thread limit, the common arguments and the "data missing" exit.

A bench is a module of this package, run from the repository root with
``.venv/bin/python -m bench.<name>``: the project is imported as installed (``make
install-dev``) and the test helpers (``tests.fakes``, ``tests.local_provider``,
``tests.agent_fakes``: the fake model server, search provider and embedder the tests use)
from the repository root. No bench edits ``sys.path`` (``tests/test_bench.py``).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
# The public dev sets: read in place, never copied into the repository (non-commercial).
DATA_DIR = REPO.parent / "shared" / "data"
SAMPLE_KB = REPO / "examples" / "kb"
SAMPLE_QUESTIONS = REPO / "examples" / "questions.jsonl"
THREADS = "2"


def limit_threads() -> None:
    """``OMP_NUM_THREADS=2`` unless set: must run before numpy or onnxruntime load."""
    os.environ.setdefault("OMP_NUM_THREADS", THREADS)


def parser(
    doc: str | None,
    *,
    data: bool = False,
    home: bool = False,
    json_out: bool = False,
    raw: bool = False,
) -> argparse.ArgumentParser:
    """An argument parser described by the first paragraph of ``doc`` (the whole
    docstring with ``raw``), with the common options a bench asks for:
    ``--data-dir`` (the dev sets), ``--home`` (a data home to reuse, so a second run
    does not embed again) and ``--json FILE`` (the figures as JSON)."""
    text = doc or ""
    p = argparse.ArgumentParser(
        description=text if raw else text.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter if raw else argparse.HelpFormatter,
    )
    if data:
        p.add_argument(
            "--data-dir",
            type=Path,
            default=DATA_DIR,
            help=f"the shared dev sets, read in place (default {DATA_DIR})",
        )
    if home:
        p.add_argument(
            "--home", type=Path, default=None, help="data home to reuse (its embedding cache)"
        )
    if json_out:
        p.add_argument("--json", type=Path, default=None, help="also write the figures as JSON")
    return p


def rerun(module: str, *args: str) -> list[str]:
    """The command that runs bench ``module`` (``__spec__.name``) again in a fresh process
    (run it with ``cwd=REPO``): benches that measure a process's peak memory do so."""
    return [sys.executable, "-m", module, *args]


def need(path: Path) -> Path:
    """``path`` if it exists, else exit naming it and ``--data-dir``."""
    if not path.exists():
        sys.exit(f"error: {path} not found; pass --data-dir pointing at the shared data folder")
    return path


def write_json(path: Path | None, figures: Any) -> None:
    """Write ``figures`` to ``path`` (when given) as indented JSON."""
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(figures, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
        print(f"figures written to {path}")
