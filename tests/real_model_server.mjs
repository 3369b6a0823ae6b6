// An OpenAI-compatible /v1/chat/completions on loopback, served by llama.cpp through
// node-llama-cpp's prebuilt addon (npm @node-llama-cpp/linux-x64: a binary shipped inside a
// registry package; the npm packages ship no llama-server). Started by tests/real_model.py.
//
//   node real_model_server.mjs MODEL.gguf PORT [native|chatml]
//
// native (Qwen2.5 and any model whose GGUF names a chat template node-llama-cpp knows):
// LlamaChat with the wrapper resolved from the model ("auto": QwenChatWrapper for Qwen2.5),
// so the prompt is the model's own template and tool calls are its own <tool_call> format
// (node-llama-cpp forces the call's parameters by grammar once the model opens a call and
// stops at the call: the client runs the tool). chatml (SmolLM2, whose template has no
// tools): the ChatML prompt is built here and tool calls are forced by a JSON grammar, the
// way llama-server's generic tool format does it. Either way response_format JSON schemas
// are forced by grammars, one request is evaluated at a time, a client that disconnects
// aborts its generation, and every generation is bounded by the request's max_tokens (else
// DEFAULT_MAX_TOKENS).
import http from "node:http";
import {getLlama, LlamaChat, LlamaCompletion} from "node-llama-cpp";

const [modelPath, portArg, modeArg] = process.argv.slice(2);
const NATIVE = (modeArg || "chatml") === "native";
const DEFAULT_MAX_TOKENS = 512;
const CONTEXT_SIZE = 8192;
const MAX_BODY = 8 * 1024 * 1024;
const MAX_REF_DEPTH = 16;
const THREADS = Number(process.env.LLAMA_THREADS || 1);

const llama = await getLlama({build: "never", gpu: false, logLevel: "error"});
const model = await llama.loadModel({modelPath});
// One thread: on a loaded 2-core machine more threads spin against each other and a
// 30-token reply took minutes.
const context = await model.createContext({contextSize: CONTEXT_SIZE, threads: THREADS});
const sequence = context.getSequence();
const completion = NATIVE ? null : new LlamaCompletion({contextSequence: sequence});
const chat = NATIVE ? new LlamaChat({contextSequence: sequence, chatWrapper: "auto"}) : null;
if (chat) console.log(`chat wrapper: ${chat.chatWrapper.wrapperName}`);
let queue = Promise.resolve();

const KEEP = new Set(["type", "properties", "required", "items", "enum", "const", "oneOf",
  "minItems", "maxItems", "minLength", "maxLength", "prefixItems", "format"]);

// A pydantic/LangChain JSON schema reduced to what node-llama-cpp's grammar accepts:
// $ref inlined (bounded), anyOf/allOf as oneOf, annotations dropped.
function simplify(schema, defs, depth = 0) {
  if (depth > MAX_REF_DEPTH || schema === true || !schema || typeof schema !== "object") {
    return {type: ["string", "number", "boolean", "null"]};
  }
  if (schema.$ref) {
    const name = schema.$ref.split("/").pop();
    return simplify(defs[name], defs, depth + 1);
  }
  const alts = schema.anyOf || schema.oneOf || (schema.allOf?.length === 1 ? null : schema.allOf);
  if (schema.allOf?.length === 1) return simplify(schema.allOf[0], defs, depth + 1);
  if (alts) return {oneOf: alts.map((s) => simplify(s, defs, depth + 1))};
  const out = {};
  for (const [key, value] of Object.entries(schema)) {
    if (!KEEP.has(key)) continue;
    if (key === "properties") {
      out.properties = Object.fromEntries(
        Object.entries(value).map(([k, v]) => [k, simplify(v, defs, depth + 1)]));
    } else if (key === "items" || key === "prefixItems") {
      out[key] = Array.isArray(value) ? value.map((v) => simplify(v, defs, depth + 1))
        : simplify(value, defs, depth + 1);
    } else if (key === "format" && !["date", "time", "date-time"].includes(value)) {
      continue;
    } else {
      out[key] = value;
    }
  }
  if (!out.type && !out.enum && out.const === undefined && !out.oneOf) {
    if (out.properties) out.type = "object";
    else return {type: ["string", "number", "boolean", "null"]};
  }
  if (out.type === "object" && !out.properties) out.properties = {};
  return out;
}

