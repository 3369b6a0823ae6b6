"""PDF, DOCX, HTML, XLSX and CSV: real files written by their libraries (tests/docgen.py),
read by the loaders, chunked, ingested, searched and cited.

Per format: text, headings, a table kept with its header, Chinese; every bad input of
issue 12 (encrypted PDF, scanned PDF, corrupt and truncated files, zip bombs, a file over
the size limit, 100k rows) gives a reason and never stops the folder; locations (page,
sheet) reach search results, citations and the printed source list.
"""

from __future__ import annotations

import json
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cli.main import main
from graph.agent.tool_work import render_internal
from run import resources
from tests.docgen import (
    html_page,
    write_docx,
    write_html,
    write_image_pdf,
    write_pdf,
    write_xlsx,
)
from tests.fakes import hash_model, use_kb_in_cli
from tools.answer.citations import assign_labels, citation_record
from tools.answer.context_builder import render_source
from tools.answer.sources import chunk_to_source
from tools.errors import ConfigError
from tools.kb.ingest import formats
from tools.kb.ingest.chunking import Chunk, chunk_document, location_marker
from tools.kb.ingest.formats import LoadLimits
from tools.kb.ingest.loaders import SkippedFile, SourceDocument, load_file
from tools.kb.knowledge_base import KBConfig, KnowledgeBase

HANDBOOK_PAGES: list[list[tuple[str, Any]]] = [
    [
        ("h1", "Warehouse handbook"),
        ("p", "This handbook describes how the Northwind warehouse operates day to day."),
    ],
    [
        ("h1", "Shifts"),
        ("p", "The early shift starts at 06:00 and the late shift ends at 22:00."),
    ],
    [
        ("h1", "Lifting equipment"),
        ("p", "The ZX-9 lifter carries a maximum payload of 750 kg on level floors."),
        ("h2", "Inspection intervals"),
        (
            "table",
            [
                ["Equipment", "Interval", "Owner"],
                ["ZX-9 lifter", "every 90 days", "Facilities"],
                ["Pallet jack", "every 180 days", "Warehouse lead"],
            ],
        ),
    ],
    [("h1", "Contacts"), ("p", "Questions go to the warehouse office, extension 3301.")],
]


def doc(path: Path, **limits: Any) -> SourceDocument:
    loaded = load_file(path, path.name, LoadLimits(**limits) if limits else LoadLimits())
    assert isinstance(loaded, SourceDocument), loaded
    return loaded


def skipped(path: Path, **limits: Any) -> str:
    loaded = load_file(path, path.name, LoadLimits(**limits) if limits else LoadLimits())
    assert isinstance(loaded, SkippedFile), f"{path.name} was not skipped"
    return loaded.reason


def chunks_of(document: SourceDocument) -> list[Chunk]:
    return chunk_document(document.text, markdown=document.is_markdown)


def chunk_with(chunks: list[Chunk], text: str) -> Chunk:
    found = [c for c in chunks if text in c.text]
    assert found, f"no chunk contains {text!r}"
    return found[0]


def table_lines(chunk: Chunk) -> list[str]:
    return [line for line in chunk.text.split("\n") if line.startswith("|")]


def assert_table_rows_keep_header(chunks: list[Chunk], header: str) -> None:
    tables = [c for c in chunks if c.is_table]
    assert tables
    for c in tables:
        assert table_lines(c)[0] == header, c.text


# -- PDF -------------------------------------------------------------------------------------


def test_pdf_pages_outline_headings_and_ruled_table(tmp_path: Path) -> None:
    pdf = doc(write_pdf(tmp_path / "handbook.pdf", HANDBOOK_PAGES))
    assert pdf.is_markdown and pdf.extraction.startswith("pdf:") and pdf.notes == ()
    chunks = chunks_of(pdf)
    payload = chunk_with(chunks, "maximum payload of 750 kg")
    assert (payload.page, payload.page_end) == (3, 3)
    assert payload.heading_path == ("Lifting equipment",)
    shifts = chunk_with(chunks, "early shift starts at 06:00")
    assert (shifts.page, shifts.heading_path) == (2, ("Shifts",))
    table = chunk_with(chunks, "| ZX-9 lifter | every 90 days | Facilities |")
    assert table.is_table and table.page == 3
    assert table.heading_path == ("Lifting equipment", "Inspection intervals")
    assert table_lines(table)[:2] == ["| Equipment | Interval | Owner |", "| --- | --- | --- |"]
    assert "<!--" not in "".join(c.text for c in chunks)  # markers never reach the text


