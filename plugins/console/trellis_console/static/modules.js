// Modules page: one card per loaded module, its config form generated from the module's JSON Schema.
import { api, bindForm, el, errorText, flash, onReady } from "/console/static/console.js";

const SECRET = /password|secret|apikey|authtoken|token$/i;

function hint(schema) {
  const parts = [];
  if (schema.description) parts.push(schema.description);
  if (schema.minimum !== undefined || schema.maximum !== undefined) {
    parts.push(`${schema.minimum ?? "…"} – ${schema.maximum ?? "…"}`);
  }
  if (schema.default !== undefined && schema.default !== null && schema.default !== "" && typeof schema.default !== "object") {
    parts.push(`default ${schema.default}`);
  }
  return parts.length ? el("span", { class: "hint" }, parts.join(" · ")) : null;
}

function control(name, key, schema, value) {
  const type = Array.isArray(schema.type) ? schema.type[0] : schema.type;
  if (type === "boolean") {
    return el("label", { class: "check" }, el("input", { type: "checkbox", name, checked: Boolean(value) }), " ", key, hint(schema));
  }
  let input;
  if (schema.enum) {
    input = el("select", { name }, schema.enum.map((option) => el("option", { value: option, selected: option === value }, String(option))));
  } else if (type === "integer" || type === "number") {
    // Text, not type=number: whatever is typed reaches the server, which says what is wrong with it.
    const mode = type === "integer" ? "numeric" : "decimal";
    input = el("input", { type: "text", inputmode: mode, name, "data-type": "number", value: value ?? "" });
  } else if (type === "array" && schema.items?.type !== "object") {
    // A list of plain values, one a line; a list of objects (e.g. OpenID Connect providers) is edited as JSON below.
    input = el("textarea", { name, rows: 3, "data-type": "lines" }, Array.isArray(value) ? value.join("\n") : "");
  } else if (type === "string") {
    // A value the form shows must be clearable: an emptied field is sent as "" (or null when allowed).
    const empty = schema.nullable ? "null" : typeof value === "string" || schema.default === "" ? "keep" : null;
    const attrs = { name, "data-empty": empty, autocomplete: "off", spellcheck: "false" };
    if (/privatekey/i.test(key)) input = el("textarea", { ...attrs, rows: 4 }, value ?? "");
    else input = el("input", { ...attrs, value: value ?? "", type: SECRET.test(key) ? "password" : "text" });
  } else {
    input = el("textarea", { name, rows: 3, "data-type": "json" }, value === undefined ? "" : JSON.stringify(value, null, 2));
  }
  return el("label", { class: "field" }, el("span", { class: "label" }, key), input, hint(schema));
}

// Flask sorts JSON keys, so the schema's own order is lost: show `active` first, then plain settings, then groups.
function ordered(properties) {
  const rank = ([key, property]) => (key === "active" ? 0 : property.type === "object" ? 2 : 1);
  return Object.entries(properties || {}).sort((a, b) => rank(a) - rank(b));
}

function controls(schema, values, prefix) {
  const out = [];
  for (const [key, property] of ordered(schema.properties)) {
    const name = prefix ? `${prefix}.${key}` : key;
    const value = values ? values[key] : undefined;
    if (property.type === "object" && property.properties) {
      if (!Object.keys(property.properties).length) continue; // e.g. the outbox provider: nothing to set
      out.push(el("fieldset", { class: "group", "data-error-key": name, "data-group": key }, el("legend", {}, key),
        hint(property), controls(property, value || {}, name)));
    } else {
      out.push(control(name, key, property, value));
    }
  }
  return out;
}

// A group named after a provider (email.smtp, storage.s3 …) matters only while that provider is chosen:
// the others are hidden and disabled, so they are neither shown nor sent.
function followProvider(form) {
  const select = form.querySelector("select[name=provider]");
  if (!select) return;
  const providers = [...select.options].map((option) => option.value);
  const update = () => {
    for (const group of form.querySelectorAll(":scope > fieldset[data-group]")) {
      if (!providers.includes(group.dataset.group)) continue;
      group.hidden = group.disabled = group.dataset.group !== select.value;
    }
  };
  select.addEventListener("change", update);
  update();
}

function badge(active) {
  return el("span", { class: active ? "badge on" : "badge off" }, active ? "active" : "inactive");
}

async function card(module) {
  const name = encodeURIComponent(module.name);
  const [schema, config] = await Promise.all([api("GET", `/config/${name}/schema`), api("GET", `/config/${name}`)]);
  const status = el("span", { class: "status" }, badge(module.active));
  const article = el("article", { class: "card", id: `module-${module.name}`, "data-module": module.name },
    el("header", {}, el("h2", {}, module.name), status),
    module.description ? el("p", { class: "muted" }, module.description) : null,
    module.requires.length ? el("p", { class: "muted small" }, "Requires: " + module.requires.join(", ")) : null);
  if (!schema.ok || !config.ok) {
    article.append(el("p", { class: "list-status error" }, errorText(schema.ok ? config : schema)));
    return article;
  }
  const form = el("form", { class: "config-form", "data-api": `PUT /config/${name}`, "data-keep": true, "data-done": "Saved." },
    controls(schema.data, config.data, ""),
    el("div", { class: "form-actions" }, el("button", { type: "submit" }, "Save configuration")));
  bindForm(form);
  followProvider(form);
  form.addEventListener("saved", (event) => {
    status.replaceChildren(badge(event.detail.active !== false));
  });
  article.append(form);
  return article;
}

onReady(async () => {
  const root = document.getElementById("modules");
  const result = await api("GET", "/config");
  if (!result.ok) {
    flash(errorText(result), "error");
    return;
  }
  root.replaceChildren(...(await Promise.all(result.data.modules.map(card))));
  root.removeAttribute("aria-busy");
});
