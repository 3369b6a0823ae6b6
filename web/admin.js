// The admin view (admins only; the server refuses the rest to others): users and their
// tokens, synced sources, and the knowledge base's jobs.

import {
  addMember, adminMe, createSource, createUser, deleteSource, deleteUser, listAllKeys, listGroups, listJobs,
  listSources, listUsers, removeMember, revokeKey, setPassword, syncSource, userAction,
} from "./api.js";
import { el } from "./answer.js";
import { addStrings, lang, t, translatePage } from "./i18n.js";
import { keysTable } from "./keys.js";
import { actionDone, showError } from "./notify.js";

addStrings({
  en: {
    admin: "Admin", adminTitle: "Administration", usersTitle: "Users", refresh: "Refresh",
    userName: "Name", groups: "Groups", role: "Role", state: "State", roleAdmin: "admin", roleUser: "user",
    enabled: "active", disabled: "disabled", disable: "Disable", enable: "Enable", rotate: "New token",
    addUser: "Add user", groupsHint: "hr, finance", isAdmin: "Administrator",
    tokenTitle: "Token of {name}", tokenText: "Give this token to {name}. It is shown only now: it cannot be read again, only replaced.",
    copy: "Copy", copied: "Copied", done: "Done", confirmRemoveUser: "Remove user {name}? Their token stops working.",
    confirmRotate: "Give {name} a new token? The old one stops working.",
    setPassword: "Set password", passwordTitle: "Password of {name}", newPassword: "New password (10 characters at least)",
    passwordText: "{name} signs in with this password; their open sessions end now.", save: "Save", cancel: "Cancel",
    passwordSet: "Password set for {name}.", sso: "single sign-on",
    sourcesAdmin: "Sources", sourceId: "Id", kind: "Kind", location: "Location", lastSyncCol: "Last sync",
    syncNow: "Sync now", addSource: "Add source", aclCol: "Access", noSources: "No sources yet.",
    syncErrors: "{n} error(s)", confirmRemoveSource: "Remove source {id} and its documents?",
    jobsTitle: "Jobs", jobKind: "Kind", owner: "Owner", created: "Started", progressCol: "Progress", files: "Files", noJobs: "No jobs yet.",
    schedule: "Sync every", manual: "when asked",
    syncStarted: "Sync started (job {id}).", noUsersFile: "This server has no users file: every caller is an admin.",
    groupsTitle: "Groups", groupName: "Group", members: "Members", groupSource: "Managed by", fromProvider: "{source} (read-only)",
    localGroup: "this server", addMember: "Add member", memberHint: "user name", noGroups: "No groups yet.",
    allKeysTitle: "API keys of every user",
  },
  zh: {
    admin: "管理", adminTitle: "管理", usersTitle: "用户", refresh: "刷新",
    userName: "名称", groups: "组", role: "角色", state: "状态", roleAdmin: "管理员", roleUser: "用户",
    enabled: "启用", disabled: "已停用", disable: "停用", enable: "启用", rotate: "新令牌",
    addUser: "添加用户", groupsHint: "hr, finance", isAdmin: "管理员",
    tokenTitle: "{name} 的令牌", tokenText: "请把此令牌交给 {name}。它只显示这一次：之后无法再查看，只能更换。",
    copy: "复制", copied: "已复制", done: "完成", confirmRemoveUser: "删除用户 {name}？其令牌将失效。",
    confirmRotate: "为 {name} 生成新令牌？旧令牌将失效。",
    setPassword: "设置密码", passwordTitle: "{name} 的密码", newPassword: "新密码（至少 10 个字符）",
    passwordText: "{name} 将用此密码登录；其现有会话立即失效。", save: "保存", cancel: "取消",
    passwordSet: "已为 {name} 设置密码。", sso: "单点登录",
    sourcesAdmin: "来源", sourceId: "标识", kind: "类型", location: "位置", lastSyncCol: "上次同步",
    syncNow: "立即同步", addSource: "添加来源", aclCol: "访问权限", noSources: "还没有来源。",
    syncErrors: "{n} 个错误", confirmRemoveSource: "删除来源 {id} 及其文档？",
    jobsTitle: "任务", jobKind: "类型", owner: "发起人", created: "开始时间", progressCol: "进度", files: "文件", noJobs: "还没有任务。",
    schedule: "同步周期", manual: "手动",
    syncStarted: "已开始同步（任务 {id}）。", noUsersFile: "此服务器没有用户文件：每个调用者都是管理员。",
    groupsTitle: "组", groupName: "组", members: "成员", groupSource: "管理方", fromProvider: "{source}（只读）",
    localGroup: "本服务器", addMember: "添加成员", memberHint: "用户名", noGroups: "还没有组。",
    allKeysTitle: "所有用户的 API 密钥",
  },
});