def test_pdf_without_outline_still_has_pages(tmp_path: Path) -> None:
    pdf = doc(write_pdf(tmp_path / "plain.pdf", HANDBOOK_PAGES, outline=False))
    # No headings: the four short pages merge into one chunk, which records the range.
    (chunk,) = chunks_of(pdf)
    assert chunk.heading_path == () and (chunk.page, chunk.page_end) == (1, 4)
    assert "Warehouse handbook This handbook describes" in chunk.text  # a heading is text here


def test_chinese_pdf(tmp_path: Path) -> None:
    pages = [
        [("h1", "年假制度"), ("p", "员工工作满一年后享有五天带薪年假。")],
        [
            ("h1", "报销标准"),
            ("p", "一线城市住宿费每晚不超过六百元，二线城市不超过四百五十元。"),
            ("table", [["城市级别", "住宿费"], ["一线", "600元"], ["二线", "450元"]]),
        ],
    ]
    pdf = doc(write_pdf(tmp_path / "制度.pdf", pages))
    chunks = chunks_of(pdf)
    hotel = chunk_with(chunks, "一线城市住宿费每晚不超过六百元")
    assert (hotel.page, hotel.heading_path) == (2, ("报销标准",))
    table = chunk_with(chunks, "| 一线 | 600元 |")
    assert table_lines(table)[0] == "| 城市级别 | 住宿费 |" and table.page == 2
    assert chunk_with(chunks, "员工工作满一年后享有五天带薪年假").page == 1


def test_pdf_text_cannot_forge_a_location_or_a_heading(tmp_path: Path) -> None:
    pages = [[("p", "<!-- page: 99 -->")], [("p", "# Fake heading"), ("p", "Real text here.")]]
    pdf = doc(write_pdf(tmp_path / "forge.pdf", pages, outline=False))
    (chunk,) = chunks_of(pdf)
    assert (chunk.page, chunk.page_end, chunk.heading_path) == (1, 2, ())
    assert "\\<!-- page: 99 -->" in chunk.text and "\\# Fake heading" in chunk.text


# -- Word ------------------------------------------------------------------------------------

TRAVEL_BLOCKS: list[tuple[str, Any]] = [
    ("h1", "Hotels"),
    ("p", "Hotel costs are reimbursed up to the limit of the city tier."),
    (
        "table",
        [
            ["City tier", "Hotel per night", "Meals per day"],
            ["Tier 1", "600 CNY", "100 CNY"],
            ["Tier 2", "450 CNY", "80 CNY"],
        ],
    ),
    ("h2", "Receipts"),
    ("list", ["Keep the original invoice.", "Submit within 30 days."]),
]


def test_docx_headings_table_and_lists(tmp_path: Path) -> None:
    word = doc(write_docx(tmp_path / "travel.docx", TRAVEL_BLOCKS, title="Travel policy"))
    assert "# Travel policy" in word.text.split("\n")  # the Title is the top heading
    chunks = chunks_of(word)
    table = chunk_with(chunks, "| Tier 1 | 600 CNY | 100 CNY |")
    assert table.is_table and table.heading_path == ("Travel policy", "Hotels")
    assert table_lines(table)[0] == "| City tier | Hotel per night | Meals per day |"
    receipts = chunk_with(chunks, "Submit within 30 days.")
    assert receipts.heading_path == ("Travel policy", "Hotels", "Receipts")
    assert "- Keep the original invoice.\n- Submit within 30 days." in receipts.text
    assert all(c.page is None and c.sheet is None for c in chunks)


def test_chinese_docx_and_a_custom_heading_style(tmp_path: Path) -> None:
    import docx
    from docx.enum.style import WD_STYLE_TYPE
    from docx.oxml import OxmlElement
    from docx.oxml.ns import qn

    document = docx.Document()
    style = document.styles.add_style("章节标题", WD_STYLE_TYPE.PARAGRAPH)
    outline = OxmlElement("w:outlineLvl")
    outline.set(qn("w:val"), "0")
    style.element.get_or_add_pPr().append(outline)
    document.add_paragraph("出差管理办法", style="章节标题")
    document.add_paragraph("员工出差须提前三天提交申请。")
    document.add_heading("住宿标准", level=2)
    table = document.add_table(rows=2, cols=2)
    for c, value in enumerate(["城市", "上限"]):
        table.cell(0, c).text = value
    for c, value in enumerate(["北京", "每晚600元"]):
        table.cell(1, c).text = value
    path = tmp_path / "出差.docx"
    document.save(str(path))
    chunks = chunks_of(doc(path))
    assert chunk_with(chunks, "员工出差须提前三天提交申请").heading_path == ("出差管理办法",)
    table_chunk = chunk_with(chunks, "| 北京 | 每晚600元 |")
    assert table_chunk.heading_path == ("出差管理办法", "住宿标准")
    assert table_lines(table_chunk)[0] == "| 城市 | 上限 |"


