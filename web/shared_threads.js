// Conversations shared read-only: the owner shares the open one with named colleagues or
// groups ("Share"); the server keeps a copy, refreshed after each new answer in it. The
// sidebar lists those shared with the user, each opened read-only in a dialog; a source
// the reader may not open shows as such (its label only, withheld by the server).

import { sharedThread, sharedThreads, shareThread, threadSharing } from "./api.js";
import { el, renderAnswer } from "./answer.js";
import { currentThread } from "./chat.js";
import { addStrings, t } from "./i18n.js";
import { showError } from "./notify.js";

addStrings({
  en: {
    shareThread: "Share", shareTitle: "Share this conversation", shareHelp: "Read-only, for named colleagues or groups: user:bob, group:hr. They see the questions and answers; a source they may not open shows as such.",
    shareWith: "Shared with", save: "Save", stopSharing: "Stop sharing", sharedWithMe: "Shared with me", noShared: "Nothing shared with you yet.",
    sharedBy: "Shared by {owner}, read only", close: "Close", withheldSource: "a source you cannot open", shareNothing: "Open a conversation first.",
  },
  zh: {
    shareThread: "分享", shareTitle: "分享此对话", shareHelp: "只读，分享给指定的同事或组：user:bob, group:hr。他们能看到问题和回答；无权打开的来源会如此显示。",
    shareWith: "分享给", save: "保存", stopSharing: "停止分享", sharedWithMe: "分享给我的", noShared: "还没有人与你分享对话。",
    sharedBy: "由 {owner} 分享，只读", close: "关闭", withheldSource: "你无法打开的来源", shareNothing: "请先打开一个对话。",
  },
});

const $ = (id) => document.getElementById(id);
const REFRESH_MS = 800; // after an answer, once the thread's state holds it
const pending = new Map(); // thread_id -> timer of its refresh

function principals(text) {
  return text.split(/[\s,]+/).map((p) => p.trim()).filter(Boolean);
}

async function openShare() {
  const id = currentThread();
  if (!id) return showError(new Error(t("shareNothing")));
  let current = [];
  try {
    current = (await threadSharing(id)).with || [];
  } catch (err) {
    return showError(err);
  }
  const dialog = $("share-dialog");
  const input = el("input", { id: "share-with", type: "text", value: current.join(", "), placeholder: "user:bob, group:hr" });
  const save = async (list) => {
    try {
      await shareThread(id, list);
      dialog.close();
    } catch (err) {
      showError(err);
    }
  };
  dialog.replaceChildren(el("form", { method: "dialog", onsubmit: (e) => { e.preventDefault(); save(principals(input.value)); } },
    el("h2", {}, t("shareTitle")), el("p", {}, t("shareHelp")), el("label", { for: "share-with" }, t("shareWith")), input,
    el("div", { class: "buttons" },
      current.length ? el("button", { type: "button", class: "danger", onclick: () => save([]) }, t("stopSharing")) : null,
      el("button", { type: "button", onclick: () => dialog.close() }, t("close")),
      el("button", { type: "submit", class: "primary" }, t("save")))));
  dialog.showModal();
  input.focus();
}

/** After an answer in a shared thread, its copy is refreshed (the owner's page does it). */
function refreshLater(threadId) {
  if (!threadId || pending.has(threadId)) return;
  pending.set(threadId, setTimeout(async () => {
    pending.delete(threadId);
    try {
      const list = (await threadSharing(threadId)).with || [];
      if (list.length) await shareThread(threadId, list);
    } catch { /* the next answer tries again */ }
  }, REFRESH_MS));
}

function turnView(turn) {
  const answer = el("div", { class: "answer" });
  renderAnswer(answer, turn.answer, turn.citations || []);
  return [el("article", { class: "turn user" }, el("h2", { class: "who" }, t("you")), el("p", { class: "question" }, turn.question)),
    el("article", { class: "turn assistant" }, el("h2", { class: "who" }, t("assistant")), answer)];
}

async function openShared(id) {
  let body;
  try {
    body = await sharedThread(id);
  } catch (err) {
    return showError(err, () => openShared(id));
  }
  const dialog = $("shared-dialog");
  dialog.replaceChildren(el("h2", {}, body.title || id), el("p", { class: "hint-inline", id: "shared-owner" }, t("sharedBy", { owner: body.owner })),
    el("div", { class: "conversation shared" }, body.turns.flatMap(turnView)),
    el("div", { class: "buttons" }, el("button", { type: "button", class: "primary", onclick: () => dialog.close() }, t("close"))));
  dialog.showModal();
}

export async function loadShared() {
  let body;
  try {
    body = await sharedThreads();
  } catch {
    $("shared-section").hidden = true; // a server without the route, or signed out
    return;
  }
  $("shared-section").hidden = false;
  const items = body.threads.map((th) => el("li", { "data-thread": th.thread_id },
    el("button", { type: "button", class: "open", onclick: () => openShared(th.thread_id) }, `${th.title || th.thread_id} — ${th.owner}`)));
  $("shared-list").replaceChildren(...(items.length ? items : [el("li", { class: "hint-inline" }, t("noShared"))]));
}

export function initSharedThreads() {
  $("thread-list").after(el("section", { id: "shared-section", class: "shared-threads", hidden: true },
    el("h2", {}, t("sharedWithMe")), el("ul", { id: "shared-list" })));
  $("app").append(el("dialog", { id: "share-dialog", class: "token-dialog" }), el("dialog", { id: "shared-dialog", class: "shared-dialog" }));
  $("export-thread").after(el("button", { type: "button", id: "share-thread", class: "quiet", onclick: openShare }, t("shareThread")));
  document.addEventListener("answered", (e) => refreshLater(e.detail?.threadId));
  new MutationObserver(() => { if (!$("app").hidden) loadShared(); }).observe($("app"), { attributes: true, attributeFilter: ["hidden"] });
}
