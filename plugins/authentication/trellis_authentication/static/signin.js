// What the account page and the invite page share: the tokens kept in this tab's sessionStorage (one
// key, so signing in on one page signs in the other), a call as the signed-in user that renews an expired
// access token once, and the forms that sign in (password, then a second factor) and sign up.
import { call, clearErrors, showErrors } from "./api.js";

const KEY = "trellis-account";

export function saved() {
  try { return JSON.parse(sessionStorage.getItem(KEY)) || {}; } catch { return {}; }
}

export function keep(tokens) {
  sessionStorage.setItem(KEY, JSON.stringify({ accessToken: tokens.accessToken, refreshToken: tokens.refreshToken }));
}

export function forget() {
  sessionStorage.removeItem(KEY);
}

// A call as the signed-in user; an expired access token is renewed once with the refresh token. Calls
// whose 401 may mean a wrong password instead (deleting the account) pass renew=false.
export async function asUser(method, path, body, renew = true) {
  let answer = await call(method, path, body, saved().accessToken);
  if (renew && answer.status === 401 && saved().refreshToken) {
    const renewed = await call("POST", "/authentication/renew", { refreshToken: saved().refreshToken });
    if (renewed.status !== 200) return answer;
    keep(renewed.body);
    answer = await call(method, path, body, saved().accessToken);
  }
  return answer;
}

// The two steps of signing in: each form posts its body to its route; signedIn(form, answer) decides
// what follows (200: signed in, 202: the second factor, else the error).
export function onSignIn(signedIn) {
  const steps = {
    "sign-in-form": ["/authentication/local", (form) => ({ email: form.elements.email.value, password: form.elements.password.value })],
    "second-factor-form": ["/authentication/twoFa/authorize", (form) => ({ twoFaToken: form.dataset.token, code: form.elements.code.value })],
  };
  for (const [id, [path, bodyOf]] of Object.entries(steps)) {
    document.getElementById(id).addEventListener("submit", async (event) => {
      event.preventDefault();
      clearErrors(event.target);
      await signedIn(event.target, await call("POST", path, bodyOf(event.target)));
    });
  }
}

// The sign-up form: created(form, body) runs once the account exists (with tokens in the body when the
// configuration signs a new account in).
export function onSignUp(created) {
  document.getElementById("register-form").addEventListener("submit", async (event) => {
    event.preventDefault();
    const form = event.target;
    clearErrors(form);
    const answer = await call("POST", "/authentication/local/new", {
      email: form.elements.email.value,
      password: form.elements.password.value,
    });
    if (answer.status !== 201) {
      showErrors(form, answer.body);
      return;
    }
    form.reset();
    if (answer.body.accessToken) keep(answer.body); // local.signInOnRegister: the sign-up signed in
    await created(form, answer.body);
  });
}
