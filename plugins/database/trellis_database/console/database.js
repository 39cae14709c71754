// Database page: the schema editor (fields and CRUD options), documents of one schema, custom endpoints.
import {
  actions, clearErrors, collect, documentedSchema, el, fillForm, flash, lists, onReady, resetForm, submitForm,
} from "/console/static/console.js";

const OWN = "database";
// From the server's description of POST /admin/database/schemas (see onReady): the field type names,
// the options a new schema starts with, and the choices of canModify.
let TYPES = [];
let DEFAULT_OPTIONS = {};

const editor = () => document.getElementById("schema-editor");
const schemaForm = () => document.getElementById("schema-form");
const rowsBody = () => document.getElementById("field-rows");

/** The fields documents carry: the schema's own plus every extension's. */
function effectiveFields(schema) {
  const fields = { ...schema.fields };
  for (const extension of schema.extensions || []) Object.assign(fields, extension.fields || {});
  return fields;
}

function definition(raw) {
  const def = typeof raw === "string" || Array.isArray(raw) ? { type: raw } : { ...raw };
  let type = def.type;
  const array = Array.isArray(type);
  if (array) type = type[0];
  if (type && typeof type === "object") {
    def.model = def.model || type.model;
    type = type.type;
  }
  return { ...def, type, array };
}

// ---- schema editor ---------------------------------------------------------------------------------------

function fieldRow(name = "", raw = { type: "String" }) {
  const def = definition(raw);
  const check = (role, checked, label) => el("td", {}, el("input", { type: "checkbox", "data-role": role, checked, "aria-label": label }));
  const row = el("tr", { class: "field-row" },
    el("td", {}, el("input", { "data-role": "name", value: name, "aria-label": "Field name", spellcheck: "false" })),
    el("td", {}, el("select", { "data-role": "type", "aria-label": "Type" },
      TYPES.map((type) => el("option", { selected: type === def.type }, type)))),
    check("array", def.array, "List of values"),
    el("td", {}, el("input", { "data-role": "model", value: def.model || "", list: "schema-names", "aria-label": "Related schema" })),
    check("required", def.required, "Required"),
    check("unique", def.unique, "Unique"),
    el("td", {}, el("input", { "data-role": "description", value: def.description || "", "aria-label": "Description" })),
    el("td", {}, el("button", { type: "button", class: "small ghost", "aria-label": "Remove field", onclick: () => row.remove() }, "×")));
  return row;
}

function rowDefinitions() {
  const fields = {};
  for (const row of rowsBody().querySelectorAll("tr")) {
    const value = (role) => row.querySelector(`[data-role=${role}]`);
    const name = value("name").value.trim();
    if (!name) continue;
    row.dataset.errorKey = `fields.${name}`; // where the server's errors for this field are shown
    const type = value("type").value;
    const def = { type: value("array").checked ? [type] : type };
    if (value("model").value.trim()) def.model = value("model").value.trim();
    if (value("required").checked) def.required = true;
    if (value("unique").checked) def.unique = true;
    if (value("description").value.trim()) def.description = value("description").value.trim();
    fields[name] = def;
  }
  return fields;
}

function openEditor(mode, schema) {
  const form = schemaForm();
  resetForm(form);
  form.dataset.mode = mode;
  const title = document.getElementById("schema-editor-title");
  const options = document.getElementById("schema-options");
  const nameRow = document.getElementById("schema-name-row");
  options.hidden = nameRow.hidden = mode === "extend";
  options.disabled = nameRow.querySelector("input").disabled = mode === "extend";
  let fields = {};
  if (mode === "new") {
    title.textContent = "New schema";
    form.dataset.api = "POST /admin/database/schemas";
    fillForm(form, { modelOptions: DEFAULT_OPTIONS });
    fields = { title: { type: "String", required: true } };
  } else if (mode === "edit") {
    title.textContent = `Edit schema ${schema.name}`;
    form.dataset.api = `PUT /admin/database/schemas/${encodeURIComponent(schema._id)}`;
    fillForm(form, schema);
    fields = schema.fields;
  } else {
    title.textContent = `Extend ${schema.name} (owned by ${schema.ownerModule})`;
    form.dataset.api = `POST /admin/database/schemas/${encodeURIComponent(schema._id)}/extensions`;
    const mine = (schema.extensions || []).find((extension) => extension.ownerModule === OWN);
    fields = mine ? mine.fields : {};
  }
  rowsBody().replaceChildren(...Object.entries(fields).map(([name, raw]) => fieldRow(name, raw)));
  if (!rowsBody().children.length) rowsBody().append(fieldRow());
  editor().hidden = false;
  editor().scrollIntoView({ block: "nearest" });
  (form.querySelector("input[name=name]:not(:disabled)") || rowsBody().querySelector("input")).focus();
}

