// Thumbs up or down, with an optional comment, under each answer (stored on the server
// per user: /feedback). A reopened thread shows the votes already given.

import { listFeedback, saveFeedback } from "./api.js";
import { el } from "./answer.js";
import { addStrings, t } from "./i18n.js";
import { icon } from "./icons.js";

addStrings({
  en: {
    fbGroup: "Was this answer useful?", fbUp: "Good answer", fbDown: "Bad answer",
    fbComment: "What was wrong or missing? (optional)", fbSend: "Send", fbSaved: "Thanks, your feedback is saved.",
    fbSavedComment: "Thanks, your feedback and comment are saved.", fbFailed: "Your feedback could not be saved: {error}",
  },
  zh: {
    fbGroup: "这个回答有用吗？", fbUp: "回答很好", fbDown: "回答不好",
    fbComment: "哪里不对或缺少什么？（可选）", fbSend: "发送", fbSaved: "谢谢，您的反馈已保存。",
    fbSavedComment: "谢谢，您的反馈和意见已保存。", fbFailed: "反馈未能保存：{error}",
  },
});

const known = new Map(); // thread_id -> Promise of this user's votes in it

function votesOf(threadId) {
  if (!known.has(threadId)) {
    known.set(threadId, listFeedback(threadId)
      .then((body) => body.feedback || [])
      .catch(() => { known.delete(threadId); return []; }));
  }
  return known.get(threadId);
}

let formIds = 0;

/** The vote row of one answer. */
function feedbackRow(detail, previous) {
  const id = `fb-comment-${++formIds}`;
  const up = el("button", { type: "button", class: "vote up", "aria-pressed": "false", "aria-label": t("fbUp"), title: t("fbUp") }, icon("thumbsUp"));
  const down = el("button", { type: "button", class: "vote down", "aria-pressed": "false", "aria-label": t("fbDown"), title: t("fbDown") }, icon("thumbsDown"));
  const comment = el("textarea", { id, rows: "2", maxlength: "2000" });
  const form = el("form", { class: "fb-comment", hidden: true },
    el("label", { for: id }, t("fbComment")), comment,
    el("button", { type: "submit" }, t("fbSend")));
  const said = el("span", { class: "fb-state", role: "status" });
  let vote = previous?.vote || "";
  comment.value = previous?.comment || "";
  const show = () => {
    up.setAttribute("aria-pressed", String(vote === "up"));
    down.setAttribute("aria-pressed", String(vote === "down"));
  };
  const send = async () => {
    const body = {
      thread_id: detail.threadId, run_id: detail.runId || "", graph: detail.graph || "",
      question: detail.question || "", answer: detail.answer, vote, comment: comment.value.trim(),
      doc_ids: (detail.citations || []).map((c) => c.doc_id).filter(Boolean),
    };
    try {
      await saveFeedback(body);
      known.delete(detail.threadId);
      said.textContent = t(body.comment ? "fbSavedComment" : "fbSaved");
    } catch (err) {
      said.textContent = t("fbFailed", { error: err.message || String(err) });
    }
  };
  const choose = (which) => {
    vote = which;
    show();
    form.hidden = false;
    send();
    if (which === "down") comment.focus();
  };
  up.addEventListener("click", () => choose("up"));
  down.addEventListener("click", () => choose("down"));
  form.addEventListener("submit", (e) => {
    e.preventDefault();
    send();
  });
  show();
  return el("div", { class: "feedback", role: "group", "aria-label": t("fbGroup") }, up, down, said, form);
}

async function onAnswered(event) {
  const { detail } = event;
  const root = event.target;
  if (!detail?.threadId || !detail.answer || root.querySelector(".feedback")) return;
  const mine = await votesOf(detail.threadId);
  const previous = mine.find((f) => f.answer.trim() === String(detail.answer).trim());
  if (!root.querySelector(".feedback")) root.append(feedbackRow(detail, previous));
}

export function initFeedback() {
  document.getElementById("conversation").addEventListener("answered", onAnswered);
}
