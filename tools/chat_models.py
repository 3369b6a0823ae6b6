"""Model specs (``"provider:model"``, ``auto``, ``offline``) checked without building
anything, and the registry of model objects plugged in as ``custom:<name>``.

Plain Python (no LangGraph), so the run configuration (``run.context``) can check a
spec without importing ``nodes``; ``run.models`` builds the models.
"""

from __future__ import annotations

import importlib.util
import threading

from langchain_core.language_models import BaseChatModel

from tools.errors import ConfigError

AUTO_MODEL = "openai:gpt-4o-mini"
OFFLINE = "offline"

_lock = threading.Lock()
_custom: dict[str, BaseChatModel] = {}


def register_chat_model(name: str, model: BaseChatModel) -> None:
    """Plug a model object in under ``custom:<name>`` (tests, applications)."""
    with _lock:
        _custom[name] = model


def unregister_chat_model(name: str) -> None:
    with _lock:
        _custom.pop(name, None)


def custom_chat_model(name: str) -> BaseChatModel:
    """The model registered under ``custom:<name>``."""
    with _lock:
        if name not in _custom:
            raise ConfigError(f"no custom model registered under {name!r}")
        return _custom[name]


def validate_model_spec(field: str, spec: str) -> None:
    """Fail at configuration time for a model that cannot be built (no call is made)."""
    provider, _, name = spec.partition(":")
    if spec in ("auto", OFFLINE) or provider == "openai":
        return
    if provider == "custom":
        with _lock:
            if name not in _custom:
                raise ConfigError(f"{field}: no custom model registered under {name!r}")
        return
    if importlib.util.find_spec(f"langchain_{provider.replace('-', '_')}") is None:
        raise ConfigError(
            f"{field} {spec!r}: provider {provider!r} needs its LangChain integration "
            f"(pip install langchain-{provider}); installed: openai"
        )
