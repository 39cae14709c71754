// Trellis console: the session, API calls, and the generic parts every page is built from:
//   <div data-list data-path="/api/path" data-items="key">  a paged table filled from a list route
//   <form data-api="METHOD /api/path">                      a form sent as JSON, errors shown by the fields
//   <select data-options="/api/path" …>                     options loaded from a list route
//   <dl data-fetch="/api/path">                             a record shown key by key
//   <select name="status" data-enum> in a list's filters    its choices: the list route's documented enum
//   <span data-enum-text="POST /api/path field.items.type">  documented choices of a body field, as text
// Page scripts (a module's, served at /console/scripts/<page>.js) import this file by its absolute path,
// /console/static/console.js, and add what is specific to them.
// Everything coming from the API is inserted as text nodes or attribute values, never parsed as HTML.

const TOKEN_KEY = "trellis.console.token";
const FLASH_KEY = "trellis.console.flash";

export const lists = new Map(); // element id → List
export const actions = {}; // custom row actions: name → (row, list, button) => void
const readyCallbacks = [];
const editing = new WeakMap(); // form → {record}

export function onReady(callback) {
  readyCallbacks.push(callback);
}

// ---- session and API -------------------------------------------------------------------------------

export function token() {
  return sessionStorage.getItem(TOKEN_KEY);
}

export function signOut(message) {
  sessionStorage.removeItem(TOKEN_KEY);
  if (message) sessionStorage.setItem(FLASH_KEY, message);
  const next = location.pathname.startsWith("/console/login") ? "" : "?next=" + encodeURIComponent(location.pathname);
  location.assign("/console/login" + next);
}

/** Call the API. Resolves to {ok, status, data}; with {raw: true} to the fetch Response. */
export async function api(method, path, body, { headers = {}, raw = false } = {}) {
  const init = { method, headers: { Accept: "application/json", ...headers }, credentials: "omit", cache: "no-store" };
  const bearer = token();
  if (bearer) init.headers.Authorization = "Bearer " + bearer;
  if (body instanceof FormData) {
    init.body = body;
  } else if (body !== undefined) {
    init.headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  let response;
  try {
    response = await fetch(path, init);
  } catch (error) {
    return { ok: false, status: 0, data: { message: "The server cannot be reached." } };
  }
  if (response.status === 401 && bearer) {
    signOut("Your session has ended. Sign in again.");
  }
  if (raw && response.ok) return response;
  const text = await response.text();
  let data = null;
  if (text) {
    try {
      data = JSON.parse(text);
    } catch (error) {
      data = { message: text.slice(0, 300) };
    }
  }
  return { ok: response.ok, status: response.status, data };
}

export function errorText(result) {
  const message = (result.data && result.data.message) || `The request failed (${result.status}).`;
  return result.status ? `${message} (${result.status})` : message;
}

// ---- DOM helpers -------------------------------------------------------------------------------------

/** el("td", {class: "x", onclick: fn}, "text", child) — strings become text nodes. */
export function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (key === "class") node.className = value;
    else if (key.startsWith("on") && typeof value === "function") node.addEventListener(key.slice(2), value);
    else if (value === true) node.setAttribute(key, "");
    else node.setAttribute(key, String(value));
  }
  for (const child of children.flat()) {
    if (child !== null && child !== undefined && child !== false) node.append(child);
  }
  return node;
}

export function getPath(object, path) {
  return path.split(".").reduce((value, key) => (value == null ? undefined : value[key]), object);
}

function setPath(object, path, value) {
  const keys = path.split(".");
  let target = object;
  for (const key of keys.slice(0, -1)) {
    if (typeof target[key] !== "object" || target[key] === null) target[key] = {};
    target = target[key];
  }
  target[keys[keys.length - 1]] = value;
}

/** "/a/{_id}/b" with values from context; URL-encoded unless plain (for messages). */
export function fill(template, context, plain = false) {
  return template.replace(/\{([\w.]+)\}/g, (_, key) => {
    const value = getPath(context, key);
    const text = value === undefined || value === null ? "" : String(value);
    return plain ? text : encodeURIComponent(text);
  });
}

