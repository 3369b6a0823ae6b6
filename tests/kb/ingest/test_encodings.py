"""Odd encodings: a BOM decides, then strict UTF-8, then UTF-8 with a few broken bytes,
then charset-normalizer's most plausible guess, else the file is skipped with the reason;
any decoding but plain UTF-8 is named in the ingest report (and ``ingest --json``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cli.main import main
from tests.fakes import hash_kb_cli
from tools.kb.ingest.formats.text_encodings import decode_bytes
from tools.kb.ingest.loaders import SourceDocument, load_file
from tools.kb.knowledge_base import KnowledgeBase

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


def test_utf8_with_a_few_broken_bytes_stays_utf8(tmp_path: Path) -> None:
    good = "Grüße aus München, 年假五天。Plain words follow here. " * 50
    path = tmp_path / "cut.txt"
    # one stray Latin-1 byte, and the file cut inside its last character
    path.write_bytes(good.encode() + b"\xe9" + good.encode() + "年".encode()[:2])
    doc = load_file(path, "cut.txt")
    assert isinstance(doc, SourceDocument), doc
    assert doc.text == good + "\ufffd" + good + "\ufffd"
    assert doc.notes == ("decoded as utf-8 (2 invalid byte sequences replaced)",)


def test_plain_utf8_and_a_utf8_bom_carry_no_note(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("Grüße\n", encoding="utf-8")
    (tmp_path / "b.txt").write_bytes(b"\xef\xbb\xbf" + "Grüße\n".encode())
    for name in ("a.txt", "b.txt"):
        doc = load_file(tmp_path / name, name)
        assert isinstance(doc, SourceDocument) and doc.text == "Grüße\n" and doc.notes == ()


def test_a_utf16_bom_file_is_noted_with_its_encoding(tmp_path: Path) -> None:
    path = tmp_path / "w.txt"
    path.write_bytes(b"\xff\xfe" + "Grüße, 年假\n".encode("utf-16-le"))
    doc = load_file(path, "w.txt")
    assert isinstance(doc, SourceDocument) and doc.notes == ("decoded as utf-16 (BOM)",)


@pytest.mark.parametrize(
    ("name", "codec", "bom"),
    [("t.csv", "utf-16-le", b"\xff\xfe"), ("t.tsv", "utf-16-be", b"\xfe\xff"),
     ("u.csv", "utf-32-le", b"\xff\xfe\x00\x00")],
)  # fmt: skip
def test_a_utf16_or_utf32_table_with_a_bom_is_decoded(
    tmp_path: Path, name: str, codec: str, bom: bytes
) -> None:
    """Issue 43: a UTF-16 CSV/TSV (Excel's "Unicode text") was skipped as binary."""
    sep = "\t" if name.endswith(".tsv") else ","
    path = tmp_path / name
    path.write_bytes(bom + f"城市{sep}人口\nMünchen{sep}1500000\n北京{sep}21540000\n".encode(codec))
    doc = load_file(path, name)
    assert isinstance(doc, SourceDocument), doc
    assert "| 城市 | 人口 |" in doc.text and "| München | 1500000 |" in doc.text


def test_a_utf16_file_without_a_bom_is_still_binary(tmp_path: Path) -> None:
    path = tmp_path / "w.txt"
    path.write_bytes("Grüße, 年假\n".encode("utf-16-le"))
    doc = load_file(path, "w.txt")
    assert not isinstance(doc, SourceDocument) and "NUL" in doc.reason


def test_ingest_json_names_the_encoding(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    hash_kb_cli(monkeypatch)
    folder = tmp_path / "kb"
    folder.mkdir()
    (folder / "menu.txt").write_bytes("Café “quotes” – naïve résumé €5\n".encode("cp1252"))
    (folder / "zh.txt").write_bytes(
        "员工入职满一年后享有年假五天，满六年后十八天。\n".encode("gb18030")
    )
    (folder / "noise.txt").write_bytes(bytes(range(1, 256)) * 3)
    assert main(["--home", str(tmp_path / "h"), "ingest", str(folder), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    notes = {Path(n["source"]).name: n["note"] for n in out["notes"]}
    assert notes == {
        "menu.txt": "decoded as cp1252 (detected)",
        "zh.txt": "decoded as gb18030 (detected)",
    }
    assert sorted(out["added"]) == ["menu.txt", "zh.txt"]
    assert [Path(s["source"]).name for s in out["skipped"]] == ["noise.txt"]
    assert "encoding" in out["skipped"][0]["reason"]
