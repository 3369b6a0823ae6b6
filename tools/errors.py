"""The project's exception hierarchy.

Every error a user can cause or meet is one of these, with a message that names
the problem (the field, path, host or model) and never contains a secret.
"""

from __future__ import annotations

import re

# scheme://user:password@ (the password up to the last "@" of the word, so one holding an
# unescaped "@" or "/" goes whole) and a ``password=`` parameter: what a URL quoted in an
# error may carry. (``http://host:80/a@b`` loses its port and path too: safe.)
_URL_PASSWORD = re.compile(r"(?i)(\b[a-z][a-z0-9+.-]*://[^/\s:@\"']*):[^\s\"']*@")
_PASSWORD_PARAM = re.compile(r"(?i)(\bpassword=)[^&\s\"']*")


def redact_credentials(text: str) -> str:
    """``text`` with the password of every URL in it (and ``password=`` parameters) as
    ``***``: every error that quotes a URL goes through this."""
    return _PASSWORD_PARAM.sub(r"\1***", _URL_PASSWORD.sub(r"\1:***@", text))


class HybridRagError(Exception):
    """Base class of every error this project raises on purpose."""


class ConfigError(HybridRagError, ValueError):
    """A configuration value is missing, malformed or out of range."""


class InputError(HybridRagError, ValueError):
    """User input (a question, a query, a path) is unusable."""


class FieldError(InputError):
    """One field of a request's body is unusable (too long, too many items, not text): the
    HTTP API answers 422 naming the field."""


class StoreError(HybridRagError):
    """The vector store cannot be reached or refused an operation."""


class EmbeddingMismatchError(StoreError):
    """A collection was built with one embedding model and opened with another."""


class EmbeddingError(HybridRagError):
    """A remote embedding endpoint failed or did not answer in time."""


class CheckpointError(HybridRagError):
    """The checkpoint database (conversation threads) cannot be reached or refused an
    operation; the message names its host, never its password."""


class ConcurrentTurnError(CheckpointError):
    """Another run wrote to the same conversation thread while this one was running: this
    run stopped before saving anything (saving would have dropped the other turn)."""


# An absolute path of two or more parts, not part of a URL ("https://h/x") or a scope
# ("folder:/hr/"): what an error quotes of the data home.
_PATH = re.compile(r"(?<![\w:/.~-])/[\w.~-]+(?:/[\w.~-]*)+")


def without_paths(text: str) -> str:
    """``text`` with every file-system path in it as ``<server path>``: what an API user
    reads (an error of a route, a run's warning) never shows where the server keeps data."""
    return _PATH.sub("<server path>", text)


def kb_unavailable(exc: Exception) -> str:
    """The one wording of "the knowledge base failed" in warnings, whichever step (the
    router's probe, a retrieval round, the agent's tool) met it, so a run repeating it
    gives it once (``run.reducers.add_warnings``). Without paths: a served run's answer
    is read by its API user (``hybrid-rag kb stats`` names the store)."""
    text = without_paths(str(exc))
    prefix = "knowledge base unavailable: "
    return text if text.startswith(prefix) else prefix + text  # a damaged store says it