export function flash(message, kind = "info") {
  const box = document.getElementById("flash");
  if (!box) return;
  box.className = "flash " + kind;
  box.textContent = message;
  box.hidden = !message;
}

export function formatValue(value, format, labels) {
  if (value === undefined || value === null) return "";
  switch (format) {
    case "bool": {
      const [yes, no] = (labels || "yes|no").split("|");
      return value ? yes : no;
    }
    case "date":
      return String(value).replace("T", " ").replace(/\.\d+/, "").replace("Z", " UTC");
    case "json":
      return JSON.stringify(value);
    case "id": // long opaque ids: the start is enough to tell them apart (the cell's title has all of it)
    case "user": // a user id until its email is known (resolveUsers)
      return String(value).length > 10 ? String(value).slice(0, 8) + "…" : String(value);
    case "actor": // an audit entry's actor: the administrator's name, or how the change came
      if (typeof value !== "object") return String(value);
      return value.username ? `${value.username} (${value.type})` : value.type;
    case "keys":
      return Object.keys(value).join(", ");
    case "count":
      return String(Array.isArray(value) ? value.length : Object.keys(value).length);
    case "list":
      return Array.isArray(value) ? value.join(", ") : String(value);
    case "bytes": {
      const units = ["B", "KiB", "MiB", "GiB", "TiB"];
      let size = Number(value);
      let unit = 0;
      while (size >= 1024 && unit < units.length - 1) {
        size /= 1024;
        unit += 1;
      }
      return `${unit ? size.toFixed(1) : size} ${units[unit]}`;
    }
    default:
      return typeof value === "object" ? JSON.stringify(value) : String(value);
  }
}

// ---- lists -------------------------------------------------------------------------------------------

export class List {
  constructor(root) {
    this.root = root;
    this.path = root.dataset.path;
    this.itemsKey = root.dataset.items;
    this.needs = (root.dataset.needs || "").split(" ").filter(Boolean);
    this.table = root.querySelector("table");
    this.head = this.table.tHead || this.table.createTHead();
    this.body = this.table.tBodies[0] || this.table.createTBody();
    this.columns = [...this.head.querySelectorAll("th[data-col]")].map((th) => ({
      key: th.dataset.col,
      format: th.dataset.format,
      labels: th.dataset.labels,
    }));
    this.actionsTemplate = root.querySelector("template.row-actions");
    this.filters = root.querySelector("form.filters");
    this.status = root.querySelector(".list-status") || root.appendChild(el("p", { class: "list-status", role: "status" }));
    this.pager = root.querySelector(".pager") || root.appendChild(el("div", { class: "pager" }));
    this.context = {};
    this.rows = [];
    this.skip = 0;
    this.limit = Number(root.dataset.limit || document.body.dataset.pageSize || 25);
    this.extraParams = null; // page scripts may add query parameters: (URLSearchParams) => void
    this.transform = null; // and derive values for columns and actions: (rows) => rows
    if (this.filters) {
      this.filters.addEventListener("submit", (event) => {
        event.preventDefault();
        this.skip = 0;
        this.load();
      });
      this.filters.addEventListener("change", (event) => {
        if (event.target.tagName === "SELECT") {
          this.skip = 0;
          this.load();
        }
      });
    }
  }

  ready() {
    return this.needs.every((key) => this.context[key] !== undefined);
  }

  setColumns(columns) {
    this.columns = columns;
    const row = el("tr", {}, columns.map((c) => el("th", { scope: "col" }, c.title || c.key)));
    if (this.actionsTemplate) row.append(el("th", { class: "actions" }, el("span", { class: "sr-only" }, "Actions")));
    this.head.replaceChildren(row);
  }

  setContext(context, label) {
    Object.assign(this.context, context);
    this.skip = 0;
    for (const node of this.root.querySelectorAll("[data-context-label]")) node.textContent = label || "";
    this.root.hidden = false;
    return this.load();
  }

