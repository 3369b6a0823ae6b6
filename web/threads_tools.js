// A conversation exported as Markdown with its numbered sources, and a search over the
// user's conversations (words of their questions and answers, English or Chinese).

import { getThread, linkedOriginal, originalUrl, searchThreads, threadState } from "./api.js";
import { contentText, el, withoutSources } from "./answer.js";
import { currentThread, openThread } from "./chat.js";
import { addStrings, t } from "./i18n.js";
import { icon } from "./icons.js";
import { showError } from "./notify.js";
import { openOriginal } from "./viewer.js";

addStrings({
  en: {
    exportMd: "Export as Markdown", searchThreads: "Search conversations", searchThreadsHint: "Words of a question or answer",
    noHits: "No conversation has these words.", hits: "{n} conversation(s) found",
    sourcesHead: "Sources", exportNothing: "Open a conversation first.",
  },
  zh: {
    exportMd: "导出为 Markdown", searchThreads: "搜索对话", searchThreadsHint: "问题或回答中的词语",
    noHits: "没有对话包含这些词语。", hits: "找到 {n} 个对话",
    sourcesHead: "来源", exportNothing: "请先打开一个对话。",
  },
});

const $ = (id) => document.getElementById(id);
const MAX_THREADS = 100; // the newest conversations searched
const FETCHES = 6; // states read at once
const SNIPPET = 60;
const cache = new Map(); // thread_id -> {updated, turns}

/** A thread's turns: [{question, answer, citations}] from its state's messages. */
export function turnsOf(values) {
  const turns = [];
  let asked = typeof values?.question === "string" ? values.question : "";
  const messages = values?.messages || [];
  messages.forEach((m, i) => {
    if (m.type === "human" || m.role === "user") asked = contentText(m.content);
    const text = (m.type === "ai" || m.role === "assistant") && !(m.tool_calls || []).length ? contentText(m.content) : "";
    if (!text) return;
    const last = !messages.slice(i + 1).some((n) => n.type === "ai" && !(n.tool_calls || []).length);
    const citations = m.additional_kwargs?.citations || (last ? values.citations : []) || [];
    turns.push({ question: asked, answer: withoutSources(text), citations });
  });
  return turns;
}

// --- export ----------------------------------------------------------------------------

function sourceLine(c, origin) {
  const title = (c.title || c.path || c.url || "").replace(/[[\]]/g, "");
  if (c.doc_id) {
    return `${title} — ${originalUrl(origin, c.doc_id, c.page, title)}`;
  }
  return c.url ? `${title} — ${c.url}` : title;
}

/** The conversation as Markdown: each question and answer, then the answer's sources,
 * numbered by their labels, with links to the originals. */
export function toMarkdown(title, turns, origin) {
  const out = [`# ${title || "Conversation"}`, ""];
  for (const turn of turns) {
    out.push(`## ${t("you")}`, "", turn.question.trim(), "", `## ${t("assistant")}`, "", turn.answer.trim(), "");
    const cites = turn.citations.filter((c) => c.label);
    if (cites.length) {
      out.push(`**${t("sourcesHead")}**`, "");
      for (const c of cites) out.push(`- ${c.label} ${sourceLine(c, origin)}`);
      out.push("");
    }
  }
  return `${out.join("\n").trim()}\n`;
}

async function exportThread() {
  const id = currentThread();
  if (!id) return showError(new Error(t("exportNothing")));
  try {
    const [state, thread] = await Promise.all([threadState(id), getThread(id)]);
    const turns = turnsOf(state.values || {});
    const title = thread.metadata?.title || turns[0]?.question.slice(0, 80) || "";
    const text = toMarkdown(title, turns, window.location.origin);
    const link = el("a", { href: URL.createObjectURL(new Blob([text], { type: "text/markdown" })), download: `conversation-${id.slice(0, 8)}.md` });
    document.body.append(link);
    link.click();
    link.remove();
    setTimeout(() => URL.revokeObjectURL(link.href), 10000);
  } catch (err) {
    showError(err, exportThread);
  }
}

