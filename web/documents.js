// The documents the user may read (the document API, /kb), uploads with live progress,
// and the synced sources.

import {
  ApiError, deleteDocument as removeDocument, documentAccess, grantAccess, jobEvents, listDocuments, listSources,
  originalHref, revokeAccess, uploadFiles, whoAmI,
} from "./api.js";
import { el } from "./answer.js";
import { addStrings, lang, t } from "./i18n.js";
import { actionDone, showError } from "./notify.js";
import { openOriginal } from "./viewer.js";

addStrings({
  en: { uploadFolder: "Into folder", share: "Share", shareDocTitle: "Who may read {path}", shareDocHelp: "Add a colleague (user:bob) or a group you are in (group:hr).",
    addPrincipal: "Add", removeAccess: "Remove", principalHint: "user:bob" },
  zh: { uploadFolder: "存入文件夹", share: "分享", shareDocTitle: "谁可以阅读 {path}", shareDocHelp: "添加同事（user:bob）或你所在的组（group:hr）。",
    addPrincipal: "添加", removeAccess: "移除", principalHint: "user:bob" },
});

const PAGE = 25;
const MAX_JOB_EVENTS = 10000; // a job stream ends at a terminal state; this bounds a stuck one
const $ = (id) => document.getElementById(id);
const docs = { offset: 0, total: 0, loaded: false };

function size(bytes) {
  if (bytes == null) return "";
  if (bytes < 1024) return `${bytes} B`;
  if (bytes < 1024 * 1024) return `${(bytes / 1024).toFixed(1)} KB`;
  return `${(bytes / 1024 / 1024).toFixed(1)} MB`;
}

function when(value) {
  if (!value) return "";
  const d = new Date(typeof value === "number" && value < 1e12 ? value * 1000 : value);
  return Number.isNaN(d.getTime()) ? String(value) : d.toLocaleString(lang === "zh" ? "zh-CN" : "en");
}

function acl(value) {
  if (!value || value === "public") return t("everyone");
  return Array.isArray(value) ? value.join(", ") : String(value);
}

export async function loadDocuments() {
  const query = { limit: PAGE, offset: docs.offset };
  for (const [key, id] of [["q", "doc-q"], ["prefix", "doc-prefix"], ["format", "doc-format"]]) {
    query[key] = $(id).value.trim();
  }
  let page;
  try {
    page = await listDocuments(query);
  } catch (err) {
    if (err instanceof ApiError && err.status === 404) {
      $("doc-rows").replaceChildren(el("tr", {}, el("td", { colspan: "6" }, t("docsUnavailable"))));
      return;
    }
    showError(err, loadDocuments);
    return;
  }
  docs.total = page.total ?? page.documents.length;
  // Each cell names its column (data-label): on a phone the rows stack as cards.
  const cell = (key, ...content) => el("td", { "data-label": t(key) }, ...content);
  const rows = page.documents.map((d) => el("tr", {},
    el("td", { class: "doc-title" }, el("a", { href: originalHref(d.doc_id), class: "doc-link",
      onclick: (e) => { e.preventDefault(); openOriginal(d.doc_id, { path: d.path, title: d.title }).catch((err) => showError(err)); } },
    d.title || d.path), el("br"), el("code", {}, d.path)),
    cell("format", d.format || ""),
    cell("updated", when(d.updated_at)),
    cell("size", size(d.bytes)),
    cell("access", acl(d.acl)),
    // Only where the server would allow it: the document's owner or an admin.
    // Share: an upload's access (a source's or a CLI ingest's comes from there).
    el("td", { class: "doc-actions" }, d.can_delete ? [
      d.source === "upload" ? el("button", { type: "button", "aria-label": `${t("share")}: ${d.path}`, onclick: () => shareDocument(d) }, t("share")) : "",
      el("button", { type: "button", class: "danger", "aria-label": `${t("remove")}: ${d.path}`,
        onclick: () => deleteDocument(d) }, t("remove"))] : "")));
  $("doc-rows").replaceChildren(...(rows.length ? rows : [el("tr", {}, el("td", { colspan: "6" }, t("noDocs")))]));
  const from = docs.total ? docs.offset + 1 : 0;
  $("doc-count").textContent = t("showing", { from, to: docs.offset + rows.length, total: docs.total });
  $("doc-prev").disabled = docs.offset === 0;
  $("doc-next").disabled = docs.offset + PAGE >= docs.total;
}

