"""Browser sessions kept server-side: a SQLite file in the data home, shared by every
process (and replica) that shares the home.

A session id is a random 256-bit value the browser holds in an HttpOnly cookie; the file
stores only its SHA-256, so whoever reads the file cannot sign in as anyone. A session
ends at ``idle_s`` without a request, at ``absolute_s`` after its sign-in, or when it is
ended (sign-out). Each session records the ``stamp`` of the user's credentials at sign-in
(``tools.access.users.User.stamp``): the server refuses a session whose user is disabled,
removed or has a new token or password since, at the next request (``server/credentials.py``).

The same file holds what an OpenID Connect sign-in started (state, nonce, PKCE verifier),
each kept ``PENDING_S`` and usable once.
"""

from __future__ import annotations

import hashlib
import os
import secrets
import sqlite3
import time
from collections.abc import Callable, Iterator
from contextlib import closing, contextmanager
from dataclasses import dataclass
from pathlib import Path

from tools.errors import ConfigError

IDLE_ENV = "HYBRID_RAG_SESSION_IDLE_S"
ABSOLUTE_ENV = "HYBRID_RAG_SESSION_ABSOLUTE_S"
DEFAULT_IDLE_S = 8 * 3600.0  # a working day without a request signs out
DEFAULT_ABSOLUTE_S = 7 * 86400.0  # a week after signing in, sign in again
TOUCH_EVERY_S = 60.0  # "last seen" is written at most once a minute per session
MAX_PER_USER = 50  # sessions one user keeps; the oldest end first (bounded table)
PENDING_S = 600.0  # an OpenID Connect sign-in not finished within 10 minutes is void
SQLITE_TIMEOUT_S = 10.0
SCHEMA = """
CREATE TABLE IF NOT EXISTS sessions (
    id_sha256 TEXT PRIMARY KEY, identity TEXT NOT NULL, stamp TEXT NOT NULL,
    created REAL NOT NULL, seen REAL NOT NULL);
CREATE INDEX IF NOT EXISTS sessions_identity ON sessions (identity, created);
CREATE TABLE IF NOT EXISTS pending (
    state_sha256 TEXT PRIMARY KEY, nonce TEXT NOT NULL, verifier TEXT NOT NULL,
    created REAL NOT NULL);
"""


@dataclass(frozen=True)
class Session:
    identity: str
    stamp: str
    created: float
    seen: float


def digest(secret: str) -> str:
    return hashlib.sha256(secret.encode("utf-8")).hexdigest()


def limits_from_env(env: dict[str, str] | None = None) -> tuple[float, float]:
    """``(idle_s, absolute_s)`` from the environment, or ``ConfigError`` naming the bad one."""
    env = dict(os.environ) if env is None else env
    values = []
    for name, default in ((IDLE_ENV, DEFAULT_IDLE_S), (ABSOLUTE_ENV, DEFAULT_ABSOLUTE_S)):
        raw = env.get(name, "").strip()
        try:
            value = float(raw) if raw else default
        except ValueError:
            raise ConfigError(f"{name} must be a number of seconds, not {raw!r}") from None
        if not 60 <= value <= 366 * 86400:
            raise ConfigError(f"{name} must be between 60 seconds and a year, not {raw}")
        values.append(value)
    return values[0], values[1]


class SessionStore:
    """The sessions of ``path`` (created on first use); safe across threads and processes
    (one SQLite connection per call, WAL journal)."""

    def __init__(
        self,
        path: Path,
        idle_s: float = DEFAULT_IDLE_S,
        absolute_s: float = DEFAULT_ABSOLUTE_S,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.path = path
        self.idle_s = idle_s
        self.absolute_s = absolute_s
        self._clock = clock
        self._ready = False

    @contextmanager
    def _db(self) -> Iterator[sqlite3.Connection]:
        try:
            with closing(sqlite3.connect(self.path, timeout=SQLITE_TIMEOUT_S)) as db, db:
                if not self._ready:
                    db.execute("PRAGMA journal_mode=WAL")
                    db.executescript(SCHEMA)
                    self._ready = True
                yield db
        except sqlite3.Error as exc:
            raise ConfigError(f"sessions file {self.path} unavailable: {exc}") from None

    def create(self, identity: str, stamp: str) -> str:
        """A new session of ``identity``; returns its id (stored only as its hash)."""
        session_id = secrets.token_urlsafe(32)
        now = self._clock()
        with self._db() as db:
            self._purge(db, now)
            db.execute(
                "INSERT INTO sessions VALUES (?, ?, ?, ?, ?)",
                (digest(session_id), identity, stamp, now, now),
            )
            db.execute(
                "DELETE FROM sessions WHERE identity = ? AND id_sha256 NOT IN (SELECT id_sha256"
                " FROM sessions WHERE identity = ? ORDER BY created DESC LIMIT ?)",
                (identity, identity, MAX_PER_USER),
            )
        return session_id

    def get(self, session_id: str) -> Session | None:
        """The live session of this id, or None (unknown, expired: an expired one is
        deleted)."""
        if not session_id or len(session_id) > 200:
            return None
        key, now = digest(session_id), self._clock()
        with self._db() as db:
            row = db.execute(
                "SELECT identity, stamp, created, seen FROM sessions WHERE id_sha256 = ?", (key,)
            ).fetchone()
            if row is None:
                return None
            session = Session(*row)
            if now - session.seen >= self.idle_s or now - session.created >= self.absolute_s:
                db.execute("DELETE FROM sessions WHERE id_sha256 = ?", (key,))
                return None
            if now - session.seen > TOUCH_EVERY_S:
                db.execute("UPDATE sessions SET seen = ? WHERE id_sha256 = ?", (now, key))
        return session

    def end(self, session_id: str) -> None:
        with self._db() as db:
            db.execute("DELETE FROM sessions WHERE id_sha256 = ?", (digest(session_id),))

    def _purge(self, db: sqlite3.Connection, now: float) -> None:
        db.execute(
            "DELETE FROM sessions WHERE seen < ? OR created < ?",
            (now - self.idle_s, now - self.absolute_s),
        )
        db.execute("DELETE FROM pending WHERE created < ?", (now - PENDING_S,))

    def begin_pending(self, state: str, nonce: str, verifier: str) -> None:
        """Remember an OpenID Connect sign-in started with ``state``."""
        now = self._clock()
        with self._db() as db:
            self._purge(db, now)
            db.execute(
                "INSERT INTO pending VALUES (?, ?, ?, ?)", (digest(state), nonce, verifier, now)
            )

    def take_pending(self, state: str) -> tuple[str, str] | None:
        """``(nonce, verifier)`` of the sign-in started with ``state``, once; None when
        unknown, used or older than ``PENDING_S``."""
        key, now = digest(state), self._clock()
        with self._db() as db:
            row = db.execute(
                "SELECT nonce, verifier, created FROM pending WHERE state_sha256 = ?", (key,)
            ).fetchone()
            db.execute("DELETE FROM pending WHERE state_sha256 = ?", (key,))
        if row is None or now - row[2] > PENDING_S:
            return None
        return row[0], row[1]