  url() {
    const path = fill(this.path, this.context);
    const params = new URLSearchParams();
    if (this.filters) {
      for (const [key, value] of new FormData(this.filters)) {
        if (typeof value === "string" && value.trim() !== "") params.append(key, value.trim());
      }
    }
    if (this.extraParams) this.extraParams(params);
    params.set("skip", String(this.skip));
    params.set("limit", String(this.limit));
    return path + (path.includes("?") ? "&" : "?") + params.toString();
  }

  async load() {
    if (!this.ready()) return;
    const call = (this.calls = (this.calls || 0) + 1);
    this.root.setAttribute("aria-busy", "true");
    const result = await api("GET", this.url());
    if (call !== this.calls) return; // a newer load (filter, page) has started: its answer wins
    this.root.removeAttribute("aria-busy");
    if (!result.ok) {
      this.rows = [];
      this.body.replaceChildren();
      this.pager.replaceChildren();
      this.status.textContent = errorText(result);
      this.status.className = "list-status error";
      return;
    }
    this.rows = result.data[this.itemsKey] || [];
    if (this.transform) this.rows = this.transform(this.rows);
    const count = typeof result.data.count === "number" ? result.data.count : this.rows.length;
    if (!this.rows.length && this.skip > 0 && count > 0) {
      this.skip = Math.max(0, this.skip - this.limit); // the last row of this page went away
      await this.load();
      return;
    }
    this.render(count);
    this.root.dispatchEvent(new CustomEvent("loaded", { detail: result.data }));
  }

  render(count) {
    this.body.replaceChildren(...this.rows.map((row) => this.renderRow(row)));
    resolveUsers(this.body);
    this.status.className = "list-status";
    this.status.textContent = count === 0 ? "Nothing here yet." : "";
    const first = count === 0 ? 0 : this.skip + 1;
    const previous = el("button", { type: "button", class: "small", disabled: this.skip === 0 }, "Previous");
    const next = el("button", { type: "button", class: "small", disabled: this.skip + this.rows.length >= count }, "Next");
    previous.addEventListener("click", () => {
      this.skip = Math.max(0, this.skip - this.limit);
      this.load();
    });
    next.addEventListener("click", () => {
      this.skip += this.limit;
      this.load();
    });
    const summary = el("span", { class: "muted" }, `${first}–${this.skip + this.rows.length} of ${count}`);
    this.pager.replaceChildren(summary, previous, next);
  }

  renderRow(row) {
    const tr = el("tr");
    for (const column of this.columns) {
      const value = getPath(row, column.key);
      const text = formatValue(value, column.format, column.labels);
      const full = (column.format === "id" || column.format === "user") && value ? String(value) : text;
      const userId = column.format === "user" && value ? String(value) : null;
      tr.append(el("td", { title: full.length > 40 || full !== text ? full : null, "data-user-id": userId }, text));
    }
    if (this.actionsTemplate) {
      const cell = el("td", { class: "actions" });
      cell.append(this.actionsTemplate.content.cloneNode(true));
      for (const button of cell.querySelectorAll("[data-do]")) {
        const { if: onlyIf, unless } = button.dataset;
        if ((onlyIf && !getPath(row, onlyIf)) || (unless && getPath(row, unless))) {
          button.remove();
          continue;
        }
        button.addEventListener("click", () => runAction(button, row, this));
      }
      tr.append(cell);
    }
    return tr;
  }
}

// ---- users by email ----------------------------------------------------------------------------------

const userEmails = new Map(); // user id → email (or phone number), for this page's life

/** Show the user of every `[data-user-id]` cell under `root` by email instead of id: one call for the ids
 * not seen yet (`GET /authentication/users?ids=`). Without the Authentication module the ids stay. */
export async function resolveUsers(root) {
  const cells = [...root.querySelectorAll("[data-user-id]")];
  const unknown = [...new Set(cells.map((cell) => cell.dataset.userId))].filter((id) => !userEmails.has(id));
  for (let start = 0; start < unknown.length; start += 100) {
    const ids = unknown.slice(start, start + 100);
    const result = await api("GET", `/authentication/users?limit=100&ids=${ids.map(encodeURIComponent).join(",")}`);
    if (!result.ok) return;
    for (const user of result.data.users) userEmails.set(user._id, user.email || user.phoneNumber || user._id);
  }
  for (const cell of cells) {
    const email = userEmails.get(cell.dataset.userId);
    if (email) cell.textContent = email;
  }
}

