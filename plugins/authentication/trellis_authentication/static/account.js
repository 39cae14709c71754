// The account page: sign in (password, then a second factor when the account has one), the signed-in
// user's sessions (end one), sign out, delete the account. Every action is a call to the module's JSON
// routes with the user's Bearer token, kept in this tab's sessionStorage (as the console keeps its own).
// A magic link's sign-in arrives in the URL fragment, which never reaches a server.
import { call, clearErrors, flash, showErrors } from "./api.js";
import { asUser, forget, keep, onSignIn, onSignUp, saved } from "./signin.js";

const sections = ["sign-in", "second-factor", "signed-in", "deleted"];

function show(name) {
  for (const id of sections) document.getElementById(id).hidden = id !== name;
}

function when(iso) {
  return iso ? new Date(iso).toLocaleString() : "";
}

async function showAccount() {
  const me = await asUser("GET", "/authentication/user");
  if (me.status !== 200) {
    forget();
    show("sign-in");
    return;
  }
  document.getElementById("who").textContent = me.body.email || me.body.phoneNumber || me.body._id;
  show("signed-in");
  await listSessions();
}

async function listSessions() {
  const answer = await asUser("GET", "/authentication/sessions?limit=100");
  const body = document.querySelector("#sessions tbody");
  body.replaceChildren();
  if (answer.status !== 200) {
    flash(answer.body.message || "Your sessions could not be read.", true);
    return;
  }
  for (const session of answer.body.sessions) {
    const row = document.createElement("tr");
    for (const text of [session.userAgent || "Unknown device", session.ip || "", when(session.createdAt), when(session.lastUsedAt)]) {
      const cell = document.createElement("td");
      cell.textContent = text;
      row.append(cell);
    }
    const action = document.createElement("td");
    if (session.current) {
      const badge = document.createElement("span");
      badge.className = "badge";
      badge.textContent = "This device";
      action.append(badge);
    } else {
      const end = document.createElement("button");
      end.type = "button";
      end.className = "secondary small";
      end.textContent = "End";
      end.setAttribute("aria-label", `End the session of ${session.userAgent || "an unknown device"} from ${session.ip || "an unknown address"}`);
      end.addEventListener("click", () => endSession(session._id));
      action.append(end);
    }
    row.append(action);
    body.append(row);
  }
}

async function endSession(id) {
  const answer = await asUser("DELETE", `/authentication/sessions/${encodeURIComponent(id)}`);
  flash(answer.status === 200 ? "The session has ended." : answer.body.message || "The session was not ended.", answer.status !== 200);
  await listSessions();
}

function signedIn(form, answer) {
  if (answer.status === 200) {
    keep(answer.body);
    form.reset();
    flash("");
    return showAccount();
  }
  if (answer.status === 202) {
    document.getElementById("second-factor-form").dataset.token = answer.body.twoFaToken;
    show("second-factor");
    return undefined;
  }
  showErrors(form, { message: answer.body.message });
  return undefined;
}

onSignIn(signedIn);

onSignUp(async (form, body) => {
  form.closest("details").open = false;
  const verify = body.user.isVerified ? "" : " Confirm your address with the link we mailed you.";
  if (body.accessToken) {
    await showAccount();
    flash(`Your account is created and you are signed in.${verify}`);
  } else {
    flash(`Your account is created.${verify} Then sign in.`);
  }
});

document.getElementById("forgot-form").addEventListener("submit", async (event) => {
  event.preventDefault();
  const form = event.target;
  clearErrors(form);
  const answer = await call("POST", "/authentication/forgot-password", { email: form.elements.email.value });
  if (answer.status === 200) flash(answer.body.message);
  else showErrors(form, answer.body);
});

document.getElementById("sign-out").addEventListener("click", async () => {
  await asUser("POST", "/authentication/logout");
  forget();
  flash("You are signed out.");
  show("sign-in");
});

document.getElementById("delete-form").addEventListener("submit", async (event) => {
  event.preventDefault();
  const form = event.target;
  clearErrors(form);
  const body = {};
  if (form.elements.password.value) body.password = form.elements.password.value;
  if (form.elements.code.value) body.code = form.elements.code.value;
  await asUser("GET", "/authentication/user"); // renews an expired access token
  const answer = await asUser("DELETE", "/authentication/user", body, false);
  if (answer.status === 200) {
    forget();
    flash("");
    show("deleted");
    return;
  }
  showErrors(form, { message: answer.body.message });
});

// A magic link (or a provider's sign-in) hands its answer over in the fragment: keep it, then drop it
// from the address bar and the history.
const handed = new URLSearchParams(window.location.hash.slice(1));
if (handed.has("accessToken") || handed.has("twoFaToken")) {
  window.history.replaceState(null, "", window.location.pathname);
  if (handed.has("accessToken")) {
    keep({ accessToken: handed.get("accessToken"), refreshToken: handed.get("refreshToken") });
    flash("You are signed in with your link.");
  } else {
    document.getElementById("second-factor-form").dataset.token = handed.get("twoFaToken");
  }
}
if (handed.has("twoFaToken") && !handed.has("accessToken")) show("second-factor");
else if (saved().accessToken) showAccount();
else show("sign-in");
