"""Human approval of a paid web search: what is asked, and what the answer may be.

Plain Python (no LangGraph): :func:`approval_request` describes the searches about to be
made — the queries, the provider, its price per query and the estimated cost — and
:class:`WebSearchDecision` validates the person's answer: ``approve`` (run as planned),
``edit`` (run these queries instead) or ``skip`` (no web search; the answer then says
live web results were unavailable because of :data:`SKIPPED_BY_USER`). Both graphs ask
through ``run.approval_interrupt``, which pauses the run with LangGraph's ``interrupt``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from tools.errors import InputError

from .cache import SearchCache, cache_key
from .providers import PROVIDERS
from .snippets import build_params, normalize_query
from .web_settings import ENV_PRICE_PREFIX, WebSearchSettings

# The reason the answer gives ("Live web results were unavailable: <reason>.").
SKIPPED_BY_USER = "web search was skipped by the user"
MAX_EDITED_QUERIES = 5
ACTIONS = ("approve", "edit", "skip")
# The action as agent-chat-ui's inbox (LangChain's human-in-the-loop request schema,
# ``action_requests`` / ``review_configs``) names it; its "reject" is our "skip".
HITL_ACTION = "web_search"
HITL_DECISIONS = {"approve": "approve", "edit": "edit", "reject": "skip"}


class InvalidDecisionError(InputError):
    """The answer to an approval request is not a valid decision (the request stays open)."""


def invalid_decision(exc: ValidationError) -> InvalidDecisionError:
    """One readable sentence for what is wrong with an answer, and what a valid one is."""
    problems = "; ".join(
        ".".join(str(p) for p in e["loc"]) + f": {e['msg']}" if e["loc"] else e["msg"]
        for e in exc.errors()
    ).replace("Value error, ", "")
    return InvalidDecisionError(
        f"invalid answer to the web search approval ({problems}); resume with "
        "{'action': 'approve'}, {'action': 'skip'} or "
        "{'action': 'edit', 'queries': ['...']}"
    )


class WebSearchDecision(BaseModel):
    """The answer to an approval request (the value to resume the run with).

    ``{"action": "approve"}``, ``{"action": "skip"}`` or ``{"action": "edit", "queries":
    ["...", ...]}`` (1 to :data:`MAX_EDITED_QUERIES` non-empty queries); a bare
    ``"approve"`` or ``"skip"`` is accepted too, and so is agent-chat-ui's
    ``{"decisions": [{"type": "approve" | "edit" | "reject"}]}`` (:func:`from_hitl`,
    reject = skip). Anything else is rejected with a message
    that names the problem, and the request can be answered again.
    """

    model_config = ConfigDict(extra="forbid")

    action: Literal["approve", "edit", "skip"] = Field(
        description="approve: search as planned; edit: search `queries` instead; skip: no web search"
    )
    queries: list[str] | None = Field(
        default=None,
        description=f"With 'edit': the queries to search, 1 to {MAX_EDITED_QUERIES}.",
    )

    @model_validator(mode="before")
    @classmethod
    def _bare_action(cls, value: Any) -> Any:
        if isinstance(value, str):
            return {"action": value.strip().lower()}
        if isinstance(value, dict) and ("decisions" in value or "type" in value):
            return from_hitl(value)
        if not isinstance(value, dict):
            raise ValueError(
                "resume with {'action': 'approve' | 'edit' | 'skip'} "
                f"(and 'queries' for edit), got {type(value).__name__}"
            )
        return value

    @field_validator("action", mode="before")
    @classmethod
    def _known_action(cls, value: Any) -> Any:
        if value not in ACTIONS:
            raise ValueError(f"action must be approve, edit or skip, got {value!r}")
        return value

    @field_validator("queries", mode="before")
    @classmethod
    def _valid_queries(cls, value: Any) -> Any:
        if value is None:
            return None
        if isinstance(value, str) or not isinstance(value, list):
            raise ValueError(f"queries must be a list of strings, got {type(value).__name__}")
        if not 1 <= len(value) <= MAX_EDITED_QUERIES:
            raise ValueError(f"edit needs 1 to {MAX_EDITED_QUERIES} queries, got {len(value)}")
        cleaned: list[str] = []
        for n, query in enumerate(value, 1):
            if not isinstance(query, str):
                raise ValueError(f"query {n} must be a string, got {type(query).__name__}")
            try:
                cleaned.append(build_params(query).query)
            except InputError as exc:
                raise ValueError(f"query {n}: {exc}") from None
        return list(dict.fromkeys(cleaned))

    @model_validator(mode="after")
    def _queries_only_with_edit(self) -> WebSearchDecision:
        if self.action == "edit" and not self.queries:
            raise ValueError("action 'edit' needs 'queries': the list of queries to search")
        if self.action != "edit" and self.queries is not None:
            raise ValueError(f"'queries' only go with action 'edit', not {self.action!r}")
        return self


def from_hitl(value: dict[str, Any]) -> dict[str, Any]:
    """A human-in-the-loop answer (``{"decisions": [{"type": "approve" | "edit" |
    "reject", ...}]}``, or one decision) as this module's ``{"action": ...}``.

    An edit's ``edited_action.args.queries`` may be a list, a JSON list or text with one
    query per line (agent-chat-ui edits every argument as a string).
    """
    decisions = value.get("decisions", [value])
    if not isinstance(decisions, list) or len(decisions) != 1 or not isinstance(decisions[0], dict):
        raise ValueError(
            "decisions must be a list of exactly one decision (one web search request)"
        )
    decision = decisions[0]
    kind = decision.get("type")
    if kind not in HITL_DECISIONS:
        raise ValueError(f"decision type must be approve, edit or reject, got {kind!r}")
    if kind != "edit":
        return {"action": HITL_DECISIONS[kind]}
    action = decision.get("edited_action")
    args = action.get("args") if isinstance(action, dict) else None
    if not isinstance(args, dict) or "queries" not in args:
        raise ValueError("an edit decision needs edited_action.args.queries")
    return {"action": "edit", "queries": _queries_value(args["queries"])}


def _queries_value(queries: Any) -> Any:
    if not isinstance(queries, str):
        return queries
    try:
        parsed = json.loads(queries)
    except ValueError:
        parsed = None
    if isinstance(parsed, list):
        return parsed
    return [line for line in queries.splitlines() if line.strip()]


def _price(settings: WebSearchSettings, provider: str) -> tuple[float | None, str]:
    """The provider's price per query (None: unknown) and where it comes from."""
    env = f"{ENV_PRICE_PREFIX}{provider.upper()}"
    if provider in settings.prices:
        return settings.price(provider), f"price per query from {env}"
    if PROVIDERS[provider].price_usd > 0:
        return settings.price(provider), f"list price per query (estimate; set {env} to override)"
    return (
        None,
        f"{provider} has no known per-query price (self-hosted or free); set {env} to count one",
    )