function toolSchema(tools, choice) {
  const named = choice?.function?.name;
  const chosen = named ? tools.filter((t) => t.function.name === named) : tools;
  const calls = chosen.map((t) => {
    const fn = t.function || {};
    const params = fn.parameters || {type: "object", properties: {}};
    return {type: "object", properties: {tool_call: {type: "object", properties: {
      name: {const: fn.name}, arguments: simplify(params, params.$defs || {})}}}};
  });
  if (choice === "required" || named) return calls.length === 1 ? calls[0] : {oneOf: calls};
  return {oneOf: [...calls, {type: "object", properties: {response: {type: "string"}}}]};
}

function toolPrompt(tools) {
  const lines = tools.map((t) => `- ${t.function.name}: ${t.function.description || ""} ` +
    `arguments: ${JSON.stringify(t.function.parameters?.properties || {})}`);
  return "You can call these tools:\n" + lines.join("\n") + "\nReply with JSON: either " +
    '{"tool_call": {"name": ..., "arguments": {...}}} or {"response": "your answer"}.';
}

function text(content) {
  if (typeof content === "string") return content;
  if (Array.isArray(content)) return content.map((p) => p.text || "").join("");
  return "";
}

function chatml(messages, tools) {
  const parts = [];
  const system = tools.length ? toolPrompt(tools) : "";
  let sawSystem = false;
  for (const m of messages) {
    let body = text(m.content);
    if (m.role === "system" && system && !sawSystem) body = `${body}\n\n${system}`;
    if (m.role === "system") sawSystem = true;
    if (m.role === "assistant" && m.tool_calls?.length) {
      body = m.tool_calls.map((c) => JSON.stringify({tool_call: {
        name: c.function.name, arguments: JSON.parse(c.function.arguments || "{}")}})).join("\n");
    }
    const role = m.role === "tool" ? "user" : m.role;
    if (m.role === "tool") body = `Tool result:\n${body}`;
    parts.push(`<|im_start|>${role}\n${body}<|im_end|>\n`);
  }
  if (system && !sawSystem) parts.unshift(`<|im_start|>system\n${system}<|im_end|>\n`);
  parts.push("<|im_start|>assistant\n");
  return parts.join("");
}

async function grammarFor(body, tools) {
  if (tools.length) return llama.createGrammarForJsonSchema(toolSchema(tools, body.tool_choice));
  const format = body.response_format || {};
  if (format.type === "json_schema") {
    const schema = format.json_schema?.schema || {};
    return llama.createGrammarForJsonSchema(simplify(schema, schema.$defs || {}));
  }
  if (format.type === "json_object") return llama.getGrammarFor("json");
  return undefined;
}

function message(raw, tools, id) {
  if (!tools.length) return {role: "assistant", content: raw};
  let parsed;
  try {
    parsed = JSON.parse(raw);
  } catch {
    return {role: "assistant", content: raw};  // cut off by max_tokens
  }
  if (parsed.tool_call) {
    return {role: "assistant", content: null, tool_calls: [{id: `call_${id}`, type: "function",
      function: {name: parsed.tool_call.name,
        arguments: JSON.stringify(parsed.tool_call.arguments ?? {})}}]};
  }
  return {role: "assistant", content: String(parsed.response ?? "")};
}

