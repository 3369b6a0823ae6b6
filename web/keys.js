// The signed-in user's API keys (agent-chat-ui, MCP clients, scripts): made with a name
// and an optional expiry, shown once, listed by prefix, revoked. Only on a server with a
// users file (without one there are no tokens, so no keys).

import { adminMe, createKey, listKeys, revokeKey } from "./api.js";
import { el } from "./answer.js";
import { addStrings, lang, t } from "./i18n.js";
import { showError } from "./notify.js";

addStrings({
  en: {
    keysTab: "Keys", keysTitle: "My API keys", keysHelp: "A key signs in as you (Authorization: Bearer, or x-api-key) from agent-chat-ui, an MCP client or a script. Revoke it when it is no longer needed.",
    keyName: "Name", keyNameHint: "agent-chat-ui", keyExpiry: "Expires", never: "never", days: "in {n} days",
    makeKey: "Create key", keyPrefix: "Starts with", keyCreated: "Created", keyExpired: "expired", revoke: "Revoke",
    noKeys: "No keys yet.", keyShownTitle: "Key {name}", keyShownText: "Copy this key now: it is shown only once and cannot be read again.",
    confirmRevoke: "Revoke key {name}? Clients using it are refused at once.", keyOwner: "User",
  },
  zh: {
    keysTab: "密钥", keysTitle: "我的 API 密钥", keysHelp: "密钥以你的身份登录（Authorization: Bearer 或 x-api-key），供 agent-chat-ui、MCP 客户端或脚本使用。不再需要时请吊销。",
    keyName: "名称", keyNameHint: "agent-chat-ui", keyExpiry: "过期", never: "永不", days: "{n} 天后",
    makeKey: "创建密钥", keyPrefix: "开头", keyCreated: "创建时间", keyExpired: "已过期", revoke: "吊销",
    noKeys: "还没有密钥。", keyShownTitle: "密钥 {name}", keyShownText: "请立即复制此密钥：它只显示这一次，之后无法再查看。",
    confirmRevoke: "吊销密钥 {name}？使用它的客户端将立即被拒绝。", keyOwner: "用户",
  },
});

const $ = (id) => document.getElementById(id);
const OTHER_VIEWS = ["chat-view", "docs-view", "admin-view"];
const OTHER_TABS = ["tab-chat", "tab-docs", "tab-admin"];

export function when(seconds) {
  if (!seconds) return t("never");
  return new Date(seconds * 1000).toLocaleString(lang === "zh" ? "zh-CN" : "en", { dateStyle: "medium", timeStyle: "short" });
}

/** The key, once, in a dialog that forgets it when closed. */
export function showKey(name, key) {
  const dialog = $("key-dialog");
  const box = el("input", { id: "new-key", type: "text", readonly: true, value: key, "aria-label": t("keyShownTitle", { name }) });
  const forget = () => { box.value = ""; dialog.replaceChildren(); };
  const done = el("button", { type: "button", class: "primary", onclick: () => { forget(); dialog.close(); } }, t("done"));
  const copy = el("button", { type: "button", onclick: async () => {
    try { await navigator.clipboard.writeText(key); copy.textContent = t("copied"); } catch { box.select(); }
  } }, t("copy"));
  dialog.replaceChildren(el("form", { method: "dialog" }, el("h2", {}, t("keyShownTitle", { name })),
    el("p", {}, t("keyShownText")), box, el("div", { class: "buttons" }, copy, done)));
  dialog.addEventListener("close", forget, { once: true });
  dialog.showModal();
  box.select();
}

