"""Giant inputs: every chunk within the bound, whatever the text; progress inside one big
file; an interrupted ingest resumes from its cached embeddings. (Odd encodings:
tests/kb/ingest/test_encodings.py.)"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from cli.common import ProgressBar
from tools.kb.ingest.chunking import MAX_HEADING_TOKENS, ChunkingOptions, chunk_document
from tools.kb.knowledge_base import KnowledgeBase
from tools.policy.offline import extractive_answer
from tools.text import estimate_tokens

MAX = ChunkingOptions().max_tokens

GIANT = {
    "unbroken line": "x" * 200_000,
    "unbroken run inside prose": "# H\n\nSome words first. " + "y" * 200_000 + " And after.",
    "giant table row": "| a | b |\n|---|---|\n| " + "z" * 50_000 + " | 1 |\n| c | 2 |",
    "CJK without punctuation": "中" * 5_000,
    "long code line": "```\n" + "q" * 10_000 + "\n```",
    "long URL": "See https://example.com/" + "a/" * 40_000 + " for details.",
}


@pytest.mark.parametrize("text", GIANT.values(), ids=GIANT.keys())
def test_no_chunk_exceeds_the_bound(text: str) -> None:
    chunks = chunk_document(text, markdown=True, options=ChunkingOptions())
    assert chunks
    assert max(estimate_tokens(c.text) for c in chunks) <= MAX
    # nothing lost: the letters of the input all reach some chunk
    assert sum(c.text.count(text.strip()[-1]) for c in chunks) >= text.count(text.strip()[-1])


def test_a_giant_heading_is_cut_in_the_path_and_kept_in_the_text() -> None:
    chunks = chunk_document("# " + "q" * 200_000 + "\n\nThe body.\n", markdown=True)
    assert all(estimate_tokens(h) <= MAX_HEADING_TOKENS for c in chunks for h in c.heading_path)
    assert max(estimate_tokens(c.index_text()) for c in chunks) <= MAX + MAX_HEADING_TOKENS
    assert sum(c.text.count("q") for c in chunks) == 200_000
    assert chunks[-1].text.endswith("The body.")
    # normal headings are unchanged (closing hashes dropped as before)
    assert chunk_document("## Carry-over ##\n\nText.")[0].heading_path == ("Carry-over",)


PATHOLOGICAL = {
    # each took minutes to hours (regex backtracking on a run of spaces, or a quadratic
    # re-estimate of the buffer per word); now well under a second each
    "heading with 20,000 spaces": "# a" + " " * 20_000 + "b\n\ntext",
    "location marker with 20,000 spaces": "<!-- page: " + " " * 20_000 + "x\n\ntext",
    "table separator with 200,000 spaces": "| a |\n|---" + " " * 200_000 + "x\n| b |",
    "200,000-character line of short words": "ab " * 70_000,
    "one table row of 30,000 cells": "| " + "a | " * 30_000 + "\n|---|\n| b |",
}


@pytest.mark.parametrize("text", PATHOLOGICAL.values(), ids=PATHOLOGICAL.keys())
def test_odd_lines_chunk_in_bounded_time(text: str) -> None:
    started = time.monotonic()
    chunks = chunk_document(text, markdown=True)
    assert time.monotonic() - started < 10
    assert chunks and max(estimate_tokens(c.text) for c in chunks) <= MAX
    assert max(len(c.heading) for c in chunks) < 200


def test_the_terminal_progress_line_shows_the_end_of_a_long_item(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    bar = ProgressBar("ingest")
    bar.tty = True
    bar(0, 1, "handbooks/2026/employee-handbook.md: chunk 1,280/39,116")
    line = capsys.readouterr().err
    assert line.rstrip().endswith(" …ndbook.md: chunk 1,280/39,116")


def test_a_200k_character_line_gives_a_bounded_offline_answer(
    kb: KnowledgeBase, tmp_path: Path
) -> None:
    folder = tmp_path / "kb"
    folder.mkdir()
    (folder / "blob.txt").write_text("The parking fee is 5 EUR. " + "w" * 200_000 + "\n")
    kb.ingest([folder])
    hits = kb.search("parking fee", k=5)
    assert hits and max(len(h.text) for h in hits) <= MAX * 4 + 100
    sources = [{"label": "[internal-1]", "text": h.text, "source": h.source} for h in hits]
    answer = extractive_answer("What is the parking fee?", sources, "en")
    assert len(answer) < 5_000


def _big_markdown(path: Path, sections: int) -> None:
    body = "\n\n".join(
        f"## Section {i}\n\nParagraph {i} explains rule {i} of the handbook in some detail. "
        f"It repeats the point for rule {i} so the chunk has substance."
        for i in range(sections)
    )
    path.write_text(f"# Handbook\n\n{body}\n")


class _Interrupted(Exception):
    pass


def test_progress_moves_inside_one_big_file(kb: KnowledgeBase, tmp_path: Path) -> None:
    folder = tmp_path / "kb"
    folder.mkdir()
    _big_markdown(folder / "big.md", 15_000)
    assert (folder / "big.md").stat().st_size > 2_000_000
    events: list[tuple[int, int, str]] = []
    kb.ingest([folder], progress=lambda d, t, item: events.append((d, t, item)))
    inside = [e for e in events if e[2].startswith("big.md: chunk ")]
    assert len(inside) >= 20, events[:5]
    counts = [e[2].removeprefix("big.md: chunk ").replace(",", "").split("/") for e in inside]
    done = [int(n) for n, _ in counts]
    assert done == sorted(done) and all(e[:2] == (0, 1) for e in inside)
    assert {int(of) for _, of in counts} == {done[-1]}  # counted against the file's chunks
    assert ("big.md: chunking" in [e[2] for e in events]) and events[-1] == (1, 1, "")


def test_an_interrupted_ingest_of_a_big_file_resumes_where_it_stopped(
    tmp_path: Path,
) -> None:
    from tests.fakes import hash_model
    from tools.kb.knowledge_base import KBConfig

    folder = tmp_path / "kb"
    folder.mkdir()
    _big_markdown(folder / "big.md", 3000)
    model = hash_model()
    calls = {"texts": 0, "left": 3}
    real = model.embeddings.embed_documents

    def flaky(texts: list[str]) -> list[list[float]]:
        if calls["left"] == 0:
            raise _Interrupted
        calls["left"] -= 1
        calls["texts"] += len(texts)
        return real(texts)

    model.embeddings.embed_documents = flaky  # type: ignore[method-assign]
    home = tmp_path / "home"
    with KnowledgeBase(KBConfig(home=home), embedding_model=model) as kb:
        with pytest.raises(_Interrupted):
            kb.ingest([folder])
        assert kb.stats()["documents"] == 0  # nothing committed: the old (empty) state
    first = calls["texts"]
    assert first >= 3 * 256 - 256  # three slices were embedded and cached
    calls["left"], calls["texts"] = 10_000, 0
    with KnowledgeBase(KBConfig(home=home), embedding_model=model) as kb:
        report = kb.ingest([folder])
        total = report.chunks_written
    assert report.added == ["big.md"]
    assert calls["texts"] == total - first  # only what the first run had not reached


def test_repeated_chunks_of_a_big_file_are_embedded_once(tmp_path: Path) -> None:
    from tests.fakes import hash_model
    from tools.kb.knowledge_base import KBConfig

    folder = tmp_path / "kb"
    folder.mkdir()
    boilerplate = "## Notice\n\nThis page intentionally repeats the legal notice.\n\n"
    (folder / "big.md").write_text("# Book\n\n" + boilerplate * 1000 + "## End\n\nThe end.\n")
    model = hash_model()
    embedded: list[str] = []
    real = model.embeddings.embed_documents

    def counting(texts: list[str]) -> list[list[float]]:
        embedded.extend(texts)
        return real(texts)

    model.embeddings.embed_documents = counting  # type: ignore[method-assign]
    with KnowledgeBase(KBConfig(home=tmp_path / "home"), embedding_model=model) as kb:
        report = kb.ingest([folder])
        assert report.chunks_written == 1001 and kb.stats()["chunks"] == 1001
    assert len(embedded) == len(set(embedded)) == 2
