// An answer with its citation pills, and the source card a pill opens. Answers are
// Markdown (lists, tables, code), rendered by the vendored marked and sanitized by the
// vendored DOMPurify before they reach the page: a model's or a document's HTML is data.

import { originalHref } from "./api.js";
import { lang, t } from "./i18n.js";
import { markdown } from "./sanitize.js";
import { openOriginal } from "./viewer.js";

export const LABEL_RE = /\[(内部|网络|internal|web)\s*-\s*(\d{1,3})\]/gi;
const KIND = { 内部: "internal", internal: "internal", 网络: "web", web: "web" };
const SOURCES_RULE = /\n\n---\n\*\*(Sources|来源)\*\*\n[\s\S]*$/;

/** The answer of a chat message without its sources block. */
export function withoutSources(text) {
  return String(text || "").replace(SOURCES_RULE, "");
}

/** The text of message content (a string or content blocks). */
export function contentText(content) {
  if (typeof content === "string") return content;
  if (!Array.isArray(content)) return "";
  return content.map((b) => (typeof b === "string" ? b : b?.type === "text" ? b.text : "")).join("\n");
}

function canonical(label) {
  const m = /\[(内部|网络|internal|web)\s*-\s*(\d{1,3})\]/i.exec(label);
  return m ? `${KIND[m[1].toLowerCase()] || KIND[m[1]]}-${m[2]}` : label;
}

