// The chat: threads, a streamed run with its progress, the answer with pills, approval,
// and control of a run (Stop, Regenerate, Edit and resend).

import {
  ApiError, cancelRun, createThread, deleteThread as removeThread, getThread, interruptedValues,
  pendingInterrupt, runIdOf, searchThreads, streamRun, threadHistory, threadState, updateThread,
} from "./api.js";
import { contentText, el, renderAnswer, withoutSources } from "./answer.js";
import { lang, t } from "./i18n.js";
import { actionDone, showError } from "./notify.js";

const ANSWER_NODES = new Set(["generate", "call_model"]);
const GRAPH_KEY = "hybrid-rag-graph";
const TITLE_CHARS = 80;
const STRATEGY_OF_ROUTE = { knowledge: "vector", search: "search", both: "both" };
const STATE_FETCHES = 6; // untitled threads whose first question is read at once
const WEB_NOT_AVAILABLE = "web search is not set up — ask your administrator"; // tools.policy.disclosure

const chat = {
  thread: null, // the open thread's id
  busy: false,
  controller: null,
  runId: "", // the streaming run's id (Stop cancels it on the server)
  stopping: false,
  markedStopped: false, // the open thread's metadata says its last run was stopped
  editing: false, // the next question replaces the last one
};

const $ = (id) => document.getElementById(id);
const isHuman = (m) => m?.type === "human" || m?.role === "user";
const isAnswer = (m) => m?.type === "ai" && !(m.tool_calls || []).length && Boolean(contentText(m.content));

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
        const found = firstQuestion((await threadState(id)).values);
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
  const threads = await searchThreads({ limit: 50, sort_by: "updated_at", sort_order: "desc" });
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
  await guarded(() => updateThread(id, { title: name.trim() }));
  await guarded(loadThreads);
}

async function deleteThread(id) {
  if (!window.confirm(t("confirmDelete"))) return;
  await guarded(() => removeThread(id));
  if (id === chat.thread) newThread();
  await guarded(loadThreads);
}

/** The open thread's id (null before the first question). */
export const currentThread = () => chat.thread;

export function newThread() {
  chat.thread = null;
  chat.markedStopped = false;
  endEdit();
  $("conversation").replaceChildren(el("p", { class: "hint" }, t("emptyChat")));
  $("question").focus();
  for (const li of $("thread-list").querySelectorAll("li")) li.classList.remove("current");
}

export async function openThread(id) {
  if (chat.busy) return;
  chat.thread = id;
  endEdit();
  const state = await guarded(() => threadState(id));
  if (!state) return;
  const [thread, runs] = await Promise.all([guarded(() => getThread(id)), runsOfAnswers(id)]);
  const metadata = thread?.metadata || {};
  if (metadata.graph_id) $("graph").value = metadata.graph_id;
  chat.markedStopped = Boolean(metadata.stopped);
  renderThread(state, metadata.stopped || "", runs);
  await guarded(loadThreads);
  $("question").focus();
}

const answerKey = (m) => m.id || contentText(m.content);

/** The run that wrote each answer of thread ``id`` (answer's id or text -> run_id), read
 * from its checkpoints: the run of the first checkpoint where the answer appears (one
 * already in the oldest checkpoint read is left out: its run is older than the window). */
async function runsOfAnswers(id) {
  const found = new Map();
  let history = [];
  try {
    history = await threadHistory(id);
  } catch {
    return found; // votes then go without a run id, as before
  }
  let before = null;
  for (const h of [...history].reverse()) { // oldest first
    const keys = (h.values?.messages || []).filter(isAnswer).map(answerKey);
    const runId = String(h.metadata?.run_id || "");
    if (before && runId) for (const k of keys) if (!before.has(k) && !found.has(k)) found.set(k, runId);
    before = new Set(keys);
  }
  return found;
}

/** A thread's turns: each human message and the answer after it (``runs``: the run of
 * each answer, runsOfAnswers'); a stopped last question (``stopped``) marked so, and a
 * pending approval asked again. */
