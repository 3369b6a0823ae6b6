"""Issue 55 item 1: single sign-on with OpenID Connect against a REAL provider (npm's
oidc-provider on loopback, tests/oidc_provider.py) and a real ``langgraph dev``, in
Debian's Chromium: hana signs in at the provider's login form and is back on the page
signed in, reading hr's document (her groups claim); omar, without the claim, cannot; the
flow's state is bound to the browser and used once; a tampered ID token, or one for
another audience, nonce or issuer, or expired, is refused (joserfc, with a real RSA key)."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from joserfc import jwt
from joserfc.errors import JoseError
from joserfc.jwk import KeySet, RSAKey

from cli.main import main
from server.oidc import settings, verify_id_token
from tests.browser import DESKTOP, chromium
from tests.browser import unavailable as no_browser
from tests.langgraph_server import serving
from tests.oidc_provider import CLIENT_ID, CLIENT_SECRET, oidc_provider
from tests.oidc_provider import unavailable as no_provider
from tests.ports import free_port
from tests.test_documents_api import doc_url, wait_job
from tools.access.sso_users import SsoRefused, sign_in_sso
from tools.access.users import add_user, read_users
from tools.errors import ConfigError

HR_FACT = "The hr salary bands are reviewed every March by the pay committee."
WAIT_MS = 60_000


@dataclass
class Sso:
    url: str
    users: Path
    issuer: str
    root: str  # an admin's token
    doc_id: str  # hr's document


@pytest.fixture(scope="module")
def sso(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sso]:
    reason = no_provider() or no_browser()
    if reason:
        pytest.skip(reason)
    base = tmp_path_factory.mktemp("oidc")
    users = base / "users.json"
    root = add_user(users, "root", admin=True)
    add_user(users, "alice", ["hr"])  # a token user: no sign-in may take her name over
    home = base / "home"
    home.mkdir()
    port = free_port()
    env = {
        "HYBRID_RAG_USERS_FILE": str(users),
        "HYBRID_RAG_OIDC_ISSUER": f"http://127.0.0.1:{port}",
        "HYBRID_RAG_OIDC_CLIENT_ID": CLIENT_ID,
        "HYBRID_RAG_OIDC_CLIENT_SECRET": CLIENT_SECRET,
        "HYBRID_RAG_OIDC_SCOPES": "openid profile email groups",
    }
    with serving(home, base / "langgraph-dev.log", env) as srv:
        callback = f"{srv.url}/auth/oidc/callback"
        with oidc_provider(port, callback, base / "provider.log") as issuer:
            with httpx.Client(base_url=srv.url, timeout=60,
                              headers={"Authorization": f"Bearer {root}"}) as admin:  # fmt: skip
                parts = [("file", ("bands.md", f"# Salary bands\n\n{HR_FACT}\n".encode()))]
                made = admin.post("/kb/uploads", files=parts, data={"acl": "group:hr"})
                assert made.status_code == 202, made.text
                assert wait_job(admin, made.json()["job_id"])["state"] == "done"
                doc_id = admin.get("/kb/documents").json()["documents"][0]["doc_id"]
            yield Sso(srv.url, users, issuer, root, doc_id)


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with chromium() as b:
        yield b


def sign_in_at_provider(browser: Any, sso: Sso, login: str) -> Any:
    """A new browser context: the page's single sign-on, the provider's login and consent
    forms, back on the page; returns the context."""
    context = browser.new_context(viewport=DESKTOP, locale="en-US")
    page = context.new_page()
    page.set_default_timeout(WAIT_MS)
    page.goto(f"{sso.url}/ui/")
    page.click("#sso-signin")
    page.fill("input[name=login]", login)
    page.fill("input[name=password]", "any password: the provider's development form")
    page.click("button[type=submit]")
    page.click("button[type=submit]")  # consent: hybrid-rag may read the claims
    page.wait_for_url(f"{sso.url}/ui/")
    page.wait_for_selector("#question", state="visible")
    return context


def test_single_sign_on_in_the_browser_reads_the_groups_documents(browser: Any, sso: Sso) -> None:
    context = sign_in_at_provider(browser, sso, "hana")
    try:
        page = context.pages[0]
        hana = {u.identity: u for u in read_users(sso.users).values()}["hana"]
        assert hana.sso and hana.groups == ("hr",) and not hana.admin
        # The page holds no credential a script can read: the session is HttpOnly.
        assert page.evaluate("sessionStorage.length + localStorage.length") == 0
        assert "hybrid_rag_session" not in page.evaluate("document.cookie")
        page.click("#tab-docs")
        page.wait_for_selector("#doc-rows tr")
        assert "bands" in page.locator("#doc-rows").inner_text()
        # Every tab of the browser is signed in, until signing out.
        second = context.new_page()
        second.goto(f"{sso.url}/ui/")
        second.wait_for_selector("#question", state="visible")
        page.click("#signout")
        page.wait_for_selector("#signin", state="visible")
        second.reload()
        second.wait_for_selector("#signin", state="visible")
    finally:
        context.close()


def test_a_user_without_the_groups_claim_cannot_read_hr(browser: Any, sso: Sso) -> None:
    context = sign_in_at_provider(browser, sso, "omar")
    try:
        listed = context.request.get(f"{sso.url}/kb/documents").json()
        assert listed["documents"] == [] and listed["total"] == 0
        omar = {u.identity: u for u in read_users(sso.users).values()}["omar"]
        assert omar.sso and omar.groups == ()
        assert context.request.get(f"{sso.url}{doc_url(sso.doc_id)}").status == 404
        found = context.request.get(f"{sso.url}/kb/documents?q=salary").json()
        assert found["total"] == 0
    finally:
        context.close()


def test_the_flow_is_bound_to_the_browser_and_used_once(sso: Sso) -> None:
    c = httpx.Client(base_url=sso.url, timeout=60)
    started = c.get("/auth/oidc/login")
    assert started.status_code == 302
    where = httpx.URL(started.headers["location"])
    params = dict(where.params)
    assert params["code_challenge_method"] == "S256" and params["code_challenge"]
    assert params["nonce"] and params["state"] and params["client_id"] == CLIENT_ID
    assert str(where).startswith(f"{sso.issuer}/")
    state = params["state"]
    # Another browser (no state cookie) cannot finish it; nor can a forged state.
    stranger = httpx.get(f"{sso.url}/auth/oidc/callback", params={"state": state, "code": "x"})
    assert stranger.status_code == 400 and "did not start in this browser" in stranger.text
    forged = c.get("/auth/oidc/callback", params={"state": "forged", "code": "x"})
    assert forged.status_code == 400
    # A wrong code: the provider refuses it; the state is used up all the same.
    refused = c.get("/auth/oidc/callback", params={"state": state, "code": "not-a-code"})
    assert refused.status_code == 401 and "refused the code" in refused.json()["error"]
    again = c.get("/auth/oidc/callback", params={"state": state, "code": "not-a-code"})
    assert again.status_code == 400 and "used or expired" in again.json()["error"]
    said = c.get("/auth/oidc/callback", params={"error": "access_denied"})
    assert said.status_code == 401 and "access_denied" in said.json()["error"]
    assert httpx.get(f"{sso.url}/auth/methods").json()["oidc"] is True


# -- the ID token's checks, with a real RSA key ----------------------------------------


ISSUER, NONCE = "https://idp.example.test", "n-0123456789"


def signed(key: RSAKey, **changes: Any) -> str:
    now = int(time.time())
    claims = {"iss": ISSUER, "aud": CLIENT_ID, "sub": "hana", "nonce": NONCE,
              "iat": now, "exp": now + 300, **changes}  # fmt: skip
    return jwt.encode({"alg": "RS256", "kid": key.kid}, claims, key)


def test_a_tampered_or_foreign_id_token_is_refused() -> None:
    key = RSAKey.generate_key(2048, parameters={"kid": "k1"})
    other = RSAKey.generate_key(2048, parameters={"kid": "k1"})
    keys = KeySet([key]).as_dict(private=False)
    check = lambda token, nonce=NONCE: verify_id_token(token, keys, ISSUER, CLIENT_ID, nonce)  # noqa: E731
    assert check(signed(key))["sub"] == "hana"
    head, body, sig = signed(key).split(".")
    claims = json.loads(jwt_part(body))
    claims["groups"] = ["hr"]  # the payload changed, the signature kept
    tampered = ".".join([head, b64(json.dumps(claims)), sig])
    for bad in (
        tampered,
        signed(other),  # signed by a key the provider does not publish
        signed(key, aud="another-client"),
        signed(key, iss="https://evil.example.test"),
        signed(key, exp=int(time.time()) - 3600),
        signed(key, nonce="a replayed nonce"),
        signed(key, aud=[CLIENT_ID, "another-client"]),  # several audiences, no azp
    ):
        with pytest.raises((JoseError, ValueError)):
            check(bad)
    with pytest.raises((JoseError, ValueError)):
        check(signed(key), nonce="another sign-in's nonce")
    unsigned = ".".join([b64(json.dumps({"alg": "none"})), body, ""])
    with pytest.raises((JoseError, ValueError)):
        check(unsigned)


def jwt_part(part: str) -> str:
    import base64

    return base64.urlsafe_b64decode(part + "=" * (-len(part) % 4)).decode()


def b64(text: str) -> str:
    import base64

    return base64.urlsafe_b64encode(text.encode()).rstrip(b"=").decode()


def test_sso_users_are_created_marked_and_never_take_a_name_over(tmp_path: Path) -> None:
    users = tmp_path / "users.json"
    add_user(users, "alice", ["hr"])
    with pytest.raises(SsoRefused, match="does not sign in with single sign-on"):
        sign_in_sso(users, "alice", ["admins"], True, create=True)
    with pytest.raises(SsoRefused, match="HYBRID_RAG_OIDC_CREATE_USERS=0"):
        sign_in_sso(users, "hana", ["hr"], False, create=False)
    assert main(["users", "add", "omar", "--sso", "--file", str(users)]) == 0
    omar = sign_in_sso(users, "omar", ["ops"], False, create=False)  # added by an admin first
    assert omar.sso and omar.groups == ("ops",)
    hana = sign_in_sso(users, "hana", ["hr"], False, create=True)
    assert hana.sso and hana.groups == ("hr",)
    again = sign_in_sso(users, "hana", ["finance"], True, create=False)  # the IdP decides
    assert again.groups == ("finance",) and again.admin
    kept = sign_in_sso(users, "hana", None, False, create=False)  # no groups claim at all
    assert kept.groups == ("finance",) and kept.admin


def test_the_settings_name_what_is_missing() -> None:
    with pytest.raises(
        ConfigError, match="HYBRID_RAG_OIDC_CLIENT_ID, HYBRID_RAG_OIDC_CLIENT_SECRET"
    ):
        settings({"HYBRID_RAG_OIDC_ISSUER": "https://idp"})
    with pytest.raises(ConfigError, match="HYBRID_RAG_OIDC_CREATE_USERS must be 0 or 1"):
        settings({"HYBRID_RAG_OIDC_ISSUER": "https://idp", "HYBRID_RAG_OIDC_CLIENT_ID": "c",
                  "HYBRID_RAG_OIDC_CLIENT_SECRET": "s", "HYBRID_RAG_OIDC_CREATE_USERS": "no"})  # fmt: skip
    ok = settings({"HYBRID_RAG_OIDC_ISSUER": "https://idp/", "HYBRID_RAG_OIDC_CLIENT_ID": "c",
                   "HYBRID_RAG_OIDC_CLIENT_SECRET": "s"})  # fmt: skip
    assert ok.issuer == "https://idp" and ok.groups_claim == "groups" and ok.create_users
