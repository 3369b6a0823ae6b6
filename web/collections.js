// The collection picker: a question limited to a folder, a source or a named set of
// documents (the run's "scope"; it only narrows what the user may read).

import { api } from "./api.js";
import { el } from "./answer.js";
import { addStrings, t } from "./i18n.js";

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
    body = await api("/kb/collections");
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

export function initCollections() {
  const select = el("select", { id: "scope", name: "scope" }, el("option", { value: "" }, t("scopeAll")));
  $("approve-web").closest("label").before(el("label", { for: "scope" }, t("scopeLabel")), select);
  new MutationObserver(() => { if (!$("app").hidden) loadCollections(); }).observe($("app"), { attributes: true, attributeFilter: ["hidden"] });
}