/** Field types, default options and canModify choices, as the schema routes document them. */
async function loadDefinitions() {
  const route = ["POST", "/admin/database/schemas"];
  const [field, options, canModify] = await Promise.all([
    documentedSchema(...route, "fields.additionalProperties"),
    documentedSchema(...route, "modelOptions"),
    documentedSchema(...route, "modelOptions.conduit.permissions.canModify"),
  ]);
  TYPES = ((field && field.oneOf) || []).map((option) => option.enum).find(Boolean) || [];
  DEFAULT_OPTIONS = (options && options.default) || {};
  document.querySelector("select[name='modelOptions.conduit.permissions.canModify']")
    .replaceChildren(...((canModify && canModify.enum) || []).map((choice) => el("option", {}, choice)));
  if (!TYPES.length) flash("The field types could not be read from /openapi.json: the schema editor is unavailable.", "error");
  document.getElementById("new-schema").disabled = !TYPES.length;
}

async function saveSchema(event) {
  event.preventDefault();
  const form = schemaForm();
  clearErrors(form);
  const fields = rowDefinitions();
  const body = form.dataset.mode === "extend" ? { fields } : { ...collect(form).body, fields };
  const saved = await submitForm(form, body);
  if (!saved) return;
  editor().hidden = true;
  lists.get("schemas").load();
  const documents = lists.get("documents");
  if (documents.context.schemaName && documents.context.schemaId === saved._id) showDocuments(saved);
}

// ---- documents ---------------------------------------------------------------------------------------------

function documentControl(name, raw) {
  const def = definition(raw);
  const label = el("span", { class: "label" }, `${name} (${def.array ? `[${def.type}]` : def.type}${def.required ? ", required" : ""})`);
  let input;
  if (def.array || def.type === "JSON") {
    input = el("textarea", { name, rows: 2, "data-type": "json", placeholder: def.array ? "[…]" : "{…}" });
  } else if (def.type === "Boolean") {
    input = el("select", { name, "data-type": "json" },
      el("option", { value: "" }, "(not set)"), el("option", { value: "true" }, "true"), el("option", { value: "false" }, "false"));
  } else if (def.type === "Number") {
    input = el("input", { name, type: "text", inputmode: "decimal", "data-type": "number" });
  } else {
    const placeholder = def.type === "Date" ? "2030-01-31T12:00:00Z" : def.type === "Relation" ? `_id of a ${def.model}` : "";
    input = el("input", { name, placeholder, spellcheck: "false" });
  }
  return el("label", { class: "field" }, label, input, def.description ? el("span", { class: "hint" }, def.description) : null);
}

function columnFormat(def) {
  if (def.array || def.type === "JSON") return "json";
  if (def.type === "Relation" || def.type === "ObjectId") return "id";
  return def.type === "Date" ? "date" : undefined;
}