# -- HTML ------------------------------------------------------------------------------------


def test_html_main_content_without_boilerplate(tmp_path: Path) -> None:
    page = write_html(tmp_path / "support.html", TRAVEL_BLOCKS, title="Travel policy")
    html = doc(page)
    for boilerplate in ("HR menu", "Northwind intranet", "cookie settings", "Copyright footer",
                        "script text", "style text", "tracking"):  # fmt: skip
        assert boilerplate not in html.text
    chunks = chunks_of(html)
    table = chunk_with(chunks, "| Tier 2 | 450 CNY | 80 CNY |")
    assert table.heading_path == ("Hotels",)  # the page has an h1: <title> is not a heading
    assert table_lines(table)[0] == "| City tier | Hotel per night | Meals per day |"
    receipts = chunk_with(chunks, "Submit within 30 days.")
    assert receipts.heading_path == ("Hotels", "Receipts")
    no_h1 = write_html(tmp_path / "no-h1.html", TRAVEL_BLOCKS[1:], title="Travel policy")
    assert chunks_of(doc(no_h1))[0].heading_path == ("Travel policy",)  # <title> tops it


def test_html_hidden_elements_and_page_header_are_dropped_article_header_kept(
    tmp_path: Path,
) -> None:
    path = tmp_path / "article.html"
    path.write_text(
        "<html><body><header><h1>Site banner</h1></header><div role='navigation'>menu</div>"
        "<article><header><h1>Release 4.2</h1></header><p>Release 4.2 adds fleet maps.</p>"
        "<p hidden>draft note</p><p style='display: none'>invisible</p>"
        "<div aria-hidden='true'>icon text</div></article></body></html>",
        encoding="utf-8",
    )
    text = doc(path).text
    assert text.startswith("# Release 4.2\n") and "Release 4.2 adds fleet maps." in text
    for dropped in ("Site banner", "menu", "draft note", "invisible", "icon text"):
        assert dropped not in text


def test_chinese_html_in_gbk(tmp_path: Path) -> None:
    blocks = [("h1", "年假"), ("p", "工作满十年的员工享有十天年假。"),
              ("table", [["工龄", "天数"], ["1-10年", "5天"]])]  # fmt: skip
    path = write_html(tmp_path / "nianjia.html", blocks, title="人事制度", encoding="gbk")
    chunks = chunks_of(doc(path))
    assert chunk_with(chunks, "工作满十年的员工享有十天年假").heading_path == ("年假",)
    assert table_lines(chunk_with(chunks, "| 1-10年 | 5天 |"))[0] == "| 工龄 | 天数 |"


# -- spreadsheets ----------------------------------------------------------------------------


def test_xlsx_sheets_become_tables_with_the_sheet_recorded(tmp_path: Path) -> None:
    rows = [["SKU", "Name", "Price"], ["NR-200", "Porter", 12000.0], ["NR-500", "巨象", 35000.5]]
    path = write_xlsx(tmp_path / "prices.xlsx", {"Prices": rows, "Empty": [], "价格表": rows[:2]})
    sheet = doc(path)
    chunks = chunks_of(sheet)
    prices = chunk_with(chunks, "| NR-500 | 巨象 | 35000.5 |")
    assert (prices.sheet, prices.heading_path, prices.page) == ("Prices", ("Prices",), None)
    assert prices.text.split("\n")[:3] == [
        "| SKU | Name | Price |",
        "| --- | --- | --- |",
        "| NR-200 | Porter | 12000 |",  # a whole float without ".0"
    ]
    (second,) = [c for c in chunks if c.sheet == "价格表"]
    assert second.heading_path == ("价格表",) and "| NR-200 | Porter | 12000 |" in second.text
    assert {c.sheet for c in chunks} == {"Prices", "价格表"}  # the empty sheet adds nothing


