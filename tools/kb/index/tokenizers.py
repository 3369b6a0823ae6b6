"""Tokenisation for BM25, for Chinese and English.

English (and any spaced script): Unicode case-folding, punctuation stripped,
a short stop-word list removed; optional Snowball (Porter 2) stemming of ASCII
words through PyStemmer, the analyser of the best lexical peers (bm25s, Lucene's
EnglishAnalyzer): +0.011 nDCG@10 on SciFact over the earlier suffix rules, equal
on the other dev sets (bench/README.md, "English BM25 analysis"). Chinese: runs of CJK characters are segmented with jieba's
search mode (``jieba``, the default) or cut into overlapping character bigrams
(``bigram``); which one retrieves better was measured on the Chinese dev data
(``bench/bench_analysers.py``, bench/README.md).
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Callable
from functools import lru_cache
from typing import Literal

from tools.errors import ConfigError

ChineseMode = Literal["jieba", "bigram"]
CHINESE_MODES: tuple[ChineseMode, ...] = ("jieba", "bigram")

# CJK runs, or runs of other letters/digits (\w alone would swallow CJK after a digit).
_RUN_RE = re.compile(
    r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]+|[^\W_\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]+"
)
_CJK_START = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")

ENGLISH_STOPWORDS = frozenset(
    [
        "a",
        "an",
        "and",
        "are",
        "as",
        "at",
        "be",
        "been",
        "but",
        "by",
        "can",
        "could",
        "did",
        "do",
        "does",
        "for",
        "from",
        "had",
        "has",
        "have",
        "how",
        "i",
        "if",
        "in",
        "into",
        "is",
        "it",
        "its",
        "may",
        "me",
        "my",
        "of",
        "on",
        "or",
        "our",
        "should",
        "so",
        "than",
        "that",
        "the",
        "their",
        "them",
        "then",
        "there",
        "these",
        "they",
        "this",
        "to",
        "was",
        "we",
        "were",
        "what",
        "when",
        "where",
        "which",
        "who",
        "whom",
        "why",
        "will",
        "with",
        "would",
        "you",
        "your",
        "about",
        "after",
        "all",
        "also",
        "any",
        "before",
        "between",
        "both",
        "each",
        "few",
        "more",
        "most",
        "other",
        "over",
        "same",
        "some",
        "such",
        "only",
        "own",
        "too",
        "very",
        "just",
    ]
)
CHINESE_STOPWORDS = frozenset(
    [
        "的",
        "了",
        "是",
        "在",
        "和",
        "与",
        "及",
        "或",
        "也",
        "都",
        "就",
        "而",
        "吗",
        "呢",
        "吧",
        "啊",
        "么",
        "什么",
        "怎么",
        "如何",
        "哪些",
        "哪个",
        "多少",
        "请问",
        "我",
        "你",
        "他",
        "她",
        "它",
        "我们",
        "你们",
        "他们",
        "这",
        "那",
        "这个",
        "那个",
        "一个",
        "有",
        "没有",
        "被",
        "把",
        "对",
        "从",
        "给",
        "为",
        "以",
        "之",
        "其",
        "并",
        "等",
    ]
)
_STOPWORDS = ENGLISH_STOPWORDS | CHINESE_STOPWORDS
# The Chinese counterparts of English stop words "can", "could", "may", "should", "will",
# "would" and "if". Only the coverage rule drops them for now: adding them to
# CHINESE_STOPWORDS would change every BM25 index's tokens.
CHINESE_MODALS = frozenset(
    ["可以", "可", "能", "能够", "可能", "应该", "应当", "应", "会", "将", "是否"]
)

_jieba_lock = threading.Lock()


@lru_cache(maxsize=1)
def _jieba() -> Callable[[str], list[str]]:
    # Imported lazily: jieba builds its dictionary (~1 s) on first use.
    import jieba

    jieba.setLogLevel(logging.WARNING)
    with _jieba_lock:
        jieba.initialize()
    return jieba.lcut_for_search


def warm_up() -> None:
    """Load the Chinese dictionary now (about 1 s of file I/O, once per process).

    Async callers run this in a worker thread before any rule tokenizes, so the lazy
    load never happens on an event loop (where ``langgraph dev`` rejects it as a
    blocking call and a production server would stall every other run)."""
    _jieba()


def warmed_up() -> bool:
    """Whether the dictionary is loaded (then tokenizing never blocks on file I/O)."""
    return _jieba.cache_info().currsize > 0


@lru_cache(maxsize=1)
def _snowball() -> Callable[[str], str]:
    # Imported lazily: the C stemmer loads its English tables on first use.
    import Stemmer

    stem: Callable[[str], str] = Stemmer.Stemmer("english").stemWord
    return stem


@lru_cache(maxsize=200_000)
def _stem(word: str) -> str:
    """Snowball English stem of an ASCII word ('policies' -> 'polici', same as 'policy');
    digits, mixed tokens and other scripts are left as they are. Cached: a corpus
    repeats its words, and stemming is per word."""
    if len(word) <= 3 or not word.isascii() or not word.isalpha():
        return word
    return _snowball()(word)


def make_tokenizer(chinese: str = "jieba", *, stem: bool = False) -> Callable[[str], list[str]]:
    """Return a tokenizer; ``chinese`` is ``jieba`` or ``bigram``."""
    if chinese not in CHINESE_MODES:
        raise ConfigError(
            f"unknown Chinese tokenisation {chinese!r}; choose one of {CHINESE_MODES}"
        )

    def tokenize(text: str) -> list[str]:
        tokens: list[str] = []
        for run in _RUN_RE.findall(text.casefold()):
            if _CJK_START.match(run):
                if chinese == "jieba":
                    tokens.extend(t for t in _jieba()(run) if t.strip())
                elif len(run) == 1:
                    tokens.append(run)
                else:
                    tokens.extend(run[i : i + 2] for i in range(len(run) - 1))
            else:
                tokens.append(_stem(run) if stem else run)
        return [t for t in tokens if t not in _STOPWORDS]

    return tokenize


_keyword_tokenize: Callable[[str], list[str]] | None = None


def keywords(text: str) -> list[str]:
    """A question's content words, in order, once each (jieba words; single Latin letters
    dropped): what the offline rewriter queries and the lexical reranker looks for."""
    global _keyword_tokenize
    if _keyword_tokenize is None:
        _keyword_tokenize = make_tokenizer("jieba")
    return list(dict.fromkeys(t for t in _keyword_tokenize(text) if len(t) > 1 or not t.isascii()))


def words_of(query: str, text: str) -> bool:
    """True when every content word of ``query`` occurs in ``text`` (case-folded): the
    query is a keyword selection of the text ("biomaterials inductive" of "0-dimensional
    biomaterials lack inductive properties"), not a paraphrase or a translation."""
    words = keywords(query)
    folded = text.casefold()
    return bool(words) and all(w.casefold() in folded for w in words)