/** Reload the lists (or data-fetch records) with these element ids. */
export function reload(ids) {
  for (const id of (ids || "").split(" ").filter(Boolean)) {
    const list = lists.get(id);
    if (list) list.load();
    const record = document.getElementById(id);
    if (record && "fetch" in record.dataset) loadRecord(record);
  }
}

async function runAction(button, row, list) {
  const kind = button.dataset.do;
  const context = { ...list.context, ...row };
  if (button.dataset.confirm && !window.confirm(fill(button.dataset.confirm, context, true))) return;
  if (kind === "call") {
    const [method, path] = button.dataset.api.split(" ");
    button.disabled = true;
    const result = await api(method, fill(path, context));
    button.disabled = false;
    if (!result.ok) {
      flash(errorText(result), "error");
      return;
    }
    flash(fill(button.dataset.done || "Done.", context, true));
    await list.load();
    reload(button.dataset.reload);
  } else if (kind === "edit") {
    editForm(document.getElementById(button.dataset.form), row);
  } else if (kind === "select") {
    const target = lists.get(button.dataset.target);
    await target.setContext({ [button.dataset.param]: row._id }, fill(button.dataset.label || "", context, true));
    target.root.scrollIntoView({ block: "nearest" });
  } else if (kind === "filter") {
    const target = lists.get(button.dataset.target);
    target.filters.elements[button.dataset.field].value = fill(button.dataset.value, context, true);
    target.skip = 0;
    await target.load();
    target.root.scrollIntoView({ block: "nearest" });
  } else if (kind === "download") {
    await download(fill(button.dataset.api, context), fill(button.dataset.filename || "download", context, true));
  } else if (actions[kind]) {
    await actions[kind](row, list, button);
  }
}

export async function download(path, filename) {
  const response = await api("GET", path, undefined, { raw: true });
  if (!(response instanceof Response)) {
    flash(errorText(response), "error");
    return;
  }
  const url = URL.createObjectURL(await response.blob());
  const link = el("a", { href: url, download: filename, hidden: true });
  document.body.append(link);
  link.click();
  link.remove();
  setTimeout(() => URL.revokeObjectURL(url), 5000);
}

// ---- forms -------------------------------------------------------------------------------------------

export function bindForm(form) {
  form.noValidate = true; // the server validates; its errors are shown next to the fields
  ensureFeedback(form);
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    submitForm(form);
  });
  for (const cancel of form.querySelectorAll("[data-cancel]")) {
    cancel.addEventListener("click", () => resetForm(form));
  }
}

function ensureFeedback(form) {
  if (!form.querySelector(":scope .form-error")) form.append(el("div", { class: "form-error", role: "alert", hidden: true }));
  if (!form.querySelector(":scope .form-status")) form.append(el("p", { class: "form-status", role: "status" }));
}

/** Put a record into the form and switch it to its edit route (data-api-edit). */
export function editForm(form, record) {
  editing.set(form, { record });
  clearErrors(form);
  fillForm(form, record);
  form.classList.add("editing");
  for (const node of form.querySelectorAll("[data-cancel]")) node.hidden = false;
  for (const node of labels(form)) node.textContent = fill(node.dataset.editLabel, record, true);
  form.scrollIntoView({ block: "nearest" });
  const first = form.querySelector("input:not([type=hidden]), textarea, select");
  if (first) first.focus();
}

// Headings that name what a form is doing: inside it, or elsewhere with data-for="<form id>".
function labels(form) {
  const outside = form.id ? [...document.querySelectorAll(`[data-edit-label][data-for="${form.id}"]`)] : [];
  return [...form.querySelectorAll("[data-edit-label]"), ...outside];
}