// --- search ----------------------------------------------------------------------------

/** The query's terms: words (latin) and runs of CJK characters, lower case. */
export function termsOf(query) {
  return (query.toLowerCase().match(/[\p{Script=Han}]+|[\p{L}\p{N}]+/gu) || []);
}

async function turnsOfThread(th) {
  const hit = cache.get(th.thread_id);
  if (hit && hit.updated === th.updated_at) return hit.turns;
  const values = th.values?.messages ? th.values : (await threadState(th.thread_id)).values;
  const turns = turnsOf(values || {});
  cache.set(th.thread_id, { updated: th.updated_at, turns });
  return turns;
}

function snippet(text, term) {
  const at = text.toLowerCase().indexOf(term);
  const start = Math.max(0, at - SNIPPET / 2);
  const part = text.slice(start, start + SNIPPET + term.length).replace(/\s+/g, " ");
  const i = part.toLowerCase().indexOf(term);
  return [start > 0 ? "…" : "", part.slice(0, i), el("mark", {}, part.slice(i, i + term.length)), part.slice(i + term.length), "…"];
}

async function search(e) {
  e.preventDefault();
  const terms = termsOf($("thread-q").value);
  const list = $("thread-hits");
  list.replaceChildren();
  if (!terms.length) return;
  try {
    const threads = await searchThreads({ limit: MAX_THREADS, sort_by: "updated_at", sort_order: "desc" });
    const found = [];
    for (let i = 0; i < threads.length; i += FETCHES) {
      await Promise.all(threads.slice(i, i + FETCHES).map(async (th) => {
        const turns = await turnsOfThread(th).catch(() => []);
        const text = turns.map((x) => `${x.question}\n${x.answer}`).join("\n");
        const lower = text.toLowerCase();
        if (turns.length && terms.every((term) => lower.includes(term))) found.push({ th, text, title: th.metadata?.title || turns[0].question });
      }));
    }
    found.sort((a, b) => String(b.th.updated_at).localeCompare(String(a.th.updated_at)));
    list.append(el("li", { role: "status", class: "count" }, found.length ? t("hits", { n: found.length }) : t("noHits")));
    for (const { th, text, title } of found) {
      list.append(el("li", {}, el("button", { type: "button", onclick: () => openThread(th.thread_id) },
        el("strong", {}, title.slice(0, 80)), el("span", { class: "snippet" }, snippet(text, terms[0])))));
    }
  } catch (err) {
    showError(err, () => search(e));
  }
}

/** A link of an exported conversation (``/ui/#original=<doc_id>``) opens its original
 * once the page is signed in (with the user's token), then leaves the address. */
function openLinked() {
  const linked = linkedOriginal(window.location.hash);
  if (!linked || $("app").hidden) return;
  window.history.replaceState(null, "", window.location.pathname + window.location.search);
  openOriginal(linked.docId, { page: linked.page, title: linked.title || linked.docId, here: true })
    .catch((err) => showError(err, null, "original"));
}

export function initThreadTools() {
  new MutationObserver(openLinked).observe($("app"), { attributes: true, attributeFilter: ["hidden"] });
  window.addEventListener("hashchange", openLinked);
  const form = el("form", { id: "thread-search", class: "thread-tools", role: "search" },
    el("label", { for: "thread-q", class: "visually-hidden" }, t("searchThreads")),
    el("input", { id: "thread-q", type: "search", placeholder: t("searchThreadsHint") }),
    el("button", { type: "submit", "aria-label": t("searchThreads"), title: t("searchThreads") }, icon("search")));
  form.addEventListener("submit", search);
  $("new-thread").after(form, el("ul", { id: "thread-hits", class: "thread-hits", "aria-live": "polite" }));
  const bar = el("div", { class: "conv-tools" },
    el("button", { type: "button", id: "export-thread", class: "quiet", onclick: exportThread }, icon("download"), " ", t("exportMd")));
  $("conversation").before(bar);
}
