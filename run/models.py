"""Chat models from ``"provider:model"`` strings, built lazily, plus offline resolution.

``auto`` resolves at run time: ``openai:gpt-4o-mini`` when ``OPENAI_API_KEY`` or
``OPENAI_BASE_URL`` is set (an OpenAI-compatible server such as Ollama, vLLM or
llama.cpp then works through the base URL), otherwise ``offline``. Every provider
is built by LangChain's ``init_chat_model`` (``openai`` is installed; another needs
its integration, e.g. ``pip install langchain-anthropic``). Tests and applications
can plug their own model object in with :func:`register_chat_model` and name it
``custom:<name>``.
"""

from __future__ import annotations

import asyncio
import hashlib
import threading
import weakref
from typing import TYPE_CHECKING, Any

from langchain_core.language_models import BaseChatModel
from langchain_core.runnables import RunnableConfig
from langgraph.constants import TAG_NOSTREAM

from run.run_settings import ModelEnv
from tools.chat_models import (  # noqa: F401  (register_* re-exported for callers)
    AUTO_MODEL,
    OFFLINE,
    custom_chat_model,
    register_chat_model,
    unregister_chat_model,
    validate_model_spec,
)
from tools.errors import ConfigError

if TYPE_CHECKING:
    from run.context import Context

# A hung endpoint costs at most (1 + MAX_RETRIES) x HYBRID_RAG_MODEL_TIMEOUT per call; every
# model step falls back to its offline rule, so a run still answers (with a warning).
MAX_RETRIES = 1
# Internal calls (router, rewriter, grader, reflection, translation) carry LangGraph's
# "nostream" tag so they stay out of the "messages" stream: only the answer streams.
# (The former "langsmith:nostream" tag is not honoured by LangGraph 1.x.)
NOSTREAM = RunnableConfig(tags=[TAG_NOSTREAM])

# OpenAI's own API (a base URL naming it is not "a local compatible server").
OPENAI_HOST = "api.openai.com"

_lock = threading.Lock()


class _NoLoop:
    """Stands for "no running event loop" as a weak-referenceable cache key."""


_NO_LOOP = _NoLoop()
# Per event loop: a client's pooled keep-alive connections belong to the loop that opened
# them, so a model built under one asyncio.run() fails ("Event loop is closed") in the next.
_built: weakref.WeakKeyDictionary[Any, dict[tuple[str, str, str, str], BaseChatModel]] = (
    weakref.WeakKeyDictionary()
)


def _loop() -> Any:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return _NO_LOOP


def resolve_model_spec(
    spec: str, *, fallback: str | None = None, env: ModelEnv | None = None
) -> str:
    """Turn ``auto`` into a concrete spec or ``offline``, by the run's model environment
    (``env``; read now when not given, for callers outside a run)."""
    spec = spec.strip()
    if spec == "auto":
        if fallback and fallback != "auto":
            return resolve_model_spec(fallback, env=env)
        env = env or ModelEnv.read()
        return AUTO_MODEL if env.api_key or env.base_url else OFFLINE
    return spec


def load_chat_model(spec: str, env: ModelEnv | None = None) -> BaseChatModel:
    """Build (once) the chat model named by a resolved spec, with the run's model
    environment (``env``; read now when not given, for callers outside a run)."""
    provider, _, name = spec.partition(":")
    if provider == "custom":
        return custom_chat_model(name)
    env = env or ModelEnv.read()
    if env.problem is not None:
        raise env.problem
    # Everything that changes the client is part of the key: a new base URL or key in
    # the environment must not be served the client built for the old one.
    key = (spec, env.base_url, _fingerprint(env.api_key), f"{env.timeout}/{env.max_tokens}")
    loop = _loop()
    with _lock:
        built = _built.setdefault(loop, {})
        if key in built:
            return built[key]
    from langchain.chat_models import init_chat_model

    kwargs: dict[str, Any] = {
        "temperature": 0,
        "max_retries": MAX_RETRIES,
        "timeout": env.timeout,
        # Every call is bounded in tokens too (Context.max_output_tokens): a model that
        # never stops would otherwise write until the timeout.
        "max_tokens": env.max_tokens,
    }
    if provider == "openai":
        import openai  # lazily, like the model itself

        # A Timeout object (unhashable) makes langchain-openai build this model its own
        # async HTTP client instead of sharing a process-wide one across event loops.
        # openai's own class: openai 3.63 moved to httpx2 and rejects httpx.Timeout.
        kwargs["timeout"] = openai.Timeout(env.timeout)
        if env.base_url:
            kwargs["base_url"] = env.base_url
            if OPENAI_HOST not in env.base_url:
                # LangChain sends the bound as max_completion_tokens, which llama.cpp's
                # server ignored before 2026 and llama-cpp-python still ignores: a local
                # compatible server also gets the older max_tokens (OpenAI's own API
                # rejects it for reasoning models, so it gets only the new name).
                kwargs["extra_body"] = {"max_tokens": env.max_tokens}
        kwargs["api_key"] = env.api_key or "not-needed"  # local compatible servers ignore it
    try:
        model: BaseChatModel = init_chat_model(spec, **kwargs)
    except Exception as exc:  # missing integration or key: a configuration problem
        raise ConfigError(f"cannot build model {spec!r}: {type(exc).__name__}: {exc}") from exc
    with _lock:
        built[key] = model
    return model


def _fingerprint(value: str) -> str:
    """A short hash of a secret: tells keys apart without keeping one in a dict key."""
    return hashlib.sha256(value.encode()).hexdigest()[:12] if value else ""


def effective_reranker(ctx: Context, mode: str | None) -> str:
    """The reranker of the run, both graphs (the state graph's ``rerank``, the agent's
    ``internal_search``): ``auto`` is ``lexical`` offline (it raised nDCG@10 on every dev
    set, bench/README.md) and ``none`` with a model, whose own grading and answer already
    read the passages. ``mode`` is the run's resolved answering model (``State.mode``;
    None: offline)."""
    if ctx.reranker != "auto":
        return str(ctx.reranker)
    return "lexical" if (mode or OFFLINE) == OFFLINE else "none"