export function fillForm(form, record) {
  for (const input of form.elements) {
    if (!input.name || input.type === "file" || input.type === "submit") continue;
    let value = input.name === "." ? { ...record } : getPath(record, input.name);
    if (input.name === "." && input.dataset.omit) {
      for (const key of input.dataset.omit.split(" ")) delete value[key];
    }
    if (input.type === "checkbox") input.checked = Boolean(value);
    else if (input.dataset.type === "json") input.value = value === undefined ? "" : JSON.stringify(value, null, 2);
    else if (input.dataset.type === "lines") input.value = Array.isArray(value) ? value.join("\n") : "";
    else input.value = value === undefined || value === null ? "" : String(value);
  }
}

export function resetForm(form) {
  editing.delete(form);
  form.reset();
  clearErrors(form);
  form.classList.remove("editing");
  for (const node of form.querySelectorAll("[data-cancel]")) node.hidden = true;
  for (const node of labels(form)) node.textContent = node.dataset.createLabel || "";
  form.dispatchEvent(new CustomEvent("formreset"));
}

export function editedRecord(form) {
  const state = editing.get(form);
  return state ? state.record : null;
}

/** The JSON body of a form: named controls by dotted name; data-type number|json|lines|list. */
export function collect(form) {
  const body = {};
  const errors = {};
  for (const input of form.elements) {
    const name = input.name;
    if (!name || input.matches(":disabled") || ["submit", "button", "file", "reset"].includes(input.type)) continue;
    let value;
    if (input.type === "checkbox") {
      value = input.checked;
    } else {
      const raw = input.value;
      const type = input.dataset.type;
      if (raw.trim() === "") {
        if (input.dataset.empty === "null") value = null;
        else if (input.dataset.empty === "keep") value = "";
        else continue;
      } else if (type === "number") {
        const number = Number(raw);
        value = Number.isFinite(number) ? number : raw; // the server says what is wrong with it
      } else if (type === "json") {
        try {
          value = JSON.parse(raw);
        } catch (error) {
          errors[name] = ["Not valid JSON: " + error.message];
          continue;
        }
      } else if (type === "lines") {
        value = raw.split("\n").map((line) => line.trim()).filter(Boolean);
      } else if (type === "list") {
        value = raw.split(",").map((item) => item.trim()).filter(Boolean);
      } else {
        value = raw;
      }
    }
    if (name === ".") Object.assign(body, value);
    else setPath(body, name, value);
  }
  return { body, errors: Object.keys(errors).length ? errors : null };
}

function contextOf(form) {
  const list = lists.get(form.dataset.context || "");
  return list ? list.context : {};
}

/** Send the form to its route; shows errors inline, reloads lists named in data-reload. */
export async function submitForm(form, bodyOverride) {
  clearErrors(form);
  const record = editedRecord(form);
  const spec = record && form.dataset.apiEdit ? form.dataset.apiEdit : form.dataset.api;
  const [method, template] = spec.split(" ");
  const path = fill(template, { ...contextOf(form), ...(record || {}) });
  let body = bodyOverride;
  if (body === undefined) {
    if ("multipart" in form.dataset) {
      body = new FormData(form);
      for (const [key, value] of [...body.entries()]) if (value === "") body.delete(key);
    } else {
      const collected = collect(form);
      if (collected.errors) {
        showErrors(form, { message: "Some fields need fixing.", errors: collected.errors });
        return null;
      }
      body = collected.body;
    }
  }
  const buttons = [...form.querySelectorAll("button[type=submit], button:not([type])")];
  for (const button of buttons) button.disabled = true;
  form.setAttribute("aria-busy", "true");
  const result = await api(method, path, body);
  for (const button of buttons) button.disabled = false;
  form.removeAttribute("aria-busy");
  if (!result.ok) {
    showErrors(form, result.data || { message: errorText(result) }, result.status);
    return null;
  }
  if (!("keep" in form.dataset)) resetForm(form);
  setStatus(form, fill(form.dataset.done || "Saved.", result.data || {}, true));
  reload(form.dataset.reload);
  form.dispatchEvent(new CustomEvent("saved", { detail: result.data }));
  return result.data;
}

export function setStatus(form, message) {
  const status = form.querySelector(".form-status");
  if (status) status.textContent = message;
}

