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

async function start() {
  // One cheap call tells whether this server wants a token and whether ours is good.
  try {
    await checkSignIn();
  } catch (err) {
    if (err instanceof ApiError && err.status === 401) return showSignIn(Boolean(token.get()));
    showError(err, start);
    return;
  }
  $("signin").hidden = true;
  $("app").hidden = false;
  $("signout").hidden = !token.get();
  hideError();
  await loadThreads().catch((err) => showError(err, loadThreads));
  $("question").focus();
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
    await start();
    if (!$("signin").hidden) $("signin-note").textContent = t("badToken");
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