function renderThread(state, stopped, runs = new Map()) {
  const values = state.values || {};
  const box = $("conversation");
  box.replaceChildren();
  const messages = values.messages || [];
  // The state's route, confidence and citations are those of the last answer.
  const lastAi = messages.findLastIndex(isAnswer);
  let asked = "";
  messages.forEach((m, i) => {
    if (isHuman(m)) box.append(userTurn((asked = contentText(m.content))));
    if (!isAnswer(m)) return;
    const text = contentText(m.content);
    const turn = answerTurn();
    const last = i === lastAi;
    const cites = m.additional_kwargs?.citations || (last ? values.citations : []) || [];
    renderAnswer(turn.body, withoutSources(text), cites);
    if (last) renderFacts(turn, values);
    box.append(turn.root);
    answered(turn.root, { runId: runs.get(answerKey(m)) || "", question: asked, answer: withoutSources(text), citations: cites });
  });
  const interrupt = pendingInterrupt(state);
  if (stopped && !interrupt && !messages.slice(messages.findLastIndex(isHuman)).some(isAnswer)) {
    if (lastQuestionShown() !== stopped) box.append(userTurn(stopped));
    const turn = answerTurn();
    box.append(turn.root);
    stoppedMark(turn);
  }
  if (!box.childElementCount) box.append(el("p", { class: "hint" }, t("emptyChat")));
  if (interrupt) box.append(approvalCard(interrupt, null));
  else addTurnActions();
  box.lastElementChild?.scrollIntoView({ block: "end" });
}

/** Tell the page's other parts (feedback, export) that ``root`` holds a finished answer. */
function answered(root, detail) {
  root.dispatchEvent(new CustomEvent("answered", { bubbles: true, detail: { ...detail, threadId: chat.thread, graph: $("graph").value } }));
}

// --- one turn --------------------------------------------------------------------------

function userTurn(text) {
  return el("article", { class: "turn user" }, el("h2", { class: "who" }, t("you")), el("p", { class: "question" }, text));
}

/** The parts of an answer's run: its progress (folded once done), status, answer, facts. */
function runParts() {
  const progress = el("ol", { class: "progress" });
  const summary = el("summary", {}, t("working"));
  const steps = el("details", { class: "steps", open: true }, summary, progress);
  const status = el("p", { class: "status", role: "status" });
  const body = el("div", { class: "answer" });
  const facts = el("div", { class: "facts" });
  return { progress, steps, summary, status, body, facts };
}

function answerTurn() {
  const parts = runParts();
  const root = el("article", { class: "turn assistant", "aria-busy": "false" },
    el("h2", { class: "who" }, t("assistant")), parts.status, parts.steps, parts.body, parts.facts);
  return { root, part: root, ...parts };
}

/** The run after an approval continues in the turn that paused for it (one answer, not a
 * paused bubble and another): its steps follow the paused ones. */
function continuedTurn(root) {
  const parts = runParts();
  for (const old of root.querySelectorAll(".answer, .facts, .status")) old.remove(); // none yet: it paused
  const part = el("div", { class: "resumed" }, parts.status, parts.steps, parts.body, parts.facts);
  root.append(part);
  return { root, part, ...parts };
}

function stoppedMark(turn) {
  turn.root.classList.add("stopped");
  turn.facts.append(el("p", { class: "stopped-note", role: "status" }, t("stoppedNote")));
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
  if (step === "searched" && event.error) {
    const why = event.error === WEB_NOT_AVAILABLE ? t("webNotAvailable") : event.error;
    return `${t("steps.searched", { count: event.count || 0 })} — ${why}`;
  }
  const text = t(`steps.${step}`, event);
  return text === `steps.${step}` ? step : text;
}

/** Send a question, resume an interrupted run (``request.resume``: it continues in
 * ``into``, the turn that paused) or rerun from a checkpoint (``request.checkpoint``);
 * streams into the answer turn. */
