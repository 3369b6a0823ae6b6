"""Single sign-on with OpenID Connect: the authorization code flow with PKCE (S256),
``state`` and ``nonce`` (docs/DEPLOYMENT.md, "Single sign-on").

* ``GET /auth/oidc/login``: a fresh state, nonce and PKCE verifier, kept server-side in the
  sessions file (``tools.access.sessions``: usable once, for 10 minutes) and the state
  also in a short-lived HttpOnly cookie that binds the sign-in to this browser; then a
  redirect to the provider's authorization endpoint.
* ``GET /auth/oidc/callback``: the state must be this browser's and still pending; the
  code is exchanged (with the verifier and the client secret) at the token endpoint; the
  ID token's signature (the provider's published keys), issuer, audience, expiry and
  nonce are verified (``verify_id_token``, joserfc); the user is written to the users
  file (``tools.access.sso_users``) and the browser gets a session, back on the page.

The provider's metadata comes from ``<issuer>/.well-known/openid-configuration``, fetched
on the first sign-in (never at import), with a timeout, and kept ``METADATA_TTL_S``; its
keys are fetched again once when a token names a key they lack (a rotation).
"""

from __future__ import annotations

import asyncio
import hmac
import os
import secrets
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
from authlib.integrations.httpx_client import AsyncOAuth2Client
from joserfc import jwt
from joserfc.errors import JoseError
from joserfc.jwk import KeySet
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import BaseRoute, Route

from server.api_caller import Refused
from server.credentials import is_https, sessions, start_session
from tools.access.sso_users import SsoRefused, sign_in_sso, valid_groups
from tools.access.users import USERS_FILE_ENV, User
from tools.errors import ConfigError

ISSUER_ENV = "HYBRID_RAG_OIDC_ISSUER"
CLIENT_ID_ENV = "HYBRID_RAG_OIDC_CLIENT_ID"
CLIENT_SECRET_ENV = "HYBRID_RAG_OIDC_CLIENT_SECRET"
GROUPS_CLAIM_ENV = "HYBRID_RAG_OIDC_GROUPS_CLAIM"
ADMIN_GROUP_ENV = "HYBRID_RAG_OIDC_ADMIN_GROUP"
CREATE_USERS_ENV = "HYBRID_RAG_OIDC_CREATE_USERS"
IDENTITY_CLAIM_ENV = "HYBRID_RAG_OIDC_IDENTITY_CLAIM"
SCOPES_ENV = "HYBRID_RAG_OIDC_SCOPES"
REDIRECT_URI_ENV = "HYBRID_RAG_OIDC_REDIRECT_URI"
CALLBACK_PATH = "/auth/oidc/callback"
PENDING_COOKIE = "hybrid_rag_oidc_state"
HTTP_TIMEOUT_S = 10.0  # discovery, keys and the code exchange: a provider slower is down
METADATA_TTL_S = 3600.0
LEEWAY_S = 60  # clock skew allowed on exp / iat / nbf
# Asymmetric algorithms only: an HS256 token would be "signed" with the client secret.
ALGORITHMS = ["RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA"]  # fmt: skip
PAGE = "/ui/"


@dataclass(frozen=True)
class OidcSettings:
    issuer: str
    client_id: str
    client_secret: str
    groups_claim: str = "groups"
    admin_group: str = ""
    create_users: bool = True
    identity_claim: str = "preferred_username"
    scopes: str = "openid profile email"
    redirect_uri: str = ""


def oidc_configured() -> bool:
    return bool(os.environ.get(ISSUER_ENV, "").strip())


def settings(env: dict[str, str] | None = None) -> OidcSettings:
    """The provider's settings from the environment; ``ConfigError`` names what is missing."""
    env = dict(os.environ) if env is None else env

    def get(name: str, default: str = "") -> str:
        return env.get(name, "").strip() or default

    missing = [n for n in (ISSUER_ENV, CLIENT_ID_ENV, CLIENT_SECRET_ENV) if not get(n)]
    if missing:
        raise ConfigError(f"single sign-on needs {', '.join(missing)} (docs/DEPLOYMENT.md)")
    create = get(CREATE_USERS_ENV, "1")
    if create not in ("0", "1"):
        raise ConfigError(f"{CREATE_USERS_ENV} must be 0 or 1, not {create!r}")
    return OidcSettings(
        issuer=get(ISSUER_ENV).rstrip("/"),
        client_id=get(CLIENT_ID_ENV),
        client_secret=get(CLIENT_SECRET_ENV),
        groups_claim=get(GROUPS_CLAIM_ENV, "groups"),
        admin_group=get(ADMIN_GROUP_ENV),
        create_users=create == "1",
        identity_claim=get(IDENTITY_CLAIM_ENV, "preferred_username"),
        scopes=get(SCOPES_ENV, "openid profile email"),
        redirect_uri=get(REDIRECT_URI_ENV),
    )


