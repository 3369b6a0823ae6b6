// The page's protocol in one place: every URL the page asks, and how an interrupt is read.
// The other modules call the named functions below (threads, runs and their streams,
// interrupts, documents, jobs, sources, feedback, collections, the admin's routes); none
// builds a URL (tests/test_ui_protocol_js.py).
// Requests carry the browser's session cookie (HttpOnly: no script here reads it); one that
// changes anything also sends the session's CSRF token, read from its own cookie
// (server/credentials.py). The page keeps no credential: a token or password is sent once,
// to sign in, and forgotten.

const CSRF_COOKIE = "hybrid_rag_csrf";
const REQUEST_TIMEOUT_MS = 30000; // a plain request; streams are bounded by the run's own deadline
const STREAM_MODE = ["values", "updates", "custom", "messages-tuple"];
const HISTORY_LIMIT = 100; // checkpoints read to find where the last question began

export class ApiError extends Error {
  /** status 0: the server could not be reached. */
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

/** The session's CSRF token ("" when signed out, or on a server without users). */
function csrfToken() {
  const prefix = `${CSRF_COOKIE}=`;
  const found = document.cookie.split(";").map((c) => c.trim()).find((c) => c.startsWith(prefix));
  return found ? decodeURIComponent(found.slice(prefix.length)) : "";
}

function headers(method, extra = {}) {
  const h = { ...extra };
  const value = csrfToken();
  if (value && method !== "GET" && method !== "HEAD") h["X-CSRF-Token"] = value;
  return h;
}

async function errorOf(response, signingIn) {
  let message = response.statusText || "error";
  try {
    const body = await response.json();
    message = body.error || body.detail || body.message || JSON.stringify(body);
  } catch {
    /* not JSON: keep the status text */
  }
  const error = new ApiError(response.status, String(message));
  if (response.status === 401 && !signingIn) window.dispatchEvent(new CustomEvent("auth-required"));
  return error;
}

async function send(path, { method = "GET", json, form, signal, accept, signingIn } = {}) {
  const init = { method, headers: headers(method, accept ? { Accept: accept } : {}), signal };
  if (json !== undefined) {
    init.headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(json);
  } else if (form) {
    init.body = form;
  }
  let response;
  try {
    response = await fetch(path, init);
  } catch (err) {
    if (err.name === "AbortError") throw err;
    throw new ApiError(0, String(err.message || err));
  }
  if (!response.ok) throw await errorOf(response, signingIn);
  return response;
}

/** A JSON request; throws ApiError (401 also fires "auth-required"). */
async function api(path, options = {}) {
  const controller = new AbortController();
  const timer = setTimeout(() => controller.abort(), REQUEST_TIMEOUT_MS);
  try {
    const response = await send(path, { ...options, signal: options.signal || controller.signal });
    const type = response.headers.get("content-type") || "";
    return type.includes("json") ? response.json() : response;
  } catch (err) {
    if (err.name === "AbortError") throw new ApiError(0, "timed out");
    throw err;
  } finally {
    clearTimeout(timer);
  }
}

/** A Server-Sent Events stream (POST with a JSON body, or GET): yields {event, data}. */
async function* stream(path, { json, signal } = {}) {
  const response = await send(path, {
    method: json === undefined ? "GET" : "POST", json, signal, accept: "text/event-stream",
  });
  const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  for (;;) {
    let chunk;
    try {
      chunk = await reader.read();
    } catch (err) {
      if (err.name === "AbortError") throw err;
      throw new ApiError(0, String(err.message || err));
    }
    if (chunk.done) break;
    buffer += chunk.value.replace(/\r\n/g, "\n");
    let end;
    while ((end = buffer.indexOf("\n\n")) >= 0) {
      const block = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      let event = "message";
      const data = [];
      for (const line of block.split("\n")) {
        if (line.startsWith("event:")) event = line.slice(6).trim();
        else if (line.startsWith("data:")) data.push(line.slice(5).replace(/^ /, ""));
      }
      if (!data.length) continue;
      let parsed;
      try {
        parsed = JSON.parse(data.join("\n"));
      } catch {
        parsed = data.join("\n");
      }
      yield { event, data: parsed };
    }
  }
}

const enc = encodeURIComponent;

// --- who ---------------------------------------------------------------------------------

/** Whether the server accepts this browser (a cheap call; 401 throws). */
export const checkSignIn = () => searchThreads({ limit: 1 });

/** Which sign-ins the server offers: ``{password, token, oidc}``. */
export const signInMethods = () => api("/auth/methods");
/** Sign in (each answers ``{identity, admin}`` and sets the session cookie; 401: refused). */
export const signInWithPassword = (identity, password) => api("/auth/login", { method: "POST", json: { identity, password }, signingIn: true });
export const signInWithToken = (value) => api("/auth/token", { method: "POST", json: { token: value.trim() }, signingIn: true });
/** Where the browser goes to sign in with the identity provider (a page, not a request). */
export const oidcSignInHref = "/auth/oidc/login";
/** End the session on the server (the cookie alone would outlive a sign-out). */
export const signOut = () => api("/auth/logout", { method: "POST", signingIn: true });
/** Whether this browser holds a session (its CSRF cookie is readable; the session is not). */
export const hasSession = () => Boolean(csrfToken());

const known = { token: null, who: null }; // the last session's answer (a session's rights stay)

/** ``{identity, admin}`` of the session; a server without the document API: not an admin. */
export async function whoAmI() {
  const current = csrfToken();
  if (known.token === current && known.who) return known.who;
  let who;
  try {
    who = await api("/kb/me");
  } catch (err) {
    if (!(err instanceof ApiError && err.status === 404)) throw err;
    who = { identity: "", admin: false };
  }
  Object.assign(known, { token: current, who });
  return who;
}

// --- threads -----------------------------------------------------------------------------

export const searchThreads = (query) => api("/threads/search", { method: "POST", json: query });
export const createThread = (metadata) => api("/threads", { method: "POST", json: { metadata } });
export const getThread = (id) => api(`/threads/${enc(id)}`);
export const threadState = (id) => api(`/threads/${enc(id)}/state`);
export const updateThread = (id, metadata) => api(`/threads/${enc(id)}`, { method: "PATCH", json: { metadata } });
/** A deleted conversation is no longer shared (the server keeps its copy otherwise). */
export const deleteThread = async (id) => {
  await shareThread(id, []).catch(() => {});
  return api(`/threads/${enc(id)}`, { method: "DELETE" });
};

/** The thread's checkpoints, newest first (each ``{values, checkpoint, ...}``). */
export const threadHistory = (id) => api(`/threads/${enc(id)}/history`, { method: "POST", json: { limit: HISTORY_LIMIT } });

// --- runs and their streams --------------------------------------------------------------

/**
 * Start a run on thread ``id`` and stream it: yields {event, data}. ``run`` holds
 * ``assistant`` and one of ``input`` (a new question), ``resume`` (an interrupt's answer);
 * optional ``context`` and ``checkpoint`` (a checkpoint id the run starts from: a fork,
 * to rerun or replace the last question).
 */
export function streamRun(id, { assistant, input, resume, context, checkpoint }, signal) {
  const json = { assistant_id: assistant, stream_mode: STREAM_MODE, on_disconnect: "cancel" };
  if (input !== undefined) json.input = input;
  if (resume !== undefined) json.command = { resume };
  if (context) json.context = context;
  if (checkpoint) json.checkpoint = { checkpoint_id: checkpoint };
  return stream(`/threads/${enc(id)}/runs/stream`, { json, signal });
}

/** Cancel a run on the server (Stop); the thread keeps what it checkpointed. */
export const cancelRun = (threadId, runId) => api(`/threads/${enc(threadId)}/runs/${enc(runId)}/cancel?wait=1&action=interrupt`, { method: "POST" });

/** The run id a stream's ``metadata`` event carries, or "". */
export const runIdOf = (metadata) => String(metadata?.run_id || "");

// --- interrupts --------------------------------------------------------------------------

/** The pending interrupt of a thread's state (servers list them at the top or per task),
 * as what the page asks about: ``{provider, queries, estimated_cost_usd}``; or null. */
export function pendingInterrupt(state) {
  const found = (state?.interrupts?.length ? state.interrupts : (state?.tasks || []).flatMap((task) => task.interrupts || []))[0];
  if (!found) return null;
  const value = found.value || {};
  const queries = value.queries || value.action_requests?.[0]?.args?.queries || [];
  return { ...value, queries };
}

/** Whether a stream's final ``values`` stopped at an interrupt. */
export const interruptedValues = (values) => Boolean(values?.__interrupt__?.length);

// --- documents, uploads and jobs ---------------------------------------------------------

/** A page of the documents the user may read: ``{documents, total, limit, offset}``. */
export function listDocuments({ limit, offset, q, prefix, format }) {
  const params = new URLSearchParams({ limit: String(limit), offset: String(offset) });
  for (const [key, value] of Object.entries({ q, prefix, format })) if (value) params.set(key, value);
  return api(`/kb/documents?${params}`);
}

export const deleteDocument = (docId) => api(`/kb/documents/${enc(docId)}`, { method: "DELETE" });

/** The link of a document's original (the page opens it with the session: viewer.js). */
export const originalHref = (docId, page) => `/kb/documents/${enc(docId)}/original${page ? `#page=${page}` : ""}`;

/** Send files (a FormData of ``file`` parts, optional ``acl``): ``{job_id}``. */
export const uploadFiles = (form) => api("/kb/uploads", { method: "POST", form });

/** A job's states as it runs (ends at a terminal state). */
export const jobEvents = (jobId) => stream(`/kb/jobs/${enc(jobId)}/events`);

export const listSources = () => api("/kb/sources");

/** A document's original (fetched with the session): a Response, shown by viewer.js. */
export function fetchOriginal(docId) {
  return send(`/kb/documents/${enc(docId)}/original`);
}

/** A Word or Excel original as the server's escaped HTML fragment (text and tables). */
export async function fetchPreview(docId) {
  return (await send(`/kb/documents/${enc(docId)}/preview`)).text();
}

/** A document's original as an absolute link (an exported conversation's sources): the
 * page's own viewer (it signs in, then opens the original), never the document API's
 * address (that answers 401 to a browser without the token). */
export function originalUrl(origin, docId, page, title) {
  const params = new URLSearchParams({ original: docId });
  if (page) params.set("page", String(page));
  if (title) params.set("title", title);
  return `${origin}/ui/#${params}`;
}

/** The original a page address names (``#original=<doc_id>&page=N&title=T``:
 * originalUrl's), as ``{docId, page, title}``, or null. */
export function linkedOriginal(hash) {
  const params = new URLSearchParams(String(hash || "").replace(/^#/, ""));
  const docId = params.get("original");
  return docId ? { docId, page: Number(params.get("page")) || undefined, title: params.get("title") || "" } : null;
}

// --- feedback ----------------------------------------------------------------------------

/** The caller's own votes (on one thread's answers): ``{feedback: [rows]}``. */
export const listFeedback = (threadId) => api(`/feedback?${new URLSearchParams({ thread_id: threadId })}`);

/** Vote on an answer (again: the vote changes): the stored row. */
export const saveFeedback = (body) => api("/feedback", { method: "PUT", json: body });

// --- collections -------------------------------------------------------------------------

/** What the caller can scope a question to: ``{folders, sources, sets}``. */
export const listCollections = () => api("/kb/collections");
export const saveCollection = (json) => api("/kb/collections", { method: "POST", json });
export const deleteCollection = (name) => api(`/kb/collections/${enc(name)}`, { method: "DELETE" });

// --- admin -------------------------------------------------------------------------------

/** ``{identity, admin, users_file}`` of the caller (anyone may ask). */
export const adminMe = () => api("/admin/me");
export const listUsers = () => api("/admin/users");
/** A new user: ``{identity, groups, token}`` (the token is answered this once). */
export const createUser = (json) => api("/admin/users", { method: "POST", json });
/** ``action``: "enable", "disable" or "rotate" (answers the new token). */
export const userAction = (identity, action) => api(`/admin/users/${enc(identity)}/${enc(action)}`, { method: "POST" });
/** Set or reset a user's password (their sessions end). */
export const setPassword = (identity, password) => api(`/admin/users/${enc(identity)}/password`, { method: "POST", json: { password } });
export const deleteUser = (identity) => api(`/admin/users/${enc(identity)}`, { method: "DELETE" });
export const listJobs = () => api("/admin/jobs");
export const createSource = (json) => api("/kb/sources", { method: "POST", json });
export const syncSource = (id) => api(`/kb/sources/${enc(id)}/sync`, { method: "POST" });
export const deleteSource = (id) => api(`/kb/sources/${enc(id)}`, { method: "DELETE" });

// --- sharing: API keys, groups, a document's access, shared conversations ---------------

/** The caller's own API keys: ``{keys: [{id, name, prefix, created, expires, expired}]}``. */
export const listKeys = () => api("/auth/keys");
/** A new key ``{name, expires_days}``: the record and ``key``, answered this once. */
export const createKey = (json) => api("/auth/keys", { method: "POST", json });
export const revokeKey = (id) => api(`/auth/keys/${enc(id)}`, { method: "DELETE" });
export const listAllKeys = () => api("/admin/keys");
export const listGroups = () => api("/admin/groups");
export const addMember = (group, identity) => api(`/admin/groups/${enc(group)}/members`, { method: "POST", json: { identity } });
export const removeMember = (group, identity) => api(`/admin/groups/${enc(group)}/members/${enc(identity)}`, { method: "DELETE" });
/** Who may read a document: ``{acl: [principals], public, owner, can_change}``. */
export const documentAccess = (docId) => api(`/kb/documents/${enc(docId)}/access`);
export const grantAccess = (docId, principal) => api(`/kb/documents/${enc(docId)}/access`, { method: "POST", json: { principal } });
export const revokeAccess = (docId, principal) => api(`/kb/documents/${enc(docId)}/access/${enc(principal)}`, { method: "DELETE" });
/** Whom the caller's thread is shared with: ``{with: [principals]}``. */
export const threadSharing = (threadId) => api(`/kb/threads/${enc(threadId)}/share`);
/** Share the caller's thread (``[]``: stop); the server keeps a copy of it as it is now. */
export const shareThread = (threadId, principals) => api(`/kb/threads/${enc(threadId)}/share`, { method: "PUT", json: { with: principals } });
export const sharedThreads = () => api("/kb/shared");
/** A conversation shared with the caller: ``{owner, title, turns: [{question, answer, citations}]}``. */
export const sharedThread = (threadId) => api(`/kb/shared/${enc(threadId)}`);