def approval_request(
    settings: WebSearchSettings,
    queries: Sequence[str],
    *,
    hl: str | None = None,
    gl: str | None = None,
    num: int = 10,
    cache: SearchCache | None = None,
) -> dict[str, Any]:
    """What a person approves: queries, provider, price per query and estimated cost.

    ``hl``, ``gl`` and ``num`` are those of the coming search, so queries already in
    ``cache`` are recognised (they cost nothing). The estimate assumes the first provider
    of the failover chain answers. A provider without a known per-query price
    (self-hosted SearXNG, keyless ddgs, unless ``WEBSEARCH_PRICE_<NAME>`` is set) gets
    ``None`` for its price and cost, and ``price_note`` says so.
    """
    chain = settings.chain()
    if not chain:
        raise InputError(f"web search is not configured: {settings.missing_message()}")
    provider = chain[0]
    unique = list(dict.fromkeys(" ".join(q.split()) for q in queries if q.strip()))

    def is_cached(query: str) -> bool:
        try:
            params = build_params(query, hl=hl, gl=gl, num=num)
        except InputError:  # the search itself will report it
            return False
        return cache is not None and cache.get(cache_key(provider, params)) is not None

    cached = [q for q in unique if is_cached(q)]
    paid = len({normalize_query(q) for q in unique if q not in cached})
    price, note = _price(settings, provider)
    cost = None if price is None else round(price * paid, 6)
    shown = "unknown" if cost is None else f"USD {cost:g}"
    message = (
        f"Approve {len(unique)} web search(es) with {provider}? Estimated cost: {shown}. "
        "Resume with approve, edit (new queries) or skip."
    )
    return {
        "type": "web_search_approval",
        "message": message,
        "queries": unique,
        "provider": provider,
        "failover": list(chain[1:]),
        "price_per_query_usd": price,
        "estimated_cost_usd": cost,
        "cached_queries": cached,
        "price_note": note,
        "max_queries": MAX_EDITED_QUERIES,
        "resume": {
            "approve": {"action": "approve"},
            "edit": {"action": "edit", "queries": unique},
            "skip": {"action": "skip"},
        },
        **hitl_request(unique, message),
    }


def hitl_request(queries: list[str], message: str) -> dict[str, Any]:
    """The request in the human-in-the-loop schema agent-chat-ui's inbox renders (resumed
    with ``{"decisions": [...]}``, read by :class:`WebSearchDecision`)."""
    return {
        "action_requests": [
            {"name": HITL_ACTION, "args": {"queries": queries}, "description": message}
        ],
        "review_configs": [{"action_name": HITL_ACTION, "allowed_decisions": list(HITL_DECISIONS)}],
    }
