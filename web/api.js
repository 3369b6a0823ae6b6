// The server's own API, with the user's token (sessionStorage: this tab only).

const TOKEN_KEY = "hybrid-rag-token";
const REQUEST_TIMEOUT_MS = 30000; // a plain request; streams are bounded by the run's own deadline

export class ApiError extends Error {
  /** status 0: the server could not be reached. */
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

export const token = {
  get: () => sessionStorage.getItem(TOKEN_KEY) || "",
  set: (value) => sessionStorage.setItem(TOKEN_KEY, value.trim()),
  clear: () => sessionStorage.removeItem(TOKEN_KEY),
};

function headers(extra = {}) {
  const h = { ...extra };
  const value = token.get();
  if (value) h.Authorization = `Bearer ${value}`;
  return h;
}

async function errorOf(response) {
  let message = response.statusText || "error";
  try {
    const body = await response.json();
    message = body.error || body.detail || body.message || JSON.stringify(body);
  } catch {
    /* not JSON: keep the status text */
  }
  const error = new ApiError(response.status, String(message));
  if (response.status === 401) window.dispatchEvent(new CustomEvent("auth-required"));
  return error;
}

async function send(path, { method = "GET", json, form, signal, accept } = {}) {
  const init = { method, headers: headers(accept ? { Accept: accept } : {}), signal };
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
  if (!response.ok) throw await errorOf(response);
  return response;
}

/** A JSON request; throws ApiError (401 also fires "auth-required"). */
export async function api(path, options = {}) {
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
export async function* stream(path, { json, signal } = {}) {
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

/** A document's original (fetched with the token): a Response, shown by viewer.js. */
export function fetchOriginal(docId) {
  return send(`/kb/documents/${encodeURIComponent(docId)}/original`);
}