/** A table of keys; ``owner``: add the user column (the admin's list). */
export function keysTable(keys, onRevoke, owner = false) {
  if (!keys.length) return el("p", { class: "hint-inline" }, t("noKeys"));
  const head = [...(owner ? ["keyOwner"] : []), "keyName", "keyPrefix", "keyCreated", "keyExpiry", "actions"];
  const rows = keys.map((k) => {
    const cells = [...(owner ? [k.identity] : []), k.name, el("code", {}, `${k.prefix}…`), when(k.created),
      k.expired ? t("keyExpired") : when(k.expires),
      el("button", { type: "button", class: "danger", "aria-label": `${t("revoke")}: ${k.name}`, onclick: () => {
        if (window.confirm(t("confirmRevoke", { name: k.name }))) onRevoke(k);
      } }, t("revoke"))];
    return el("tr", { "data-key": k.id }, cells.map((c, i) => el("td", { "data-label": t(head[i]) }, c)));
  });
  return el("div", { class: "table-wrap" }, el("table", {},
    el("thead", {}, el("tr", {}, head.map((h) => el("th", { scope: "col" }, t(h))))), el("tbody", {}, rows)));
}

async function loadKeys() {
  try {
    const body = await listKeys();
    $("my-keys").replaceChildren(keysTable(body.keys, (k) => revokeKey(k.id).then(loadKeys, (err) => showError(err, loadKeys))));
  } catch (err) {
    showError(err, loadKeys);
  }
}

async function makeKey(e) {
  e.preventDefault();
  const name = $("key-name").value.trim();
  const days = $("key-days").value;
  try {
    const made = await createKey({ name, expires_days: days ? Number(days) : null });
    e.target.reset();
    showKey(made.name, made.key);
  } catch (err) {
    showError(err);
  }
  await loadKeys();
}

function showKeys(on) {
  $("keys-view").hidden = !on;
  $("tab-keys").setAttribute("aria-current", on ? "page" : "false");
  if (!on) return;
  for (const id of OTHER_VIEWS) if ($(id)) $(id).hidden = true;
  for (const id of OTHER_TABS) $(id)?.setAttribute("aria-current", "false");
  loadKeys();
}

function view() {
  const expiry = el("select", { id: "key-days", "aria-label": t("keyExpiry") },
    el("option", { value: "" }, t("never")), ...[30, 90, 365].map((n) => el("option", { value: String(n) }, t("days", { n }))));
  const form = el("form", { id: "key-form", class: "admin-form" },
    el("span", { class: "field" }, el("label", { for: "key-name" }, t("keyName")), " ",
      el("input", { id: "key-name", required: true, maxlength: "60", placeholder: t("keyNameHint"), autocomplete: "off" })),
    el("span", { class: "field" }, el("label", { for: "key-days" }, t("keyExpiry")), " ", expiry),
    el("button", { type: "submit", class: "primary" }, t("makeKey")));
  form.addEventListener("submit", makeKey);
  return el("main", { id: "keys-view", class: "docs", hidden: true },
    el("h1", {}, t("keysTitle")), el("p", { class: "hint-inline" }, t("keysHelp")),
    el("section", { class: "upload" }, form), el("div", { id: "my-keys" })); // the upload form's panel look
}

async function offerKeys() {
  let usersFile = false;
  try {
    usersFile = (await adminMe()).users_file === true;
  } catch {
    usersFile = false;
  }
  $("tab-keys").hidden = !usersFile;
  if (!usersFile) showKeys(false);
}

export function initKeys() {
  const tab = el("button", { type: "button", id: "tab-keys", "aria-current": "false", hidden: true }, t("keysTab"));
  $("tab-docs").after(tab);
  $("app").append(view(), el("dialog", { id: "key-dialog", class: "token-dialog" }));
  tab.addEventListener("click", () => showKeys(true));
  // The other tabs show their own view: this one hides (the admin tab is added later).
  document.addEventListener("click", (e) => {
    if (OTHER_TABS.includes(e.target?.closest?.("button")?.id)) showKeys(false);
  });
  new MutationObserver(() => { if (!$("app").hidden) offerKeys(); }).observe($("app"), { attributes: true, attributeFilter: ["hidden"] });
  window.addEventListener("auth-required", () => { $("tab-keys").hidden = true; showKeys(false); });
}
