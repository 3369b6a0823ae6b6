// A document's original, shown so that nothing in it can run in this page: a text file
// (Markdown, HTML, XML, SVG, CSV ...) as plain text in a dialog, a Word or Excel file as the
// server's escaped HTML of its text and tables (sanitised again here), a PDF in the
// browser's own viewer at its page, anything else saved as a file. Never a blob of the server's type:
// an HTML or SVG blob would run its scripts in this page's origin, with the user's token.

import { fetchOriginal, fetchPreview } from "./api.js";
import { t } from "./i18n.js";
import { sanitize } from "./sanitize.js";

const TEXT = /\.(md|markdown|txt|text|csv|tsv|html?|xhtml|xml|svg|json|rst|log)$/i;
const PDF = /\.pdf$/i;
const OFFICE = /\.(docx|xlsx)$/i;
const OFFICE_TYPE = /officedocument\.(wordprocessingml\.document|spreadsheetml\.sheet)/;
const MAX_CHARS = 2_000_000; // shown; the rest is in the saved copy
const REVOKE_AFTER_MS = 60_000;

function kindOf(name, type) {
  if (PDF.test(name) || type.startsWith("application/pdf")) return "pdf";
  if (OFFICE.test(name) || OFFICE_TYPE.test(type)) return "office";
  if (TEXT.test(name) || /^text\/|\+xml|\/xml|\/json/.test(type)) return "text";
  return "file";
}

function objectUrl(bytes, type) {
  const url = URL.createObjectURL(new Blob([bytes], { type }));
  setTimeout(() => URL.revokeObjectURL(url), REVOKE_AFTER_MS);
  return url;
}

function save(bytes, name) {
  const a = document.createElement("a");
  a.href = objectUrl(bytes, "application/octet-stream"); // a download, never rendered
  a.download = name.split("/").pop() || "original";
  document.body.append(a);
  a.click();
  a.remove();
}

function dialog() {
  let box = document.getElementById("original-viewer");
  if (box) return box;
  box = document.createElement("dialog");
  box.id = "original-viewer";
  box.className = "viewer";
  box.setAttribute("aria-labelledby", "original-title");
  const head = document.createElement("div");
  head.className = "viewer-head";
  const title = document.createElement("h2");
  title.id = "original-title";
  const saveButton = document.createElement("button");
  saveButton.type = "button";
  saveButton.className = "viewer-save";
  const close = document.createElement("button");
  close.type = "button";
  close.className = "viewer-close";
  close.addEventListener("click", () => box.close());
  const note = document.createElement("p");
  note.className = "viewer-note";
  const text = document.createElement("pre");
  text.className = "viewer-text";
  text.tabIndex = 0;
  const html = document.createElement("div"); // a Word or Excel file's text and tables
  html.className = "viewer-html";
  html.tabIndex = 0;
  html.hidden = true;
  // Escape closes this dialog only, not the source card under it.
  box.addEventListener("keydown", (e) => { if (e.key === "Escape") e.stopPropagation(); });
  head.append(title, saveButton, close);
  box.append(head, note, text, html);
  document.body.append(box);
  return box;
}

/** The dialog headed by ``title`` showing ``content``: plain text, or a fragment (``html``). */
function showDialog(bytes, name, title, { text = "", html = null, note = "" }) {
  const box = dialog();
  box.querySelector("h2").textContent = title || name; // the document's title heads it
  box.querySelector(".viewer-note").textContent = note;
  const pre = box.querySelector(".viewer-text");
  const div = box.querySelector(".viewer-html");
  pre.textContent = text; // text, never markup
  pre.hidden = Boolean(html);
  div.replaceChildren(...(html ? [html] : []));
  div.hidden = !html;
  const saveButton = box.querySelector(".viewer-save");
  saveButton.textContent = t("saveCopy");
  saveButton.onclick = () => save(bytes, name);
  box.querySelector(".viewer-close").textContent = t("close");
  if (!box.open) box.showModal();
  (html ? div : pre).focus();
}

function showText(bytes, name, title) {
  const all = new TextDecoder("utf-8").decode(bytes);
  showDialog(bytes, name, title, { text: all.slice(0, MAX_CHARS), note: all.length > MAX_CHARS ? t("viewerCut") : "" });
}

/** A Word or Excel file: the server's fragment, sanitised to text and table tags (no
 * attribute, no link, no image); a file it cannot preview is saved as before. */
async function showOffice(docId, bytes, name, title) {
  let fragment;
  try {
    fragment = sanitize(await fetchPreview(docId));
  } catch {
    save(bytes, name);
    return;
  }
  showDialog(bytes, name, title, { html: fragment });
}

/** Show the original of ``docId`` (``path``: its name, which says its kind before it is
 * fetched; ``page``: where a PDF opens; ``title``: the document's title, heading the text). */
export async function openOriginal(docId, { path = "", page, title = "", here = false } = {}) {
  // A PDF's tab is opened now, while the click still allows a new tab (``here``: no click,
  // a link followed to the page: the PDF opens in this tab).
  const tab = PDF.test(path) && !here ? window.open("", "_blank") : null;
  try {
    const response = await fetchOriginal(docId);
    const type = (response.headers.get("content-type") || "").toLowerCase();
    const bytes = await response.arrayBuffer();
    const name = path || docId;
    const kind = kindOf(path, type);
    if (kind === "pdf") {
      const url = objectUrl(bytes, "application/pdf");
      const target = page ? `${url}#page=${page}` : url;
      if (tab) tab.location.href = target;
      else if (here) window.location.assign(target);
      else if (!window.open(target, "_blank")) save(bytes, name);
    } else {
      if (tab) tab.close();
      if (kind === "text") showText(bytes, name, title);
      else if (kind === "office") await showOffice(docId, bytes, name, title);
      else save(bytes, name);
    }
  } catch (err) {
    if (tab) tab.close();
    throw err;
  }
}