def test_100k_row_sheet_is_bounded_and_says_so(tmp_path: Path) -> None:
    rows = [["id", "item", "qty"], *([i, f"part {i}", i % 7] for i in range(100_000))]
    path = write_xlsx(tmp_path / "big.xlsx", {"Stock": rows})
    big = doc(path, max_sheet_rows=2000)
    assert "| 1999 | part 1999 | 4 |" in big.text and "| 2000 | part 2000 |" not in big.text
    assert big.notes == (
        "sheet 'Stock': indexed the first 2,000 rows; later rows were left out "
        "(max_sheet_rows 2,000, $HYBRID_RAG_MAX_SHEET_ROWS)",
    )
    chunks = chunks_of(big)
    assert len(chunks) > 10
    assert_table_rows_keep_header(chunks, "| id | item | qty |")
    assert all(c.sheet == "Stock" for c in chunks)


def test_csv_sniffed_delimiter_chinese_and_bounded(tmp_path: Path) -> None:
    path = tmp_path / "offices.csv"
    path.write_bytes("城市;电话\n上海;021-5550\n柏林;+49 30 5550\n".encode("gb18030"))
    offices = doc(path)
    assert offices.text.split("\n")[:3] == [
        "| 城市 | 电话 |",
        "| --- | --- |",
        "| 上海 | 021-5550 |",
    ]
    rows = "\n".join(["code,meaning", *(f"E-{i},meaning {i}" for i in range(100_000))])
    (tmp_path / "codes.csv").write_text(rows, encoding="utf-8")
    codes = doc(tmp_path / "codes.csv", max_sheet_rows=500)
    assert codes.notes == (
        "table: indexed the first 500 of about 100,000 rows "
        "(max_sheet_rows 500, $HYBRID_RAG_MAX_SHEET_ROWS)",
    )
    assert_table_rows_keep_header(chunks_of(codes), "| code | meaning |")
    tsv = tmp_path / "t.tsv"
    tsv.write_text("a\tb\n1\t2,5\n", encoding="utf-8")
    assert doc(tsv).text.split("\n")[2] == "| 1 | 2,5 |"


# -- bad input ---------------------------------------------------------------------------------


def test_encrypted_pdf_is_skipped_but_an_owner_only_password_is_read(tmp_path: Path) -> None:
    locked = write_pdf(tmp_path / "locked.pdf", HANDBOOK_PAGES[:1], user_password="s3cret")
    assert skipped(locked) == "encrypted PDF: it needs a password to open (remove it and re-ingest)"
    restricted = write_pdf(tmp_path / "restricted.pdf", HANDBOOK_PAGES[:1], owner_password="o")
    assert "how the Northwind warehouse operates" in doc(restricted).text


def test_scanned_pdf_has_no_text_layer(tmp_path: Path) -> None:
    reason = skipped(write_image_pdf(tmp_path / "scan.pdf"))
    assert reason == "no text layer; OCR is not supported (scanned PDF?)"


def test_a_pdf_with_some_scanned_pages_is_indexed_with_a_note(tmp_path: Path) -> None:
    from pypdf import PdfReader, PdfWriter

    text = write_pdf(tmp_path / "text.pdf", HANDBOOK_PAGES[:2])
    scan = write_image_pdf(tmp_path / "scan.pdf", pages=1)
    writer = PdfWriter()
    for source in (text, scan):
        for page in PdfReader(source).pages:
            writer.add_page(page)
    mixed = tmp_path / "mixed.pdf"
    with mixed.open("wb") as fh:
        writer.write(fh)
    loaded = doc(mixed)
    assert loaded.notes == ("1 of 3 pages have no text layer (OCR is not supported): p. 3",)
    (chunk,) = chunks_of(loaded)  # merging pages drops the outline: one chunk, pp. 1-2
    assert (chunk.page, chunk.page_end) == (1, 2) and "early shift" in chunk.text