function showDocuments(schema) {
  const fields = effectiveFields(schema);
  const names = Object.keys(fields);
  document.getElementById("documents-panel").hidden = false;
  document.getElementById("documents-schema").textContent = schema.name;
  const filter = document.getElementById("document-filter");
  filter.reset();
  filter.elements.field.replaceChildren(...["_id", ...names, "createdAt", "updatedAt"].map((name) => el("option", {}, name)));
  const form = document.getElementById("document-form");
  resetForm(form);
  document.getElementById("document-fields").replaceChildren(...names.map((name) => documentControl(name, fields[name])));
  const list = lists.get("documents");
  list.setColumns([
    { key: "_id", title: "_id", format: "id" },
    ...names.map((name) => ({ key: name, format: columnFormat(definition(fields[name])) })),
    { key: "updatedAt", format: "date" },
  ]);
  list.setContext({ schemaName: schema.name, schemaId: schema._id }, schema.name);
  document.getElementById("documents-panel").scrollIntoView({ block: "nearest" });
}

function filterParams(params) {
  const filter = document.getElementById("document-filter").elements;
  const value = filter.value.value.trim();
  if (value) params.set(filter.op.value ? `${filter.field.value}[${filter.op.value}]` : filter.field.value, value);
  if (filter.sort.value.trim()) params.set("sort", filter.sort.value.trim());
}

// ---- wiring --------------------------------------------------------------------------------------------------

actions.documents = (schema) => showDocuments(schema);
actions.editSchema = (schema) => openEditor("edit", schema);
actions.extendSchema = (schema) => openEditor("extend", schema);

const CRUD = ["create", "read", "update", "delete"]; // in the order the schema editor shows them

/** What a schema's CMS routes serve, by its CRUD options: "off", or the operations that are on, and those of
 * them open to anonymous callers (no user token needed). Schemas of other modules have no CMS routes. */
function cmsState(schema, own) {
  if (!own) return { cmsStatus: `managed by ${schema.ownerModule}`, anonymous: "" };
  const cms = (schema.modelOptions.conduit || {}).cms || {};
  if (!cms.enabled) return { cmsStatus: "off", anonymous: "" };
  const rules = cms.crudOperations || {};
  const operations = CRUD.map((name) => [name, rules[name]]).filter(([, rule]) => rule && rule.enabled);
  const open = operations.filter(([, rule]) => !rule.authenticated).map(([name]) => name);
  return {
    cmsStatus: operations.length ? operations.map(([name]) => name).join(", ") : "on, every operation off",
    anonymous: open.length ? `⚠ ${open.join(", ")}` : "",
  };
}

onReady(async () => {
  await loadDefinitions();
  const schemas = lists.get("schemas");
  schemas.transform = (rows) => rows.map((schema) => {
    const own = schema.ownerModule === OWN;
    const permissions = (schema.modelOptions.conduit || {}).permissions || {};
    return {
      ...schema,
      ...cmsState(schema, own),
      allFields: effectiveFields(schema),
      hasDocuments: own,
      editable: own,
      extendable: !own && (permissions.extendable || permissions.canModify === "ExtensionOnly"),
    };
  });
  schemas.root.addEventListener("loaded", () => {
    const open = schemas.rows.filter((schema) => schema.anonymous).map((schema) => schema.name);
    const warning = document.getElementById("open-schemas");
    warning.textContent = open.length
      ? `Anyone, signed in or not, can use these schemas' routes where ⚠ shows: ${open.join(", ")}. ` +
        "Edit a schema and tick \"Needs a user token\" for each operation that should not be public."
      : "";
    warning.hidden = !open.length;
    document.getElementById("schema-names").replaceChildren(...schemas.rows.map((schema) => el("option", { value: schema.name })));
  });
  const documents = lists.get("documents");
  documents.extraParams = filterParams;
  const filter = document.getElementById("document-filter");
  filter.addEventListener("submit", (event) => {
    event.preventDefault();
    documents.skip = 0;
    documents.load();
  });
  document.getElementById("clear-filter").addEventListener("click", () => {
    filter.reset();
    documents.skip = 0;
    documents.load();
  });
  document.getElementById("new-schema").addEventListener("click", () => openEditor("new"));
  document.getElementById("add-field").addEventListener("click", () => {
    const row = fieldRow();
    rowsBody().append(row);
    row.querySelector("input").focus();
  });
  document.getElementById("close-schema").addEventListener("click", () => {
    editor().hidden = true;
  });
  schemaForm().noValidate = true;
  schemaForm().addEventListener("submit", saveSchema);
});
