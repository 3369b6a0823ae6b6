"""Re-reading a large unchanged folder: the second ``hybrid-rag ingest`` (run on demand).

Issue 53, item 14: each unchanged file listed its chunks through a Chroma
``where={"doc_id": ...}`` get, a scan of the collection, so the cost per file grew with
the store (3.1 ms a file at 3,000 files, 9.8 ms at 40,000: 392 s). For each size, in a
fresh process and a fresh data home (embedded Chroma): N small Markdown files (1,000 per
folder) are ingested once with the hash embedder of ``tests.fakes`` (no model), then the
same folder again, timed; the chunk store's calls during the second ingest are counted
(0 expected: an unchanged file costs no store read).

Usage::

    .venv/bin/python -m bench.bench_resync                       # 5,000 20,000 40,000
    .venv/bin/python -m bench.bench_resync --sizes 200000 --json out.json
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

from bench.harness import REPO, limit_threads, parser, rerun, write_json

PER_FOLDER = 1000


class Counted:
    """A Chroma collection whose calls are counted (``calls``)."""

    def __init__(self, inner: Any) -> None:
        self.inner, self.calls = inner, Counter[str]()

    def __getattr__(self, name: str) -> Any:
        found = getattr(self.inner, name)
        if not callable(found):
            return found

        def call(*args: Any, **kwargs: Any) -> Any:
            self.calls[name] += 1
            return found(*args, **kwargs)

        return call


def write_folder(root: Path, n: int) -> None:
    for i in range(n):
        folder = root / f"part{i // PER_FOLDER:04d}"
        if i % PER_FOLDER == 0:
            folder.mkdir(parents=True)
        (folder / f"doc{i:06d}.md").write_text(
            f"# Note {i}\n\nDocument {i} of the folder records code K-{i * 7919 % 100003}. "
            f"It belongs to part {i // PER_FOLDER} and mentions topic {i % 97}.\n",
            encoding="utf-8",
        )


def one_size(n: int) -> dict[str, Any]:
    """Ingest ``n`` files twice into a fresh home; the figures of both runs."""
    from tests.fakes import hash_model
    from tools.kb.knowledge_base import KBConfig, KnowledgeBase

    base = Path(tempfile.mkdtemp(prefix="bench-resync-"))
    try:
        write_folder(base / "docs", n)
        with KnowledgeBase(KBConfig(home=base / "home"), embedding_model=hash_model(64)) as kb:
            started = time.perf_counter()
            first = kb.ingest([base / "docs"])
            first_s = time.perf_counter() - started
            counted = Counted(kb.chunks.collection)
            kb.chunks.collection = counted  # type: ignore[assignment]
            started = time.perf_counter()
            second = kb.ingest([base / "docs"])
            second_s = time.perf_counter() - started
        assert len(first.added) == n and len(second.unchanged) == n, (first, second)
        return {
            "files": n,
            "first_ingest_s": round(first_s, 1),
            "resync_s": round(second_s, 2),
            "resync_ms_per_file": round(1000 * second_s / n, 3),
            "chunk_store_calls_in_resync": sum(counted.calls.values()),
        }
    finally:
        shutil.rmtree(base, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    p = parser(__doc__, json_out=True)
    p.add_argument("--sizes", default="5000,20000,40000", help="file counts, comma-separated")
    p.add_argument("--one", type=int, default=0, help="(internal) measure one size here")
    args = p.parse_args(argv)
    if args.one:  # the child: one size, its figures as JSON on stdout
        print(json.dumps(one_size(args.one)))
        return 0
    rows: list[dict[str, Any]] = []
    for n in (int(s) for s in args.sizes.split(",") if s.strip()):
        out = subprocess.run(
            rerun(__spec__.name if __spec__ else "bench.bench_resync", "--one", str(n)),
            cwd=REPO,
            capture_output=True,
            text=True,
            check=True,
        )
        rows.append(json.loads(out.stdout.strip().splitlines()[-1]))
        print(json.dumps(rows[-1]), file=sys.stderr)
    print(f"{'files':>8}{'first ingest s':>16}{'re-sync s':>11}{'ms/file':>9}{'store calls':>13}")
    for r in rows:
        print(
            f"{r['files']:>8,}{r['first_ingest_s']:>16.1f}{r['resync_s']:>11.2f}"
            f"{r['resync_ms_per_file']:>9.3f}{r['chunk_store_calls_in_resync']:>13}"
        )
    write_json(args.json, rows)
    return 0


if __name__ == "__main__":
    limit_threads()
    raise SystemExit(main())
