"""Giant and oddly encoded inputs: every chunk within the bound, the encoding chosen
right and named, UTF-16/32 files read rather than called binary."""

from __future__ import annotations

from pathlib import Path

import pytest

from tools.kb.chunking import ChunkingOptions, chunk_document
from tools.kb.formats.common import decode_bytes
from tools.kb.knowledge_base import KnowledgeBase
from tools.kb.loaders import SourceDocument, load_file
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


ENCODED = {
    "latin-1": ("Über die Größe: Straße München\n", "latin-1", "cp1252"),
    "latin-1 spanish": ("El niño come piñas en España.\n", "latin-1", "cp1252"),
    "cp1250 polish": ("Zażółć gęślą jaźń, proszę pana.\n", "cp1250", "cp1250"),
    "big5": ("員工入職滿一年後享有年假五天。\n", "big5", "big5"),
    "cp1252": ("Café “quotes” – naïve résumé €5\n", "cp1252", "cp1252"),
    "gb18030": ("员工入职满一年后享有年假五天，满六年后十八天。\n", "gb18030", "gb18030"),
    "gb18030 short": ("年假", "gb18030", "gb18030"),
    "cp1251": ("Привет мир, это тест кодировки.\n", "cp1251", "cp1251"),
    "shift-jis": ("日本語のテキストです。東京都。\n", "shift_jis", "cp932"),
}


@pytest.mark.parametrize(("text", "codec", "named"), ENCODED.values(), ids=ENCODED.keys())
def test_legacy_encodings_decode_right(text: str, codec: str, named: str) -> None:
    decoded = decode_bytes(text.encode(codec))
    assert decoded is not None and decoded.text == text
    assert decoded.encoding == named and decoded.how == "detected"


BOMS = {
    "utf-16 le": b"\xff\xfe" + "Grüße, 年假\n".encode("utf-16-le"),
    "utf-16 be": b"\xfe\xff" + "Grüße, 年假\n".encode("utf-16-be"),
    "utf-32 le": b"\xff\xfe\x00\x00" + "Grüße, 年假\n".encode("utf-32-le"),
    "utf-32 be": b"\x00\x00\xfe\xff" + "Grüße, 年假\n".encode("utf-32-be"),
    "utf-8 bom": b"\xef\xbb\xbf" + "Grüße, 年假\n".encode(),
}


@pytest.mark.parametrize("raw", BOMS.values(), ids=BOMS.keys())
def test_files_with_a_bom_are_text_not_binary(tmp_path: Path, raw: bytes) -> None:
    path = tmp_path / "note.txt"
    path.write_bytes(raw)
    doc = load_file(path, "note.txt")
    assert isinstance(doc, SourceDocument), doc
    assert doc.text == "Grüße, 年假\n"


def test_the_ingest_report_names_a_detected_encoding(kb: KnowledgeBase, tmp_path: Path) -> None:
    folder = tmp_path / "kb"
    folder.mkdir()
    (folder / "de.txt").write_bytes("Über die Größe: Straße München\n".encode("latin-1"))
    (folder / "utf8.txt").write_text("Plain UTF-8 text about streets.\n")
    report = kb.ingest([folder])
    assert sorted(report.added) == ["de.txt", "utf8.txt"]
    assert [(Path(n.source).name, n.note) for n in report.notes] == [
        ("de.txt", "decoded as cp1252 (detected)")
    ]
    assert any("Straße München" in h.text for h in kb.search("Straße München", k=3))


def test_bytes_without_a_plausible_encoding_are_skipped_with_the_reason(tmp_path: Path) -> None:
    path = tmp_path / "noise.txt"
    path.write_bytes(bytes(range(1, 256)) * 3)
    doc = load_file(path, "noise.txt")
    assert not isinstance(doc, SourceDocument)
    assert "encoding" in doc.reason


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
    _big_markdown(folder / "big.md", 3000)
    events: list[tuple[int, int, str]] = []
    kb.ingest([folder], progress=lambda d, t, item: events.append((d, t, item)))
    inside = [e for e in events if e[2].startswith("embedded ")]
    assert len(inside) >= 5, events[:5]
    done = [int(e[2].split()[1].split("/")[0].replace(",", "")) for e in inside]
    assert done == sorted(done) and all(e[:2] == (0, 1) for e in inside)


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
