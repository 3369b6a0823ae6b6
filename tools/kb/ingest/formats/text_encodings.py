"""What encoding a text file's bytes are in, and their text: a BOM, strict UTF-8, UTF-8
with a few broken bytes, or the most plausible legacy encoding (GB18030 for Chinese);
``None`` when no guess is plausible, so the file is skipped with the reason. Plain text
files (``tools.kb.ingest.loaders``) and CSV/TSV (``delimited``) are read through it.
"""

from __future__ import annotations

from dataclasses import dataclass

FALLBACK_ENCODING = "gb18030"


@dataclass(frozen=True)
class Decoded:
    text: str
    encoding: str  # Python codec name
    how: str  # "BOM", "valid UTF-8" or "detected"


_BOMS = (  # UTF-32 first: its little-endian BOM begins with UTF-16's
    (b"\xff\xfe\x00\x00", "utf-32"),
    (b"\x00\x00\xfe\xff", "utf-32"),
    (b"\xef\xbb\xbf", "utf-8-sig"),
    (b"\xff\xfe", "utf-16"),
    (b"\xfe\xff", "utf-16"),
)
# Among guesses about as plausible as the best one, the encodings text files are really
# written in win: a short Latin-1 file is also "valid" cp775 or mac_iceland.
_PREFERRED = ("gb18030", "cp1252", "latin_1", "cp1250", "cp1251", "cp932", "big5", "cp949")
_TIE = 0.07  # chaos (charset-normalizer's mess ratio, 0..1) within which guesses tie
_MAX_CHAOS = 0.3  # beyond this no guess is trusted: the file is skipped with the reason
_NEARLY_UTF8_RATIO = 20  # valid multi-byte characters per broken byte (_nearly_utf8)


def has_bom(raw: bytes) -> bool:
    return any(raw.startswith(bom) for bom, _ in _BOMS)


def decode_bytes(raw: bytes) -> Decoded | None:
    """Text from bytes: a BOM (UTF-8/16/32) decides; else strict UTF-8; else UTF-8 with a
    few broken bytes replaced (:func:`_nearly_utf8`); else the most plausible encoding
    charset-normalizer finds (GB18030 for Chinese legacy files); None when no guess is
    plausible."""
    for bom, codec in _BOMS:
        if raw.startswith(bom):
            try:
                return Decoded(raw.decode(codec), codec.removesuffix("-sig"), "BOM")
            except UnicodeDecodeError:
                return None
    try:
        return Decoded(raw.decode("utf-8"), "utf-8", "valid UTF-8")
    except UnicodeDecodeError:
        pass
    nearly = _nearly_utf8(raw)
    if nearly is not None:
        return nearly
    import charset_normalizer  # deferred: only legacy-encoded files pay for it

    matches = list(charset_normalizer.from_bytes(raw))
    if not matches:
        return None
    best = min(m.chaos for m in matches)
    if best > _MAX_CHAOS:
        return None
    # The common encodings, measured on their own (the general pass drops an encoding
    # whose text equals another's, so cp1252 may be missing from it).
    common = list(charset_normalizer.from_bytes(raw, cp_isolation=list(_PREFERRED)))
    near = {_family(m.encoding) for m in common if m.chaos <= best + _TIE}
    encoding = next((e for e in _PREFERRED if e in near), None) or _family(
        min(matches, key=lambda m: m.chaos).encoding
    )
    try:
        text = raw.decode(encoding)
    except (UnicodeDecodeError, LookupError):
        return None
    if encoding != "cp1252" and _decodes_as(raw, "cp1252") == text:
        encoding = "cp1252"  # the same text: name the encoding Western files are in
    return Decoded(text, encoding, "detected")


def _nearly_utf8(raw: bytes) -> Decoded | None:
    """UTF-8 with a few broken bytes (a file cut inside a character, one stray Latin-1
    byte in a UTF-8 file): read as UTF-8 with U+FFFD for them, not as a legacy guess that
    would garble every other non-ASCII character. Legacy text rarely forms valid UTF-8
    sequences, so it needs twenty valid multi-byte characters per broken byte."""
    text = raw.decode("utf-8", errors="replace")
    genuine = raw.count(b"\xef\xbf\xbd")  # U+FFFD already in the file
    broken = text.count("\ufffd") - genuine
    multibyte = len(text) - len(text.encode("ascii", "ignore")) - broken - genuine
    if broken * _NEARLY_UTF8_RATIO > multibyte:
        return None
    plural = "s" if broken > 1 else ""
    return Decoded(text, "utf-8", f"{broken} invalid byte sequence{plural} replaced")


def _decodes_as(raw: bytes, encoding: str) -> str | None:
    try:
        return raw.decode(encoding)
    except UnicodeDecodeError:
        return None


def _family(encoding: str) -> str:
    # GB2312 and GBK text is GB18030 text: decode with the superset.
    return FALLBACK_ENCODING if encoding in ("gb2312", "gbk", "gb18030", "hz") else encoding


def decode_text(raw: bytes) -> str | None:
    """The text of :func:`decode_bytes`, or None."""
    decoded = decode_bytes(raw)
    return decoded.text if decoded else None