_metadata: dict[str, tuple[float, dict[str, Any], dict[str, Any]]] = {}  # issuer -> (at, doc, jwks)


async def _get_json(url: str) -> dict[str, Any]:
    try:
        async with httpx.AsyncClient(timeout=HTTP_TIMEOUT_S) as client:
            answer = await client.get(url)
            answer.raise_for_status()
            data = answer.json()
    except (httpx.HTTPError, ValueError) as exc:
        raise Refused(502, f"the identity provider did not answer {url}: {exc}") from None
    if not isinstance(data, dict):
        raise Refused(502, f"the identity provider's {url} is not a JSON object")
    return data


async def provider(issuer: str, refresh: bool = False) -> tuple[dict[str, Any], dict[str, Any]]:
    """The provider's metadata and keys (cached ``METADATA_TTL_S``)."""
    cached = _metadata.get(issuer)
    if cached and not refresh and time.monotonic() - cached[0] < METADATA_TTL_S:
        return cached[1], cached[2]
    doc = await _get_json(f"{issuer}/.well-known/openid-configuration")
    if str(doc.get("issuer", "")).rstrip("/") != issuer:  # OpenID Connect Discovery §4.3
        raise Refused(
            502, f"the provider's metadata names issuer {doc.get('issuer')!r}, not {issuer!r}"
        )
    for field in ("authorization_endpoint", "token_endpoint", "jwks_uri"):
        if not isinstance(doc.get(field), str):
            raise Refused(502, f"the provider's metadata has no {field}")
    keys = await _get_json(doc["jwks_uri"])
    _metadata[issuer] = (time.monotonic(), doc, keys)
    return doc, keys


def verify_id_token(
    id_token: str, keys: dict[str, Any], issuer: str, client_id: str, nonce: str
) -> dict[str, Any]:
    """The ID token's claims once its signature, issuer, audience, expiry and nonce are
    verified; ``JoseError`` (or ``ValueError``) says what failed."""
    token = jwt.decode(id_token, KeySet.import_key_set(keys), algorithms=ALGORITHMS)  # type: ignore[arg-type]
    claims = jwt.JWTClaimsRegistry(
        leeway=LEEWAY_S,
        iss={"essential": True, "value": issuer},
        aud={"essential": True, "value": client_id},
        nonce={"essential": True, "value": nonce},
        sub={"essential": True},
        exp={"essential": True},
        iat={"essential": True},
    )
    claims.validate(token.claims)
    audience = token.claims["aud"]
    if isinstance(audience, list) and len(audience) > 1 and token.claims.get("azp") != client_id:
        raise ValueError("the ID token is meant for several parties, not authorised for this one")
    return dict(token.claims)


def _redirect_uri(request: Request, s: OidcSettings) -> str:
    if s.redirect_uri:
        return s.redirect_uri
    scheme = "https" if is_https(request.headers, request.url.scheme) else "http"
    return f"{scheme}://{request.headers.get('host', request.url.netloc)}{CALLBACK_PATH}"


def _client(request: Request, s: OidcSettings) -> AsyncOAuth2Client:
    return AsyncOAuth2Client(
        client_id=s.client_id,
        client_secret=s.client_secret,
        scope=s.scopes,
        redirect_uri=_redirect_uri(request, s),
        code_challenge_method="S256",
        timeout=HTTP_TIMEOUT_S,
    )


def _settings() -> OidcSettings:
    if not oidc_configured():
        raise Refused(404, f"single sign-on is not configured here ({ISSUER_ENV})")
    try:
        return settings()
    except ConfigError as exc:  # half configured: say what is missing
        raise Refused(503, str(exc)) from None