const $ = (id) => document.getElementById(id);
const VIEWS = ["chat-view", "docs-view"];

function when(value) {
  const d = typeof value === "number" ? new Date(value * 1000) : new Date(value);
  return Number.isNaN(d.getTime()) ? "" : d.toLocaleString(lang === "zh" ? "zh-CN" : "en", { dateStyle: "medium", timeStyle: "short" });
}

async function act(fn) {
  try {
    await fn();
    actionDone("admin");
  } catch (err) {
    showError(err, () => act(fn), "admin");
  }
  await refresh();
}

function table(headers, rows, empty) {
  if (!rows.length) return el("p", { class: "hint-inline" }, empty);
  // Each cell names its column: the phone layout shows a row as labelled lines.
  for (const row of rows) [...row.cells].forEach((cell, i) => cell.setAttribute("data-label", t(headers[i])));
  return el("div", { class: "table-wrap" }, el("table", {},
    el("thead", {}, el("tr", {}, headers.map((h) => el("th", { scope: "col" }, t(h))))),
    el("tbody", {}, rows)));
}

// --- users ---------------------------------------------------------------------------

function showToken(name, token) {
  const dialog = $("token-dialog");
  const box = el("input", { id: "new-token", type: "text", readonly: true, value: token, "aria-label": t("tokenTitle", { name }) });
  const copy = el("button", { type: "button", onclick: async () => {
    try { await navigator.clipboard.writeText(token); copy.textContent = t("copied"); } catch { box.select(); }
  } }, t("copy"));
  // The token leaves the DOM the moment Done is pressed (the dialog's "close" event comes
  // a task later), and on any other way of closing (Escape).
  const forget = () => { box.value = ""; dialog.replaceChildren(); };
  const done = el("button", { type: "button", class: "primary", onclick: () => { forget(); dialog.close(); } }, t("done"));
  dialog.replaceChildren(el("form", { method: "dialog" },
    el("h2", { id: "token-title" }, t("tokenTitle", { name })), el("p", {}, t("tokenText", { name })), box,
    el("div", { class: "buttons" }, copy, done)));
  dialog.addEventListener("close", forget, { once: true }); // never kept
  dialog.showModal();
  box.select();
}

/** Ask for a new password of ``name`` in a dialog; it leaves the DOM once sent or closed. */
function askPassword(name) {
  const dialog = $("token-dialog");
  const box = el("input", { id: "new-password", type: "password", autocomplete: "new-password", minlength: "10", required: true, "aria-label": t("newPassword") });
  const forget = () => { box.value = ""; dialog.replaceChildren(); };
  const cancel = el("button", { type: "button", onclick: () => { forget(); dialog.close(); } }, t("cancel"));
  const form = el("form", {},
    el("h2", { id: "token-title" }, t("passwordTitle", { name })), el("p", {}, t("passwordText", { name })),
    el("label", { for: "new-password" }, t("newPassword")), box,
    el("div", { class: "buttons" }, cancel, el("button", { type: "submit", class: "primary" }, t("save"))));
  form.addEventListener("submit", (e) => {
    e.preventDefault();
    const value = box.value;
    forget();
    dialog.close();
    act(async () => { await setPassword(name, value); $("admin-state").textContent = t("passwordSet", { name }); });
  });
  dialog.replaceChildren(form);
  dialog.addEventListener("close", forget, { once: true });
  dialog.showModal();
  box.focus();
}

