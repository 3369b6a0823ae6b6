"""Calibration figures for a probability: AUROC, expected calibration error, reliability.

Owns the measures ``hybrid-rag eval calibration`` and ``bench/bench_evidence.py``
report for the answerability probability (``tools.kb.search.answerability``), and the
reliability diagram (matplotlib, the optional ``eval`` extra, imported only here).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from tools.errors import ConfigError


@dataclass(frozen=True)
class Bin:
    lower: float
    upper: float
    count: int
    mean_confidence: float
    accuracy: float


def _arrays(labels: Sequence[int], probs: Sequence[float]) -> tuple[np.ndarray, np.ndarray]:
    y = np.asarray(labels, dtype=np.float64)
    p = np.asarray(probs, dtype=np.float64)
    if y.shape != p.shape or y.ndim != 1:
        raise ValueError(f"labels and scores differ in length ({len(y)} vs {len(p)})")
    return y, p


def auroc(labels: Sequence[int], scores: Sequence[float]) -> float:
    """Area under the ROC curve (Mann-Whitney rank sum, ties get their average rank)."""
    y, s = _arrays(labels, scores)
    pos = int(y.sum())
    neg = len(y) - pos
    if pos == 0 or neg == 0:
        raise ValueError("AUROC needs both classes: all labels are the same")
    order = np.argsort(s, kind="mergesort")
    ranks = np.empty(len(s))
    sorted_s = s[order]
    i = 0
    while i < len(s):  # average ranks over runs of tied scores
        j = i
        while j + 1 < len(s) and sorted_s[j + 1] == sorted_s[i]:
            j += 1
        ranks[order[i : j + 1]] = (i + j) / 2.0 + 1.0
        i = j + 1
    return float((ranks[y == 1].sum() - pos * (pos + 1) / 2.0) / (pos * neg))


def reliability_bins(labels: Sequence[int], probs: Sequence[float], bins: int = 10) -> list[Bin]:
    """Equal-width bins on [0, 1] (1.0 falls in the last one); empty bins included."""
    y, p = _arrays(labels, probs)
    if bins < 1:
        raise ValueError(f"bins must be >= 1, got {bins}")
    index = np.minimum((p * bins).astype(int), bins - 1)
    out: list[Bin] = []
    for b in range(bins):
        members = index == b
        n = int(members.sum())
        out.append(
            Bin(
                lower=b / bins,
                upper=(b + 1) / bins,
                count=n,
                mean_confidence=float(p[members].mean()) if n else 0.0,
                accuracy=float(y[members].mean()) if n else 0.0,
            )
        )
    return out


def expected_calibration_error(
    labels: Sequence[int], probs: Sequence[float], bins: int = 10
) -> float:
    """Sum over bins of ``count / n * |accuracy - mean confidence|``."""
    n = len(labels)
    if n == 0:
        return 0.0
    return float(
        sum(
            b.count / n * abs(b.accuracy - b.mean_confidence)
            for b in reliability_bins(labels, probs, bins)
        )
    )


def brier_score(labels: Sequence[int], probs: Sequence[float]) -> float:
    y, p = _arrays(labels, probs)
    return float(np.mean((p - y) ** 2)) if len(y) else 0.0


@dataclass(frozen=True)
class CalibrationReport:
    name: str
    n: int
    positives: int
    auroc: float | None  # None when only one class is present
    ece: float
    brier: float
    bins: list[Bin] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "n": self.n,
            "positives": self.positives,
            "auroc": None if self.auroc is None else round(self.auroc, 4),
            "ece": round(self.ece, 4),
            "brier": round(self.brier, 4),
            "bins": [
                {
                    "lower": round(b.lower, 4),
                    "upper": round(b.upper, 4),
                    "count": b.count,
                    "mean_confidence": round(b.mean_confidence, 4),
                    "accuracy": round(b.accuracy, 4),
                }
                for b in self.bins
            ],
        }


def calibration_report(
    name: str, labels: Sequence[int], probs: Sequence[float], bins: int = 10
) -> CalibrationReport:
    positives = int(sum(int(v) for v in labels))
    both = 0 < positives < len(labels)
    return CalibrationReport(
        name=name,
        n=len(labels),
        positives=positives,
        auroc=auroc(labels, probs) if both else None,
        ece=expected_calibration_error(labels, probs, bins),
        brier=brier_score(labels, probs),
        bins=reliability_bins(labels, probs, bins),
    )


def plot_reliability(
    reports: Sequence[CalibrationReport], path: Path, title: str = "Reliability"
) -> Path:
    """A reliability diagram (PNG): observed share answerable per confidence bin."""
    try:
        import matplotlib

        matplotlib.use("Agg")  # no display: files only
        import matplotlib.pyplot as plt
    except ImportError as exc:
        raise ConfigError(
            "the reliability diagram needs matplotlib: pip install 'hybrid-rag[eval]'"
        ) from exc
    path.parent.mkdir(parents=True, exist_ok=True)
    fig, ax = plt.subplots(figsize=(5.5, 5.0), dpi=110)
    try:
        ax.plot([0, 1], [0, 1], linestyle="--", color="grey", linewidth=1, label="perfect")
        for r in reports:
            xs = [b.mean_confidence for b in r.bins if b.count]
            ys = [b.accuracy for b in r.bins if b.count]
            auc = f"{r.auroc:.2f}" if r.auroc is not None else "-"
            ax.plot(xs, ys, marker="o", label=f"{r.name} (AUROC {auc}, ECE {r.ece:.2f})")
        ax.set_xlim(0, 1)
        ax.set_ylim(0, 1)
        ax.set_xlabel("predicted probability (answerable)")
        ax.set_ylabel("observed share answerable")
        ax.set_title(title)
        ax.legend(loc="upper left", fontsize=8)
        fig.tight_layout()
        fig.savefig(path, format="png")
    finally:
        plt.close(fig)
    return path
