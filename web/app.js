// The page: sign-in, the two views, errors shown as messages that can be retried.

import {
  ApiError, checkSignIn, hasSession, oidcSignInHref, signInMethods, signInWithPassword, signInWithToken, signOut,
} from "./api.js";
import { closeSource } from "./answer.js";
import { initChat, loadThreads } from "./chat.js";
import { initDocuments, showDocuments } from "./documents.js";
import { t, translatePage } from "./i18n.js";
import { hideError, initNotify, showError } from "./notify.js";

const $ = (id) => document.getElementById(id);

let mode = "password"; // or "token": which fields the sign-in form shows

function setMode(next, offersPassword = true) {
  mode = next;
  const byToken = next === "token";
  $("password-fields").hidden = byToken;
  $("token-fields").hidden = !byToken;
  $("use-token").hidden = byToken;
  $("use-password").hidden = !byToken || !offersPassword;
  $("identity").required = !byToken;
  $("password").required = !byToken;
  $("token").required = byToken;
  $("signin-help").textContent = t(byToken ? "signInHelpToken" : "signInHelp");
}

async function showSignIn(expired) {
  $("signin").hidden = false;
  $("app").hidden = true;
  $("signin-note").textContent = expired ? t("signInAgain") : "";
  let offered;
  try {
    offered = await signInMethods();
  } catch {
    offered = { password: false, token: true, oidc: false }; // a server without the routes
  }
  $("sso-signin").href = oidcSignInHref;
  $("sso-signin").hidden = !offered.oidc;
  setMode(offered.password ? mode : "token", offered.password);
  (mode === "token" ? $("token") : $("identity")).focus();
}

/** Sign in with the token or password in the form: the server sets a session cookie and
 * the fields are emptied (the page keeps no credential). Returns the failure, or null. */
async function signIn() {
  try {
    if (mode === "token") {
      const value = $("token").value;
      $("token").value = "";
      await signInWithToken(value);
    } else {
      const password = $("password").value;
      $("password").value = "";
      await signInWithPassword($("identity").value.trim(), password);
    }
    return null;
  } catch (err) {
    return err;
  }
}

function signInFailure(failure) {
  // Only a 401 says the credential is wrong; anything else (a users file the server cannot
  // read: 503; too many failures: 429) is said as the server says it.
  if (failure.status === 401) return t(mode === "token" ? "badToken" : "badPassword");
  if (failure.status === 429) return t("tooMany", { message: failure.message });
  return t("signInFailed", { message: failure.message });
}

/** Whether this browser is signed in; returns the failure (null when signed in). */
async function start() {
  // One cheap call tells whether this server wants a sign-in and whether ours is good.
  try {
    await checkSignIn();
  } catch (err) {
    if (err instanceof ApiError && err.status === 401) {
      await showSignIn(hasSession());
      return err;
    }
    showError(err, start);
    return err;
  }
  $("signin").hidden = true;
  $("app").hidden = false;
  $("signout").hidden = !hasSession();
  hideError();
  await loadThreads().catch((err) => showError(err, loadThreads));
  $("question").focus();
  return null;
}

function showView(name) {
  const docs = name === "documents";
  $("chat-view").hidden = docs;
  $("docs-view").hidden = !docs;
  $("tab-chat").setAttribute("aria-current", docs ? "false" : "page");
  $("tab-docs").setAttribute("aria-current", docs ? "page" : "false");
  if (docs) showDocuments();
  else $("question").focus();
}

function init() {
  translatePage();
  $("signin-form").addEventListener("submit", async (e) => {
    e.preventDefault();
    const failure = (await signIn()) || (await start());
    if (failure && !$("signin").hidden) $("signin-note").textContent = signInFailure(failure);
  });
  $("use-token").addEventListener("click", () => { setMode("token"); $("token").focus(); });
  $("use-password").addEventListener("click", () => { setMode("password"); $("identity").focus(); });
  $("signout").addEventListener("click", async () => {
    await signOut().catch(() => {}); // the server ends the session; the cookie goes with it
    showSignIn(false);
  });
  initNotify();
  $("tab-chat").addEventListener("click", () => showView("chat"));
  $("tab-docs").addEventListener("click", () => showView("documents"));
  $("source-card").querySelector(".close").addEventListener("click", closeSource);
  document.addEventListener("keydown", (e) => {
    if (e.key === "Escape") closeSource();
  });
  window.addEventListener("auth-required", () => showSignIn(true));
  initChat();
  initDocuments();
  start();
}

init();
