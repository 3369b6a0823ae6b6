"""Ingest throughput by document format, and peak memory, on ~200 generated documents.

The corpus (``--files``, default 200, fixed seed) is written by ``tests/docgen.py`` with
the format's own library: PDF (reportlab: 2–9 pages, outline, a ruled table on every
third page), DOCX (python-docx: headings, a table), HTML (headings, a table, site
boilerplate), XLSX (openpyxl: two sheets of 150–400 rows), CSV and Markdown; a fifth of
the documents are Chinese. One folder per format plus the whole mixed folder.

Every (folder, embedder) pair runs in a fresh process (so its peak RSS is its own) with a
fresh data home and embedding cache:

* ``parse``    — ``load_file`` on every file: extraction alone (files/s, PDF pages/s);
* ``no embed`` — ``KnowledgeBase.ingest`` with ``tests.fakes.hash_model`` (a hashed bag of
  words): parsing, chunking, Chroma writes, registry commits;
* ``e5``       — the same with the default local model (``--embedding``), cold cache.

Usage::

    OMP_NUM_THREADS=2 .venv/bin/python -m bench.bench_formats            # ~7 minutes
    .venv/bin/python -m bench.bench_formats --skip-embedding             # seconds
    .venv/bin/python -m bench.bench_formats --corpus /tmp/corpus --keep  # reuse a corpus
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench.harness import REPO, parser, rerun

FORMAT_SHARE = {"pdf": 0.3, "docx": 0.2, "html": 0.2, "xlsx": 0.1, "csv": 0.05, "md": 0.15}
SUFFIX = {"pdf": ".pdf", "docx": ".docx", "html": ".html", "xlsx": ".xlsx", "csv": ".csv",
          "md": ".md"}  # fmt: skip

_EN_SUBJECTS = ["The NR-200 robot", "Each forklift", "The night shift", "A new employee",
                "The FleetCloud service", "The Suzhou warehouse", "Every supplier",
                "The finance team", "The charging station", "A visitor"]  # fmt: skip
_EN_VERBS = ["must complete", "receives", "checks", "reports", "needs", "schedules",
             "replaces", "records", "reviews", "approves"]  # fmt: skip
_EN_OBJECTS = ["a safety briefing", "the inspection list", "three spare batteries",
               "the monthly report", "a signed purchase order", "the incident ticket",
               "an access badge", "the firmware update", "a travel request",
               "the maintenance log"]  # fmt: skip
_ZH_SUBJECTS = ["新员工", "仓库管理员", "财务部", "每台机器人", "夜班班长", "供应商", "访客"]
_ZH_VERBS = ["须提交", "负责检查", "每月更新", "应当填写", "可以申请", "须在三天内完成"]
_ZH_OBJECTS = ["安全培训记录", "设备巡检表", "费用报销单", "固件升级申请", "入职材料", "事故报告"]


def sentence(rng: random.Random, zh: bool) -> str:
    if zh:
        return (f"{rng.choice(_ZH_SUBJECTS)}{rng.choice(_ZH_VERBS)}{rng.choice(_ZH_OBJECTS)}，"
                f"期限为{rng.randint(2, 30)}天。")  # fmt: skip
    return (f"{rng.choice(_EN_SUBJECTS)} {rng.choice(_EN_VERBS)} {rng.choice(_EN_OBJECTS)} "
            f"within {rng.randint(2, 30)} days of code {rng.randint(100, 999)}.")  # fmt: skip


def paragraph(rng: random.Random, zh: bool, sentences: int = 6) -> str:
    return ("" if zh else " ").join(sentence(rng, zh) for _ in range(sentences))


def table(rng: random.Random, zh: bool, rows: int) -> list[list[Any]]:
    header = ["编号", "项目", "期限（天）", "负责人"] if zh else ["Code", "Item", "Days", "Owner"]
    items = _ZH_OBJECTS if zh else _EN_OBJECTS
    owners = _ZH_SUBJECTS if zh else _EN_SUBJECTS
    return [header] + [
        [f"K-{rng.randint(1000, 9999)}", rng.choice(items), rng.randint(1, 90), rng.choice(owners)]
        for _ in range(rows)
    ]


def blocks(rng: random.Random, zh: bool, sections: int) -> list[tuple[str, Any]]:
    out: list[tuple[str, Any]] = []
    for s in range(sections):
        out.append(("h1", f"第{s + 1}章 制度说明" if zh else f"Section {s + 1} procedures"))
        out.append(("p", paragraph(rng, zh)))
        out.append(("h2", "细则" if zh else "Details"))
        out.append(("p", paragraph(rng, zh, 4)))
        if s % 2 == 0:
            out.append(("table", table(rng, zh, 6)))
    return out


def make_corpus(root: Path, files: int, seed: int = 7) -> dict[str, int]:
    """Write ``files`` documents into ``root/<format>/``; returns the count per format."""
    from tests.docgen import html_page, write_docx, write_pdf, write_xlsx

    rng = random.Random(seed)
    counts = {fmt: max(1, round(files * share)) for fmt, share in FORMAT_SHARE.items()}
    counts["md"] += files - sum(counts.values())
    for fmt, n in counts.items():
        folder = root / fmt
        folder.mkdir(parents=True, exist_ok=True)
        for i in range(n):
            zh = i % 5 == 0
            path = folder / f"{fmt}-{i:03d}{SUFFIX[fmt]}"
            if fmt == "pdf":
                pages = [
                    [("h1", f"第{p + 1}页 要点" if zh else f"Part {p + 1}"),
                     ("p", paragraph(rng, zh, 5)),
                     *([("table", table(rng, zh, 5))] if p % 3 == 2 else [])]
                    for p in range(rng.randint(2, 9))
                ]  # fmt: skip
                write_pdf(path, pages)
            elif fmt == "docx":
                write_docx(path, blocks(rng, zh, rng.randint(2, 5)), title=f"Policy {i}")
            elif fmt == "html":
                page = html_page(blocks(rng, zh, rng.randint(2, 5)), title=f"Page {i}")
                path.write_text(page, encoding="utf-8")
            elif fmt == "xlsx":
                write_xlsx(path, {"Register": table(rng, zh, rng.randint(150, 400)),
                                  "Owners": table(rng, zh, 20)})  # fmt: skip
            elif fmt == "csv":
                rows = table(rng, zh, rng.randint(100, 300))
                path.write_text("\n".join(",".join(map(str, r)) for r in rows), encoding="utf-8")
            else:
                lines = []
                for kind, content in blocks(rng, zh, rng.randint(2, 5)):
                    if kind == "table":
                        lines.append("| " + " | ".join(map(str, content[0])) + " |")
                        lines.append("|" + " --- |" * len(content[0]))
                        lines.extend("| " + " | ".join(map(str, r)) + " |" for r in content[1:])
                        lines.append("")
                    else:
                        prefix = {"h1": "# ", "h2": "## "}.get(kind, "")
                        lines.extend([prefix + content, ""])
                path.write_text("\n".join(lines), encoding="utf-8")
    return counts


# -- one measured run (in its own process) --------------------------------------------------


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def worker(folder: Path, embedding: str) -> dict[str, Any]:
    import importlib

    from pypdf import PdfReader

    from tests.fakes import hash_model
    from tools.kb.embed.embeddings import make_embedding_model
    from tools.kb.ingest.identity import find_files
    from tools.kb.ingest.loaders import SourceDocument, load_file
    from tools.kb.knowledge_base import KBConfig, KnowledgeBase

    for library in ("pdfplumber", "docx", "openpyxl", "bs4"):  # imported outside the timing
        importlib.import_module(library)
    files = [(f.path, f.name) for f in find_files([folder])[0]]
    pages = sum(len(PdfReader(f).pages) for f, _ in files if f.suffix == ".pdf")
    size_mb = sum(f.stat().st_size for f, _ in files) / 1024 / 1024
    started = time.perf_counter()
    loaded = [load_file(f, d) for f, d in files]
    parse_s = time.perf_counter() - started
    assert all(isinstance(d, SourceDocument) for d in loaded), "a generated file was skipped"
    del loaded
    model = hash_model(384) if embedding == "hash" else make_embedding_model(embedding)
    model.embed_query("warm up")  # load the model outside the timed part
    home = Path(tempfile.mkdtemp(prefix="bench-formats-"))
    try:
        kb = KnowledgeBase(KBConfig(home=home), embedding_model=model)
        rss_open = peak_rss_mb()
        started = time.perf_counter()
        report = kb.ingest([folder])
        ingest_s = time.perf_counter() - started
        kb.close()
    finally:
        shutil.rmtree(home, ignore_errors=True)
    assert not report.skipped, report.skipped
    return {
        "folder": folder.name,
        "embedding": embedding,
        "files": len(files),
        "pages": pages,
        "mb": round(size_mb, 2),
        "chunks": report.chunks_written,
        "parse_s": round(parse_s, 3),
        "ingest_s": round(ingest_s, 3),
        "rss_open_mb": round(rss_open, 1),
        "rss_peak_mb": round(peak_rss_mb(), 1),
    }


def run_worker(folder: Path, embedding: str) -> dict[str, Any]:
    out = subprocess.run(
        rerun(__spec__.name, "--worker", str(folder), "--embedding", embedding),
        cwd=REPO,
        check=True,
        capture_output=True,
        text=True,
    )
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


def rate(n: float, seconds: float) -> str:
    return f"{n / seconds:,.1f}" if seconds > 0 and n else "-"


def print_table(rows: Sequence[dict[str, Any]], embedding: str) -> None:
    by = {(r["folder"], r["embedding"]): r for r in rows}
    folders = [f for f in [*FORMAT_SHARE, "mixed"] if (f, "hash") in by]
    header = (
        f"{'format':<7}{'files':>6}{'pages':>6}{'MB':>6}{'chunks':>7} | {'parse files/s':>13}"
        f"{'pages/s':>8} | {'no embed s':>10}{'files/s':>8}{'pages/s':>8}{'RSS MB':>7}"
    )
    with_model = any((f, embedding) in by for f in folders)
    if with_model:
        header += f" | {embedding + ' s':>8}{'files/s':>8}{'chunks/s':>9}{'RSS MB':>7}"
    print(header)
    print("-" * len(header))
    for f in folders:
        h = by[(f, "hash")]
        pages = h["pages"] or 0
        line = (
            f"{f:<7}{h['files']:>6}{pages or '-':>6}{h['mb']:>6.1f}{h['chunks']:>7} | "
            f"{rate(h['files'], h['parse_s']):>13}{rate(pages, h['parse_s']):>8} | "
            f"{h['ingest_s']:>10.1f}{rate(h['files'], h['ingest_s']):>8}"
            f"{rate(pages, h['ingest_s']):>8}{h['rss_peak_mb']:>7.0f}"
        )
        m = by.get((f, embedding))
        if m:
            line += (
                f" | {m['ingest_s']:>8.1f}{rate(m['files'], m['ingest_s']):>8}"
                f"{rate(m['chunks'], m['ingest_s']):>9}{m['rss_peak_mb']:>7.0f}"
            )
        print(line)


def main(argv: list[str] | None = None) -> int:
    p = parser(__doc__)
    p.add_argument("--files", type=int, default=200, help="documents in the corpus (~200)")
    p.add_argument("--corpus", type=Path, default=None, help="corpus folder (default: temp)")
    p.add_argument("--keep", action="store_true", help="keep the corpus folder")
    p.add_argument("--embedding", default="local", help="the model of the embedding runs")
    p.add_argument("--skip-embedding", action="store_true", help="only the hash-model runs")
    p.add_argument("--json", type=Path, default=None, help="also write the figures as JSON")
    p.add_argument("--worker", type=Path, default=None, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.worker:
        print(json.dumps(worker(args.worker, args.embedding)))
        return 0
    corpus = args.corpus or Path(tempfile.mkdtemp(prefix="bench-formats-corpus-"))
    try:
        if not any(corpus.glob("*/*")):
            started = time.perf_counter()
            counts = make_corpus(corpus, args.files)
            print(f"corpus: {counts} in {time.perf_counter() - started:.1f} s", file=sys.stderr)
        # The mixed folder: a copy of every format's folder, ingested at once.
        mixed = corpus.parent / f"{corpus.name}-mixed"
        if not mixed.exists():
            for fmt in FORMAT_SHARE:
                shutil.copytree(corpus / fmt, mixed / fmt)
        folders = [corpus / fmt for fmt in FORMAT_SHARE] + [mixed]
        rows: list[dict[str, Any]] = []
        embedders = ["hash"] + ([] if args.skip_embedding else [args.embedding])
        for embedding in embedders:
            for folder in folders:
                row = run_worker(folder, embedding)
                row["folder"] = "mixed" if folder == mixed else row["folder"]
                rows.append(row)
                print(f"{row['folder']:<6} {embedding:<6} {row}", file=sys.stderr)
        print(f"{sum(r['files'] for r in rows if r['folder'] == 'mixed' and r['embedding'] == 'hash')}"
              f" generated documents; OMP_NUM_THREADS={os.environ['OMP_NUM_THREADS']}")  # fmt: skip
        print_table(rows, args.embedding)
        if args.json:
            args.json.write_text(json.dumps(rows, indent=2), encoding="utf-8")
    finally:
        if not args.keep and args.corpus is None:
            shutil.rmtree(corpus, ignore_errors=True)
            shutil.rmtree(corpus.parent / f"{corpus.name}-mixed", ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
