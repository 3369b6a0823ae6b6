"""Every decision of both graphs, as pure functions over typed evidence.

The state graph's ``grade`` / ``generate`` and the agent's nodes build an
:class:`Evidence` from what their searches found and call :func:`decide`; neither
restates a rule. A change of the web-fallback rule is :func:`needs_web_fallback` and
its unit test (tests/test_policy.py).

Two numbers per kind of evidence:

* knowledge base: the calibrated probability that the retrieval answers the question
  (``tools.kb.answerability``, the best of the searches behind the kept passages), or,
  when a model graded the top passages (Corrective-RAG grades), their mean grade points;
* web: the share of question keywords in the top results' titles and snippets (web
  results carry no calibrated score).

``confidence_threshold`` guards the KB's probability (fallback), ``refusal_threshold`` the
final confidence (offline refusal). ``strategy`` is only a label for reports (:func:`strategy_label`); no
node branches on it.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

from typing_extensions import TypedDict

from tools.policy.offline import text_overlap, uncovered_terms

Route = Literal["knowledge", "search", "both"]
Grade = Literal["correct", "ambiguous", "incorrect"]

# Passages graded by the model, and web results scored for overlap: the top three.
TOP_N = 3
# On a web fallback the two best KB passages stay beside the web results (Corrective RAG).
KEEP_ON_FALLBACK = 2
S = TypeVar("S", bound=Mapping[str, Any])
POINTS: dict[str, float] = {"correct": 1.0, "ambiguous": 0.5, "incorrect": 0.0}


@dataclass(frozen=True)
class Evidence:
    """What the searches of one turn found, as the decisions need it.

    ``kb_answerability``: the calibrated probability of each search behind the KB
    passages kept; ``web_overlap``: question-keyword overlap of each top web result;
    ``grades``: the model's grades of the top KB passages, empty when none were given
    this round; ``fell_back``: the web fallback was decided earlier in this turn.
    """

    route: Route | None = None
    kb_answerability: tuple[float, ...] = ()
    web_overlap: tuple[float, ...] = ()
    grades: tuple[Grade, ...] = ()
    web_searched: bool = False
    fell_back: bool = False

    @classmethod
    def of(
        cls,
        question: str,
        internal: Sequence[Mapping[str, Any]],
        web: Sequence[Mapping[str, Any]],
        *,
        route: str | None,
        web_searched: bool,
        fell_back: bool = False,
        grades: Sequence[Grade] = (),
    ) -> Evidence:
        """Evidence from the sources a run holds (``Source`` dicts)."""
        return cls(
            route=route if route in ("knowledge", "search", "both") else None,  # type: ignore[arg-type]
            kb_answerability=tuple(float(d.get("answerability") or 0.0) for d in internal),
            web_overlap=tuple(
                text_overlap(question, f"{d.get('title', '')} {d.get('text', '')}")
                for d in web[:TOP_N]
            ),
            grades=tuple(grades),
            web_searched=web_searched,
            fell_back=fell_back,
        )


class EvidenceRecord(TypedDict):
    """:class:`Evidence` as the state keeps it (plain lists, so checkpoints serialise it)."""

    route: str | None
    kb_answerability: list[float]
    web_overlap: list[float]
    grades: list[str]
    web_searched: bool
    fell_back: bool


def record(evidence: Evidence) -> EvidenceRecord:
    """The state's copy of ``evidence`` (what the turn's decision was taken on)."""
    return {
        "route": evidence.route,
        "kb_answerability": [round(v, 4) for v in evidence.kb_answerability],
        "web_overlap": [round(v, 4) for v in evidence.web_overlap],
        "grades": list(evidence.grades),
        "web_searched": evidence.web_searched,
        "fell_back": evidence.fell_back,
    }


class Decision(TypedDict):
    """What :func:`decide` concluded (a plain dict, so the state can checkpoint it)."""

    kb_confidence: float
    web_confidence: float
    confidence: float  # the run's confidence for its route (reported, and refusal's input)
    web_fallback: bool  # the run falls (or fell) back to the web on weak KB evidence
    search_web_now: bool  # the fallback search has not run yet
    refuse: bool  # an offline answer says "no information" instead of quoting


def kb_confidence(evidence: Evidence) -> float:
    """Mean grade points when the model graded this round, else the best search's
    calibrated answerability."""
    if evidence.grades:
        return sum(POINTS[g] for g in evidence.grades) / len(evidence.grades)
    return max(evidence.kb_answerability, default=0.0)


def web_confidence(evidence: Evidence) -> float:
    top = evidence.web_overlap[:TOP_N]
    return sum(top) / len(top) if top else 0.0


def needs_web_fallback(evidence: Evidence, threshold: float) -> bool:
    """Corrective fallback: the KB was asked, its evidence is weak and the web was not
    searched yet in this turn."""
    return (
        evidence.route != "search"
        and kb_confidence(evidence) < threshold
        and not evidence.web_searched
    )


def refuses(confidence: float, threshold: float) -> bool:
    """The offline answer's rule: below ``threshold`` the evidence is too weak to quote."""
    return confidence < threshold