function userRow(u) {
  const name = u.identity;
  const post = (action) => userAction(name, action);
  return el("tr", { "data-user": name },
    el("td", {}, name), el("td", {}, u.groups.join(", ") || "—"),
    el("td", {}, t(u.admin ? "roleAdmin" : "roleUser") + (u.sso ? ` (${t("sso")})` : "")), el("td", {}, t(u.disabled ? "disabled" : "enabled")),
    el("td", { class: "actions" },
      el("button", { type: "button", onclick: () => act(() => post(u.disabled ? "enable" : "disable")) }, t(u.disabled ? "enable" : "disable")),
      el("button", { type: "button", onclick: () => {
        if (!window.confirm(t("confirmRotate", { name }))) return;
        act(async () => showToken(name, (await post("rotate")).token));
      } }, t("rotate")),
      el("button", { type: "button", class: "set-password", onclick: () => askPassword(name) }, t("setPassword")),
      el("button", { type: "button", class: "danger", onclick: () => {
        if (window.confirm(t("confirmRemoveUser", { name }))) act(() => deleteUser(name));
      } }, t("remove"))));
}

async function loadUsers() {
  const box = $("admin-users");
  let body;
  try {
    body = await listUsers();
  } catch (err) {
    if (err.status === 409) return box.replaceChildren(el("p", {}, t("noUsersFile")));
    throw err;
  }
  box.replaceChildren(table(["userName", "groups", "role", "state", "actions"], body.users.map(userRow), ""));
}

async function addUser(e) {
  e.preventDefault();
  const name = $("new-user").value.trim();
  const groups = $("new-groups").value;
  const admin = $("new-admin").checked;
  await act(async () => {
    const made = await createUser({ identity: name, groups, admin });
    e.target.reset();
    showToken(made.identity, made.token);
  });
}

// --- groups and everyone's keys --------------------------------------------------------

function groupRow(g) {
  const member = (name) => el("li", { "data-member": name }, name, g.read_only ? "" : el("button", { type: "button", class: "quiet",
    "aria-label": `${t("remove")}: ${name} (${g.name})`, onclick: () => act(() => removeMember(g.name, name)) }, "×"));
  const input = el("input", { type: "text", placeholder: t("memberHint"), "aria-label": `${t("addMember")}: ${g.name}` });
  const add = g.read_only ? "" : el("form", { class: "inline-form", onsubmit: (e) => {
    e.preventDefault();
    if (input.value.trim()) act(() => addMember(g.name, input.value.trim()));
  } }, input, el("button", { type: "submit" }, t("addMember")));
  return el("tr", { "data-group": g.name }, el("td", {}, g.name), el("td", {}, el("ul", { class: "members" }, g.members.map(member))),
    el("td", {}, g.read_only ? t("fromProvider", { source: g.source }) : t("localGroup")), el("td", { class: "actions" }, add));
}

async function loadGroups() {
  let body;
  try {
    body = await listGroups();
  } catch (err) {
    if (err.status === 409) return $("admin-groups").replaceChildren(el("p", {}, t("noUsersFile")));
    throw err;
  }
  $("admin-groups").replaceChildren(table(["groupName", "members", "groupSource", "actions"], body.groups.map(groupRow), t("noGroups")));
}

async function addGroupMember(e) {
  e.preventDefault();
  const group = $("new-group").value.trim();
  const name = $("new-group-member").value.trim();
  await act(async () => {
    await addMember(group, name);
    e.target.reset();
  });
}

async function loadAllKeys() {
  let body;
  try {
    body = await listAllKeys();
  } catch (err) {
    if (err.status === 409) return $("admin-keys").replaceChildren();
    throw err;
  }
  $("admin-keys").replaceChildren(keysTable(body.keys, (k) => act(() => revokeKey(k.id)), true));
}

function groupSections() {
  const form = el("form", { id: "group-form", class: "admin-form" },
    el("input", { id: "new-group", required: true, placeholder: t("groupName"), "aria-label": t("groupName") }),
    el("input", { id: "new-group-member", required: true, placeholder: t("memberHint"), "aria-label": t("memberHint") }),
    el("button", { type: "submit" }, t("addMember")));
  form.addEventListener("submit", addGroupMember);
  return [el("section", { "aria-labelledby": "admin-groups-title" }, el("h3", { id: "admin-groups-title" }, t("groupsTitle")), el("div", { id: "admin-groups" }), form),
    el("section", { "aria-labelledby": "admin-keys-title" }, el("h3", { id: "admin-keys-title" }, t("allKeysTitle")), el("div", { id: "admin-keys" }))];
}

// --- sources and jobs ------------------------------------------------------------------