async function run(request, question, retry, into = null) {
  if (chat.busy) return false;
  chat.busy = true;
  chat.stopping = false;
  setBusy(true);
  const box = $("conversation");
  box.querySelector(".hint")?.remove();
  box.querySelector(".approval")?.remove();
  for (const old of box.querySelectorAll(".turn-actions, .stopped-note")) old.remove();
  const asked = question ? userTurn(question) : null;
  if (asked) box.append(asked);
  const turn = into ? continuedTurn(into) : answerTurn();
  turn.root.setAttribute("aria-busy", "true");
  turn.status.textContent = t("sending");
  if (!into) box.append(turn.root);
  turn.root.scrollIntoView({ block: "end" });
  const seen = new Set();
  let values = {};
  let draft = "";
  let failed = null;
  let runId = "";
  chat.controller = new AbortController();
  try {
    if (!chat.thread) {
      const th = await createThread({ title: question.slice(0, TITLE_CHARS), graph_id: $("graph").value });
      chat.thread = th.thread_id;
    }
    if (chat.markedStopped) { // a new run: the thread's last one is no longer the stopped one
      await updateThread(chat.thread, { stopped: "" });
      chat.markedStopped = false;
    }
    const context = {}; // the run's context: approval asked for, the collection chosen
    if ($("approve-web").checked) context.approve_web_search = true;
    if ($("scope")?.value) context.scope = $("scope").value;
    turn.status.textContent = t("working");
    const events = streamRun(chat.thread, { assistant: $("graph").value, context: Object.keys(context).length ? context : undefined, ...request }, chat.controller.signal);
    for await (const { event, data } of events) {
      if (event === "metadata") {
        runId = runIdOf(data) || runId;
        chat.runId = runId; // Stop cancels it
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
    chat.runId = "";
    setBusy(false);
    turn.root.setAttribute("aria-busy", "false");
  }
  turn.status.textContent = "";
  if (chat.stopping) return stoppedTurn(turn, question);
  if (failed) {
    if (into) turn.part.remove();
    else turn.root.remove();
    asked?.remove();
    showError(failed, retry || (() => run(request, question, null, into)), "ask");
    return false;
  }
  actionDone("ask");
  if (values.answer !== undefined && !interruptedValues(values)) {
    renderAnswer(turn.body, values.answer, values.citations || []);
    renderFacts(turn, values);
    foldSteps(turn);
    answered(turn.root, { runId, question: values.question || question || "", answer: withoutSources(values.answer), citations: values.citations || [] });
  }
  const interrupt = pendingInterrupt(await guarded(() => threadState(chat.thread)));
  if (interrupt) {
    foldSteps(turn, "stepsPaused");
    box.append(approvalCard(interrupt, turn.root));
  } else {
    addTurnActions();
  }
  guarded(loadThreads);
  return true;
}

/** Stop: the run is cancelled on the server; the question stays, marked stopped. */
async function stop() {
  if (!chat.busy || chat.stopping) return;
  chat.stopping = true;
  const { thread, runId, controller } = chat;
  try {
    if (thread && runId) await cancelRun(thread, runId);
  } catch (err) {
    if (!(err instanceof ApiError && err.status === 404)) showError(err); // 404: it had ended
  } finally {
    controller?.abort();
  }
}

/** A stopped run: what it had written stays, with a note; the thread remembers it. */
function stoppedTurn(turn, question) {
  foldSteps(turn);
  stoppedMark(turn);
  const asked = question || lastQuestionShown();
  if (chat.thread && asked) {
    chat.markedStopped = true;
    guarded(() => updateThread(chat.thread, { stopped: asked }));
  }
  addTurnActions();
  guarded(loadThreads);
  return true;
}

function setBusy(busy) {
  $("ask").disabled = busy;
  $("stop").hidden = !busy;
  $("question").setAttribute("aria-busy", busy ? "true" : "false");
}

// --- regenerate, edit and resend -------------------------------------------------------

const lastQuestionShown = () => [...$("conversation").querySelectorAll("article.turn.user .question")].pop()?.textContent || "";

/** The checkpoint before the thread's last question (a fork from it replaces that question
 * and its answer), or "" when the thread never recorded the question (a run stopped before
 * it began). The newest finished checkpoint with fewer questions, else the thread's first. */
async function beforeLastQuestion(question) {
  const history = await threadHistory(chat.thread);
  const humans = (values) => (values?.messages || []).filter(isHuman);
  const asked = humans(history[0]?.values);
  if (!asked.length || contentText(asked.at(-1).content).trim() !== question) return "";
  const earlier = history.filter((h) => humans(h.values).length < asked.length);
  const point = earlier.find((h) => !(h.next || []).length) || earlier.at(-1);
  return point?.checkpoint?.checkpoint_id || point?.checkpoint_id || "";
}

/** Rerun the last question (``replacement``: another question in its place) as a new run
 * from the checkpoint before it; the page shows the thread as it will be. */
async function rerun(replacement) {
  const last = lastQuestionShown();
  if (!last || !chat.thread || chat.busy) return false;
  const question = replacement || last;
  const checkpoint = await guarded(() => beforeLastQuestion(last));
  if (checkpoint === null) return false;
  const turns = [...$("conversation").querySelectorAll("article.turn")];
  const from = turns.findLastIndex((el) => el.classList.contains("user"));
  for (const old of turns.slice(from)) old.remove();
  const request = { input: { question }, ...(checkpoint ? { checkpoint } : {}) };
  const ok = await run(request, question, () => rerun(replacement));
  if (ok && question !== last) await retitle(last, question);
  return ok;
}

/** The thread titled by a question that an edit replaced takes the new question's title
 * (a title the user gave, or another question's, stays). */
async function retitle(replaced, question) {
  const thread = await guarded(() => getThread(chat.thread));
  if (!thread) return;
  firstQuestions.delete(chat.thread); // an untitled thread's first question is learnt again
  if (thread.metadata?.title === replaced.slice(0, TITLE_CHARS)) {
    await guarded(() => updateThread(chat.thread, { title: question.slice(0, TITLE_CHARS) }));
  }
  await guarded(loadThreads);
}

/** Regenerate on the last answer; Edit on the last question. */
function addTurnActions() {
  const box = $("conversation");
  for (const old of box.querySelectorAll(".turn-actions")) old.remove();
  const users = box.querySelectorAll("article.turn.user");
  const lastUser = users[users.length - 1];
  if (!lastUser) return;
  lastUser.append(el("p", { class: "turn-actions" },
    el("button", { type: "button", class: "quiet edit", onclick: () => startEdit() }, t("editQuestion"))));
  const answers = box.querySelectorAll("article.turn.assistant");
  const lastAnswer = answers[answers.length - 1];
  if (lastAnswer && lastAnswer.compareDocumentPosition(lastUser) & Node.DOCUMENT_POSITION_PRECEDING) {
    lastAnswer.append(el("p", { class: "turn-actions" },
      el("button", { type: "button", class: "quiet regenerate", onclick: () => rerun() }, t("regenerate"))));
  }
}

function startEdit() {
  chat.editing = true;
  $("editing").hidden = false;
  $("question").value = lastQuestionShown();
  $("question").focus();
}

function endEdit() {
  chat.editing = false;
  $("editing").hidden = true;
}

// --- approval --------------------------------------------------------------------------

/** The approval a paused run asks for (``request``: pendingInterrupt's); the run resumes
 * in ``paused``, the turn that paused (none when the thread was reopened: a new one). */
function approvalCard(request, paused) {
  const { queries } = request;
  const cost = request.estimated_cost_usd;
  const area = el("textarea", { id: "approval-queries", rows: String(Math.max(2, queries.length)) });
  area.value = queries.join("\n");
  const resume = (decision) => run({ resume: decision }, null, null, paused && document.contains(paused) ? paused : null);
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

/** Ask ``question`` on the open thread (a new one if none); while editing, it replaces
 * the last question. */
async function ask(question) {
  const input = $("question");
  if (input.value.trim() === question) input.value = "";
  const editing = chat.editing;
  endEdit();
  const ok = editing ? await rerun(question) : await run({ input: { question } }, question, () => ask(question));
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
  $("stop").addEventListener("click", stop);
  $("cancel-edit").addEventListener("click", () => {
    endEdit();
    input.value = "";
  });
  newThread();
}
