"""Small text utilities shared by chunking, retrieval and answering.

Token counts are an *estimate* (no tokenizer download is possible offline):
each CJK character counts as one token and every other word-like run counts as
``ceil(len / 4)`` tokens, at least one. For English prose this lands near
1.3 tokens per word, close to OpenAI's cl100k tokenizer; for Chinese, cl100k
uses about 1–1.5 tokens per character, so the estimate errs on the small side by
at most a third. ``tests/test_text.py`` pins both behaviours.
"""

from __future__ import annotations

import math
import re
from typing import Any, Literal

from tools.errors import InputError

Language = Literal["zh", "en"]

# A citation label in either language's spelling (tools.answer.citations numbers them;
# the policy strips them from text it compares).
# A product, fault or version code: letters then digits ("F-37", "NR-200", "P1", "v1").
CODE_RE = re.compile(r"(?<![A-Za-z0-9])[A-Za-z]{1,4}-?\d+[A-Za-z0-9-]*")
LABEL_RE = re.compile(r"\[(内部|网络|internal|web)\s*-\s*(\d{1,3})\]", re.IGNORECASE)

# CJK Unified Ideographs (+ extension A and compatibility ideographs).
_CJK = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
CJK_RE = re.compile(f"[{_CJK}]")
# Every script written without spaces (CJK punctuation, kana, bopomofo, ideographs incl.
# extension B+, hangul, full-width forms): where text may be cut at any character and
# where a model tokenizer spends most tokens per character.
CJK_WIDE_RE = re.compile(
    "[\u3000-\u9fff\uac00-\ud7af\uf900-\ufaff\uff00-\uffef\U00020000-\U0002fa1f]"
)
_TOKEN_RE = re.compile(f"[{_CJK}]|[^\\s{_CJK}]+")

# Sentence ends: Chinese full-width marks always end a sentence; English marks
# only when followed by whitespace (so "3.14" and "e.g." inside words stay whole).
_SENTENCE_RE = re.compile(r"(?<=[。！？；])\s*|(?<=[.!?])\s+")


def count_cjk(text: str) -> int:
    return len(CJK_RE.findall(text))


def detect_language(text: str) -> Language:
    """``zh`` when CJK characters make up at least a fifth of the letters, else ``en``.

    A fifth, not a majority, because Chinese technical text is full of Latin
    product names and numbers yet is still read (and answered) in Chinese.
    """
    cjk = count_cjk(text)
    if cjk == 0:
        return "en"
    latin = len(re.findall(r"[A-Za-z]", text))
    return "zh" if cjk * 4 >= latin else "en"


def estimate_tokens(text: str) -> int:
    """Estimated token count (see the module docstring for the rule)."""
    total = 0
    for piece in _TOKEN_RE.findall(text):
        total += 1 if CJK_RE.match(piece) else max(1, math.ceil(len(piece) / 4))
    return total


def split_sentences(text: str) -> list[str]:
    """Split at Chinese ``。！？；`` and English ``.!?`` boundaries; keeps punctuation."""
    parts = _SENTENCE_RE.split(text.strip())
    return [p.strip() for p in parts if p and p.strip()]


# ANSI/ECMA-48 escape sequences (CSI "ESC [", OSC "ESC ]" up to BEL or ST, other
# two-byte ESC codes), C0 controls but tab and newline (a carriage return would let a
# line overwrite what was printed before it), DEL, and the C1 controls (U+0080-U+009F,
# of which U+009B is a one-character CSI), and the bidirectional embeddings, overrides and
# isolates (U+202A-U+202E, U+2066-U+2069: "Trojan Source" text that displays in another
# order than it reads; right-to-left scripts display right without them). Whatever a
# sequence's shape, every ESC and control character goes, so no sequence survives even
# when cut across two writes.
_TERMINAL_RE = re.compile(
    r"\x1b\[[0-?]*[ -/]*[@-~]"
    r"|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?"
    r"|\x1b[PX^_][^\x1b]*(?:\x1b\\)?"
    r"|\x1b[@-Z\\-_]?"
    r"|\x9b[0-?]*[ -/]*[@-~]"
    r"|[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]"
)
# The controls JSON may carry raw (json.dumps escapes only U+0000-U+001F).
_JSON_RAW_CONTROLS_RE = re.compile(r"[\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


_SURROGATE_RE = re.compile("[\ud800-\udfff]")
# What may not appear raw in a name the CLI prints (a file name, doc_id, title, heading,
# sheet, URL): every C0/C1 control with tab and line feed, DEL, the Unicode line and
# paragraph separators, the bidirectional controls and undecodable bytes.
_NAME_UNSAFE_RE = re.compile(
    "[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069\ud800-\udfff]"
)
_SHORT_ESCAPES = {"\n": "\\n", "\t": "\\t", "\r": "\\r"}


def _escaped(match: re.Match[str]) -> str:
    char = match.group()
    code = ord(char)
    if char in _SHORT_ESCAPES:
        return _SHORT_ESCAPES[char]
    if 0xDC80 <= code <= 0xDCFF:  # an undecodable byte, as "surrogateescape" keeps it
        return f"\\x{code - 0xDC00:02x}"
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def undecodable_bytes(text: str) -> str | None:
    """``text`` with its undecodable bytes shown as ``\\xNN`` when it has any, else None.

    Python decodes command-line arguments and file names with "surrogateescape": a byte
    that is not UTF-8 becomes a lone surrogate, which no embedder, store or stream can
    encode. This names such text readably (``annual leave \\xff days``)."""
    return _SURROGATE_RE.sub(_escaped, text) if _SURROGATE_RE.search(text) else None


def shown_name(name: str) -> str:
    """``name`` on one line, as escapes (``\\n``, ``\\x1b``, ``\\u202e``) for every
    character that could break the line, move the cursor or reorder the text: a file
    called ``x\\n  [internal-9] Forged`` cannot forge a line of the CLI's output."""
    return _NAME_UNSAFE_RE.sub(_escaped, name)


def terminal_safe(text: str) -> str:
    """``text`` without escape sequences or control characters (newlines and tabs kept):
    what a document or web page says must not retitle, clear or re-link the terminal."""
    return _TERMINAL_RE.sub("", text)


def json_terminal_safe(json_text: str) -> str:
    """JSON text (``json.dumps(..., ensure_ascii=False)``) with DEL, the C1 controls and
    the bidirectional overrides written as ``\\u`` escapes: the same data, and nothing a terminal acts on. (They can
    only occur inside JSON strings, where the escape is valid.)"""
    return _JSON_RAW_CONTROLS_RE.sub(lambda m: f"\\u{ord(m.group()):04x}", json_text)


def content_text(content: Any, *, strict: bool = True) -> str:
    """The text of a chat message's content: a string, or content blocks (what chat UIs
    such as agent-chat-ui send: ``[{"type": "text", "text": "..."}]``) joined by newlines.

    ``strict``: a block that is not text (an image, a file) is an ``InputError`` naming its
    type; otherwise it is left out (a message of an earlier turn, read as history).
    """
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise InputError(
            f"message content must be text or content blocks, got {type(content).__name__}"
        )
    parts: list[str] = []
    for block in content:
        if isinstance(block, str):
            parts.append(block)
        elif isinstance(block, dict) and block.get("type") == "text":
            parts.append(str(block.get("text") or ""))
        elif strict:
            kind = block.get("type") if isinstance(block, dict) else type(block).__name__
            raise InputError(f"only text can be asked; the message has a {kind!r} block")
    return "\n".join(p for p in parts if p)
