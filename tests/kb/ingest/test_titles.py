"""A document's own title (issue 55 item 12): a PDF's metadata title, else its first
heading, else its first line; a Word file's first heading, else its core title. Only the
shown title changes: every chunk's text is what it was."""

from __future__ import annotations

import io
from dataclasses import replace
from pathlib import Path

from tests.docgen import write_docx, write_pdf
from tools.answer.sources import chunk_title, chunk_to_source
from tools.kb.ingest.chunking import chunk_document
from tools.kb.ingest.loaders import FileBytes, SourceDocument, read_file
from tools.kb.ingest.titles import chosen_title, first_line
from tools.kb.knowledge_base import KBConfig, KnowledgeBase


def with_pdf_title(path: Path, title: str) -> Path:
    from pypdf import PdfReader, PdfWriter

    writer = PdfWriter(clone_from=PdfReader(path))
    writer.add_metadata({"/Title": title})
    out = io.BytesIO()
    writer.write(out)
    path.write_bytes(out.getvalue())
    return path


def loaded(path: Path) -> SourceDocument:
    read = read_file(path, path.name)
    assert isinstance(read, FileBytes), read
    doc = read.load()
    assert isinstance(doc, SourceDocument), doc
    return doc


def title_of(doc: SourceDocument) -> str:
    fmt = doc.extraction.split(":", 1)[0]
    return chosen_title(doc.text, markdown=doc.is_markdown, fmt=fmt, metadata=doc.title)


def test_a_pdf_is_titled_by_its_metadata_title_else_its_first_line(tmp_path: Path) -> None:
    page = [("p", "Service Handbook for the support team"), ("p", "Tickets are answered in a day.")]
    plain = write_pdf(tmp_path / "service-handbook.pdf", [page], outline=False)
    # reportlab's "(anonymous)" is no title: the first line stands in for one.
    assert title_of(loaded(plain)).startswith("Service Handbook for the support team")
    titled = with_pdf_title(
        write_pdf(tmp_path / "b.pdf", [page], outline=False), "Service Handbook"
    )
    assert title_of(loaded(titled)) == "Service Handbook"
    named = with_pdf_title(
        write_pdf(tmp_path / "c.pdf", [page], outline=False), "Microsoft Word - c.docx"
    )
    assert title_of(loaded(named)).startswith("Service Handbook for")  # a tool's name, no title
    assert len(first_line("word " * 100)) <= 80


def test_a_docx_is_titled_by_its_first_heading_else_its_core_title(tmp_path: Path) -> None:
    headed = write_docx(
        tmp_path / "travel-v3.docx", [("h1", "Travel Policy"), ("p", "Book early.")]
    )
    assert title_of(loaded(headed)) == "Travel Policy"
    import docx

    document = docx.Document()
    document.core_properties.title = "Expense Rules"
    document.add_paragraph("Receipts within 30 days.")
    document.save(str(tmp_path / "expenses.docx"))
    assert title_of(loaded(tmp_path / "expenses.docx")) == "Expense Rules"


def test_the_title_is_shown_and_no_chunk_text_changes(tmp_path: Path) -> None:
    folder = tmp_path / "docs"
    folder.mkdir()
    page = [("p", "Service Handbook for the support team"), ("p", "Tickets are answered in a day.")]
    with_pdf_title(
        write_pdf(folder / "service-handbook.pdf", [page], outline=False), "Service Handbook"
    )
    doc = loaded(folder / "service-handbook.pdf")
    expected = [c.text for c in chunk_document(doc.text, markdown=True)]
    with KnowledgeBase(KBConfig(home=tmp_path / "home")) as kb:
        kb.ingest([folder])
        record = kb.registry.records()["service-handbook.pdf"]
        assert record["title"] == "Service Handbook"
        hits = kb.retrieve("tickets answered", 3).hits
    assert hits and [h.text for h in hits] == expected  # the chunk's text as before
    assert chunk_title(hits[0]) == "Service Handbook"
    assert chunk_to_source(hits[0])["title"] == "Service Handbook"
    # A chunk ingested before titles were kept, without a heading: its file's name, never
    # the doc_id's "upload:" mark.
    meta = {k: v for k, v in hits[0].metadata.items() if k != "doc_title"}
    old = replace(hits[0], doc_id="upload:hr/service-handbook.pdf", heading="", metadata=meta)
    assert chunk_title(old) == "service-handbook.pdf"
