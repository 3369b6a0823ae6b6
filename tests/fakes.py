"""Deterministic stand-ins for unit tests (never used by the product)."""

from __future__ import annotations

import argparse
import hashlib
import json
import re
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from langchain_core.embeddings import Embeddings

from prompts.answer import SUFFICIENCY_SYSTEM_EN, SUFFICIENCY_SYSTEM_ZH
from tools.kb.embed.embeddings import EmbeddingModel
from tools.kb.index.tokenizers import make_tokenizer
from tools.kb.knowledge_base import KnowledgeBase


class HashEmbeddings(Embeddings):
    """Bag of hashed words and character bigrams, L2-normalised: similar texts, similar vectors."""

    def __init__(self, dim: int = 256) -> None:
        self.dim = dim
        self.calls = 0
        self.texts_embedded = 0
        self.query_calls = 0  # embed_query + embed_queries calls (one per batch)
        self.queries: list[str] = []  # every text embedded as a query, in order
        self._tok = make_tokenizer("bigram")

    def _vector(self, text: str) -> list[float]:
        vec = np.zeros(self.dim, dtype=np.float64)
        for token in self._tok(text):
            h = int.from_bytes(hashlib.md5(token.encode()).digest()[:4], "little")
            vec[h % self.dim] += 1.0
        norm = np.linalg.norm(vec)
        if norm == 0:
            vec[0] = 1.0
            norm = 1.0
        return (vec / norm).tolist()

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        self.calls += 1
        self.texts_embedded += len(texts)
        return [self._vector(t) for t in texts]

    def embed_query(self, text: str) -> list[float]:
        self.query_calls += 1
        self.queries.append(text)
        return self._vector(text)

    def embed_queries(self, texts: list[str]) -> list[list[float]]:
        self.query_calls += 1
        self.queries.extend(texts)
        return [self._vector(t) for t in texts]


def hash_model(dim: int = 256, model_id: str | None = None) -> EmbeddingModel:
    emb = HashEmbeddings(dim)
    return EmbeddingModel(
        embeddings=emb,
        model_id=model_id or f"test-hash-{dim}",
        similarity_floor=0.0,
        _dimension=dim,
    )


# --- the CLI's knowledge base ------------------------------------------------------------


def use_kb_in_cli(
    monkeypatch: pytest.MonkeyPatch, open_kb: Callable[[argparse.Namespace], KnowledgeBase]
) -> None:
    """The CLI's KB commands open ``open_kb(args)`` for this test.

    Patched only where the name is looked up, with that module imported first:
    ``cli.kb_commands`` binds ``open_kb`` from ``cli.common`` when it is first imported, so
    patching ``cli.common`` first and then naming ``"cli.kb_commands.open_kb"`` imported it
    with the fake bound; monkeypatch took the fake for the original and "restored" it, and
    every later CLI call of the process ignored ``--embedding`` (tests/test_errors_not_
    tracebacks.py::test_a_patched_cli_kb_is_undone_for_the_next_call).
    """
    import cli.kb_commands

    monkeypatch.setattr(cli.kb_commands, "open_kb", open_kb)


def hash_kb_cli(monkeypatch: pytest.MonkeyPatch) -> None:
    """``use_kb_in_cli`` with a fresh KB at the command's ``--home`` on ``hash_model``."""
    from cli import common

    use_kb_in_cli(
        monkeypatch,
        lambda args: KnowledgeBase(common.kb_config(args), embedding_model=hash_model()),
    )


# --- scripted chat model ---------------------------------------------------------------


from langchain_core.callbacks import CallbackManagerForLLMRun  # noqa: E402
from langchain_core.language_models import BaseChatModel  # noqa: E402
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage  # noqa: E402
from langchain_core.outputs import ChatGeneration, ChatResult  # noqa: E402
from langchain_core.runnables import RunnableLambda  # noqa: E402
from pydantic import Field  # noqa: E402


def is_sufficiency_check(messages: Any) -> bool:
    """Whether a call (messages, or an OpenAI request's message dicts) is the model's
    sufficiency check (``nodes.sufficiency_check``): its system prompt is the check's."""
    first = messages[0] if messages else None
    text = str(first.get("content") if isinstance(first, dict) else getattr(first, "content", ""))
    return text in (SUFFICIENCY_SYSTEM_EN, SUFFICIENCY_SYSTEM_ZH)


class ScriptedChatModel(BaseChatModel):
    """Answers from a script: structured outputs per schema name, and an answer function.

    ``structured["Plan"] = [obj_or_dict, ...]`` is consumed in order (the last item
    repeats); the item ``"unparseable"`` raises as a broken model output would, and a
    callable item is called with the messages (see :func:`grade_every`).
    ``answer(messages) -> str`` produces the free-text answer. Every call is recorded.
    """

    structured: dict[str, list[Any]] = Field(default_factory=dict)
    answer: Callable[[list[BaseMessage]], str] = lambda messages: "scripted answer"
    calls: list[tuple[str, Any]] = Field(default_factory=list)
    # The sufficiency check's reply (nodes.sufficiency_check), recorded as ("sufficiency", ...).
    sufficient: str = "yes"

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        if is_sufficiency_check(messages):
            self.calls.append(("sufficiency", messages))
            return ChatResult(generations=[ChatGeneration(message=AIMessage(self.sufficient))])
        self.calls.append(("answer", messages))
        return ChatResult(generations=[ChatGeneration(message=AIMessage(self.answer(messages)))])

    def with_structured_output(self, schema: Any, **kwargs: Any) -> Any:  # type: ignore[override]
        """Like a real model: the scripted object is *generated* (a chat-model run, so it
        emits the callbacks LangGraph's messages stream listens to) as JSON, then parsed."""
        name = schema.__name__

        def pick(messages: Any) -> list[BaseMessage]:
            self.calls.append((name, messages))
            script = self.structured.get(name)
            if not script:
                raise ValueError(f"no script for {name}")
            item = script.pop(0) if len(script) > 1 else script[0]
            if callable(item):
                item = item(messages)
            if hasattr(item, "model_dump"):
                item = item.model_dump()
            text = "not json" if item == "unparseable" else json.dumps(item)
            return [HumanMessage(text)]

        def parse(message: BaseMessage) -> Any:
            try:
                data = json.loads(str(message.content))
            except json.JSONDecodeError as exc:
                raise ValueError("could not parse model output") from exc
            return schema.model_validate(data)

        return RunnableLambda(pick) | _EchoChatModel() | RunnableLambda(parse)


def passages_in(messages: Any) -> int:
    """How many passages a listwise grading prompt carries (fenced ``<source label="Passage
    1">`` blocks)."""
    last = messages[-1] if isinstance(messages, list) else messages.to_messages()[-1]
    return len(re.findall(r'^<source label="Passage \d+">', str(last.content), flags=re.M))


def grade_every(grade: str) -> Callable[[Any], dict[str, Any]]:
    """A ``PassageGrades`` script item: ``grade`` for every passage the prompt carries."""
    return lambda messages: {"grades": [grade] * passages_in(messages)}


class _EchoChatModel(BaseChatModel):
    """Replies with the text of the last message it is given (the structured turn)."""

    @property
    def _llm_type(self) -> str:
        return "echo"

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        text = str(messages[-1].content)
        return ChatResult(generations=[ChatGeneration(message=AIMessage(text))])