async function deleteDocument(doc) {
  if (!window.confirm(t("confirmDocDelete", { path: doc.path }))) return;
  try {
    await removeDocument(doc.doc_id);
  } catch (err) {
    if (err instanceof ApiError && (err.status === 403 || err.status === 404)) {
      showError(new ApiError(err.status, t("notAllowed")), null, "deleteDoc");
      return;
    }
    showError(err, () => deleteDocument(doc), "deleteDoc");
    return;
  }
  await loadDocuments();
}

// --- sharing: who may read a document (its owner or an admin changes it) ---------------

async function shareDocument(doc) {
  const dialog = $("doc-share-dialog");
  const change = async (fn) => {
    try {
      await fn();
    } catch (err) {
      showError(err);
    }
    await shareDocument(doc);
    loadDocuments();
  };
  let access;
  try {
    access = await documentAccess(doc.doc_id);
  } catch (err) {
    dialog.close();
    return showError(err);
  }
  const input = el("input", { id: "share-principal", type: "text", placeholder: t("principalHint"), "aria-label": t("principalHint") });
  const list = access.public ? [el("li", {}, t("everyone"))] : access.acl.map((p) => el("li", { "data-principal": p }, el("code", {}, p), " ",
    access.acl.length > 1 ? el("button", { type: "button", class: "danger", "aria-label": `${t("removeAccess")}: ${p}`,
      onclick: () => change(() => revokeAccess(doc.doc_id, p)) }, t("removeAccess")) : ""));
  dialog.replaceChildren(el("form", { method: "dialog", onsubmit: (e) => { e.preventDefault(); if (input.value.trim()) change(() => grantAccess(doc.doc_id, input.value.trim())); } },
    el("h2", {}, t("shareDocTitle", { path: doc.path })), el("p", {}, t("shareDocHelp")), el("ul", { class: "access-list" }, list),
    input, el("div", { class: "buttons" },
      el("button", { type: "button", onclick: () => dialog.close() }, t("close")),
      el("button", { type: "submit", class: "primary" }, t("addPrincipal")))));
  if (!dialog.open) dialog.showModal();
  input.focus();
}

// --- upload ----------------------------------------------------------------------------

function fileRow(name) {
  const bar = el("progress", { max: "1", value: "0", "aria-label": name });
  const status = el("span", { class: "file-status" }, t("status.queued"));
  const row = el("li", { class: "upload-file" }, el("span", { class: "file-name" }, name), bar, status);
  return { row, bar, status };
}

function showJob(job, rows) {
  // Row n is file n of the request (two files may share a name).
  (job.files || []).forEach((f, n) => {
    if (!rows[n]) {
      rows[n] = fileRow(f.name || f.path);
      $("upload-files").append(rows[n].row);
    }
    const r = rows[n];
    const done = ["done", "skipped", "failed"].includes(f.status);
    r.bar.value = done ? 1 : Number(f.progress || 0);
    r.status.textContent = `${t(`status.${f.status}`)}${f.reason ? ` — ${f.reason}` : ""}`;
    r.row.dataset.status = f.status;
  });
}

/** The request failed as a whole: each file says so, with the server's reason. */
function failRows(rows, err) {
  for (const r of rows) {
    if (["done", "skipped", "failed"].includes(r.row.dataset.status)) continue;
    r.bar.value = 1;
    r.status.textContent = `${t("status.failed")} — ${err.message || err}`;
    r.row.dataset.status = "failed";
  }
}

