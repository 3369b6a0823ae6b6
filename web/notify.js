// Failures shown as a message the user can retry (401 goes to the sign-in instead). A
// message belongs to the action that failed: it says what was refused and why (the
// server's reason), and goes when that action succeeds or the user starts another one.

import { ApiError } from "./api.js";
import { addStrings, t } from "./i18n.js";

addStrings({
  en: {
    refusedError: "Refused ({status}): {message}",
    failedAction: "{action} — {message}",
    failedActions: { upload: "Upload", ask: "Question", deleteDoc: "Delete", original: "Original", admin: "Admin" },
  },
  zh: {
    refusedError: "请求被拒绝（{status}）：{message}",
    failedAction: "{action}：{message}",
    failedActions: { upload: "上传", ask: "提问", deleteDoc: "删除", original: "原文", admin: "管理" },
  },
});

const $ = (id) => document.getElementById(id);
let retryLast = null;

/** A refusal (4xx but a timeout or too many requests): asking again would not help. */
const isRefusal = (err) => err instanceof ApiError && err.status >= 400 && err.status < 500 && ![408, 429].includes(err.status);

/** Show a failure of ``action`` (a key of ``failedActions``, optional): 401 → the sign-in;
 * otherwise a message with the server's reason, and "Try again" unless it was refused. */
export function showError(err, retry, action = "") {
  if (err instanceof ApiError && err.status === 401) return;
  const message = err.message || String(err);
  let text;
  if (err instanceof ApiError && err.status === 0) text = t("networkError");
  else if (isRefusal(err)) text = t("refusedError", { status: err.status, message });
  else text = t("serverError", { status: err.status ?? "?", message });
  $("error-text").textContent = action ? t("failedAction", { action: t(`failedActions.${action}`), message: text }) : text;
  $("error").dataset.action = action;
  retryLast = isRefusal(err) ? null : retry || null;
  $("error-retry").hidden = !retryLast;
  $("error").hidden = false;
}

export function hideError() {
  $("error").hidden = true;
  $("error").dataset.action = "";
  retryLast = null;
}

/** ``action`` succeeded: its own message goes (another's stays). */
export function actionDone(action) {
  if ($("error").dataset.action === action) hideError();
}

export function initNotify() {
  $("error-retry").addEventListener("click", () => {
    const retry = retryLast;
    hideError();
    if (retry) retry();
  });
  $("error-dismiss").addEventListener("click", hideError);
  window.addEventListener("app-error", (e) => showError(e.detail, null, e.detail?.action || ""));
  // The user starts another action (a button, a link, a form sent): the last failure's
  // message goes; the new action shows its own if it fails too. Captured before the
  // action's own handler runs.
  const started = (e) => {
    if (e.target instanceof Element && !e.target.closest("#error") && (e.type === "submit" || e.target.closest("button, a"))) hideError();
  };
  document.addEventListener("click", started, true);
  document.addEventListener("submit", started, true);
}
