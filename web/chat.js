// The chat: threads, a streamed run with its progress, the answer with pills, approval.

import { ApiError, api, stream } from "./api.js";
import { contentText, el, renderAnswer, withoutSources } from "./answer.js";
import { lang, t } from "./i18n.js";
import { showError } from "./notify.js";

const STREAM_MODE = ["values", "updates", "custom", "messages-tuple"];
const ANSWER_NODES = new Set(["generate", "call_model"]);
const GRAPH_KEY = "hybrid-rag-graph";
const TITLE_CHARS = 80;
const STRATEGY_OF_ROUTE = { knowledge: "vector", search: "search", both: "both" };
const STATE_FETCHES = 6; // untitled threads whose first question is read at once

const chat = {
  thread: null, // the open thread's id
  busy: false,
  controller: null,
};

const $ = (id) => document.getElementById(id);

// --- threads ---------------------------------------------------------------------------

// A thread's first question, once known (it never changes): thread_id -> text.
const firstQuestions = new Map();

/** The first human question in a thread's values (messages of any client, whose content
 * is a string or content blocks; else the state graph's own ``question``), or "". */
function firstQuestion(values) {
  const human = (values?.messages || []).find((m) => m?.type === "human" || m?.role === "user");
  const text = human ? contentText(human.content) : typeof values?.question === "string" ? values.question : "";
  const line = text.replace(/\s+/g, " ").trim();
  return line.length > TITLE_CHARS ? `${line.slice(0, TITLE_CHARS - 1)}…` : line;
}

/** Threads made by other clients (agent-chat-ui, Studio, the SDK) have no title: learn
 * their first question from the search's values, or (servers whose search returns no
 * values, such as Aegra) from each thread's state, a few at a time. */
async function learnFirstQuestions(threads) {
  const unknown = [];
  for (const th of threads) {
    if (th.metadata?.title || firstQuestions.has(th.thread_id)) continue;
    const found = firstQuestion(th.values);
    if (found) firstQuestions.set(th.thread_id, found);
    else if (!th.values) unknown.push(th.thread_id); // no question yet: asked again next time
  }
  for (let i = 0; i < unknown.length; i += STATE_FETCHES) {
    await Promise.all(unknown.slice(i, i + STATE_FETCHES).map(async (id) => {
      try {
        const found = firstQuestion((await api(`/threads/${id}/state`)).values);
        if (found) firstQuestions.set(id, found);
      } catch {
        /* unreadable now: titled by its date, tried again next time */
      }
    }));
  }
}

/** A user's title (a rename) first, then the first question, then the date. */
function threadTitle(th) {
  const named = th.metadata?.title || firstQuestions.get(th.thread_id);
  if (named) return named;
  const when = new Date(th.created_at);
  const date = Number.isNaN(when.getTime()) ? "" : when.toLocaleString(lang === "zh" ? "zh-CN" : "en", { dateStyle: "medium", timeStyle: "short" });
  return t("untitled", { date });
}

export async function loadThreads() {
  const list = $("thread-list");
  const threads = await api("/threads/search", {
    method: "POST", json: { limit: 50, sort_by: "updated_at", sort_order: "desc" },
  });
  await learnFirstQuestions(threads);
  list.replaceChildren();
  if (!threads.length) list.append(el("li", { class: "empty" }, t("noThreads")));
  for (const th of threads) {
    const title = threadTitle(th);
    const current = th.thread_id === chat.thread;
    list.append(el("li", { class: current ? "current" : "" },
      el("button", { type: "button", class: "open", "aria-current": current ? "true" : null,
        onclick: () => openThread(th.thread_id) }, title),
      el("button", { type: "button", class: "icon", "aria-label": `${t("rename")}: ${title}`, title: t("rename"),
        onclick: () => renameThread(th.thread_id, title) }, "✎"),
      el("button", { type: "button", class: "icon danger", "aria-label": `${t("remove")}: ${title}`, title: t("remove"),
        onclick: () => deleteThread(th.thread_id) }, "✕"),
    ));
  }
}

