"""Build the answer prompt's source context within a token budget.

Sources are shown in two labelled sections (internal, then web). Each source is
fenced as quoted data: ``<source label="[web-1]" ...>`` … ``</source>``; text that
tries to close or open a fence, or a role tag (``<system>``) or a chat-template token,
is neutralised, so retrieved content cannot step out of its block.

:func:`fence` is that rule, and the only one: every prompt that carries retrieved or
fetched text (the answer here, grading, reflection, reranking, the agent's tool results)
wraps each passage with it. The budget keeps the system prompt, an answer reserve and the
last turns of history first, then adds sources best-first until the budget is
used, and says how many were left out.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tools.answer.passage_focus import focus_passage
from tools.text import estimate_tokens
from tools.websearch.snippets import cut

# Tags that could close a source fence or open a role or instruction block, and chat
# template tokens (``<|im_start|>``): in retrieved text they are data, so they are defused.
_FENCE_RE = re.compile(
    r"<\s*/?\s*(?:source|sources|internal_sources|web_sources|system|user|assistant|human|ai"
    r"|tool|developer|instructions?|context|passage|candidates?)\b[^>]*>|<\|[^|<>]{1,40}\|>",
    re.I,
)


def cut_snippet(text: str, limit: int) -> str:
    """Collapse whitespace and cut at a word (or CJK character) boundary (the web
    snippets' rule, so both kinds of source read alike)."""
    return cut(re.sub(r"\s+", " ", text).strip(), limit)


def neutralise(text: str) -> str:
    """Retrieved text with every fence, role tag and template token defused."""
    return _FENCE_RE.sub(lambda m: m.group(0).replace("<", "‹").replace(">", "›"), text)


def fence(
    text: str, label: str, attrs: Mapping[str, Any] | None = None, *, one_line: bool = False
) -> str:
    """One passage of retrieved or fetched text as quoted data: ``<source label=…>`` …
    ``</source>``, its text and attributes neutralised. The one rule for every prompt that
    carries such text (answer, grading, reflection, reranking, agent tool results).

    ``one_line`` collapses the passage's whitespace, for listings with one source per line
    (a newline in a snippet could otherwise start a fake line of the listing)."""
    head = " ".join(
        f'{name}="{_attr(value)}"' for name, value in {"label": label, **(attrs or {})}.items()
    )
    if one_line:
        return f"<source {head}>{neutralise(' '.join(text.split()))}</source>"
    return f"<source {head}>\n{neutralise(text)}\n</source>"


def _attr(value: Any) -> str:
    # Titles and headings come from documents too: they must not end the attribute, the
    # tag, or open or close a block.
    text = " ".join(str(value).split()).replace('"', "'")
    return text.replace("<", "‹").replace(">", "›")


def render_source(
    src: dict[str, Any], snippet_chars: int, *, question: str = "", passage_chars: int = 0
) -> str:
    """One source's block: a web result's snippet (``snippet_chars``); a knowledge-base
    passage focused on ``question`` within ``passage_chars`` when given (the lines the
    offline answer would quote, whole: ``tools.answer.passage_focus``), else cut."""
    attrs: dict[str, Any] = {"title": src.get("title") or ""}
    if src.get("kind") == "web":
        attrs["url"] = src.get("url") or ""
        if src.get("published_at"):
            attrs["published"] = src["published_at"]
    else:
        attrs["doc_id"] = src.get("doc_id") or ""
        if src.get("location"):  # "p. 3" / "第 3 页" / "sheet Prices": cite-able places
            attrs["location"] = src["location"]
        if passage_chars:
            text = focus_passage(str(src.get("text") or ""), question, passage_chars)
            return fence(text, src["label"], attrs)
    return fence(cut_snippet(str(src.get("text") or ""), snippet_chars), src["label"], attrs)


@dataclass
class BuiltContext:
    text: str
    included: list[dict[str, Any]]
    omitted: int
    history: list[dict[str, str]]
    tokens: int


def _fit_history(turns: list[dict[str, str]], remaining: int) -> tuple[list[dict[str, str]], int]:
    """The latest turns that fit, and the budget they leave."""
    kept: list[dict[str, str]] = []
    for turn in reversed(turns):
        cost = estimate_tokens(turn.get("content", "")) + 4
        if cost > remaining // 3:  # history never takes more than a third of what is left
            break
        kept.insert(0, turn)
        remaining -= cost
    return kept, remaining


def build_context(
    sources: list[dict[str, Any]],
    *,
    snippet_chars: int,
    budget_tokens: int,
    system_tokens: int,
    reserve_tokens: int,
    history: list[dict[str, str]] | None = None,
    history_turns: int = 4,
    web_fetched_at: str | None = None,
    language: str = "en",
    question: str = "",
    passage_chars: int = 0,
) -> BuiltContext:
    """Fit history and labelled sources into what the budget leaves (knowledge-base
    passages focused on ``question`` within ``passage_chars`` when given)."""
    remaining = budget_tokens - system_tokens - reserve_tokens
    kept_history, remaining = _fit_history((history or [])[-history_turns:], remaining)
    rendered: list[tuple[dict[str, Any], str]] = []
    omitted = 0
    for src in sources:
        block = render_source(src, snippet_chars, question=question, passage_chars=passage_chars)
        cost = estimate_tokens(block)
        if cost > remaining:
            omitted += 1
            continue
        rendered.append((src, block))
        remaining -= cost
    zh = language == "zh"
    internal = [b for s, b in rendered if s.get("kind") != "web"]
    web = [b for s, b in rendered if s.get("kind") == "web"]
    parts = []
    parts.append("<internal_sources>")
    parts.extend(internal or ["（无）" if zh else "(none)"])
    parts.append("</internal_sources>")
    parts.append("<web_sources>")
    if web and web_fetched_at:
        parts.append(
            f"网络结果获取时间：{web_fetched_at}"
            if zh
            else f"Web results fetched at {web_fetched_at}"
        )
    parts.extend(web or ["（无）" if zh else "(none)"])
    parts.append("</web_sources>")
    if omitted:
        parts.append(
            f"（另有 {omitted} 条来源因篇幅限制被省略）"
            if zh
            else f"({omitted} more sources omitted to fit the context budget)"
        )
    text = "\n".join(parts)
    return BuiltContext(
        text=text,
        included=[s for s, _ in rendered],
        omitted=omitted,
        history=kept_history,
        tokens=estimate_tokens(text),
    )