export function clearErrors(form) {
  for (const node of form.querySelectorAll(".field-error")) node.remove();
  for (const node of form.querySelectorAll("[aria-invalid]")) node.removeAttribute("aria-invalid");
  const box = form.querySelector(".form-error");
  if (box) {
    box.replaceChildren();
    box.hidden = true;
  }
  setStatus(form, "");
}

/** {"a": {"b": ["x"]}, "c.d": ["y"]} → {"a.b": ["x"], "c.d": ["y"]} */
export function flattenErrors(errors, prefix = "", out = {}) {
  if (Array.isArray(errors) && errors.every((item) => typeof item === "string")) {
    out[prefix || "_schema"] = errors;
    return out;
  }
  if (errors && typeof errors === "object") {
    for (const [key, value] of Object.entries(errors)) flattenErrors(value, prefix ? `${prefix}.${key}` : key, out);
    return out;
  }
  out[prefix || "_schema"] = [String(errors)];
  return out;
}

function findControl(form, key) {
  const candidates = [...form.querySelectorAll("[data-error-key], [name]")];
  const parts = key.split(".");
  while (parts.length) {
    const wanted = parts.join(".");
    const found = candidates.find((node) => (node.dataset.errorKey || node.getAttribute("name")) === wanted);
    if (found) return { node: found, rest: key.slice(wanted.length + 1) };
    parts.pop();
  }
  const whole = form.querySelector('[name="."]');
  return whole ? { node: whole, rest: key } : null;
}

export function showErrors(form, data) {
  ensureFeedback(form);
  const unplaced = [];
  for (const [key, messages] of Object.entries(flattenErrors((data && data.errors) || {}))) {
    const found = key === "_schema" ? null : findControl(form, key);
    const text = messages.join(" ");
    if (!found) {
      unplaced.push(key === "_schema" ? text : `${key}: ${text}`);
      continue;
    }
    const { node, rest } = found;
    node.setAttribute("aria-invalid", "true");
    const holder = node.closest("label, .field, fieldset, tr") || node.parentElement;
    const message = el("span", { class: "field-error" }, rest ? `${rest}: ${text}` : text);
    if (holder.tagName === "TR") holder.lastElementChild.append(message);
    else holder.append(message);
  }
  const box = form.querySelector(".form-error");
  box.replaceChildren(el("strong", {}, (data && data.message) || "The request failed."), ...unplaced.map((t) => el("div", {}, t)));
  box.hidden = false;
}

// ---- the server's own description: types, choices and defaults come from /openapi.json -------------------

let openapi = null;

/** The OpenAPI document, fetched once per page (null when it cannot be read). */
export function openapiDocument() {
  if (!openapi) openapi = api("GET", "/openapi.json").then((result) => (result.ok ? result.data : null));
  return openapi;
}

