// Failures shown as a message the user can retry (401 goes to the sign-in instead).

import { ApiError } from "./api.js";
import { t } from "./i18n.js";

const $ = (id) => document.getElementById(id);
let retryLast = null;

/** Show a failure: 401 → the sign-in; otherwise a message with "Try again". */
export function showError(err, retry) {
  if (err instanceof ApiError && err.status === 401) return;
  const text = err instanceof ApiError && err.status === 0
    ? t("networkError")
    : t("serverError", { status: err.status ?? "?", message: err.message || String(err) });
  $("error-text").textContent = text;
  retryLast = retry || null;
  $("error-retry").hidden = !retry;
  $("error").hidden = false;
}

export function hideError() {
  $("error").hidden = true;
  retryLast = null;
}

export function initNotify() {
  $("error-retry").addEventListener("click", () => {
    const retry = retryLast;
    hideError();
    if (retry) retry();
  });
  $("error-dismiss").addEventListener("click", hideError);
  window.addEventListener("app-error", (e) => showError(e.detail));
}
