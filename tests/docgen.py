"""Writers of real PDF, DOCX, XLSX and HTML files for tests, the sample KB and benchmarks.

Every file is produced by the library made for its format (reportlab, python-docx,
openpyxl), never mocked, so the loaders read what a user's tools would write. A document
is a list of blocks: ``("h1".."h3", text)``, ``("p", text)``, ``("table", rows)`` (first
row the header) or ``("list", items)``. Chinese PDF text uses reportlab's built-in
STSong-Light CID font (Adobe-GB1, no font file needed), which text extractors map back
to Unicode through its standard CMap.
"""

from __future__ import annotations

import re
import zipfile
from collections.abc import Mapping, Sequence
from html import escape
from pathlib import Path
from typing import Any

Block = tuple[str, Any]
_CJK_RE = re.compile("[\u3400-\u9fff]")
CJK_FONT = "STSong-Light"


def write_pdf(
    path: Path,
    pages: Sequence[Sequence[Block]],
    *,
    outline: bool = True,
    user_password: str | None = None,
    owner_password: str | None = None,
) -> Path:
    """One PDF page per item of ``pages`` (a page's blocks must fit on it); headings
    become outline entries (bookmarks) unless ``outline`` is False."""
    from reportlab.lib import colors, pdfencrypt
    from reportlab.lib.pagesizes import A4
    from reportlab.lib.styles import ParagraphStyle, getSampleStyleSheet
    from reportlab.pdfbase import pdfmetrics
    from reportlab.pdfbase.cidfonts import UnicodeCIDFont
    from reportlab.platypus import (
        ListFlowable,
        PageBreak,
        Paragraph,
        SimpleDocTemplate,
        Table,
        TableStyle,
    )

    pdfmetrics.registerFont(UnicodeCIDFont(CJK_FONT))
    sheet = getSampleStyleSheet()

    def style(name: str, text: str) -> ParagraphStyle:
        base = sheet[{"h1": "Heading1", "h2": "Heading2", "h3": "Heading3"}.get(name, "Normal")]
        if not _CJK_RE.search(text):
            return base
        return ParagraphStyle(f"{base.name}-zh", parent=base, fontName=CJK_FONT, wordWrap="CJK")

    class Doc(SimpleDocTemplate):
        def afterFlowable(self, flowable: Any) -> None:
            level = getattr(flowable, "outline_level", None)
            if outline and level is not None:
                key = f"h{id(flowable)}"
                self.canv.bookmarkPage(key)
                self.canv.addOutlineEntry(flowable.getPlainText(), key, level=level)

    story: list[Any] = []
    for n, blocks in enumerate(pages):
        for kind, content in blocks:
            if kind in ("h1", "h2", "h3"):
                para = Paragraph(escape(content), style(kind, content))
                para.outline_level = int(kind[1]) - 1  # type: ignore[attr-defined]
                story.append(para)
            elif kind == "p":
                story.append(Paragraph(escape(content), style("p", content)))
            elif kind == "list":
                story.append(
                    ListFlowable(
                        [Paragraph(escape(i), style("p", i)) for i in content], bulletType="bullet"
                    )
                )
            elif kind == "table":
                cjk = any(_CJK_RE.search(str(c)) for row in content for c in row)
                table = Table([[str(c) for c in row] for row in content])
                commands: list[Any] = [("GRID", (0, 0), (-1, -1), 0.5, colors.black)]
                if cjk:
                    commands.append(("FONTNAME", (0, 0), (-1, -1), CJK_FONT))
                table.setStyle(TableStyle(commands))
                story.append(table)
            else:
                raise ValueError(f"unknown block kind {kind!r}")
        if n < len(pages) - 1:
            story.append(PageBreak())
    encrypt = None
    if user_password is not None or owner_password is not None:
        encrypt = pdfencrypt.StandardEncryption(
            user_password or "", owner_password or "owner-secret"
        )
    # invariant: no creation time or random document id, so the same input gives the same bytes
    Doc(str(path), pagesize=A4, encrypt=encrypt, invariant=True).build(story)
    return path


