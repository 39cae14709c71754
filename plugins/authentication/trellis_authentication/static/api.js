// The account pages' one way to call the JSON API: a fetch that answers {status, body} and never throws
// (status 0 when the server cannot be reached), and the showing of an answer's errors next to the fields they name.

export async function call(method, path, body, token) {
  const headers = { Accept: "application/json" };
  if (body !== undefined) headers["Content-Type"] = "application/json";
  if (token) headers.Authorization = `Bearer ${token}`;
  let response;
  try {
    response = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  } catch {
    // Offline, the server away, or the page being left while the call was under way.
    return { status: 0, body: { message: "The server could not be reached; try again." } };
  }
  let answer = {};
  try { answer = await response.json(); } catch { answer = {}; }
  return { status: response.status, body: answer };
}

// An answer's message above the button, and each of its field errors next to its field.
export function showErrors(form, answer) {
  clearErrors(form);
  const errors = answer.errors || {};
  let placed = false;
  for (const [name, problems] of Object.entries(errors)) {
    const input = form.elements[name];
    const slot = input && form.querySelector(`#${name}-error`);
    if (slot) {
      slot.textContent = [].concat(problems).join(" ");
      input.setAttribute("aria-invalid", "true");
      placed = true;
    }
  }
  const general = form.querySelector(".form-error");
  if (general && (!placed || !answer.errors)) general.textContent = answer.message || "Something went wrong; try again.";
}

export function clearErrors(form) {
  for (const slot of form.querySelectorAll(".field-error, .form-error")) slot.textContent = "";
  for (const input of form.querySelectorAll("[aria-invalid]")) input.removeAttribute("aria-invalid");
}

export function flash(text, isError = false) {
  const box = document.getElementById("flash");
  box.textContent = text;
  box.classList.toggle("error", isError);
  box.hidden = !text;
}
