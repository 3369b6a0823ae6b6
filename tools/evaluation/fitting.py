"""Fitting the answerability model (``tools.kb.search.answerability``) on labelled samples.

``hybrid-rag eval calibration --fit DIR`` builds the samples (``tools.evaluation.datasets``:
each judged query with and without its judged documents, unrelated questions, RGB's
5-passage KBs) and calls ``fit_params``: one logistic model over every feature, stored under
the embedding model's name, one over its dense features only (``<name>.across.json``, for
evidence in another language than the question's), and one over the lexical features only (``lexical.json``, the
fallback for an embedder without its own file). Every data set (``group``) weighs the same
in a fit, whatever its size. ``held_out`` refits without each group and predicts it: how
far the probability transfers to a corpus it was not fitted on.

The shipped parameters (``tools/kb/search/answerability_params/``) are this command's output on
the four dev sets (bench/README.md, "Calibrated answerability").
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from tools.errors import InputError
from tools.evaluation.datasets import AnswerabilitySample
from tools.kb.search.answerability import (
    ACROSS,
    DENSE_FEATURES,
    FALLBACK,
    FEATURES,
    LEXICAL_FEATURES,
    AnswerabilityModel,
    fit_logistic,
    params_name,
)

FIT_COMMAND = "hybrid-rag eval calibration --fit"


def balanced(samples: Sequence[AnswerabilitySample]) -> list[AnswerabilitySample]:
    """The samples grouped (groups in order of first appearance), the smaller groups'
    repeated so every group weighs about as much as the largest in the fit."""
    by_group: dict[str, list[AnswerabilitySample]] = {}
    for s in samples:
        by_group.setdefault(s.group, []).append(s)
    biggest = max(len(v) for v in by_group.values())
    out: list[AnswerabilitySample] = []
    for members in by_group.values():
        out.extend(members * max(1, round(biggest / len(members))))
    return out


def fit(
    samples: Sequence[AnswerabilitySample],
    features: tuple[str, ...],
    *,
    l2: float = 1.0,
    name: str = "fit",
    meta: dict[str, object] | None = None,
) -> AnswerabilityModel:
    """A logistic model over ``features`` fitted on ``samples`` as given (balance first)."""
    labels = {s.label for s in samples}
    if labels != {0, 1}:
        raise InputError(
            f"fitting needs answerable and unanswerable samples, got labels {sorted(labels)}"
        )
    x = np.asarray([s.evidence.vector(features) for s in samples])
    y = np.asarray([s.label for s in samples])
    mean, scale, coef, intercept = fit_logistic(x, y, l2=l2)
    return AnswerabilityModel(
        name,
        features,
        tuple(mean.tolist()),
        tuple(scale.tolist()),
        tuple(coef.tolist()),
        intercept,
        dict(meta or {}),
    )


def held_out(
    samples: Sequence[AnswerabilitySample], features: tuple[str, ...], *, l2: float = 1.0
) -> dict[str, tuple[list[int], list[float]]]:
    """Per group: its labels and the probabilities of the model fitted without it."""
    groups = sorted({s.group for s in samples})
    if len(groups) < 2:
        raise InputError("leaving one data set out needs at least two data sets")
    out: dict[str, tuple[list[int], list[float]]] = {}
    for group in groups:
        model = fit(balanced([s for s in samples if s.group != group]), features, l2=l2)
        test = [s for s in samples if s.group == group]
        out[group] = ([s.label for s in test], [model.probability(s.evidence) for s in test])
    return out


def fit_params(
    samples: Sequence[AnswerabilitySample], model_id: str, *, l2: float = 1.0
) -> list[AnswerabilityModel]:
    """The parameter sets the knowledge base loads, all on the balanced samples: every
    feature for ``model_id``'s embedder, its dense features alone (evidence in another
    language than the question's, ``<embedder>.across``), and the lexical fallback (any
    embedder)."""
    groups = sorted({s.group for s in samples})
    rows = balanced(samples)
    out = []
    for features, stem, embedding in (
        (FEATURES, params_name(model_id), model_id),
        (DENSE_FEATURES, f"{params_name(model_id)}.{ACROSS}", model_id),
        (LEXICAL_FEATURES, FALLBACK, "any"),
    ):
        meta = {
            "fitted_on": groups,
            "samples": len(samples),
            "embedding": embedding,
            "l2": l2,
            "command": FIT_COMMAND,
        }
        out.append(fit(rows, features, l2=l2, name=stem, meta=meta))
    return out


def write_params(models: Sequence[AnswerabilityModel], folder: Path) -> list[Path]:
    """Each model as ``<folder>/<name>.json``, in the format ``load_model`` reads."""
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for model in models:
        path = folder / f"{model.name}.json"
        path.write_text(json.dumps(model.to_json(), indent=1) + "\n", encoding="utf-8")
        paths.append(path)
    return paths