function syncCell(last) {
  if (!last) return t("never");
  const counts = t("syncCounts", last);
  const errors = last.errors?.length ? el("details", {}, el("summary", {}, t("syncErrors", { n: last.errors.length })),
    el("ul", {}, last.errors.map((x) => el("li", {}, x)))) : null;
  return [when(last.at), el("br"), counts, errors];
}

function sourceRow(s) {
  return el("tr", { "data-source": s.id },
    el("td", {}, s.id), el("td", {}, s.kind), el("td", {}, el("code", {}, s.location)), el("td", {}, s.acl),
    el("td", {}, s.schedule || t("manual")), el("td", {}, syncCell(s.last_sync)),
    el("td", { class: "actions" },
      el("button", { type: "button", onclick: () => act(async () => {
        const job = await syncSource(s.id);
        $("admin-state").textContent = t("syncStarted", { id: job.job_id.slice(0, 8) });
      }) }, t("syncNow")),
      el("button", { type: "button", class: "danger", onclick: () => {
        if (window.confirm(t("confirmRemoveSource", { id: s.id }))) act(() => deleteSource(s.id));
      } }, t("remove"))));
}

async function loadSources() {
  const body = await listSources();
  $("admin-sources").replaceChildren(table(["sourceId", "kind", "location", "aclCol", "schedule", "lastSyncCol", "actions"], body.sources.map(sourceRow), t("noSources")));
}

async function addSource(e) {
  e.preventDefault();
  const json = { id: $("src-id").value.trim(), kind: $("src-kind").value, location: $("src-location").value.trim(), acl: $("src-acl").value.trim() || "public", schedule: $("src-schedule").value.trim() };
  await act(async () => {
    await createSource(json);
    e.target.reset();
  });
}

async function loadJobs() {
  const body = await listJobs();
  const rows = body.jobs.map((j) => el("tr", { "data-job": j.job_id },
    el("td", {}, j.kind), el("td", {}, j.owner || "—"), el("td", {}, t(`status.${j.state}`)),
    el("td", {}, `${Math.round(j.progress * 100)}%`), el("td", {}, String(j.files.length)),
    el("td", {}, when(j.created))));
  $("admin-jobs").replaceChildren(table(["jobKind", "owner", "state", "progressCol", "files", "created"], rows, t("noJobs")));
}

async function refresh() {
  await Promise.all([loadUsers(), loadGroups(), loadAllKeys(), loadSources(), loadJobs()].map((p) => p.catch((err) => showError(err, refresh))));
}

// --- the view --------------------------------------------------------------------------

function showAdmin(on) {
  $("admin-view").hidden = !on;
  $("tab-admin").setAttribute("aria-current", on ? "page" : "false");
  if (!on) return;
  for (const id of VIEWS) $(id).hidden = true;
  for (const id of ["tab-chat", "tab-docs"]) $(id).setAttribute("aria-current", "false");
  refresh();
}

/** Show the Admin tab to admins (asked again at each sign-in). */
export async function checkAdmin() {
  let admin = false;
  try {
    admin = (await adminMe()).admin === true;
  } catch {
    admin = false;
  }
  $("tab-admin").hidden = !admin;
  if (!admin) showAdmin(false);
}

export function initAdmin() {
  const tab = el("button", { type: "button", id: "tab-admin", "aria-current": "false", "data-i18n": "admin", hidden: true }, t("admin"));
  $("tab-docs").after(tab);
  $("app").append(el("dialog", { id: "token-dialog", class: "token-dialog", "aria-labelledby": "token-title" }));
  const view = $("admin-template").content.cloneNode(true);
  $("app").append(view);
  $("admin-users").closest("section").after(...groupSections());
  translatePage($("admin-view"));
  tab.addEventListener("click", () => showAdmin(true));
  for (const id of ["tab-chat", "tab-docs"]) $(id).addEventListener("click", () => showAdmin(false));
  $("admin-refresh").addEventListener("click", refresh);
  $("user-form").addEventListener("submit", addUser);
  $("source-form").addEventListener("submit", addSource);
  // Asked each time the app shows (after a sign-in), never before one.
  new MutationObserver(() => { if (!$("app").hidden) checkAdmin(); }).observe($("app"), { attributes: true, attributeFilter: ["hidden"] });
  window.addEventListener("auth-required", () => { $("tab-admin").hidden = true; showAdmin(false); });
}
