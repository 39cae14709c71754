// Project page: export this server's project, plan a project file against it, apply the plan.
// The plan is shown as `flask trellis project plan` prints it (trellis/project/text.py), as a table.
import { api, clearErrors, download, el, errorText, flash, onReady, setStatus, showErrors } from "/console/static/console.js";

const SIGN = { create: "+", update: "~", delete: "-" };
const OP = { add: "+", remove: "-", change: "~" };

// A value as text.py shows it (Python's json.dumps with sorted keys): {"a": 1, "b": [true, null]}.
function shown(value) {
  if (Array.isArray(value)) return "[" + value.map(shown).join(", ") + "]";
  if (value !== null && typeof value === "object") {
    return "{" + Object.keys(value).sort().map((key) => `${JSON.stringify(key)}: ${shown(value[key])}`).join(", ") + "}";
  }
  return value === undefined ? "null" : JSON.stringify(value);
}

function detailLine(item) {
  const parts = [el("span", { class: "plan-op", "data-op": item.op }, OP[item.op] || item.op), " ", el("code", {}, item.path), ": "];
  if (item.op === "change") parts.push(el("code", {}, shown(item.from)), " → ", el("code", {}, shown(item.to)));
  else parts.push(el("code", {}, shown(item.op === "add" ? item.to : item.from)));
  return el("li", { "data-op": item.op }, parts);
}

function changeRow(change) {
  const detail = change.detail || [];
  return el("tr", { "data-action": change.action },
    el("td", { class: "plan-sign", title: change.action },
      el("span", { "aria-hidden": "true" }, SIGN[change.action] || "?"), el("span", { class: "sr-only" }, change.action)),
    el("td", {}, change.module), el("td", {}, change.kind), el("td", {}, change.name),
    el("td", {}, detail.length ? el("ul", { class: "plan-detail" }, detail.map(detailLine)) : null));
}

function summary(changes) {
  if (!changes.length) return "No changes: the server already is what the project says.";
  const count = (action) => changes.filter((change) => change.action === action).length;
  return `Plan: ${count("create")} to create, ${count("update")} to update, ${count("delete")} to delete.`;
}

onReady(() => {
  const form = document.getElementById("project-form");
  const fileInput = form.elements.file;
  const pruneInput = form.elements.prune;
  const planButton = document.getElementById("project-plan");
  const applyButton = document.getElementById("project-apply");
  const applyHint = document.getElementById("project-apply-hint");
  const result = document.getElementById("project-plan-result");
  const rows = result.querySelector("tbody");
  const summaryLine = document.getElementById("project-plan-summary");

  const state = {
    project: null, // the parsed file
    loaded: 0, // counts the files and prune settings chosen
    planned: null, // the `loaded` a plan with changes was made for: Apply is for that plan only
    confirming: false,
    busy: false,
  };

  function resetApply() {
    state.confirming = false;
    applyButton.textContent = "Apply";
    applyHint.hidden = true;
    applyButton.disabled = state.busy || state.planned !== state.loaded;
    planButton.disabled = state.busy || state.project === null;
  }

  function forgetPlan() {
    state.loaded += 1;
    state.planned = null;
    result.hidden = true;
    rows.replaceChildren();
    summaryLine.textContent = "";
    resetApply();
  }

  // While a request runs, the file and the prune setting stay as they were sent.
  function busy(on) {
    state.busy = on;
    fileInput.disabled = pruneInput.disabled = on;
    if (on) form.setAttribute("aria-busy", "true");
    else form.removeAttribute("aria-busy");
    resetApply();
  }

  // The errors of a 400 or 409 are by path in the project: listed under the message, but for a path the
  // message names already.
  function failed(answer) {
    const data = answer.data && answer.data.message ? answer.data : { message: errorText(answer) };
    const errors = Object.entries(data.errors || {}).filter(([path]) => !data.message.includes(path));
    showErrors(form, { message: data.message, errors: Object.fromEntries(errors) });
  }

  async function plan() {
    state.planned = null;
    busy(true);
    const answer = await api("POST", "/admin/project/plan", { project: state.project, prune: pruneInput.checked });
    busy(false);
    if (!answer.ok) {
      result.hidden = true;
      failed(answer);
      return;
    }
    const changes = answer.data.changes || [];
    rows.replaceChildren(...changes.map(changeRow));
    summaryLine.textContent = summary(changes);
    result.hidden = false;
    if (answer.data.count > 0) state.planned = state.loaded;
    resetApply();
  }

  async function apply() {
    busy(true);
    const answer = await api("POST", "/admin/project/apply", { project: state.project, prune: pruneInput.checked });
    state.planned = null; // applied or refused: what the server now is needs a new plan
    busy(false);
    if (!answer.ok) {
      failed(answer);
      setStatus(form, "Plan again before applying.");
      return;
    }
    const count = answer.data.count;
    await plan(); // the server now is what the file says: this plan shows no changes
    flash(`Applied ${count} change${count === 1 ? "" : "s"}.`);
  }

  document.getElementById("project-export").addEventListener("click", async (event) => {
    const button = event.currentTarget;
    button.disabled = true;
    try {
      await download("/admin/project", "project.json");
    } finally {
      button.disabled = false;
    }
  });

  fileInput.addEventListener("change", async () => {
    forgetPlan();
    clearErrors(form);
    flash("");
    state.project = null;
    const file = fileInput.files[0];
    resetApply();
    if (!file) return;
    const loaded = state.loaded;
    const text = await file.text();
    if (loaded !== state.loaded) return; // another file was chosen meanwhile
    try {
      state.project = JSON.parse(text);
    } catch (error) {
      showErrors(form, { message: `${file.name} is not valid JSON: ${error.message}` });
      return;
    }
    resetApply();
  });

  pruneInput.addEventListener("change", () => {
    forgetPlan();
    clearErrors(form);
  });

  form.addEventListener("submit", (event) => {
    event.preventDefault();
    if (state.busy || state.project === null) return;
    clearErrors(form);
    flash("");
    plan();
  });

  // Applying changes the server: the first click asks, the second applies.
  applyButton.addEventListener("click", () => {
    if (state.busy || state.planned !== state.loaded) return;
    if (!state.confirming) {
      state.confirming = true;
      applyButton.textContent = "Confirm apply";
      applyHint.hidden = false;
      return;
    }
    clearErrors(form);
    flash("");
    apply();
  });
});