async function renameThread(id, title) {
  const name = window.prompt(t("renamePrompt"), title);
  if (!name || !name.trim()) return;
  await guarded(() => api(`/threads/${id}`, { method: "PATCH", json: { metadata: { title: name.trim() } } }));
  await guarded(loadThreads);
}

async function deleteThread(id) {
  if (!window.confirm(t("confirmDelete"))) return;
  await guarded(() => api(`/threads/${id}`, { method: "DELETE" }));
  if (id === chat.thread) newThread();
  await guarded(loadThreads);
}

/** The open thread's id (null before the first question). */
export const currentThread = () => chat.thread;

export function newThread() {
  chat.thread = null;
  $("conversation").replaceChildren(el("p", { class: "hint" }, t("emptyChat")));
  $("question").focus();
  for (const li of $("thread-list").querySelectorAll("li")) li.classList.remove("current");
}

export async function openThread(id) {
  chat.thread = id;
  const state = await guarded(() => api(`/threads/${id}/state`));
  if (!state) return;
  const graph = (await guarded(() => api(`/threads/${id}`)))?.metadata?.graph_id;
  if (graph) $("graph").value = graph;
  renderThread(state);
  await guarded(loadThreads);
  $("question").focus();
}

/** A thread's turns: each human message and the answer after it. */
function renderThread(state) {
  const values = state.values || {};
  const box = $("conversation");
  box.replaceChildren();
  const messages = values.messages || [];
  const lastAi = messages.map((m) => m.type === "ai" && !(m.tool_calls || []).length && contentText(m.content)).lastIndexOf(true);
  let asked = "";
  messages.forEach((m, i) => {
    if (m.type === "human") box.append(userTurn((asked = contentText(m.content))));
    const text = m.type === "ai" && !(m.tool_calls || []).length ? contentText(m.content) : "";
    if (!text) return;
    const turn = answerTurn();
    const last = i === lastAi;
    const cites = m.additional_kwargs?.citations || (last ? values.citations : []) || [];
    renderAnswer(turn.body, withoutSources(text), cites);
    if (last) renderFacts(turn, values);
    box.append(turn.root);
    answered(turn.root, { question: asked, answer: withoutSources(text), citations: cites });
  });
  if (!messages.length) box.append(el("p", { class: "hint" }, t("emptyChat")));
  const interrupt = (state.interrupts || state.tasks?.flatMap((task) => task.interrupts || []) || [])[0];
  if (interrupt) box.append(approvalCard(interrupt.value));
  box.lastElementChild?.scrollIntoView({ block: "end" });
}

/** Tell the page's other parts (feedback, export) that ``root`` holds a finished answer. */
function answered(root, detail) {
  root.dispatchEvent(new CustomEvent("answered", { bubbles: true, detail: { ...detail, threadId: chat.thread, graph: $("graph").value } }));
}

// --- one turn --------------------------------------------------------------------------

function userTurn(text) {
  return el("article", { class: "turn user" }, el("h2", { class: "who" }, t("you")), el("p", {}, text));
}

function answerTurn() {
  const progress = el("ol", { class: "progress" });
  const summary = el("summary", {}, t("working"));
  const steps = el("details", { class: "steps", open: true }, summary, progress);
  const status = el("p", { class: "status", role: "status" });
  const body = el("div", { class: "answer" });
  const facts = el("div", { class: "facts" });
  const root = el("article", { class: "turn assistant", "aria-busy": "false" },
    el("h2", { class: "who" }, t("assistant")), status, steps, body, facts);
  return { root, progress, steps, summary, status, body, facts };
}

/** Once answered (or paused for an approval), the steps fold into one line (still there
 * to open), so a finished part never reads "Working…". */
function foldSteps(turn, key = "stepsDone") {
  const n = turn.progress.childElementCount;
  turn.summary.textContent = t(key, { n });
  turn.steps.open = false;
}

