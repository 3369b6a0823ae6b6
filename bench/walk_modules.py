"""The walk of one question's rewrites through the modules of the knowledge base.

One sample question (``examples/questions.jsonl``, ``--question`` picks it by id) is
rewritten by the offline rule (``tools.policy.offline.offline_rewrites``) and its
rewrites are searched as the graph's ``retrieve_internal`` searches them
(``KnowledgeBase.retrieve_many(rewrites, k, anchor=question)``) over the sample knowledge
base (hash embeddings, ingested into a throw-away home, one search beforehand so the
snapshot is built). ``sys.setprofile`` follows the Python calls: the module of the
innermost frame under ``--scope`` (a folder of the repository, default ``tools/kb``) is
where the query "is"; a *stay* is a maximal stretch in one module, a *return* a move back
into a module by a return (not by a call). Frames outside the scope are transparent.

    .venv/bin/python -m bench.walk_modules
    .venv/bin/python -m bench.walk_modules --scope tools/kb/search --scope tools/kb/knowledge_base.py

``--ingest PATH`` walks instead the ingest of one file of the sample knowledge base (its
path under examples/kb) into a knowledge base holding the rest, as ``hybrid-rag ingest``
adds a file: ``KnowledgeBase.ingest([file])``.

    .venv/bin/python -m bench.walk_modules --ingest hr/annual-leave.md
"""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
from collections import Counter
from pathlib import Path
from types import FrameType
from typing import Any

from bench.harness import REPO, SAMPLE_KB, SAMPLE_QUESTIONS, parser
from tools.kb.knowledge_base import KBConfig, KnowledgeBase
from tools.policy.offline import offline_rewrites


class Walk:
    """The stays and returns between the modules under ``scopes`` (repository paths)."""

    def __init__(self, scopes: list[str]) -> None:
        self.scopes = [str((REPO / s).resolve()) for s in scopes]
        self.stays: list[str] = []
        self.returns = 0
        self._known: dict[str, str | None] = {}

    def module(self, frame: FrameType | None) -> str | None:
        """The scoped module of the innermost frame in scope (None: none is)."""
        while frame is not None:
            name = self._name(frame.f_code.co_filename)
            if name is not None:
                return name
            frame = frame.f_back
        return None

    def _name(self, filename: str) -> str | None:
        if filename not in self._known:
            path = str(Path(filename).resolve()) if filename.endswith(".py") else ""
            inside = any(path == s or path.startswith(s + "/") for s in self.scopes)
            self._known[filename] = str(Path(path).relative_to(REPO)) if inside else None
        return self._known[filename]

    def profile(self, frame: FrameType, event: str, arg: Any) -> None:
        if event == "call":
            here = self.module(frame)
        elif event == "return":
            here = self.module(frame.f_back)
        else:
            return
        if here is None or (self.stays and self.stays[-1] == here):
            return
        if event == "return":
            self.returns += 1
        self.stays.append(here)

    def figures(self) -> dict[str, Any]:
        entered = Counter(self.stays)
        return {
            "stays": len(self.stays),
            "modules": len(entered),
            "returns": self.returns,
            "entered": dict(entered.most_common()),
            "path": self.stays,
        }


def main(argv: list[str] | None = None) -> int:
    p = parser(__doc__)
    p.add_argument("--question", default="q01", help="the id of a sample question")
    p.add_argument("--scope", action="append", help="a folder or module (repeatable)")
    p.add_argument("--k", type=int, default=5)
    p.add_argument("--path", action="store_true", help="print the modules in order")
    p.add_argument("--ingest", default=None, help="walk the ingest of this sample KB file")
    args = p.parse_args(argv)
    if args.ingest:
        return walk_ingest(args)
    from tests.fakes import hash_model

    rows = [json.loads(line) for line in SAMPLE_QUESTIONS.read_text().splitlines() if line]
    question = next(r["question"] for r in rows if r["id"] == args.question)
    rewrites, _ = offline_rewrites(question, 2)
    home = Path(tempfile.mkdtemp(prefix="walk-modules-")) / "home"
    kb = KnowledgeBase(KBConfig(home=home), embedding_model=hash_model())
    kb.ingest([SAMPLE_KB])
    kb.retrieve_many(["warm up the snapshot"], args.k)
    kb.forget_queries()
    walk = Walk(args.scope or ["tools/kb"])
    sys.setprofile(walk.profile)
    try:
        kb.retrieve_many(rewrites, args.k, anchor=question)
    finally:
        sys.setprofile(None)
    kb.close()
    report(f"question {args.question}: {question}\nrewrites: {rewrites}", args, walk.figures())
    return 0


def walk_ingest(args: Any) -> int:
    """The walk of one file's ingest (``--ingest``) into a KB holding the others."""
    from tests.fakes import hash_model

    root = Path(tempfile.mkdtemp(prefix="walk-ingest-"))
    others, target = root / "kb", root / "kb" / args.ingest
    shutil.copytree(SAMPLE_KB, others)
    body = target.read_bytes()
    target.unlink()
    kb = KnowledgeBase(KBConfig(home=root / "home"), embedding_model=hash_model())
    kb.ingest([others])
    target.write_bytes(body)
    walk = Walk(args.scope or ["tools/kb"])
    sys.setprofile(walk.profile)
    try:
        kb.ingest([target])
    finally:
        sys.setprofile(None)
    kb.close()
    report(f"ingest of {args.ingest}", args, walk.figures())
    return 0


def report(what: str, args: Any, figures: dict[str, Any]) -> None:
    print(what)
    print(f"scope: {' '.join(args.scope or ['tools/kb'])}")
    print(f"stays {figures['stays']} in {figures['modules']} modules, returns {figures['returns']}")
    for module, n in figures["entered"].items():
        print(f"  {n:4d}  {module}")
    if args.path:
        print(" → ".join(Path(m).stem for m in figures["path"]))


if __name__ == "__main__":
    raise SystemExit(main())