export function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v == null || v === false) continue;
    if (k === "class") node.className = v;
    else if (k === "text") node.textContent = v;
    else if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
    else node.setAttribute(k, v === true ? "" : v);
  }
  for (const child of children.flat()) {
    if (child == null || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

/** The sentence a pill at position ``at`` of ``text`` vouches for: the one ending before it
 * (labels follow their sentence: "… 18 days. [internal-1]"). A semicolon ends no sentence:
 * an extractive answer reads a table out as "a / b; c / d", and the pill vouches for every
 * row it read, not the last one. */
function sentenceAt(text, at) {
  const before = text.slice(0, at).replace(LABEL_RE, " ").trimEnd();
  const body = before.replace(/[.!?。！？]$/, "");
  const start = Math.max(body.search(/[^.!?。！？\n]*$/), 0);
  return before.slice(start).trim();
}

const NO_PILLS = "code, pre, a";
const BLOCK = "p, li, td, th, blockquote, h1, h2, h3, h4, h5, h6, div";

/** The labels in the fragment's text (not inside code or links), with the sentence each
 * vouches for; read before any is replaced, so a pill's text is in no sentence. */
function labelsIn(root) {
  const found = [];
  const walker = document.createTreeWalker(root, NodeFilter.SHOW_TEXT);
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    if (node.parentElement?.closest(NO_PILLS)) continue;
    const block = node.parentElement?.closest(BLOCK) || root;
    for (const m of node.data.matchAll(LABEL_RE)) {
      const range = document.createRange();
      range.setStart(block, 0);
      range.setEnd(node, m.index);
      const before = range.toString();
      found.push({ node, index: m.index, label: m[0], n: m[2], sentence: sentenceAt(before, before.length) });
    }
  }
  return found;
}

/** A pill for a label (a button opening its source, or a dimmed label that matches none). */
function pill(found, byLabel) {
  const key = canonical(found.label);
  const cite = byLabel.get(key);
  const kind = key.split("-")[0];
  const text = found.label.replace(/^\[|\]$/g, "");
  if (!cite) return el("span", { class: `pill ${kind} unresolved` }, text);
  // A shared conversation's source its reader may not open: the label, nothing of it.
  if (cite.withheld) return el("span", { class: `pill ${kind} unresolved withheld`, title: t("withheldSource"), "aria-label": `${text}: ${t("withheldSource")}` }, text);
  return el("button", {
    type: "button", class: `pill ${kind}`, "data-label": found.label,
    "aria-label": `${t(kind)} ${found.n}: ${cite.title || ""}`,
    onclick: (e) => showSource(cite, found.sentence, e.currentTarget),
  }, text);
}

/**
 * Render ``text`` into ``container``: Markdown (sanitized), labels as pills inside the
 * text (internal and web look different). ``citations`` are the records of the state (or
 * of the message).
 */
export function renderAnswer(container, text, citations = []) {
  const byLabel = new Map(citations.map((c) => [canonical(c.label || ""), c]));
  const frag = markdown(text);
  // Each text node split from its end, so the earlier matches' offsets stay right.
  for (const found of labelsIn(frag).reverse()) {
    const after = found.node.splitText(found.index);
    after.data = after.data.slice(found.label.length);
    found.node.after(pill(found, byLabel));
  }
  container.replaceChildren(frag);
}

/** Words worth highlighting: Latin words of 3+ letters, numbers, Chinese character pairs. */
function keyTerms(sentence) {
  const terms = new Set();
  for (const w of sentence.toLowerCase().match(/[a-z][a-z'-]{2,}|\d+(?:[.,]\d+)?/g) || []) terms.add(w);
  for (const run of sentence.match(/[\u3400-\u9fff]+/g) || []) {
    for (let i = 0; i + 2 <= run.length; i++) terms.add(run.slice(i, i + 2));
  }
  for (const stop of ["the", "and", "for", "are", "with", "that", "this", "from", "was", "were", "has", "have", "not", "each", "any", "all", "its", "per"]) terms.delete(stop);
  return [...terms].sort((a, b) => b.length - a.length);
}

function escapeRe(s) {
  return s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
}

/** Where ``sentence`` is quoted in ``passage`` (whitespace-insensitive), or null. */
function quoted(passage, sentence) {
  const words = sentence.trim().split(/\s+/).filter(Boolean);
  if (words.join("").length < 8) return null;
  const re = new RegExp(words.map(escapeRe).join("\\s*"));
  const m = re.exec(passage);
  return m ? [m.index, m.index + m[0].length] : null;
}

/** ``passage`` with the citing sentence marked where it is quoted, else its words. */
export function highlighted(passage, sentence) {
  const frag = document.createDocumentFragment();
  const span = quoted(passage, sentence.replace(/^[\s;；,，:：]+|[\s;；,，]+$/g, ""));
  if (span) {
    frag.append(passage.slice(0, span[0]), el("mark", {}, passage.slice(span[0], span[1])), passage.slice(span[1]));
    return frag;
  }
  const terms = keyTerms(sentence);
  if (!terms.length) {
    frag.append(passage);
    return frag;
  }
  // Latin words and numbers whole (not "days" inside "holidays"); Chinese pairs anywhere.
  const re = new RegExp(terms.map((w) => (/^[\w'-]+$/.test(w) ? `\\b${escapeRe(w)}\\b` : escapeRe(w))).join("|"), "gi");
  let last = 0;
  for (const m of passage.matchAll(re)) {
    frag.append(passage.slice(last, m.index), el("mark", {}, m[0]));
    last = m.index + m[0].length;
  }
  frag.append(passage.slice(last));
  return frag;
}

const TABLE_LINE = /^\s*\|.*\|\s*$/;
const RULE_LINE = /^\s*\|[\s:|-]+\|\s*$/;

const flat = (text) => text.replace(/\s+/g, " ").trim().toLowerCase();
const cellsOf = (line) => line.trim().slice(1, -1).split("|").map((c) => c.trim());
const isTable = (lines) => lines.length > 1 && lines.every((l) => TABLE_LINE.test(l));

/** Whether ``sentence`` reads ``row`` out (every cell in it: an extractive answer reads a
 * table out as "a / b; c / d"). */
function readsRow(row, sentence) {
  const said = flat(sentence);
  return row.some(Boolean) && row.every((c) => !c || said.includes(flat(c)));
}

/** A Markdown table (``| a | b |`` lines) as a table: a row the sentence reads out is
 * marked whole, and then the other rows keep no word marks (the one row is what it
 * cites); when it reads out no row, the cells' words are marked. */
function tableOf(lines, sentence) {
  const headed = lines.length > 2 && RULE_LINE.test(lines[1]);
  const rows = lines.filter((l) => !RULE_LINE.test(l)).map(cellsOf);
  const head = headed ? rows.shift() : null;
  const anyRead = [head, ...rows].some((r) => r && readsRow(r, sentence));
  const plain = (text) => (anyRead ? text : highlighted(text, sentence));
  const cell = (tag, text, whole, attrs = {}) => el(tag, attrs, whole && text ? el("mark", {}, text) : plain(text));
  return el("table", {},
    head ? el("thead", {}, el("tr", {}, head.map((c) => cell("th", c, readsRow(head, sentence), { scope: "col" })))) : null,
    el("tbody", {}, rows.map((r) => el("tr", {}, r.map((c) => cell("td", c, readsRow(r, sentence)))))));
}

/** A passage as people read it: paragraphs, and Markdown tables as tables (not pipes).
 * When the sentence reads out rows of a table, that table is what it cites: the other
 * paragraphs keep no scattered word marks. */
export function passageView(passage, sentence) {
  const frag = document.createDocumentFragment();
  const blocks = passage.split(/\n\s*\n/).map((b) => b.trim()).filter(Boolean);
  const tableCited = blocks.some((b) => {
    const lines = b.split("\n");
    return isTable(lines) && lines.filter((l) => !RULE_LINE.test(l)).some((l) => readsRow(cellsOf(l), sentence));
  });
  for (const block of blocks) {
    const lines = block.split("\n");
    if (isTable(lines)) frag.append(tableOf(lines, sentence));
    else frag.append(el("p", {}, tableCited ? block : highlighted(block, sentence)));
  }
  return frag;
}

function dateOf(value) {
  if (!value) return "";
  const d = new Date(value);
  return Number.isNaN(d.getTime()) ? String(value) : d.toLocaleDateString(lang === "zh" ? "zh-CN" : "en");
}

function where(cite) {
  if (cite.page) return t("page", { n: cite.page_end && cite.page_end !== cite.page ? `${cite.page}–${cite.page_end}` : cite.page });
  if (cite.sheet) return t("sheet", { s: cite.sheet });
  return "";
}

let opener = null;

/** Open the source card for ``cite`` (focus moves in; Escape or Close returns it). */
export function showSource(cite, sentence, from) {
  const card = document.getElementById("source-card");
  const body = card.querySelector(".card-body");
  const web = cite.type === "web";
  opener = from || document.activeElement;
  const passage = cite.passage || cite.snippet || "";
  const details = [];
  if (web) {
    if (cite.url) details.push(el("p", { class: "where" }, el("a", { href: cite.url, target: "_blank", rel: "noopener noreferrer" }, cite.url)));
    const dates = [cite.published_at && t("published", { d: dateOf(cite.published_at) }), cite.fetched_at && t("fetched", { d: dateOf(cite.fetched_at) })].filter(Boolean);
    if (dates.length) details.push(el("p", { class: "when" }, dates.join(" · ")));
  } else {
    const loc = where(cite);
    details.push(el("p", { class: "where" }, el("code", {}, cite.path || ""), loc ? ` · ${loc}` : ""));
    if (cite.doc_id) {
      details.push(el("p", {}, el("a", {
        href: originalHref(cite.doc_id, cite.page), class: "original", target: "_blank", rel: "noopener",
        onclick: (e) => {
          e.preventDefault();
          openOriginal(cite.doc_id, { path: cite.path, page: cite.page, title: cite.title }).catch((err) => window.dispatchEvent(new CustomEvent("app-error", { detail: err })));
        },
      }, t("openOriginal"))));
    }
  }
  // replaceChildren writes a null as the text "null": only the nodes that are there.
  body.replaceChildren(...[
    el("p", { class: `kind ${web ? "web" : "internal"}` }, `${web ? t("web") : t("internal")} · ${cite.label || ""}`),
    el("h2", { id: "source-title" }, cite.title || cite.path || cite.url || ""),
    cite.heading && cite.heading !== cite.title ? el("p", { class: "heading" }, cite.heading) : null,
    el("h3", { class: "visually-hidden" }, t("passage")),
    el("blockquote", { class: "passage" }, passageView(passage, sentence || "")),
    ...details,
  ].filter(Boolean));
  card.className = `source-card ${web ? "web" : "internal"}`;
  card.hidden = false;
  card.querySelector(".close").focus();
}

export function closeSource() {
  const card = document.getElementById("source-card");
  if (card.hidden) return;
  card.hidden = true;
  if (opener && document.contains(opener)) opener.focus();
  opener = null;
}