// OpenAI messages as node-llama-cpp's chat history: a tool message's content becomes the
// result of the call it answers, and the history ends with the model's turn to continue.
function history(messages) {
  const items = [];
  const calls = new Map();
  for (const m of messages) {
    const body = text(m.content);
    if (m.role === "system" || m.role === "developer") items.push({type: "system", text: body});
    else if (m.role === "user") items.push({type: "user", text: body});
    else if (m.role === "assistant") {
      const response = body ? [body] : [];
      for (const c of m.tool_calls || []) {
        let params = {};
        try { params = JSON.parse(c.function.arguments || "{}"); } catch { params = {}; }
        const call = {type: "functionCall", name: c.function.name, params, result: ""};
        calls.set(c.id, call);
        response.push(call);
      }
      items.push({type: "model", response});
    } else if (m.role === "tool") {
      const call = calls.get(m.tool_call_id);
      if (call) call.result = body; else items.push({type: "user", text: `Tool result:\n${body}`});
    }
  }
  const last = items[items.length - 1];
  const open = last?.type === "model" && last.response.some((r) => r.type === "functionCall");
  if (!open) items.push({type: "model", response: []});
  return items;
}

function functionsOf(tools) {
  return Object.fromEntries(tools.map((t) => {
    const params = t.function.parameters || {type: "object", properties: {}};
    return [t.function.name, {description: t.function.description || "",
      params: simplify(params, params.$defs || {})}];
  }));
}

// Qwen2.5-Coder often writes its call as the bare JSON of its template's <tool_call> block,
// without the tags: a reply that is exactly {"name": <a tool>, "arguments": {...}} is the
// call it means (llama-server's Hermes parser accepts the same).
function bareCall(response, tools) {
  let parsed;
  try {
    parsed = JSON.parse(String(response || "").trim().replace(/^```(?:json)?\s*|\s*```$/g, ""));
  } catch {
    return [];
  }
  const names = new Set(tools.map((t) => t.function.name));
  if (!parsed || typeof parsed !== "object" || !names.has(parsed.name)) return [];
  return [{functionName: parsed.name, params: parsed.arguments ?? parsed.parameters ?? {}}];
}

async function completeNative(body, tools, signal) {
  const chatHistory = history(body.messages || []);
  const functions = tools.length ? functionsOf(tools) : undefined;
  const state = chat.chatWrapper.generateContextState({chatHistory, availableFunctions: functions,
    documentFunctionParams: true});
  const promptTokens = state.contextText.tokenize(model.tokenizer).length;
  const limit = body.max_tokens ?? body.max_completion_tokens ?? DEFAULT_MAX_TOKENS;
  if (promptTokens + limit > CONTEXT_SIZE) {
    return [400, {error: {message: `the request exceeds the available context size ` +
      `(${promptTokens} prompt tokens + ${limit} > ${CONTEXT_SIZE})`, type: "invalid_request_error"}}];
  }
  let produced = 0;
  const grammar = tools.length ? undefined : await grammarFor(body, []);
  const options = {maxTokens: limit, temperature: body.temperature ?? 0, seed: body.seed ?? 0,
    signal, stopOnAbortSignal: true, onToken: (tokens) => { produced += tokens.length; }};
  if (functions) Object.assign(options, {functions, documentFunctionParams: true});
  else if (grammar) options.grammar = grammar;
  const result = await chat.generateResponse(chatHistory, options);
  const id = Math.random().toString(36).slice(2, 12);
  const called = result.functionCalls?.length ? result.functionCalls : bareCall(result.response, tools);
  const calls = called.map((c, i) => ({id: `call_${id}_${i}`, type: "function",
    function: {name: c.functionName, arguments: JSON.stringify(c.params ?? {})}}));
  if (calls.length) result.response = "";
  const msg = calls.length ? {role: "assistant", content: result.response || null, tool_calls: calls}
    : {role: "assistant", content: result.response};
  const finish = calls.length ? "tool_calls"
    : result.metadata.stopReason === "maxTokens" ? "length" : "stop";
  return [200, {id: `chatcmpl-${id}`, object: "chat.completion", created: Math.floor(Date.now() / 1000),
    model: body.model || "local", choices: [{index: 0, message: msg, finish_reason: finish}],
    usage: {prompt_tokens: promptTokens, completion_tokens: produced,
      total_tokens: promptTokens + produced}}];
}

