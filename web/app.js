// The page: sign-in, the two views, errors shown as messages that can be retried.

import { ApiError, checkSignIn, token } from "./api.js";
import { closeSource } from "./answer.js";
import { initChat, loadThreads } from "./chat.js";
import { initDocuments, showDocuments } from "./documents.js";
import { t, translatePage } from "./i18n.js";
import { hideError, initNotify, showError } from "./notify.js";

const $ = (id) => document.getElementById(id);

function showSignIn(expired) {
  $("signin").hidden = false;
  $("app").hidden = true;
  $("signin-note").textContent = expired ? t("signInAgain") : "";
  $("token").focus();
}

/** Sign in with the stored token; returns the failure (null when signed in). */
async function start() {
  // One cheap call tells whether this server wants a token and whether ours is good.
  try {
    await checkSignIn();
  } catch (err) {
    if (err instanceof ApiError && err.status === 401) {
      showSignIn(Boolean(token.get()));
      return err;
    }
    showError(err, start);
    return err;
  }
  $("signin").hidden = true;
  $("app").hidden = false;
  $("signout").hidden = !token.get();
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
    token.set($("token").value);
    $("token").value = "";
    const failure = await start();
    // Only a 401 says the token is wrong; anything else (a users file the server cannot
    // read: 503) is said as the server says it.
    if (failure && !$("signin").hidden) {
      $("signin-note").textContent = failure.status === 401
        ? t("badToken") : t("signInFailed", { message: failure.message });
    }
  });
  $("signout").addEventListener("click", () => {
    token.clear();
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
