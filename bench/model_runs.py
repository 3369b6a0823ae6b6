"""One question through a graph with its model calls metered: calls, ``max_tokens``, the
tokens the server reports, wall time, citations, and whether the answer is right (shared
by ``bench.bench_model_mode``, ``bench.model_mode_sets`` and tests/test_real_model.py)."""

from __future__ import annotations

import asyncio
import re
import time
from typing import Any

from langchain_core.callbacks import BaseCallbackHandler

from graph import Context
from graph.agent.tool_outcomes import call_key
from tools.policy.refusal import is_refusal

# The settings docs/DEPLOYMENT.md section 7 gives for a 0.5-3B model on a CPU (measured
# with Qwen2.5-Coder-1.5B-Instruct Q4_K_M on two cores): the same for every data set.
SMALL_LOCAL_MODEL: dict[str, Any] = {
    "small_model": True,
    "top_k_internal": 3,
    "answer_source_chars": 800,
    # Answers are a sentence or two; on a loaded CPU each token costs 1-3 s, and a small
    # model that echoes its prompt wrote 172 tokens (520 s) where 8 answered.
    "max_output_tokens": 160,
    "run_timeout_s": 600.0,
}
# One request's limit for such a model (HYBRID_RAG_MODEL_TIMEOUT): a 1,000-token prompt
# took 60-100 s on a loaded 2-core machine.
SMALL_LOCAL_MODEL_TIMEOUT_S = "300"


class CallMeter(BaseCallbackHandler):
    """Counts the chat-model calls a run makes (a call cut off by a timeout included),
    their ``max_tokens`` and the tokens the server reports."""

    def __init__(self) -> None:
        self.calls = 0
        self.limits: list[int | None] = []
        self.tokens_in = 0
        self.tokens_out = 0

    def on_chat_model_start(self, serialized: Any, messages: Any, **kwargs: Any) -> None:
        self.calls += 1
        params = kwargs.get("invocation_params") or {}
        limit = params.get("max_tokens", params.get("max_completion_tokens"))
        self.limits.append(int(limit) if limit is not None else None)

    def on_llm_end(self, response: Any, **kwargs: Any) -> None:
        for generations in response.generations:
            for gen in generations:
                usage = getattr(getattr(gen, "message", None), "usage_metadata", None) or {}
                self.tokens_in += int(usage.get("input_tokens") or 0)
                self.tokens_out += int(usage.get("output_tokens") or 0)


# An expected answer of more words is a sentence (CRAG's "rory mcilroy has never won the
# masters tournament, despite …"): no answer repeats it, and its words alone cannot tell
# "has never won" from "has won": it is left to a reader (``right`` None).
MAX_GOLD_WORDS = 8


def normalised(text: str) -> str:
    """For "is the expected answer in it": case, spaces and thousands commas dropped."""
    return re.sub(r"[\s,，]", "", text).casefold()


def _plain(text: str) -> str:
    """Case folded, thousands commas and repeated spaces dropped ("1,000  KM": "1000 km")."""
    return " ".join(re.sub(r"(?<=\d)[,，](?=\d)", "", text).casefold().split())


def states(answer: str, expected: str) -> bool:
    """Whether ``answer`` states ``expected``: Chinese as a substring; anything else not
    inside a longer Latin word or number (CRAG's "en" is not in "often", "650" is in
    "每晚650元"), or, from 4 characters, with spaces dropped."""
    amount = re.fullmatch(r"\s*([\d.,]+)\s*元\s*", expected)
    if amount:  # "120元" is "120 yuan", "CNY 120", "RMB 120" in an English answer
        number = re.escape(_plain(amount.group(1)))
        said = _plain(answer)
        yuan = rf"(?<![\d.]){number}\s*(?:元|yuan|cny|rmb)|(?:cny|rmb|¥)\s*{number}(?![\d])"
        return re.search(yuan, said) is not None
    if re.search(r"[\u3400-\u9fff]", expected):
        return normalised(expected) in normalised(answer)
    pattern = rf"(?<![a-z0-9]){re.escape(_plain(expected))}(?![a-z0-9])"
    if _plain(expected) and re.search(pattern, _plain(answer)):
        return True
    # From 4 characters, spaces aside too ("55 °C" in "above 55°C").
    return len(normalised(expected)) >= 4 and normalised(expected) in normalised(answer)


def gradable(expected: list[str]) -> bool:
    """Whether a short expected answer is among ``expected`` (see ``MAX_GOLD_WORDS``)."""
    return any(e.strip() and len(e.split()) <= MAX_GOLD_WORDS for e in expected)


def is_right(answer: str, expected: list[str]) -> bool:
    """Any expected answer (or alternative) in the answer, and the answer no refusal."""
    return not is_refusal(answer) and any(states(answer, e) for e in expected if e.strip())


async def _final_state(graph: Any, question: str, ctx: Context, meter: CallMeter) -> dict[str, Any]:
    """The run's whole last state: ``ainvoke`` returns the output schema only, which
    leaves out ``answer_draft`` (the model's reply before the checks), and the figures
    "without the check" read it."""
    last: dict[str, Any] = {}
    stream = graph.astream(
        {"question": question}, context=ctx, config={"callbacks": [meter]}, stream_mode="values"
    )
    async for values in stream:
        last = values
    return last


def run_question(
    graph: Any, question: str, ctx: Context, expected: list[str] | None = None
) -> dict[str, Any]:
    """One question through ``graph``: the row the bench reports (and the test tier
    checks); ``right`` when ``expected`` answers are given."""
    meter = CallMeter()
    started = time.perf_counter()
    out = asyncio.run(_final_state(graph, question, ctx, meter))
    keys = [call_key(c) for c in out.get("tool_calls") or []]
    warned = " ".join(out.get("warnings") or [])
    draft = str(out.get("answer_draft") or "")
    return {
        "question": question,
        "model_calls": meter.calls,
        "reported_model_calls": out.get("model_calls"),
        "tokens_in": meter.tokens_in,
        "tokens_out": meter.tokens_out,
        "max_tokens": sorted({m for m in meter.limits if m is not None}),
        "unbounded_calls": sum(1 for m in meter.limits if m is None or m > ctx.max_output_tokens),
        "wall_s": round(time.perf_counter() - started, 2),
        "refused": is_refusal(out["answer"]),
        "right": is_right(out["answer"], expected) if expected and gradable(expected) else None,
        "deadline_hit": "deadline" in " ".join(out.get("warnings") or []) + out["answer"],
        "citation_validity": out.get("citation_validity"),
        "repeated_tool_calls": len(keys) - len(set(keys)),
        "warnings": out.get("warnings") or [],
        "answer": out["answer"],
        # What the model wrote, and whether its sufficiency check (nodes.sufficiency_check)
        # refused it: the figures without the check are read from the same run.
        "draft": draft,
        "draft_right": is_right(draft, expected)
        if expected and draft and gradable(expected)
        else None,
        "check_refused": "the model judged that no source states the answer" in warned,
    }
