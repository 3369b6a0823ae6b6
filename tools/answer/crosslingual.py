"""Cross-lingual queries: when the KB holds text in another language than the question.

With a model, the question is translated and the translation joins the KB queries,
so results of both languages are fused by the knowledge-base search. Offline, nothing is
translated and the output says so (the multilingual embedding still matches across
languages, more weakly). The translation itself is the caller's model call
(``nodes.rewrite.model_translator``): this module reads the knowledge base's languages,
keeps the translations that are ones (``tools.policy.translation``) and reports.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any

import numpy as np

from tools.errors import HybridRagError
from tools.kb.knowledge_base import KnowledgeBase
from tools.policy.offline import Similarity
from tools.policy.translation import translation_problem
from tools.text import detect_language

log = logging.getLogger("hybrid_rag.nodes")

LANGUAGE_NAMES = {"zh": "Simplified Chinese", "en": "English"}

# The run's knowledge base, opened when first needed (``RunView.kb``).
OpenKB = Callable[[], KnowledgeBase]
# The question in a target language (its English name); may fail.
Translate = Callable[[str], Awaitable[str]]


async def other_languages(kb: OpenKB, question: str) -> tuple[list[str], dict[str, Any]]:
    """The KB's languages other than the question's (``zh``/``en``), and the report."""
    try:
        mix = await asyncio.to_thread(lambda: kb().languages())
    except HybridRagError:
        return [], {}
    source = detect_language(question)
    others = sorted(
        lang for lang, n in mix.items() if n > 0 and lang != source and lang in LANGUAGE_NAMES
    )
    return others, {"question_language": source, "kb_languages": mix, "translated": []}


def language_names(languages: list[str]) -> str:
    return ", ".join(LANGUAGE_NAMES[lang] for lang in languages)


def planned_translations(
    question: str, languages: list[str], translations: list[str], report: dict[str, Any]
) -> tuple[list[str], dict[str, Any]]:
    """The planner's translations (one per language, in order) as extra KB queries; one
    that is no translation (``tools.policy.translation``) is left out and reported."""
    report = {**report, "translated": []}
    queries: list[str] = []
    for lang, text in zip(languages, translations, strict=False):
        keep_translation(question, lang, text, queries, report)
    return queries, report


def keep_translation(
    question: str, lang: str, text: str, queries: list[str], report: dict[str, Any]
) -> None:
    """Add ``text`` to ``queries`` (and the report) when it is a usable translation of
    ``question`` into ``lang``; otherwise note in the report why it was rejected."""
    text = text.strip()
    problem = translation_problem(question, text, lang)
    if not problem:
        queries.append(text)
        report["translated"].append({"language": lang, "query": text})
    elif text and problem != "the question unchanged":
        shown = text if len(text) <= 80 else f"{text[:80]}…"
        report.setdefault("rejected", []).append(
            {"language": lang, "query": shown, "reason": problem}
        )


async def translated_queries(
    kb: OpenKB, question: str, translator: Callable[[], Translate] | None
) -> tuple[list[str], dict[str, Any]]:
    """Extra KB queries in the KB's other languages (one ``translator()`` call per
    language, used when the planner did not translate; None: no model, offline), and a
    report for the output."""
    others, report = await other_languages(kb, question)
    if not report or not others:
        return [], report
    if translator is None:
        # Not a warning: offline, each of the KB's languages is searched on its own
        # (tools.kb.search.joiner), and an answer quoting another language says so itself.
        report["note"] = (
            f"the knowledge base also holds {', '.join(others)} text; no translation was done "
            "(no language model for this step): each language of the knowledge base is "
            "searched on its own"
        )
        return [], report
    queries: list[str] = []
    translate = translator()
    for lang in others:
        try:
            text = await translate(LANGUAGE_NAMES[lang])
        except Exception as exc:  # a failed translation only loses the extra query
            log.warning("translation into %s failed", lang, exc_info=True)
            report.setdefault("errors", []).append(f"{lang}: {type(exc).__name__}")
            continue
        keep_translation(question, lang, text, queries, report)
    return queries, report


def source_similarity(kb: OpenKB) -> Similarity:
    """Cosine of the question to each text with the KB's embedding model, for the offline
    answer's sources in another language (blocking: call it off the event loop). A KB
    that cannot be opened gives no similarity (zeros), never an error."""

    def similarity(question: str, texts: list[str]) -> list[float]:
        try:
            model = kb().model
            q = np.asarray(model.embed_query(question), dtype=np.float32)
            docs = np.asarray(model.embed_documents(texts), dtype=np.float32)
        except HybridRagError:
            log.warning("no similarity for the offline answer", exc_info=True)
            return [0.0] * len(texts)
        norms = np.linalg.norm(docs, axis=1) * (np.linalg.norm(q) or 1.0)
        norms[norms == 0] = 1.0
        return [float(v) for v in (docs @ q) / norms]

    return similarity