def write_image_pdf(path: Path, pages: int = 2) -> Path:
    """A 'scanned' PDF: every page an image, no text layer."""
    from PIL import Image, ImageDraw
    from reportlab.lib.utils import ImageReader
    from reportlab.pdfgen import canvas

    image = Image.new("RGB", (400, 200), "white")
    ImageDraw.Draw(image).rectangle((20, 20, 380, 180), outline="black")
    pdf = canvas.Canvas(str(path))
    for _ in range(pages):
        pdf.drawImage(ImageReader(image), 72, 500, width=400, height=200)
        pdf.showPage()
    pdf.save()
    return path


def write_docx(path: Path, blocks: Sequence[Block], *, title: str | None = None) -> Path:
    import docx

    document = docx.Document()
    if title:
        document.add_heading(title, level=0)
    for kind, content in blocks:
        if kind in ("h1", "h2", "h3"):
            document.add_heading(content, level=int(kind[1]))
        elif kind == "p":
            document.add_paragraph(content)
        elif kind == "list":
            for item in content:
                document.add_paragraph(item, style="List Bullet")
        elif kind == "table":
            table = document.add_table(rows=len(content), cols=len(content[0]))
            table.style = "Table Grid"
            for r, row in enumerate(content):
                for c, value in enumerate(row):
                    table.cell(r, c).text = str(value)
        else:
            raise ValueError(f"unknown block kind {kind!r}")
    document.save(str(path))
    _fix_zip_times(path)
    return path


def _fix_zip_times(path: Path) -> None:
    """Rewrite a ZIP container with one fixed timestamp: the same content, the same bytes."""
    with zipfile.ZipFile(path) as src:
        parts = [(info.filename, src.read(info.filename)) for info in src.infolist()]
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as dst:
        for name, data in parts:
            dst.writestr(zipfile.ZipInfo(name, date_time=(2026, 1, 1, 0, 0, 0)), data,
                         compress_type=zipfile.ZIP_DEFLATED)  # fmt: skip


def write_xlsx(path: Path, sheets: Mapping[str, Sequence[Sequence[Any]]]) -> Path:
    """Sheets of rows (streamed: write-only mode, so 100k rows take seconds)."""
    import openpyxl

    workbook = openpyxl.Workbook(write_only=True)
    for name, rows in sheets.items():
        sheet = workbook.create_sheet(name)
        for row in rows:
            sheet.append(list(row))
    workbook.save(str(path))
    return path


def html_page(blocks: Sequence[Block], *, title: str, boilerplate: bool = True) -> str:
    """An HTML page: the blocks inside ``<main>``, with (by default) the boilerplate a
    real site has around it: scripts, styles, a navigation bar, a footer, an aside."""
    body: list[str] = []
    for kind, content in blocks:
        if kind in ("h1", "h2", "h3"):
            body.append(f"<{kind}>{escape(content)}</{kind}>")
        elif kind == "p":
            body.append(f"<p>{escape(content)}</p>")
        elif kind == "list":
            body.append("<ul>" + "".join(f"<li>{escape(i)}</li>" for i in content) + "</ul>")
        elif kind == "table":
            head = "".join(f"<th>{escape(str(c))}</th>" for c in content[0])
            rows = "".join(
                "<tr>" + "".join(f"<td>{escape(str(c))}</td>" for c in row) + "</tr>"
                for row in content[1:]
            )
            body.append(f"<table><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table>")
        else:
            raise ValueError(f"unknown block kind {kind!r}")
    chrome_top = chrome_bottom = ""
    if boilerplate:
        chrome_top = (
            "<header><div class='logo'>Northwind intranet</div><nav><a href='/'>Home</a> "
            "<a href='/hr'>HR menu</a></nav></header>"
        )
        chrome_bottom = (
            "<aside>Related: cookie settings</aside>"
            "<footer>Copyright footer text 2026</footer>"
            "<script>var tracking = 'script text';</script>"
        )
    return (
        f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{escape(title)}</title>"
        "<style>body { font: 12px sans-serif } /* style text */</style></head><body>"
        f"{chrome_top}<main>{''.join(body)}</main>{chrome_bottom}</body></html>"
    )


def write_html(path: Path, blocks: Sequence[Block], *, title: str, encoding: str = "utf-8") -> Path:
    text = html_page(blocks, title=title)
    if encoding != "utf-8":
        text = text.replace("charset='utf-8'", f"charset='{encoding}'")
    path.write_bytes(text.encode(encoding))
    return path
