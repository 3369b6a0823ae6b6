"""Small files that cost a parser far more than their size (made in the test, never
stored): the PDFs of issue 43 item 8."""

from __future__ import annotations

import zlib


def pdf_with_stream(content: bytes, pages: int) -> bytes:
    """A PDF of ``pages`` pages that all draw one shared, Flate-compressed content stream."""
    stream = zlib.compress(content, 9)
    font = 4 + pages
    kids = " ".join(f"{4 + n} 0 R" for n in range(pages))
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        f"<< /Type /Pages /Kids [{kids}] /Count {pages} >>".encode(),
        b"<< /Length %d /Filter /FlateDecode >>\nstream\n" % len(stream) + stream + b"\nendstream",
    ]
    page = (
        "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 3 0 R "
        f"/Resources << /Font << /F1 {font} 0 R >> >> >>"
    ).encode()
    objects += [page] * pages
    objects.append(b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>")
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for n, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % n + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % o for o in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (
        len(objects) + 1,
        xref,
    )
    return bytes(out)


def line_drawing_pdf(megabytes: float = 6.0) -> bytes:
    """~15 KB: one page of text over ``megabytes`` of line drawings (pdfplumber builds an
    object per line)."""
    head = b"BT /F1 12 Tf 72 720 Td (Site plan) Tj ET\n"
    lines = bytearray()
    n = 0
    while len(lines) < megabytes * 1024 * 1024:
        k = n % 97
        lines += b"%d %d m %d %d l S\n" % (k * 6, k * 8, 600 - k * 6, 780 - k * 8)
        n += 1
    return pdf_with_stream(head + bytes(lines), 1)


def shared_stream_pdf(pages: int = 400, ops: int = 40_000) -> bytes:
    """~64 KB: ``pages`` pages sharing one content stream of ``ops`` text operations, so
    extracting each page's text parses the whole stream again."""
    body = b"".join(b"BT /F1 10 Tf %d %d Td (Word %d) Tj ET\n" % (n % 50 * 10, n % 50 * 14, n % 50)
                    for n in range(ops))  # fmt: skip
    return pdf_with_stream(body, pages)
