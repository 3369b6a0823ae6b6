"""Every decision of both graphs, as pure functions over typed evidence.

The state graph's ``grade`` / ``generate`` and the agent's nodes build an
:class:`Evidence` from what their searches found and call :func:`decide`; neither
restates a rule. A change of the web-fallback rule is :func:`needs_web_fallback` and
its unit test (tests/test_policy.py).

Two numbers per kind of evidence:

* knowledge base: the calibrated probability that the retrieval answers the question
  (``tools.kb.search.answerability``, the best of the searches behind the kept passages), or,
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

from tools.policy.offline import ROUTES, Route, text_overlap, uncovered_terms
from tools.websearch import SKIPPED_BY_USER

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
    web_skipped: bool = False  # the person approving web searches skipped one this turn

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
        web_skipped: bool = False,
    ) -> Evidence:
        """Evidence from the sources a run holds (``Source`` dicts): one value per search
        behind the KB passages (passages of one search carry the same value; the same
        searches give the same evidence however many of their hits a graph keeps)."""
        values = {round(float(d.get("answerability") or 0.0), 4) for d in internal}
        return cls(
            route=route if route in ROUTES else None,
            kb_answerability=tuple(sorted(values, reverse=True)),
            web_overlap=tuple(
                text_overlap(question, f"{d.get('title', '')} {d.get('text', '')}")
                for d in web[:TOP_N]
            ),
            grades=tuple(grades),
            web_searched=web_searched,
            fell_back=fell_back,
            web_skipped=web_skipped,
        )


class EvidenceRecord(TypedDict):
    """:class:`Evidence` as the state keeps it (plain lists, so checkpoints serialise it)."""

    route: str | None
    kb_answerability: list[float]
    web_overlap: list[float]
    grades: list[str]
    web_searched: bool
    fell_back: bool
    web_skipped: bool


def record(evidence: Evidence) -> EvidenceRecord:
    """The state's copy of ``evidence`` (what the turn's decision was taken on)."""
    return {
        "route": evidence.route,
        "kb_answerability": [round(v, 4) for v in evidence.kb_answerability],
        "web_overlap": [round(v, 4) for v in evidence.web_overlap],
        "grades": list(evidence.grades),
        "web_searched": evidence.web_searched,
        "fell_back": evidence.fell_back,
        "web_skipped": evidence.web_skipped,
    }


def turn_evidence(
    turn: Mapping[str, Any], *, route: str | None = None, grades: Sequence[Grade] = ()
) -> Evidence:
    """The evidence of a turn as either graph's state holds it: the KB passages kept
    (``internal_docs``, each with the answerability ``confidence.evidence_from`` gave it),
    the web results, the web's status, the fallback decided before (``decision``);
    ``route`` when the graph knows it better than ``turn["route"]`` (the agent: from the
    tools it used); ``grades``: the model's grades of this round."""
    return Evidence.of(
        turn["question"],
        list(turn.get("internal_docs") or []),
        list(turn.get("web_docs") or []),
        route=route or turn.get("route"),
        web_searched=bool(turn.get("web_searched")),
        fell_back=bool((turn.get("decision") or {}).get("web_fallback")),
        grades=grades,
        web_skipped=bool(turn.get("web_skipped")),
    )


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
    """Corrective fallback: the KB was asked, its evidence is weak and the web was neither
    searched nor skipped yet in this turn."""
    return (
        evidence.route != "search"
        and kb_confidence(evidence) < threshold
        and not evidence.web_searched
        and not evidence.web_skipped
    )


def refuses(confidence: float, threshold: float) -> bool:
    """The offline answer's rule: below ``threshold`` the evidence is too weak to quote."""
    return confidence < threshold


def decide(
    evidence: Evidence,
    threshold: float,
    *,
    refusal: float | None = None,
    model_driven: bool = False,
    searches_left: int | None = None,
) -> Decision:
    """Confidence, web fallback and refusal for ``evidence`` (both graphs): ``threshold``
    guards the web fallback (``confidence_threshold``), ``refusal`` the offline answer
    (``refusal_threshold``; ``threshold`` when not given). A model that drives the run
    (the agent's) picks its own searches: no fallback is decided for it. ``searches_left``:
    the searches the run may still make (the agent's ``max_tool_calls``; None: no bound)."""
    kb, web = kb_confidence(evidence), web_confidence(evidence)
    now = (
        not model_driven
        and (searches_left is None or searches_left > 0)
        and needs_web_fallback(evidence, threshold)
    )
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


def kept_internal(internal: Sequence[Any], decision: Mapping[str, Any]) -> list[Any]:
    """The KB passages kept beside the web results: the best two once ``decision`` sends
    the run to the web (both graphs trim then, before the fallback search)."""
    return list(internal[:KEEP_ON_FALLBACK] if decision.get("search_web_now") else internal)


def web_unavailable(turn: Mapping[str, Any]) -> str | None:
    """Why the answer must say live web results were unavailable, or None: the run wanted
    the web (its route, or a fallback), a search failed or was skipped, and no web result
    reached the run (both graphs; the sentence is ``run.localize``)."""
    if turn.get("web_docs"):
        return None
    wanted = turn.get("route") in ("search", "both") or (turn.get("decision") or {}).get(
        "web_fallback"
    )
    if not wanted:
        return None
    reason = str(turn.get("web_error") or "") or (
        SKIPPED_BY_USER if turn.get("web_skipped") else ""
    )
    return reason or None


def route_without_plan(offline_route: Route, model_failed: bool) -> Route:
    """The route when no model plans it: the offline rule's, unless a planning model failed
    (its failure says nothing about the question: ask both sources). Both graphs."""
    return "both" if model_failed else offline_route


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
