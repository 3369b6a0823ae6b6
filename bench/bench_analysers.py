"""English BM25 analysis: which stemmer and stop-word list, measured on every dev set.

BM25 only, in memory (the knowledge base's chunking and ``BM25Index``, no Chroma, no
embedding): seconds per set. Variants of the English side of the analyser (Chinese runs
always go through jieba, so the Chinese sets show what each variant does to mixed text):

* ``none``              no stemming, the shipped short stop-word list;
* ``suffix``            the suffix rules shipped before 0.3 (plural/-ing/-ed), kept here
                        as the reference the change is judged against;
* ``snowball``          Snowball English (PyStemmer), the short list: the shipped default;
* ``snowball+nltk``     Snowball with NLTK's 179-word English list added (bm25s's
                        default analyser is of this kind);
* ``snowball+nltk-neg`` the same without "no", "nor", "not" (negation matters to claims).

    .venv/bin/python -m bench.bench_analysers [--sets scifact,rgb,cmrc,realtimeqa]

Data sets are read from ``--data-dir`` (default ../shared/data), never copied.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable

from bench.harness import parser
from tools.evaluation.datasets import (
    DEV_SETS,
    BeirData,
    score_run,
    to_documents,
)
from tools.kb.index import tokenizers as tk
from tools.kb.index.bm25 import BM25Index
from tools.kb.ingest.chunking import ChunkingOptions, chunk_document

SETS = DEV_SETS
_NLTK_WORDS = """i me my myself we our ours ourselves you you're you've you'll you'd your yours
    yourself yourselves he him his himself she she's her hers herself it it's its itself
    they them their theirs themselves what which who whom this that that'll these those am
    is are was were be been being have has had having do does did doing a an the and but if
    or because as until while of at by for with about against between into through during
    before after above below to from up down in out on off over under again further then
    once here there when where why how all any both each few more most other some such no
    nor not only own same so than too very s t can will just don don't should should've now
    d ll m o re ve y ain aren aren't couldn couldn't didn didn't doesn doesn't hadn hadn't
    hasn hasn't haven haven't isn isn't ma mightn mightn't mustn mustn't needn needn't shan
    shan't shouldn shouldn't wasn wasn't weren weren't won won't wouldn wouldn't"""
NLTK_ENGLISH = frozenset(_NLTK_WORDS.split())


def suffix_stem(word: str) -> str:
    """The English stemmer shipped before 0.3: plural and common verb suffixes."""
    if len(word) <= 3 or not word.isascii() or not word.isalpha():
        return word
    for suffix, repl in (("ies", "y"), ("sses", "ss"), ("ing", ""), ("ed", ""), ("s", "")):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            if suffix == "s" and word.endswith(("ss", "us", "is")):
                return word
            return word[: -len(suffix)] + repl
    return word


def analyser(stem: Callable[[str], str], stopwords: frozenset[str]) -> Callable[[str], list[str]]:
    """The shipped tokenizer's structure with another English stemmer / stop-word list."""
    stops = stopwords | tk.CHINESE_STOPWORDS
    jieba = tk.make_tokenizer("jieba")

    def tokenize(text: str) -> list[str]:
        out: list[str] = []
        for run in tk._RUN_RE.findall(text.casefold()):
            if tk._CJK_START.match(run):
                out.extend(jieba(run))
            elif run not in stops:
                out.append(stem(run))
        return [t for t in out if t not in stops]

    return tokenize


VARIANTS: dict[str, Callable[[str], list[str]]] = {
    "none": tk.make_tokenizer("jieba", stem=False),
    "suffix": analyser(suffix_stem, tk.ENGLISH_STOPWORDS),
    "snowball": tk.make_tokenizer("jieba", stem=True),
    "snowball+nltk": analyser(tk._stem, tk.ENGLISH_STOPWORDS | NLTK_ENGLISH),
    "snowball+nltk-neg": analyser(
        tk._stem, (tk.ENGLISH_STOPWORDS | NLTK_ENGLISH) - {"no", "nor", "not"}
    ),
}


def bm25_ndcg(data: BeirData, tokenize: Callable[[str], list[str]]) -> dict[str, float]:
    texts: list[str] = []
    owners: list[str] = []
    for doc in to_documents(data):
        for c in chunk_document(doc.text, markdown=doc.is_markdown, options=ChunkingOptions()):
            texts.append(f"{c.heading}\n{c.text}")
            owners.append(doc.doc_id)
    index = BM25Index(texts, tokenize)
    rankings = {
        qid: list(dict.fromkeys(owners[h.index] for h in index.search(data.queries[qid], 30)))
        for qid in sorted(data.qrels)
    }
    return score_run(rankings, data.qrels, [])


def main(argv: list[str] | None = None) -> int:
    ap = parser(__doc__, data=True)
    ap.add_argument("--sets", type=lambda s: s.split(","), default=list(SETS))
    args = ap.parse_args(argv)
    table: dict[str, dict[str, float]] = {}
    for name in args.sets:
        data = SETS[name](args.data_dir)
        for variant, tokenize in VARIANTS.items():
            started = time.perf_counter()
            table.setdefault(variant, {})[name] = bm25_ndcg(data, tokenize)["ndcg@10"]
            print(f"# {name} {variant}: {time.perf_counter() - started:.0f} s", file=sys.stderr)
    print("\n## BM25 nDCG@10 by English analyser")
    print(f"{'analyser':<18} " + " ".join(f"{n:>10}" for n in args.sets))
    for variant, row in table.items():
        print(f"{variant:<18} " + " ".join(f"{row[n]:>10.4f}" for n in args.sets))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
