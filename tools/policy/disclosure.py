"""What a user is told about the server's own configuration (issues 45 and 56): a web
search that is not set up says so plainly, "web search is not set up — ask your
administrator", on the page and on the command line alike. The detail that fixes it
(environment variable names, a ``pip install``) is never in an answer or its notes, for
anyone: it goes to the log and to ``hybrid-rag doctor`` (cli/doctor_command.py), where the
person who sets the server up looks. A setting a run's caller chose ("web search is
disabled (search_provider=none)") stays readable to the operator (an admin, or local
use), who can change it. Said once, in the answer's note, never again under its notes.
A knowledge base nothing was ingested into is the same kind of set-up: a colleague reads
"the knowledge base has no documents yet — ask your administrator", the operator the
command that fills it. Both graphs and every front-end call these."""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence

log = logging.getLogger("hybrid_rag.websearch")
kb_log = logging.getLogger("hybrid_rag.kb")

WEB_NOT_AVAILABLE = "web search is not set up — ask your administrator"
KB_EMPTY = "the knowledge base has no documents yet — ask your administrator"
# What a search of a collection with no chunks in it says (tools.answer.search_service),
# for the operator, who can fill it.
KB_EMPTY_DETAIL = "the knowledge base is empty: run 'hybrid-rag ingest PATH'"
# tools.kb.store.protocol.no_collection's wording, as tools.errors.kb_unavailable gives it;
# either after "internal_search: " in the agent's notes.
_NO_COLLECTION = re.compile(
    r"^(?:\w+: )?knowledge base unavailable: no knowledge base \(collection\) "
)
_EMPTY = re.compile(rf"^(?:\w+: )?{re.escape(KB_EMPTY_DETAIL)}$")
_INGEST_HINT = re.compile(r"\. 'hybrid-rag ingest [^']*' creates it$")
# A reason that tells how to set the server up: its environment or its installation.
_SETUP = re.compile(
    r"not configured|pip install|package is not installed"
    r"|\b[A-Z][A-Z0-9]*_(?:API_KEY|BASE_URL|KEY|TOKEN)\b"
)
# A reason that names a setting of the run (for the operator, who may change it).
_CONFIGURATION = re.compile(r"search_provider=")


def names_setup(reason: str) -> bool:
    """Whether ``reason`` tells how to set the server up (the log's and doctor's)."""
    return bool(_SETUP.search(reason))


def names_configuration(reason: str) -> bool:
    """Whether ``reason`` tells how the server is set up (for its operator only)."""
    return names_setup(reason) or bool(_CONFIGURATION.search(reason))


def _plain(reason: str) -> str:
    # The admin's detail, not the user's: INFO (the CLI prints it with --verbose only).
    log.info("%s (hybrid-rag doctor says what to set)", reason)
    return WEB_NOT_AVAILABLE


def web_reason_for(reason: str, *, operator: bool) -> str:
    """``reason`` (why the web was not searched) as this user reads it: how to set the
    server up, for nobody (the log has it); a run's setting, for the operator; anything
    else (a provider's failure) as it is."""
    if names_setup(reason):
        return _plain(reason)
    if operator or not names_configuration(reason):
        return reason
    return WEB_NOT_AVAILABLE


def kb_reason_for(warning: str, *, operator: bool) -> str:
    """A missing knowledge base as this user reads it: the operator, the command that
    creates it; anyone else, that it is empty (the administrator's to fill), or, when the
    run asked for a collection that does not exist, the ones that do (a choice of theirs)."""
    if operator or not (_NO_COLLECTION.match(warning) or _EMPTY.match(warning)):
        return warning
    kb_log.info("%s", warning)  # the operator's detail: the log has it
    if "; nothing ingested yet" in warning or _EMPTY.match(warning):
        return KB_EMPTY
    return _INGEST_HINT.sub(".", warning)


def shown_warnings(warnings: Sequence[str], noted: str | None, *, operator: bool) -> list[str]:
    """The run's notes as this user reads them: none repeating ``noted`` (the web failure
    the answer's note already states), none with the set-up's detail (said once, plainly,
    instead), none with a run's setting for anyone but the operator."""
    shown: list[str] = []
    for given in warnings:
        warning = kb_reason_for(given, operator=operator)
        if noted and (noted in warning or (names_setup(noted) and names_setup(warning))):
            continue
        said = warning if not names_configuration(warning) else None
        if said is None:
            said = warning if operator and not names_setup(warning) else WEB_NOT_AVAILABLE
        if said not in shown:
            shown.append(said)
    return shown
