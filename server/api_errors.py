"""How the custom routes answer an exception: always ``{"error": message}``, a message
naming the problem in plain words, and never a path of the server's file system (the data
home's, Chroma's): the full detail goes to the server's log instead.
"""

from __future__ import annotations

import logging
import sqlite3

from python_multipart.exceptions import FormParserError
from starlette.responses import JSONResponse

from server.api_caller import Refused
from server.upload_stream import disk_error
from tools.errors import (
    ConfigError,
    FieldError,
    HybridRagError,
    InputError,
    StoreError,
    without_paths,
)

log = logging.getLogger("hybrid_rag.server")


def error(status: int, message: str) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=status)


def _logged(status: int, exc: BaseException, message: str) -> JSONResponse:
    log.warning("custom route answered %s: %s", status, exc)
    return error(status, without_paths(message))


def error_answer(exc: Exception) -> JSONResponse:
    """The JSON answer to ``exc`` raised by a route's handler (``documents_api.endpoint``)."""
    if isinstance(exc, Refused):
        return error(exc.status, exc.message)
    if isinstance(exc, FieldError):
        return error(422, str(exc))
    if isinstance(exc, InputError):
        return error(400, str(exc))
    if isinstance(exc, ConfigError | StoreError):
        return _logged(503, exc, f"knowledge base unavailable: {exc}")
    if isinstance(exc, HybridRagError):
        return _logged(500, exc, str(exc))
    if isinstance(exc, OSError | sqlite3.OperationalError):  # the data home: full disk, ...
        status, message = disk_error(exc)
        return _logged(status, exc, message)
    if isinstance(exc, FormParserError):  # python-multipart's codec and framing errors
        log.info("malformed multipart body: %s", exc)
        return error(400, "the multipart/form-data body is malformed: send each file as a part")
    if isinstance(exc, UnicodeError):
        log.info("undecodable request: %s", exc)
        return error(400, "the request holds text that is not valid UTF-8 / Unicode")
    log.exception("custom route failed", exc_info=exc)
    return error(500, "the server failed on this request (its log has the detail)")