function dereference(doc, node) {
  for (let hops = 0; node && node.$ref && hops < 10; hops += 1) {
    node = node.$ref.replace(/^#\//, "").split("/").reduce((value, key) => (value == null ? undefined : value[key]), doc);
  }
  return node;
}

/** The schema an operation documents for its JSON body, at `where` ("fields.items.type": a property, then an
 *  array's items, then a property …), references resolved; with {parameter: "status"}, for that query parameter. */
export async function documentedSchema(method, path, where = "", { parameter } = {}) {
  const doc = await openapiDocument();
  const operation = doc && doc.paths && doc.paths[path] && doc.paths[path][method.toLowerCase()];
  if (!operation) return null;
  let node;
  if (parameter) {
    const found = (operation.parameters || []).map((p) => dereference(doc, p)).find((p) => p.in === "query" && p.name === parameter);
    node = found && found.schema;
  } else {
    const content = operation.requestBody && operation.requestBody.content && operation.requestBody.content["application/json"];
    node = content && content.schema;
  }
  for (const key of where.split(".").filter(Boolean)) {
    node = dereference(doc, node);
    if (!node) return null;
    node = node.properties && key in node.properties ? node.properties[key] : node[key];
  }
  return dereference(doc, node) || null;
}

function choicesOf(schema) {
  const choices = (schema && (schema.enum || (schema.items && schema.items.enum))) || [];
  return choices.filter((choice) => choice !== null).map(String);
}

/** A filter's choices: the enum the list route documents for the query parameter of the select's name. */
async function loadEnum(select) {
  const list = select.closest("[data-list]");
  const schema = list && (await documentedSchema("GET", list.dataset.path, "", { parameter: select.name }));
  select.append(...choicesOf(schema).map((choice) => el("option", { value: choice }, choice)));
}

/** <span data-enum-text="POST /admin/forms fields.items.type">: the documented choices, as text. */
async function loadEnumText(node) {
  const [method, path, where] = node.dataset.enumText.split(" ");
  node.textContent = choicesOf(await documentedSchema(method, path, where)).join(" | ");
}

// ---- option lists and records --------------------------------------------------------------------------

export async function loadOptions(select) {
  const result = await api("GET", select.dataset.options);
  if (!result.ok) return;
  const keep = [...select.options].filter((option) => option.value === "");
  const items = result.data[select.dataset.optionsItems] || [];
  const value = select.dataset.optionsValue || "_id";
  const label = select.dataset.optionsLabel || "name";
  select.replaceChildren(...keep, ...items.map((item) => el("option", { value: getPath(item, value) }, String(getPath(item, label)))));
}

export async function loadRecord(container) {
  const result = await api("GET", container.dataset.fetch);
  if (!result.ok) {
    container.replaceChildren(el("p", { class: "list-status error" }, errorText(result)));
    return;
  }
  for (const node of container.querySelectorAll("[data-key]")) {
    node.textContent = formatValue(getPath(result.data, node.dataset.key), node.dataset.format);
  }
}

// ---- start-up ------------------------------------------------------------------------------------------

function safeNext(value) {
  // Only paths inside the console: never another origin ("//host") or a scheme.
  return value && /^\/console\/[\w/-]*$/.test(value) ? value : "/console/modules";
}

function startLogin() {
  sessionStorage.removeItem(TOKEN_KEY); // the sign-in page ends any session of this tab
  const form = document.getElementById("login-form");
  ensureFeedback(form);
  form.noValidate = true;
  const message = sessionStorage.getItem(FLASH_KEY);
  sessionStorage.removeItem(FLASH_KEY);
  if (message) flash(message);
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    clearErrors(form);
    const fields = Object.fromEntries(new FormData(form));
    const result = await api(
      "POST", "/login", { username: fields.username, password: fields.password },
      { headers: { masterkey: fields.masterkey } },
    );
    if (!result.ok) {
      showErrors(form, result.data || { message: errorText(result) });
      return;
    }
    sessionStorage.setItem(TOKEN_KEY, result.data.token);
    location.assign(safeNext(new URLSearchParams(location.search).get("next")));
  });
}

async function start() {
  if (document.body.dataset.page === "login") {
    startLogin();
    return;
  }
  if (!token()) {
    signOut();
    return;
  }
  document.getElementById("main").hidden = false;
  document.getElementById("sign-out").addEventListener("click", () => signOut("You are signed out."));
  for (const root of document.querySelectorAll("[data-list]")) lists.set(root.id, new List(root));
  for (const form of document.querySelectorAll("form[data-api]")) bindForm(form);
  for (const select of document.querySelectorAll("select[data-options]")) loadOptions(select);
  for (const select of document.querySelectorAll("select[data-enum]")) loadEnum(select);
  for (const node of document.querySelectorAll("[data-enum-text]")) loadEnumText(node);
  for (const container of document.querySelectorAll("[data-fetch]")) loadRecord(container);
  for (const callback of readyCallbacks) await callback();
  const loads = [];
  for (const list of lists.values()) if (!list.needs.length && !("manual" in list.root.dataset)) loads.push(list.load());
  await Promise.allSettled(loads);
  // The page's first lists are shown, so nothing above a form moves any more: the browser tests wait for
  // this before they click (in CI, 2026-11-28, a submit click had no effect, likely as a list above rendered).
  document.body.dataset.started = "true";
}

document.addEventListener("DOMContentLoaded", () => {
  start().catch((error) => {
    flash("The page failed to start: " + error.message, "error");
    throw error;
  });
});