function renderFacts(turn, values) {
  turn.facts.replaceChildren();
  const bits = [];
  if (values.route) bits.push(el("span", { class: `route ${values.route}` }, `${t("route")}: ${t(`routes.${values.route}`)}`));
  // The strategy only where it says more than the route (a web fallback, the agent's own
  // choice); "vector" and the like are the developers' words.
  if (values.strategy && STRATEGY_OF_ROUTE[values.route] !== values.strategy) {
    const said = t(`strategies.${values.strategy}`);
    bits.push(el("span", {}, `${t("strategy")}: ${said.startsWith("strategies.") ? values.strategy : said}`));
  }
  if (typeof values.confidence === "number") bits.push(el("span", {}, `${t("confidence")}: ${Math.round(values.confidence * 100)}%`));
  if (bits.length) turn.facts.append(el("p", { class: "meta" }, ...bits));
  const warnings = values.warnings || [];
  if (warnings.length) {
    turn.facts.append(el("div", { class: "warnings", role: "note" },
      el("h3", {}, t("warnings")), el("ul", {}, warnings.map((w) => el("li", {}, w)))));
  }
}

/** One progress line for a graph event on the custom stream. */
function progressLine(event, seen) {
  const step = event.step;
  if (!step) return null;
  if (step === "searching" && seen.has("graded")) return t("steps.webFallback");
  if (step === "routed") return t("steps.routed", { route: t(`routes.${event.route}`) });
  if (step === "graded") return t("steps.graded", { confidence: `${Math.round((event.confidence || 0) * 100)}%` });
  if (step === "searched" && event.error) return `${t("steps.searched", { count: event.count || 0 })} — ${event.error}`;
  const text = t(`steps.${step}`, event);
  return text === `steps.${step}` ? step : text;
}

/** Send a question, or resume an interrupted run; streams into a new answer turn. */
async function run(body, question, retry) {
  if (chat.busy) return false;
  chat.busy = true;
  setBusy(true);
  const box = $("conversation");
  box.querySelector(".hint")?.remove();
  box.querySelector(".approval")?.remove();
  const asked = question ? userTurn(question) : null;
  if (asked) box.append(asked);
  const turn = answerTurn();
  turn.root.setAttribute("aria-busy", "true");
  turn.status.textContent = t("sending");
  box.append(turn.root);
  turn.root.scrollIntoView({ block: "end" });
  const seen = new Set();
  let values = {};
  let draft = "";
  let failed = null;
  let runId = "";
  chat.controller = new AbortController();
  try {
    if (!chat.thread) {
      const th = await api("/threads", {
        method: "POST", json: { metadata: { title: question.slice(0, 80), graph_id: $("graph").value } },
      });
      chat.thread = th.thread_id;
    }
    const payload = { assistant_id: $("graph").value, stream_mode: STREAM_MODE, on_disconnect: "cancel", ...body };
    if ($("approve-web").checked) payload.context = { approve_web_search: true };
    if ($("scope")?.value) payload.context = { ...payload.context, scope: $("scope").value };
    turn.status.textContent = t("working");
    for await (const { event, data } of stream(`/threads/${chat.thread}/runs/stream`, { json: payload, signal: chat.controller.signal })) {
      if (event === "metadata") {
        runId = data?.run_id || runId;
        turn.status.textContent = t("accepted"); // the server took the run; a worker starts it
        turn.status.dataset.phase = "accepted";
      } else if (event === "custom") {
        const line = progressLine(data, seen);
        seen.add(data.step);
        if (line) turn.progress.append(el("li", { "data-step": data.step }, line));
      } else if (event === "messages") {
        const [chunk, meta] = data;
        const text = contentText(chunk?.content);
        if (text && ANSWER_NODES.has(meta?.langgraph_node) && !(chunk.tool_call_chunks || []).length) {
          draft += text;
          renderAnswer(turn.body, draft, []);
        }
      } else if (event === "values") {
        values = data;
      } else if (event === "error") {
        failed = new ApiError(500, data?.message || data?.error || JSON.stringify(data));
      }
    }
  } catch (err) {
    failed = err;
  } finally {
    chat.busy = false;
    chat.controller = null;
    setBusy(false);
    turn.root.setAttribute("aria-busy", "false");
  }
  turn.status.textContent = "";
  if (failed) {
    turn.root.remove();
    asked?.remove();
    showError(failed, retry || (() => run(body, question)));
    return false;
  }
  if (values.answer !== undefined && !values.__interrupt__) {
    renderAnswer(turn.body, values.answer, values.citations || []);
    renderFacts(turn, values);
    foldSteps(turn);
    answered(turn.root, { runId, question: values.question || question || "", answer: withoutSources(values.answer), citations: values.citations || [] });
  }
  const state = await guarded(() => api(`/threads/${chat.thread}/state`));
  const interrupt = (state?.interrupts || [])[0];
  if (interrupt) {
    foldSteps(turn, "stepsPaused");
    if (!turn.body.childElementCount) turn.body.remove();
    box.append(approvalCard(interrupt.value));
  }
  guarded(loadThreads);
  return true;
}

