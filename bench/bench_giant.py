"""One giant file: ingest time, peak memory, chunk bound, and resuming an interrupted run.

Writes a Markdown file of ``--mb`` MB (default 20; numbered sections of English prose, one
paragraph in ten an unbroken 2,000-character run) and, in a fresh process each:

* ``ingest``  — ``KnowledgeBase.ingest`` of the file with ``--embedding`` (``hash``: the
  hashed bag of words of the tests, so the figure is the pipeline's, not a model's;
  ``local``: e5, hours for 20 MB on two cores), reporting chunks, the largest chunk in
  estimated tokens (the bound is 480), the progress events seen inside the file, wall
  time and peak RSS;
* ``resume``  — the same ingest stopped after ``--stop-after`` embedding slices, then run
  again: how many chunks the second run had to embed (the rest come from the cache).

Usage::

    .venv/bin/python -m bench.bench_giant                  # 20 MB, hash embedder
    .venv/bin/python -m bench.bench_giant --mb 2 --embedding local
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.harness import REPO, parser, rerun


def write_giant(path: Path, mb: float) -> None:
    target = int(mb * 1024 * 1024)
    size = 0
    with path.open("w", encoding="utf-8") as fh:
        fh.write("# Giant handbook\n\n")
        i = 0
        while size < target:
            if i % 10 == 9:
                para = "x" * 2000
            else:
                para = (
                    f"Rule {i} says that request {i} must be approved by the team lead within "
                    f"{i % 7 + 1} days, and that the record of rule {i} is kept for audits. "
                ) * 3
            block = f"## Section {i}\n\n{para}\n\n"
            fh.write(block)
            size += len(block)
            i += 1


class Stop(Exception):
    pass


def run_ingest(file: Path, home: Path, embedding: str, stop_after: int | None) -> dict[str, Any]:
    from tests.fakes import hash_model
    from tools.kb.knowledge_base import KBConfig, KnowledgeBase
    from tools.text import estimate_tokens

    model = hash_model() if embedding == "hash" else None
    kb = KnowledgeBase(KBConfig(home=home, embedding=embedding if model is None else "local"),
                       embedding_model=model)  # fmt: skip
    inner = kb.model.embeddings
    embedded = {"texts": 0, "slices": 0}
    real = inner.embed_documents

    def counting(texts: list[str]) -> list[list[float]]:
        if stop_after is not None and embedded["slices"] >= stop_after:
            raise Stop
        embedded["slices"] += 1
        embedded["texts"] += len(texts)
        return real(texts)

    inner.embed_documents = counting  # type: ignore[method-assign]
    events: list[str] = []
    started = time.perf_counter()
    try:
        report = kb.ingest([file], progress=lambda d, t, item: events.append(item))
    except Stop:
        return {"stopped": True, "embedded": embedded["texts"]}
    seconds = time.perf_counter() - started
    ingest_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    largest = max(estimate_tokens(t) for t in kb.snapshot().texts)  # builds BM25 too
    kb.close()
    return {
        "chunks": report.chunks_written,
        "largest_chunk_tokens": largest,
        "progress_events_inside": sum(": chunk " in e for e in events),
        "embedded": embedded["texts"],
        "seconds": round(seconds, 1),
        "peak_rss_mb": round(ingest_rss),
        "peak_rss_with_bm25_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
    }


def child(argv: list[str]) -> dict[str, Any]:
    out = subprocess.run(rerun(__spec__.name, "--child", *argv), cwd=REPO, check=True,
                         capture_output=True, text=True)  # fmt: skip
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


def main() -> None:
    p = parser(__doc__, raw=True)
    p.add_argument("--mb", type=float, default=20.0)
    p.add_argument("--embedding", default="hash", help="'hash' (pipeline only) or 'local'")
    p.add_argument("--stop-after", type=int, default=20, help="slices before the interruption")
    p.add_argument("--child", nargs=4, metavar=("FILE", "HOME", "EMBEDDING", "STOP"),
                   help=argparse.SUPPRESS)  # fmt: skip
    args = p.parse_args()
    if args.child:
        file, home, embedding, stop = args.child
        stop_after = None if stop == "-" else int(stop)
        print(json.dumps(run_ingest(Path(file), Path(home), embedding, stop_after)))
        return
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "kb"
        folder.mkdir()
        file = folder / "giant.md"
        write_giant(file, args.mb)
        size = file.stat().st_size / 1024 / 1024
        full = child([str(file), str(Path(tmp) / "h1"), args.embedding, "-"])
        stopped = child([str(file), str(Path(tmp) / "h2"), args.embedding, str(args.stop_after)])
        resumed = child([str(file), str(Path(tmp) / "h2"), args.embedding, "-"])
    print(f"one {size:.1f} MB Markdown file, embedding={args.embedding}")
    print(f"  chunks                 {full['chunks']:,}")
    print(f"  largest chunk          {full['largest_chunk_tokens']} estimated tokens (bound 480)")
    print(f"  progress events inside {full['progress_events_inside']:,}")
    print(f"  ingest                 {full['seconds']} s, peak RSS {full['peak_rss_mb']} MB")
    print(f"  then the BM25 snapshot peak RSS {full['peak_rss_with_bm25_mb']} MB")
    print(f"  interrupted after      {stopped['embedded']:,} chunks embedded")
    print(f"  resumed run embedded   {resumed['embedded']:,} chunks "
          f"(of {resumed['chunks']:,}; the rest from the cache)")  # fmt: skip


if __name__ == "__main__":
    main()