async def login(request: Request) -> Response:
    s = _settings()
    doc, _ = await provider(s.issuer)
    state, nonce, verifier = (secrets.token_urlsafe(32) for _ in range(3))
    await asyncio.to_thread(lambda: sessions().begin_pending(state, nonce, verifier))
    async with _client(request, s) as client:
        url, _ = client.create_authorization_url(
            doc["authorization_endpoint"], state=state, nonce=nonce, code_verifier=verifier
        )
    response = RedirectResponse(url, status_code=302)
    secure = is_https(request.headers, request.url.scheme)
    # Lax: sent on the provider's redirect back (a top-level GET), not on other requests.
    response.set_cookie(PENDING_COOKIE, state, max_age=600, path="/auth/oidc", httponly=True,
                        secure=secure, samesite="lax")  # fmt: skip
    return response


async def _exchange(request: Request, s: OidcSettings, verifier: str) -> str:
    """The ID token the provider gives for this callback's code."""
    doc, _ = await provider(s.issuer)
    code = request.query_params.get("code", "")
    if not code:
        raise Refused(400, "the provider's answer has no code")
    try:
        async with _client(request, s) as client:
            token = await client.fetch_token(
                doc["token_endpoint"], code=code, code_verifier=verifier
            )
    except Exception as exc:  # authlib's OAuthError, httpx's errors: the provider refused
        raise Refused(401, f"the identity provider refused the code: {exc}") from None
    id_token = token.get("id_token")
    if not isinstance(id_token, str):
        raise Refused(401, "the identity provider gave no ID token (is 'openid' in the scopes?)")
    return id_token


async def _claims(s: OidcSettings, id_token: str, nonce: str) -> dict[str, Any]:
    for attempt in (False, True):  # once more with the provider's keys fetched again
        _, keys = await provider(s.issuer, refresh=attempt)
        try:
            return verify_id_token(id_token, keys, s.issuer, s.client_id, nonce)
        except (JoseError, ValueError) as exc:
            if attempt or "key" not in str(exc).lower():
                raise Refused(401, f"the ID token was refused: {exc}") from None
    raise AssertionError("unreachable")  # pragma: no cover


def _user_of(claims: dict[str, Any], s: OidcSettings) -> User:
    path = os.environ.get(USERS_FILE_ENV, "").strip()
    if not path:
        raise Refused(409, f"single sign-on needs a users file (${USERS_FILE_ENV})")
    identity = claims.get(s.identity_claim)
    if not isinstance(identity, str) or not identity:
        raise Refused(403, f"the ID token has no {s.identity_claim!r} claim to name the user "
                      f"({IDENTITY_CLAIM_ENV})")  # fmt: skip
    raw = claims.get(s.groups_claim)
    groups: list[str] | None = None  # no such claim (Google sends none): the file's stand
    if raw is not None:
        groups = valid_groups(g for g in raw if isinstance(g, str)) if isinstance(raw, list) else []
    admin = bool(s.admin_group) and s.admin_group in (groups or [])
    try:
        return sign_in_sso(Path(path).expanduser(), identity, groups, admin, s.create_users)
    except SsoRefused as exc:
        raise Refused(403, str(exc)) from None


async def callback(request: Request) -> Response:
    s = _settings()
    if request.query_params.get("error"):
        described = request.query_params.get("error_description", "")
        raise Refused(
            401, f"the identity provider said {request.query_params['error']}: {described}"
        )
    state = request.query_params.get("state", "")
    mine = request.cookies.get(PENDING_COOKIE, "")
    if not state or not mine or not hmac.compare_digest(state.encode(), mine.encode()):
        raise Refused(400, "this sign-in did not start in this browser: start again")
    pending = await asyncio.to_thread(lambda: sessions().take_pending(state))
    if pending is None:
        raise Refused(400, "this sign-in is unknown, used or expired: start again")
    nonce, verifier = pending
    claims = await _claims(s, await _exchange(request, s, verifier), nonce)
    user = await asyncio.to_thread(_user_of, claims, s)
    signed_in = await asyncio.to_thread(start_session, request, user)
    response = RedirectResponse(PAGE, status_code=303)
    for value in signed_in.headers.getlist("set-cookie"):
        response.headers.append("set-cookie", value)
    response.delete_cookie(PENDING_COOKIE, path="/auth/oidc")
    return response


def routes(guarded: Any) -> list[BaseRoute]:
    return [
        Route("/auth/oidc/login", guarded(login), methods=["GET"]),
        Route(CALLBACK_PATH, guarded(callback), methods=["GET"]),
    ]