@pytest.mark.parametrize(
    ("name", "make", "reason"),
    [
        ("cut.pdf", lambda good: good["pdf"][: len(good["pdf"]) // 2],
         "truncated or corrupt PDF (no end-of-file marker)"),
        ("noise.pdf", lambda good: b"%PDF-1.7\n" + bytes(range(256)) * 50 + b"\n%%EOF\n",
         "corrupt or unreadable PDF (PdfReadError: "),
        ("renamed.pdf", lambda good: b"PK\x03\x04 this is a zip, not a pdf" + b"%%EOF",
         "the file is a ZIP archive, not the .pdf its name says"),
        ("noheader.pdf", lambda good: b"just text, not a pdf\n%%EOF", "not a PDF file (no %PDF header)"),
        # Issue 43: PNG bytes named .html were indexed as control characters.
        ("picture.html", lambda good: b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256)) * 4,
         "the file is a PNG image, not the .html its name says"),
        ("picture.md", lambda good: b"\xff\xd8\xff\xe0\x00\x10JFIF" + b"x" * 300,
         "the file is a JPEG image, not the .md its name says"),
        ("cut.docx", lambda good: good["docx"][: len(good["docx"]) // 2],
         "corrupt or truncated Word file (not a valid ZIP container: "),
        ("text.xlsx", lambda good: b"id,name\n1,a\n", "corrupt or truncated Excel file"),
        ("locked.docx", lambda good: b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + b"\0" * 600,
         "password-protected or legacy binary Office file, not a Word ZIP container"),
        ("zip.docx", lambda good: good["xlsx"],
         "not a Word document (its content type is application/vnd.openxmlformats-"
         "officedocument.spreadsheetml.sheet.main+xml)"),
        ("binary.csv", lambda good: b"a,b\n\x00\x01\x02", "binary file (contains NUL bytes)"),
        ("old.doc", lambda good: b"whatever", "legacy Word .doc is not supported (save it as .docx)"),
        ("empty.pdf", lambda good: b"", "empty file"),
    ],
)  # fmt: skip
def test_corrupt_truncated_and_mislabelled_files_are_skipped_with_a_reason(
    tmp_path: Path, name: str, make: Any, reason: str
) -> None:
    good = {
        "pdf": write_pdf(tmp_path / "g.pdf", HANDBOOK_PAGES).read_bytes(),
        "docx": write_docx(tmp_path / "g.docx", TRAVEL_BLOCKS).read_bytes(),
        "xlsx": write_xlsx(tmp_path / "g.xlsx", {"S": [["a", "b"], [1, 2]]}).read_bytes(),
    }
    path = tmp_path / name
    path.write_bytes(make(good))
    assert skipped(path).startswith(reason)


def _bomb(tmp_path: Path, source: Path, name: str, member_mb: int) -> Path:
    """A valid container with an extra member of ``member_mb`` MiB of zeros (~1000:1)."""
    bomb = tmp_path / name
    with zipfile.ZipFile(source) as src, zipfile.ZipFile(bomb, "w", zipfile.ZIP_DEFLATED) as dst:
        for info in src.infolist():
            dst.writestr(info, src.read(info.filename))
        dst.writestr("customXml/padding.bin", b"\0" * (member_mb * 1024 * 1024))
    return bomb


def test_zip_bombs_are_refused_before_parsing(tmp_path: Path) -> None:
    word = _bomb(tmp_path, write_docx(tmp_path / "w.docx", TRAVEL_BLOCKS), "bomb.docx", 40)
    assert word.stat().st_size < 200_000
    assert skipped(word) == "part 'customXml/padding.bin' expands 1,029:1 (limit 100:1; zip bomb?)"
    sheet = write_xlsx(tmp_path / "s.xlsx", {"S": [["a", "b"], [1, 2]]})
    bomb = _bomb(tmp_path, sheet, "bomb.xlsx", 3)
    reason = skipped(bomb, max_unzipped_mb=2)
    assert reason == "decompressed size 3 MB exceeds the limit of 2 MB (zip bomb?)"


def test_file_over_the_size_limit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pdf = write_pdf(tmp_path / "handbook.pdf", HANDBOOK_PAGES)
    size_kb = pdf.stat().st_size / 1024
    assert size_kb > 2
    assert skipped(pdf, max_file_mb=0.001).startswith(
        f"file is {pdf.stat().st_size / 1024 / 1024:.2g} MB, over the 0.001 MB limit "
        "(max_file_mb, $HYBRID_RAG_MAX_FILE_MB)"
    )
    monkeypatch.setenv("HYBRID_RAG_MAX_FILE_MB", "0.001")
    assert LoadLimits.from_env().max_file_mb == 0.001
    assert isinstance(load_file(pdf, "handbook.pdf"), SkippedFile)  # the default reads the env
    monkeypatch.setenv("HYBRID_RAG_MAX_FILE_MB", "lots")
    with pytest.raises(ConfigError, match=r"\$HYBRID_RAG_MAX_FILE_MB must be a number"):
        LoadLimits.from_env()
    with pytest.raises(ConfigError, match="max_sheet_rows must be between"):
        LoadLimits(max_sheet_rows=0)


