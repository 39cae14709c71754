// Access control page: a schema's definition (edited as JSON), a document's grants (list, add, remove),
// and "what can this user see" (evaluate over the first documents of a schema).
import { actions, api, editForm, el, errorText, flash, lists, onReady, resetForm } from "/console/static/console.js";

const definitions = new Map(); // schema name → {name, relations, permissions}, from the resources list
const SEES_LIMIT = 25;

function fillSelect(select, values) {
  select.replaceChildren(...values.map((value) => el("option", { value }, value)));
}

async function definition(name) {
  if (!definitions.has(name)) {
    const result = await api("GET", `/admin/authorization/resources/${encodeURIComponent(name)}`);
    if (!result.ok) {
      flash(errorText(result), "error");
      return null;
    }
    definitions.set(name, result.data);
  }
  return definitions.get(name);
}

// ---- definitions -----------------------------------------------------------------------------------------

actions.editResource = (resource) => {
  document.getElementById("resource-editor").hidden = false;
  editForm(document.getElementById("resource-form"), resource);
};

// ---- grants of a document --------------------------------------------------------------------------------

async function showGrants(schema, documentId) {
  const found = await definition(schema);
  if (!found) return;
  const resource = `${schema}:${documentId}`;
  const form = document.getElementById("grant-form");
  fillSelect(form.elements.relation, Object.keys(found.relations));
  form.elements.resource.value = resource;
  document.getElementById("grants-panel").hidden = false;
  await lists.get("grants").setContext({ resource }, resource);
}

actions.showGrants = (resource) => {
  const target = document.getElementById("grants-target");
  target.elements.schema.value = resource.name;
  target.elements.document.focus();
};

// ---- what can this user see ------------------------------------------------------------------------------

async function permissionsOf(schema) {
  const found = schema ? await definition(schema) : null;
  fillSelect(document.getElementById("sees-form").elements.action, found ? Object.keys(found.permissions) : []);
}

async function evaluateFor(userId, schema, action) {
  const status = document.getElementById("sees-status");
  const table = document.getElementById("sees");
  const listed = await api("GET", `/database/${encodeURIComponent(schema)}?limit=${SEES_LIMIT}&select=_id`);
  if (!listed.ok) {
    status.textContent = errorText(listed);
    return;
  }
  const rows = [];
  for (const doc of listed.data.documents) {
    const query = new URLSearchParams({ subject: `User:${userId}`, action, resource: `${schema}:${doc._id}` });
    const result = await api("GET", `/admin/authorization/permissions/evaluate?${query}`);
    if (!result.ok) {
      status.textContent = errorText(result);
      return;
    }
    const why = result.data.paths.map((path) => el("div", {}, path.join(" → ")));
    rows.push(el("tr", { "data-allowed": String(result.data.allowed) },
      el("td", { title: doc._id }, doc._id), el("td", {}, result.data.allowed ? "yes" : "no"), el("td", {}, why)));
  }
  table.tBodies[0].replaceChildren(...rows);
  table.hidden = false;
  const allowed = rows.filter((row) => row.dataset.allowed === "true").length;
  status.textContent = `${allowed} of ${rows.length} documents (of ${listed.data.count}) allow ${action}.`;
}

// ---- wiring ----------------------------------------------------------------------------------------------

onReady(() => {
  const resources = lists.get("resources");
  resources.root.addEventListener("loaded", (event) => {
    definitions.clear();
    for (const resource of event.detail.resources) definitions.set(resource.name, resource);
  });
  const resourceForm = document.getElementById("resource-form");
  resourceForm.addEventListener("saved", () => {
    definitions.clear();
    document.getElementById("resource-editor").hidden = true;
  });
  document.getElementById("close-resource").addEventListener("click", () => {
    resetForm(resourceForm);
    document.getElementById("resource-editor").hidden = true;
  });

  const target = document.getElementById("grants-target");
  target.addEventListener("submit", (event) => {
    event.preventDefault();
    const documentId = target.elements.document.value.trim();
    if (!target.elements.schema.value || !documentId) {
      flash("Pick a schema and give a document id.", "error");
      return;
    }
    showGrants(target.elements.schema.value, documentId);
  });
  const grantForm = document.getElementById("grant-form");
  grantForm.addEventListener("saved", () => {
    grantForm.elements.subject.value = "";
  });

  const sees = document.getElementById("sees-form");
  sees.elements.schema.addEventListener("change", () => permissionsOf(sees.elements.schema.value));
  // The schema choices arrive asynchronously (data-options): take the first one's permissions then.
  new MutationObserver(() => permissionsOf(sees.elements.schema.value)).observe(sees.elements.schema, { childList: true });
  sees.addEventListener("submit", (event) => {
    event.preventDefault();
    const { user, schema, action } = sees.elements;
    if (!user.value || !schema.value || !action.value) {
      flash("Pick a user, a schema and a permission.", "error");
      return;
    }
    evaluateFor(user.value, schema.value, action.value);
  });
});