async function upload(e) {
  e.preventDefault();
  const files = [...$("upload-input").files];
  if (!files.length) return;
  const form = new FormData();
  for (const f of files) form.append("file", f, f.name);
  // No acl: the server makes a user's upload theirs alone. "public" needs an admin (the
  // server's 403 says so).
  const list = $("acl-list").value.trim();
  if ($("acl-public").checked) form.append("acl", "public");
  else if ($("acl-restricted").checked && list) form.append("acl", list);
  const folder = $("upload-folder").value.trim();
  if (folder) form.append("folder", folder); // stored as <folder>/<file name>
  const rows = files.map((f) => fileRow(f.name));
  $("upload-files").replaceChildren(...rows.map((r) => r.row));
  $("upload-state").textContent = t("uploading");
  let job;
  try {
    job = await uploadFiles(form);
    let n = 0;
    for await (const { event, data } of jobEvents(job.job_id)) {
      if (event === "error") throw new ApiError(data?.status || 500, data?.error || String(data));
      if (data && typeof data === "object") {
        showJob(data, rows);
        $("upload-state").textContent = t(`status.${data.state}`);
      }
      if (++n > MAX_JOB_EVENTS) break;
    }
  } catch (err) {
    $("upload-state").textContent = "";
    failRows(rows, err);
    showError(err, job ? null : () => upload(e), "upload");
    return;
  }
  actionDone("upload");
  $("upload-input").value = "";
  await loadDocuments();
  await loadSources();
}

// --- sources ---------------------------------------------------------------------------

/** The synced sources, for an admin (the server refuses them to others: not asked). */
async function loadSources() {
  let body;
  try {
    if (!(await whoAmI()).admin) {
      $("sources-section").hidden = true;
      return;
    }
    body = await listSources();
  } catch {
    $("sources-section").hidden = true; // none, or not offered: nothing to show
    return;
  }
  const sources = Array.isArray(body) ? body : body.sources || [];
  $("sources-section").hidden = !sources.length;
  $("source-rows").replaceChildren(...sources.map((s) => {
    const sync = s.last_sync;
    return el("li", {},
      el("strong", {}, `${s.kind}: `), el("code", {}, s.location), " · ",
      `${t("lastSync")}: ${sync?.at ? `${when(sync.at)} (${t("syncCounts", { added: sync.added ?? 0, updated: sync.updated ?? 0, removed: sync.removed ?? 0, failed: sync.failed ?? 0 })})` : t("never")}`);
  }));
}

/** "Everyone" only for an admin: the server refuses it to anyone else. */
async function offerPublic() {
  let admin = false;
  try {
    admin = (await whoAmI()).admin === true;
  } catch {
    admin = false;
  }
  $("acl-public").closest("label").hidden = !admin;
  if (!admin && $("acl-public").checked) $("acl-private").checked = true;
}

export function showDocuments() {
  if (!docs.loaded) {
    docs.loaded = true;
    loadSources();
  }
  offerPublic();
  loadDocuments();
  $("doc-q").focus();
}

export function initDocuments() {
  $("doc-filter").addEventListener("submit", (e) => {
    e.preventDefault();
    docs.offset = 0;
    loadDocuments();
  });
  $("doc-prev").addEventListener("click", () => { docs.offset = Math.max(0, docs.offset - PAGE); loadDocuments(); });
  $("doc-next").addEventListener("click", () => { docs.offset += PAGE; loadDocuments(); });
  $("upload-form").addEventListener("submit", upload);
  $("app").append(el("dialog", { id: "doc-share-dialog", class: "token-dialog" }));
  $("acl-public").closest("label").hidden = true; // until the server says the user is an admin
  const sync = () => { $("acl-list").disabled = !$("acl-restricted").checked; };
  for (const id of ["acl-private", "acl-public", "acl-restricted"]) $(id).addEventListener("change", sync);
  sync();
}