def test_a_parser_crash_becomes_a_reason(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def explode(data: bytes, limits: LoadLimits) -> formats.Extraction:
        raise RuntimeError("boom\nsecond line")

    monkeypatch.setitem(formats._LOADERS, "html", (explode, 1, "HTML page"))
    monkeypatch.setattr("tools.kb.ingest.loaders.parse", formats.extract)  # in this process
    page = tmp_path / "p.html"
    page.write_text(html_page([("p", "x")], title="t"), encoding="utf-8")
    assert skipped(page) == "corrupt or unreadable HTML page (RuntimeError: boom)"


# -- ingest: a mixed folder, incremental, crash-safe ----------------------------------------


@pytest.fixture
def mixed_folder(tmp_path: Path) -> Path:
    folder = tmp_path / "kb"
    (folder / "bad").mkdir(parents=True)
    write_pdf(folder / "handbook.pdf", HANDBOOK_PAGES)
    write_docx(folder / "travel.docx", TRAVEL_BLOCKS, title="Travel policy")
    write_html(folder / "support.html", [("h1", "Support"), ("p", "Support desk opens 08:30.")],
               title="Support")  # fmt: skip
    write_xlsx(folder / "prices.xlsx", {"Prices": [["SKU", "Price"], ["NR-200", 12000]]})
    (folder / "notes.md").write_text("# Notes\n\nThe canteen closes at 14:00.\n", encoding="utf-8")
    write_pdf(folder / "bad" / "locked.pdf", HANDBOOK_PAGES[:1], user_password="pw")
    write_image_pdf(folder / "bad" / "scan.pdf")
    (folder / "bad" / "cut.docx").write_bytes((folder / "travel.docx").read_bytes()[:1000])
    _bomb(tmp_path, folder / "travel.docx", "bomb.docx", 40).rename(folder / "bad" / "bomb.docx")
    return folder


@pytest.fixture
def hash_kb(tmp_path: Path) -> Iterator[KnowledgeBase]:
    kb = KnowledgeBase(KBConfig(home=tmp_path / "home"), embedding_model=hash_model())
    yield kb
    kb.close()


def test_a_mixed_folder_ingests_every_file_or_says_why(
    mixed_folder: Path, hash_kb: KnowledgeBase
) -> None:
    seen: list[tuple[int, int, str]] = []
    report = hash_kb.ingest([mixed_folder], progress=lambda d, t, item: seen.append((d, t, item)))
    assert sorted(report.added) == [
        "handbook.pdf", "notes.md", "prices.xlsx", "support.html", "travel.docx"
    ]  # fmt: skip
    reasons = {Path(s.source).name: s.reason for s in report.skipped}
    assert reasons == {
        "locked.pdf": "encrypted PDF: it needs a password to open (remove it and re-ingest)",
        "scan.pdf": "no text layer; OCR is not supported (scanned PDF?)",
        "cut.docx": reasons["cut.docx"],
        "bomb.docx": "part 'customXml/padding.bin' expands 1,029:1 (limit 100:1; zip bomb?)",
    }
    assert reasons["cut.docx"].startswith("corrupt or truncated Word file")
    assert seen[-1] == (9, 9, "") and {item for _, _, item in seen[:-1]} >= {"bad/bomb.docx"}
    hit = hash_kb.search("ZX-9 lifter maximum payload", 1)[0]
    assert (hit.doc_id, hit.metadata["page"], hit.metadata["page_end"]) == ("handbook.pdf", 3, 3)
    sheet_hit = hash_kb.search("NR-200 price", 3, doc_ids=["prices.xlsx"])[0]
    assert sheet_hit.metadata["sheet"] == "Prices" and "page" not in sheet_hit.metadata
    md_hit = hash_kb.search("canteen closes", 1)[0]
    assert md_hit.doc_id == "notes.md" and not {"page", "sheet"} & set(md_hit.metadata)


def test_unchanged_documents_are_not_parsed_again(
    mixed_folder: Path, hash_kb: KnowledgeBase, monkeypatch: pytest.MonkeyPatch
) -> None:
    hash_kb.ingest([mixed_folder])
    calls: list[str] = []
    real_extract = formats.extract

    def counting(fmt: str, data: bytes, limits: LoadLimits) -> formats.Extraction:
        calls.append(fmt)
        return real_extract(fmt, data, limits)

    monkeypatch.setattr("tools.kb.ingest.loaders.parse", counting)
    again = hash_kb.ingest([mixed_folder])
    assert len(again.unchanged) == 5 and again.added == again.updated == again.deleted == []
    assert sorted(calls) == ["docx", "docx", "pdf", "pdf"]  # only the files that fail to load
    # A changed file is re-extracted and replaced; a vanished one is pruned.
    write_pdf(mixed_folder / "handbook.pdf",
              [*HANDBOOK_PAGES[:2], [("h1", "Lifting equipment"),
                                     ("p", "The ZX-9 lifter now carries 800 kg.")]])  # fmt: skip
    (mixed_folder / "support.html").unlink()
    third = hash_kb.ingest([mixed_folder])
    assert third.updated == ["handbook.pdf"] and third.deleted == ["support.html"]
    hit = hash_kb.search("ZX-9 lifter carries", 1)[0]
    assert "800 kg" in hit.text and hit.metadata["page"] == 3
    assert not any("750 kg" in t for t in hash_kb.snapshot().texts)
    # Raising the row bound changes how a spreadsheet is extracted: it is re-read.
    fourth = hash_kb.ingest([mixed_folder], limits=LoadLimits(max_sheet_rows=20_000))
    assert fourth.updated == ["prices.xlsx"]


def test_an_interrupted_ingest_keeps_the_old_pdf(
    mixed_folder: Path, hash_kb: KnowledgeBase, monkeypatch: pytest.MonkeyPatch
) -> None:
    hash_kb.ingest([mixed_folder])
    write_pdf(mixed_folder / "handbook.pdf",
              [[("h1", "Lifting equipment"), ("p", "The ZX-9 lifter now carries 900 kg.")]])  # fmt: skip

    def crash(*args: Any, **kwargs: Any) -> None:
        raise KeyboardInterrupt

    commit = hash_kb.registry.commit
    monkeypatch.setattr(hash_kb.registry, "commit", crash)
    with pytest.raises(KeyboardInterrupt):
        hash_kb.ingest([mixed_folder])
    monkeypatch.setattr(hash_kb.registry, "commit", commit)
    hit = hash_kb.search("ZX-9 lifter maximum payload", 1)[0]
    assert "750 kg" in hit.text and hit.metadata["page"] == 3  # the old version, whole
    hash_kb.ingest([mixed_folder])
    hit = hash_kb.search("ZX-9 lifter carries", 1)[0]
    assert "900 kg" in hit.text and hit.metadata["page"] == 1


# -- citations: search --json, ask --json and the printed sources -----------------------------


def test_sources_and_citations_carry_the_location(hash_kb: KnowledgeBase, tmp_path: Path) -> None:
    folder = tmp_path / "docs"
    folder.mkdir()
    write_pdf(folder / "handbook.pdf", HANDBOOK_PAGES)
    write_xlsx(folder / "prices.xlsx", {"价格": [["型号", "价格"], ["NR-200", 12000]]})
    hash_kb.ingest([folder])
    pdf_source = chunk_to_source(hash_kb.search("ZX-9 maximum payload", 1)[0])
    assert (pdf_source["page"], pdf_source["page_end"], pdf_source["location"]) == (3, 3, "p. 3")
    sheet_source = chunk_to_source(hash_kb.search("NR-200 价格", 1, doc_ids=["prices.xlsx"])[0])
    assert sheet_source["sheet"] == "价格" and sheet_source["location"] == "sheet 价格"
    en = assign_labels([dict(pdf_source), dict(sheet_source)], "en")
    zh = assign_labels([dict(pdf_source), dict(sheet_source)], "zh")
    assert [s["location"] for s in zh] == ["第 3 页", "工作表 价格"]
    record = citation_record(en[0])
    assert {k: record[k] for k in ("doc_id", "page", "page_end", "location")} == {
        "doc_id": "handbook.pdf", "page": 3, "page_end": 3, "location": "p. 3"
    }  # fmt: skip
    assert 'location="第 3 页"' in render_source(zh[0], 200)
    assert "[internal-1] Lifting equipment (handbook.pdf, p. 3) — " in render_internal(en, "q", 80)
    assert "location=" not in render_source({**en[0], "location": ""}, 200)


def test_a_page_range_reads_pp(tmp_path: Path) -> None:
    from tools.answer.sources import describe_location

    assert describe_location({"page": 3, "page_end": 4}) == "pp. 3–4"
    assert describe_location({"page": 3, "page_end": 4}, "zh") == "第 3–4 页"
    assert describe_location({"page": 3, "page_end": 3}) == "p. 3"
    assert describe_location({}) == ""
    # Two short pages merge into one chunk: the chunk spans both.
    text = f"{location_marker(page=3)}\nEnd of three.\n{location_marker(page=4)}\nStart of four."
    (chunk,) = chunk_document(text)
    # ... and where page 4 begins, for the page of a cited sentence (issue 56).
    starts = "0:3,15:4"
    assert chunk.text[15:] == "Start of four."
    location = {"page": 3, "page_end": 4, "page_starts": starts}
    assert (chunk.page, chunk.page_end, chunk.location()) == (3, 4, location)


@pytest.fixture
def cli_kb(tmp_path: Path, kb_dir: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """kb_dir plus the handbook PDF, ingested through the CLI with the hash embedder and
    registered for ``ask`` (offline: no model keys, no web search)."""

    for var in ("OPENAI_API_KEY", "OPENAI_BASE_URL"):
        monkeypatch.delenv(var, raising=False)
    write_pdf(kb_dir / "handbook.pdf", HANDBOOK_PAGES)
    home = tmp_path / "clihome"
    kb = KnowledgeBase(KBConfig(home=home), embedding_model=hash_model())
    use_kb_in_cli(monkeypatch, lambda args: kb)
    monkeypatch.setattr(kb, "close", lambda: None)  # the CLI closes what it opened
    resources.register_kb(kb)
    yield home
    resources.close_all()


def test_cli_ingest_search_and_ask_cite_the_pdf_page(
    cli_kb: Path, kb_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (kb_dir / "locked.pdf").write_bytes(b"%PDF-1.4\ngarbage")
    assert main(["--home", str(cli_kb), "ingest", str(kb_dir), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert "handbook.pdf" in summary["added"] and summary["notes"] == []
    assert summary["skipped"] == [
        {"source": str((kb_dir / "locked.pdf").resolve()),
         "reason": "truncated or corrupt PDF (no end-of-file marker)"}
    ]  # fmt: skip

    assert main(["--home", str(cli_kb), "search", "ZX-9 lifter payload", "--json", "-k", "1"]) == 0
    (top,) = json.loads(capsys.readouterr().out)
    assert (top["doc_id"], top["page"], top["page_end"], top["location"]) == (
        "handbook.pdf", 3, 3, "p. 3"
    )  # fmt: skip
    assert main(["--home", str(cli_kb), "search", "ZX-9 lifter payload", "-k", "1"]) == 0
    assert capsys.readouterr().out.startswith("1. handbook.pdf p. 3 § Lifting equipment")

    question = "What is the maximum payload of the ZX-9 lifter?"
    offline = ["--set", "search_provider=none", "--set", "model=offline"]
    assert main(["--home", str(cli_kb), "ask", question, "--json", *offline]) == 0
    result = json.loads(capsys.readouterr().out)
    assert "750 kg" in result["answer"] and "[internal-1]" in result["answer"]
    cited = result["citations"][0]
    assert (cited["doc_id"], cited["page"], cited["location"]) == ("handbook.pdf", 3, "p. 3")
    assert main(["--home", str(cli_kb), "ask", question, "--quiet", *offline]) == 0
    assert "— handbook.pdf p. 3 § Lifting equipment" in capsys.readouterr().out


# -- the sample knowledge base ----------------------------------------------------------------


def test_sample_pdf_and_docx_hold_what_their_script_writes() -> None:
    """examples/kb's PDF and DOCX are generated by examples/make_samples.py: every text of
    the script reaches the loaded documents (so they were regenerated after an edit)."""
    import importlib.util

    from tests.conftest import SAMPLE_KB

    spec = importlib.util.spec_from_file_location(
        "make_samples", SAMPLE_KB.parent / "make_samples.py"
    )
    assert spec and spec.loader
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    pdf = doc(SAMPLE_KB / "facilities" / "warehouse-safety-handbook.pdf")
    chunks = chunks_of(pdf)
    for number, page in enumerate(script.HANDBOOK, start=1):
        for kind, content in page:
            if kind == "p":
                assert chunk_with(chunks, content).page == number
            elif kind == "table":
                for row in content:
                    assert chunk_with(chunks, "| " + " | ".join(row) + " |").page == number
            else:
                assert content in [c.heading_path[-1] for c in chunks if c.page == number]
    word = doc(SAMPLE_KB / "admin" / "meeting-rooms-zh.docx")
    for kind, content in script.MEETING_ROOMS:
        texts = content if kind == "list" else [content] if kind != "table" else []
        for text in texts:
            assert text in word.text
        for row in content if kind == "table" else []:
            assert "| " + " | ".join(row) + " |" in word.text
