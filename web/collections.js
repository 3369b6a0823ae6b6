// The collection picker: a question limited to a folder, a source or a named set of
// documents (the run's "scope"; it only narrows what the user may read).

import { deleteCollection, listCollections, saveCollection } from "./api.js";
import { el } from "./answer.js";
import { addStrings, t } from "./i18n.js";
import { showError } from "./notify.js";

addStrings({
  en: {
    setsTitle: "Document sets", setName: "Name", setDocs: "Documents (one path per line)", setDescription: "Description",
    saveSet: "Save set", setsHelp: "A set is a collection a question can be limited to (\"Search in\").", setCount: "{n} document(s)",
    confirmSetDelete: "Delete the set {name}?", noSets: "No sets yet.",
  },
  zh: {
    setsTitle: "文档集", setName: "名称", setDocs: "文档（每行一个路径）", setDescription: "说明",
    saveSet: "保存文档集", setsHelp: "文档集是提问时可以限定的范围（“搜索范围”）。", setCount: "{n} 个文档",
    confirmSetDelete: "删除文档集 {name}？", noSets: "还没有文档集。",
  },
});

addStrings({
  en: { scopeLabel: "Search in", scopeAll: "All my documents", scopeFolders: "Folders", scopeSources: "Sources", scopeSets: "Document sets", scopeUpload: "Uploaded documents", scopeCli: "Added by the administrator" },
  zh: { scopeLabel: "搜索范围", scopeAll: "我的全部文档", scopeFolders: "文件夹", scopeSources: "来源", scopeSets: "文档集", scopeUpload: "上传的文档", scopeCli: "管理员添加的文档" },
});

const $ = (id) => document.getElementById(id);
const SOURCE_NAMES = { upload: "scopeUpload", cli: "scopeCli" };

export async function loadCollections() {
  const select = $("scope");
  const chosen = select.value;
  let body = { folders: [], sources: [], sets: [] };
  try {
    body = await listCollections();
  } catch {
    /* a server without the document API: the whole knowledge base */
  }
  const group = (label, items) => (items.length ? el("optgroup", { label: t(label) }, items) : null);
  select.replaceChildren(
    el("option", { value: "" }, t("scopeAll")),
    group("scopeFolders", body.folders.map((f) => el("option", { value: `folder:${f}` }, f))),
    group("scopeSources", body.sources.map((s) => el("option", { value: `source:${s}` }, SOURCE_NAMES[s] ? t(SOURCE_NAMES[s]) : s))),
    group("scopeSets", body.sets.map((s) => el("option", { value: s.scope, title: s.description || null }, s.name))),
  );
  select.value = [...select.options].some((o) => o.value === chosen) ? chosen : "";
}

// --- named sets (the Documents view) -------------------------------------------------

async function loadSets() {
  let sets = [];
  try {
    sets = (await listCollections()).sets;
  } catch {
    return;
  }
  $("set-rows").replaceChildren(...(sets.length ? sets.map((s) => el("li", { "data-set": s.name },
    el("strong", {}, s.name), " · ", t("setCount", { n: s.doc_ids.length }), s.description ? ` · ${s.description}` : "",
    s.can_change ? el("button", { type: "button", class: "danger", onclick: () => removeSet(s.name) }, t("remove")) : null))
    : [el("li", { class: "empty" }, t("noSets"))]));
}

async function removeSet(name) {
  if (!window.confirm(t("confirmSetDelete", { name }))) return;
  try {
    await deleteCollection(name);
  } catch (err) {
    showError(err, () => removeSet(name));
  }
  await Promise.all([loadSets(), loadCollections()]);
}

async function saveSet(e) {
  e.preventDefault();
  const json = {
    name: $("set-name").value.trim(), description: $("set-description").value.trim(),
    doc_ids: $("set-docs").value.split("\n").map((x) => x.trim()).filter(Boolean),
  };
  try {
    await saveCollection(json);
    e.target.reset();
  } catch (err) {
    showError(err, () => saveSet(e));
  }
  await Promise.all([loadSets(), loadCollections()]);
}

function setsSection() {
  const field = (id, label, input) => el("span", { class: "field" }, el("label", { for: id }, t(label)), input);
  const form = el("form", { id: "set-form", class: "admin-form" },
    field("set-name", "setName", el("input", { id: "set-name", required: true, autocomplete: "off" })),
    field("set-description", "setDescription", el("input", { id: "set-description", autocomplete: "off" })),
    el("label", { for: "set-docs", class: "block" }, t("setDocs")),
    el("textarea", { id: "set-docs", rows: "3", required: true, placeholder: "hr/annual-leave.md" }),
    el("button", { type: "submit", class: "primary" }, t("saveSet")));
  form.addEventListener("submit", saveSet);
  return el("section", { id: "sets-section", class: "sets", "aria-labelledby": "sets-title" },
    el("h2", { id: "sets-title" }, t("setsTitle")), el("p", { class: "help" }, t("setsHelp")),
    el("ul", { id: "set-rows", class: "set-rows" }), form);
}

export function initCollections() {
  $("docs-view").append(setsSection());
  $("tab-docs").addEventListener("click", loadSets);
  const select = el("select", { id: "scope", name: "scope" }, el("option", { value: "" }, t("scopeAll")));
  $("approve-web").closest("label").before(el("label", { for: "scope" }, t("scopeLabel")), select);
  new MutationObserver(() => { if (!$("app").hidden) loadCollections(); }).observe($("app"), { attributes: true, attributeFilter: ["hidden"] });
}
