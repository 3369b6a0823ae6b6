"""Citation labels: one scheme for internal and web sources, checked against the text.

Labels are ``[内部-n]`` / ``[网络-n]`` in Chinese answers and ``[internal-n]`` /
``[web-n]`` in English ones, numbered separately per kind from 1. The validator
accepts either language's spelling (a model may mix them), maps each label to the
source it names, drops labels that name no source and reports them.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from tools.answer.cited_pages import cited_page, sentence_before
from tools.answer.sources import describe_location
from tools.text import LABEL_RE
from tools.websearch.snippets import cut

SourceKind = Literal["internal", "web"]
_LABEL_WORDS: dict[str, dict[SourceKind, str]] = {
    "zh": {"internal": "内部", "web": "网络"},
    "en": {"internal": "internal", "web": "web"},
}
_WORD_TO_KIND: dict[str, SourceKind] = {
    "内部": "internal",
    "网络": "web",
    "internal": "internal",
    "web": "web",
}


def label(kind: SourceKind, number: int, language: str) -> str:
    words = _LABEL_WORDS["zh" if language == "zh" else "en"]
    return f"[{words[kind]}-{number}]"


def labelled(
    src: Mapping[str, Any], kind: SourceKind, number: int, language: str
) -> dict[str, Any]:
    """A copy of ``src`` with its ``number``, ``label`` and (for a chunk with a page or
    sheet) ``location`` in the answer's language."""
    out = {**src, "number": number, "label": label(kind, number, language)}
    where = describe_location(src, language)
    if where:
        out["location"] = where
    return out


def assign_labels(sources: list[dict[str, Any]], language: str) -> list[dict[str, Any]]:
    """Return copies of ``sources`` with ``label`` and ``number`` set, per kind from 1."""
    counters: dict[str, int] = {"internal": 0, "web": 0}
    out = []
    for src in sources:
        kind: SourceKind = "web" if src.get("kind") == "web" else "internal"
        counters[kind] += 1
        out.append(labelled(src, kind, counters[kind], language))
    return out


@dataclass
class CitationCheck:
    answer: str
    cited: list[dict[str, Any]] = field(default_factory=list)
    unknown_labels: list[str] = field(default_factory=list)
    total_labels: int = 0

    @property
    def validity(self) -> float:
        """Share of labels in the answer that resolved to a source (1.0 when none)."""
        if self.total_labels == 0:
            return 1.0
        return 1.0 - len(self.unknown_labels) / self.total_labels


def validate_citations(answer: str, sources: Sequence[Mapping[str, Any]]) -> CitationCheck:
    """Keep labels that name a source (in either language), drop the others."""
    by_key = {(s.get("kind"), int(s.get("number", 0))): s for s in sources}
    check = CitationCheck(answer="")
    cited_keys: list[tuple[str, int]] = []
    vouched: dict[tuple[str, int], list[str]] = {}  # the sentences each source vouches for

    def repl(match: re.Match[str]) -> str:
        check.total_labels += 1
        kind = _WORD_TO_KIND[match.group(1).lower() if match.group(1).isascii() else match.group(1)]
        key = (kind, int(match.group(2)))
        src = by_key.get(key)
        if src is None:
            check.unknown_labels.append(match.group(0))
            return ""
        if key not in cited_keys:
            cited_keys.append(key)
        vouched.setdefault(key, []).append(sentence_before(answer, match.start()))
        return str(src.get("label", match.group(0)))

    text = LABEL_RE.sub(repl, answer)
    check.answer = _tidy(text) if check.unknown_labels else text.strip()
    check.cited = [citation_record(by_key[k], vouched.get(k, ())) for k in cited_keys]
    return check


# What dropping a label can leave behind: a joiner with nothing after it ("[internal-1]
# and ."), empty brackets, a space before punctuation, doubled separators.
_DANGLING_JOINER = re.compile(
    r"(?<=\])\s*(?:,|，|、|;|；|\band\b|\bor\b|和|及|与|或)\s*(?=[.。!！?？,，;；:：)）\]]|$)"
)
_EMPTY_BRACKETS = re.compile(r"\(\s*[,，、;；]?\s*\)|（\s*[,，、;；]?\s*）|\[\s*\]")
_SPACE_BEFORE_PUNCT = re.compile(r"[ \t]+(?=[.。!！?？,，;；:：)）])")
_DOUBLE_SEPARATOR = re.compile(r"([,，;；])\s*[,，;；]")


def _tidy(text: str) -> str:
    """Repair the grammar around dropped labels (only called when one was dropped)."""
    for _ in range(3):  # a joiner can dangle only once the brackets around it are gone
        before = text
        text = _DANGLING_JOINER.sub("", text)
        text = _EMPTY_BRACKETS.sub("", text)
        text = _DOUBLE_SEPARATOR.sub(r"\1", text)
        text = _SPACE_BEFORE_PUNCT.sub("", text)
        text = re.sub(r"[ \t]{2,}", " ", text)
        if text == before:
            break
    return text.strip()


CITATION_SNIPPET_CHARS = 240
CITATION_PASSAGE_CHARS = 1500  # the passage a source card shows (a chunk is shorter)


def citation_record(src: Mapping[str, Any], sentences: Sequence[str] = ()) -> dict[str, Any]:
    """What a reader (or a chat UI) needs to show and check a citation: title, the quoted
    passage's opening (``snippet``) and the passage itself (``passage``, bounded), and where it lives (URL and fetch time, or file, heading and, for
    PDF pages and spreadsheet sheets, ``page``/``page_end``/``sheet``/``location``: the
    page of the first of the ``sentences`` the label vouches for when the chunk spans pages)."""
    rec: dict[str, Any] = {
        "label": src.get("label"),
        "type": src.get("kind"),
        "title": src.get("title"),
        "snippet": cut(" ".join(str(src.get("text") or "").split()), CITATION_SNIPPET_CHARS),
        "passage": cut(str(src.get("text") or "").strip(), CITATION_PASSAGE_CHARS),
    }
    if src.get("kind") == "web":
        rec.update(
            url=src.get("url"),
            published_at=src.get("published_at"),
            fetched_at=src.get("fetched_at"),
            source=src.get("source"),
        )
    else:
        rec.update(
            doc_id=src.get("doc_id"),
            chunk_id=src.get("chunk_id"),
            heading=src.get("heading"),
            path=src.get("source"),
            ingested_at=src.get("ingested_at"),
        )
        rec.update({k: src[k] for k in ("page", "page_end", "sheet", "location") if k in src})
        page = cited_page(src, sentences)
        if page is not None:
            zh = str(src.get("label") or "").startswith("[内部")
            rec.update(page=page, page_end=page)
            rec["location"] = describe_location(rec, "zh" if zh else "en")
    return rec