def decide(evidence: Evidence, threshold: float, *, refusal: float | None = None) -> Decision:
    """Confidence, web fallback and refusal for ``evidence`` (both graphs): ``threshold``
    guards the web fallback (``confidence_threshold``), ``refusal`` the offline answer
    (``refusal_threshold``; ``threshold`` when not given)."""
    kb, web = kb_confidence(evidence), web_confidence(evidence)
    now = needs_web_fallback(evidence, threshold)
    fell_back = evidence.fell_back or now
    if evidence.route == "search":
        confidence = web
    elif evidence.route == "knowledge" and not (fell_back and evidence.web_searched):
        confidence = kb
    else:  # both sources asked (route both, a finished fallback, or no route known)
        confidence = max(kb, web)
    return {
        "kb_confidence": round(kb, 4),
        "web_confidence": round(web, 4),
        "confidence": round(confidence, 4),
        "web_fallback": fell_back,
        "search_web_now": now,
        "refuse": refuses(confidence, threshold if refusal is None else refusal),
    }


def kept_internal(internal: Sequence[Any], web_fallback: bool) -> list[Any]:
    """The KB passages kept beside the web results: the best two on a fallback."""
    return list(internal[:KEEP_ON_FALLBACK] if web_fallback else internal)


def graded(passages: Sequence[S]) -> list[S]:
    """The passages a model grade keeps: all but those graded incorrect."""
    return [p for p in passages if p.get("grade") != "incorrect"]


# --- reflection ---------------------------------------------------------------------------

# "More likely not answered than answered": the calibrated probability's own midpoint,
# not a tuned value. At or above it the evidence is strong and no model call is spent.
REFLECT_BELOW = 0.5


@dataclass(frozen=True)
class NextStep:
    """Reflection's verdict: enough evidence, or the next query and where to ask it."""

    sufficient: bool
    next_query: str = ""
    source: Literal["internal", "web"] = "internal"


def reflection_call_needed(confidence: float) -> bool:
    """With a model, reflection spends a call only on weak evidence."""
    return confidence < REFLECT_BELOW


def offline_next_step(
    question: str, route: str | None, web_failed: bool, evidence_texts: Sequence[str]
) -> NextStep:
    """The coverage rule: ask again for the question's terms no source covers, from the
    KB (or, on the web route, from the web while it works)."""
    missing = uncovered_terms(question, list(evidence_texts))
    if not missing:
        return NextStep(sufficient=True)
    if route == "search":
        # The KB was judged irrelevant; only another web query could help.
        if web_failed:
            return NextStep(sufficient=True)
        return NextStep(sufficient=False, next_query=" ".join(missing), source="web")
    return NextStep(sufficient=False, next_query=" ".join(missing), source="internal")


def worth_asking(step: NextStep, tried: Collection[str]) -> bool:
    """A next query is worth a round only when it is new in this turn."""
    query = step.next_query.strip()
    return not step.sufficient and bool(query) and step.next_query not in tried


def strategy_label(route: str | None, web_fallback: bool, *, agent: bool = False) -> str:
    """The reporting label of a run: ``search_fallback``, ``vector``, ``search``, ``both``
    (``agent`` for a model-driven agent). Derived from decisions, never one itself."""
    if agent:
        return "agent"
    if web_fallback:
        return "search_fallback"
    return {"knowledge": "vector", "search": "search", "both": "both"}.get(route or "", "")
