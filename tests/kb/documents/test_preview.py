"""A Word or Excel original as the viewer's HTML (issue 55 item 13): its text and tables,
every string escaped, nothing of the file's markup passed through."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.docgen import write_docx, write_xlsx
from tools.kb.documents.preview import preview_html
from tools.kb.ingest.formats import LoadError, LoadLimits

HOSTILE = "<script>alert(1)</script><img src=x onerror=alert(2)>"


def test_a_docx_with_a_table_and_hostile_text_is_escaped(tmp_path: Path) -> None:
    path = write_docx(tmp_path / "leave.docx", [
        ("h1", "Leave rules"), ("p", f"Say {HOSTILE} here."),
        ("table", [["Years", "Days"], ["5", "18"], [HOSTILE, "22"]]),
    ])  # fmt: skip
    html = preview_html(path.name, path, LoadLimits())
    assert "<h2>Leave rules</h2>" in html
    # The checked bytes of a CLI-ingested file preview the same (was: a crash on them).
    assert preview_html(path.name, path.read_bytes(), LoadLimits()) == html
    assert "<th>Years</th>" in html and "<td>18</td>" in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;&lt;img src=x onerror=alert(2)&gt;" in html
    assert "<script" not in html and "<img" not in html


def test_an_xlsx_is_a_table_per_sheet(tmp_path: Path) -> None:
    path = write_xlsx(tmp_path / "rates.xlsx", {"Rates": [["City", "Per day"], ["Shanghai", 500],
                                                         [HOSTILE, 1]]})  # fmt: skip
    html = preview_html(path.name, path, LoadLimits())
    assert "<h2>Rates</h2>" in html and "<td>Shanghai</td><td>500</td>" in html
    assert "<script" not in html and "&lt;img" in html


def test_other_files_and_damaged_ones_have_no_preview(tmp_path: Path) -> None:
    (tmp_path / "a.md").write_text("# A\n")
    (tmp_path / "b.docx").write_bytes(b"not a zip")
    for name in ("a.md", "b.docx"):
        with pytest.raises(LoadError):
            preview_html(name, tmp_path / name, LoadLimits())
