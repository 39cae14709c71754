// The password reset page: the new password goes to POST /authentication/reset-password with the link's
// token; the server's rules decide, and its errors show next to the field.
import { call, clearErrors, flash, showErrors } from "./api.js";

const form = document.getElementById("reset-form");

form.addEventListener("submit", async (event) => {
  event.preventDefault();
  clearErrors(form);
  flash("");
  const password = form.elements.password.value;
  if (password !== form.elements.confirm.value) {
    showErrors(form, { errors: { confirm: ["The two passwords differ."] } });
    return;
  }
  const answer = await call("POST", "/authentication/reset-password", {
    passwordResetToken: form.dataset.token,
    password,
  });
  if (answer.status === 200) {
    form.hidden = true;
    document.getElementById("done").hidden = false;
    return;
  }
  const errors = answer.body.errors || {};
  if (errors.passwordResetToken) {
    flash("This link is unknown, used or expired: ask for a new one.", true);
  } else if (errors.password) {
    showErrors(form, { errors: { password: errors.password } });
  } else {
    flash(answer.body.message || "The password was not changed; try again.", true);
  }
});