async function complete(body, signal) {
  const tools = body.tool_choice === "none" ? []
    : (body.tools || []).filter((t) => t.type === "function" && t.function?.name);
  if (NATIVE) return completeNative(body, tools, signal);
  const prompt = model.tokenize(chatml(body.messages || [], tools), true);
  const limit = body.max_tokens ?? body.max_completion_tokens ?? DEFAULT_MAX_TOKENS;
  if (prompt.length + limit > CONTEXT_SIZE) {
    return [400, {error: {message: `the request exceeds the available context size ` +
      `(${prompt.length} prompt tokens + ${limit} > ${CONTEXT_SIZE})`, type: "invalid_request_error"}}];
  }
  let produced = 0;
  const result = await completion.generateCompletionWithMeta(prompt, {
    maxTokens: limit, temperature: body.temperature ?? 0, seed: body.seed ?? 0,
    grammar: await grammarFor(body, tools), signal, stopOnAbortSignal: true,
    onToken: (tokens) => { produced += tokens.length; },
  });
  const id = Math.random().toString(36).slice(2, 12);
  const msg = message(result.response, tools, id);
  const finish = msg.tool_calls ? "tool_calls"
    : result.metadata.stopReason === "maxTokens" ? "length" : "stop";
  return [200, {id: `chatcmpl-${id}`, object: "chat.completion", created: Math.floor(Date.now() / 1000),
    model: body.model || "local", choices: [{index: 0, message: msg, finish_reason: finish}],
    usage: {prompt_tokens: prompt.length, completion_tokens: produced,
      total_tokens: prompt.length + produced}}];
}

function streamed(res, reply) {
  // stream=true: the whole reply as one chunk, then the usage, then [DONE].
  const choice = reply.choices[0];
  const delta = {role: "assistant", content: choice.message.content ?? ""};
  if (choice.message.tool_calls) {
    delta.tool_calls = choice.message.tool_calls.map((c, index) => ({index, ...c}));
  }
  const base = {id: reply.id, object: "chat.completion.chunk", created: reply.created, model: reply.model};
  res.writeHead(200, {"content-type": "text/event-stream"});
  res.write(`data: ${JSON.stringify({...base, choices: [{index: 0, delta, finish_reason: null}]})}\n\n`);
  res.write(`data: ${JSON.stringify({...base, choices: [{index: 0, delta: {},
    finish_reason: choice.finish_reason}], usage: reply.usage})}\n\n`);
  res.end("data: [DONE]\n\n");
}

function send(res, status, payload) {
  res.writeHead(status, {"content-type": "application/json"});
  res.end(JSON.stringify(payload));
}

const server = http.createServer((req, res) => {
  if (req.method === "GET" && (req.url === "/health" || req.url === "/v1/models")) {
    return send(res, 200, {object: "list", data: [{id: "local", object: "model"}], status: "ok"});
  }
  if (req.method !== "POST" || !req.url.endsWith("/chat/completions")) {
    return send(res, 404, {error: {message: "not found"}});
  }
  const chunks = [];
  let size = 0;
  req.on("data", (c) => {
    size += c.length;
    if (size > MAX_BODY) req.destroy(); else chunks.push(c);
  });
  req.on("end", () => {
    let body;
    try {
      body = JSON.parse(Buffer.concat(chunks).toString("utf8"));
    } catch (e) {
      return send(res, 400, {error: {message: `invalid JSON body: ${e.message}`}});
    }
    const abort = new AbortController();
    res.on("close", () => { if (!res.writableFinished) abort.abort(); });
    queue = queue.then(async () => {
      if (abort.signal.aborted) return;
      try {
        const [status, payload] = await complete(body, abort.signal);
        if (status === 200 && body.stream) streamed(res, payload); else send(res, status, payload);
      } catch (e) {
        if (!res.headersSent) send(res, 500, {error: {message: String(e?.message || e)}});
      }
    });
  });
});
server.listen(Number(portArg), "127.0.0.1", () => console.log(`listening on 127.0.0.1:${portArg}`));