function setBusy(busy) {
  $("ask").disabled = busy;
  $("question").setAttribute("aria-busy", busy ? "true" : "false");
}

// --- approval --------------------------------------------------------------------------

function approvalCard(request) {
  const queries = request.queries || request.action_requests?.[0]?.args?.queries || [];
  const cost = request.estimated_cost_usd;
  const area = el("textarea", { id: "approval-queries", rows: String(Math.max(2, queries.length)) });
  area.value = queries.join("\n");
  const resume = (decision) => run({ command: { resume: decision } });
  const card = el("section", { class: "approval", "aria-labelledby": "approval-title" },
    el("h2", { id: "approval-title" }, t("approvalTitle")),
    el("p", {}, t("approvalText")),
    el("dl", {},
      el("dt", {}, t("provider")), el("dd", {}, request.provider || "—"),
      el("dt", {}, t("cost")), el("dd", {}, cost == null ? t("costUnknown") : `USD ${cost}`)),
    el("label", { for: "approval-queries" }, t("queriesLabel")), area,
    el("div", { class: "buttons" },
      el("button", { type: "button", class: "primary", onclick: () => resume({ action: "approve" }) }, t("approve")),
      el("button", { type: "button", onclick: () => {
        const edited = area.value.split("\n").map((q) => q.trim()).filter(Boolean);
        resume(edited.join("\n") === queries.join("\n") ? { action: "approve" } : { action: "edit", queries: edited });
      } }, t("editSearch")),
      el("button", { type: "button", onclick: () => resume({ action: "skip" }) }, t("skipWeb"))));
  queueMicrotask(() => card.querySelector("button.primary").focus());
  return card;
}

// --- the form --------------------------------------------------------------------------

/** Run ``fn``; show a failure as a message (401: the sign-in). */
export async function guarded(fn) {
  try {
    return await fn();
  } catch (err) {
    if (!(err instanceof ApiError && err.status === 401)) showError(err, () => guarded(fn));
    return null;
  }
}

/** Ask ``question`` on the open thread (a new one if none). */
async function ask(question) {
  const input = $("question");
  if (input.value.trim() === question) input.value = "";
  const ok = await run({ input: { question } }, question, () => ask(question));
  // Nothing lost: a question that did not go through is back in the box.
  if (!ok && !input.value.trim()) input.value = question;
}

export function initChat() {
  const form = $("ask-form");
  const input = $("question");
  const graph = $("graph");
  graph.value = localStorage.getItem(GRAPH_KEY) || "hybrid_rag";
  graph.addEventListener("change", () => localStorage.setItem(GRAPH_KEY, graph.value));
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    const question = input.value.trim();
    if (!question || chat.busy) return;
    await ask(question);
  });
  input.addEventListener("keydown", (e) => {
    if (e.key === "Enter" && !e.shiftKey && !e.isComposing) {
      e.preventDefault();
      form.requestSubmit();
    }
  });
  $("new-thread").addEventListener("click", newThread);
  newThread();
}
