// The page of a TeamInvite link: sign in (or create an account) with the invited address, then accept
// through GET /authentication/teams/invite/accept with the link's token and the user's Bearer token. The
// tokens are kept in this tab's sessionStorage under the account page's key, so that page is signed in too.
import { flash, showErrors } from "./api.js";
import { asUser, forget, keep, onSignIn, onSignUp, saved } from "./signin.js";

const sections = ["sign-in", "second-factor", "joined", "refused"];
const invitation = document.getElementById("invite").dataset.token;

function show(name) {
  for (const id of sections) document.getElementById(id).hidden = id !== name;
}

// The acceptance as the signed-in user; an expired access token is renewed once with the refresh token.
async function accept() {
  const path = `/authentication/teams/invite/accept?invitationToken=${encodeURIComponent(invitation)}`;
  const answer = await asUser("GET", path);
  flash("");
  if (answer.status === 200) {
    document.getElementById("joined-team").textContent = answer.body.name;
    document.getElementById("joined-role").textContent = answer.body.role === "owner" ? "an owner" : "a member";
    show("joined");
  } else if (answer.status === 401) {
    forget();
    show("sign-in");
  } else {
    // 403: the server says why (another address, or invites switched off); 404: a dead link.
    const reasons = {
      403: `${answer.body.message}. If it was sent to another of your addresses, sign in with that one.`,
      404: "This invitation is unknown, used or expired (invitations work once, for 7 days). Ask the team's owner for a new one.",
    };
    document.getElementById("refused-text").textContent = reasons[answer.status] || answer.body.message || "The invitation was not accepted; try again.";
    show("refused");
  }
}

async function signedIn(form, answer) {
  if (answer.status === 200) {
    keep(answer.body);
    form.reset();
    await accept();
  } else if (answer.status === 202) {
    document.getElementById("second-factor-form").dataset.token = answer.body.twoFaToken;
    show("second-factor");
  } else {
    showErrors(form, { message: answer.body.message });
  }
}

onSignIn(signedIn);

onSignUp(async (form, body) => {
  if (body.accessToken) {
    await accept();
  } else {
    form.closest("details").open = false;
    flash("Your account is created. Confirm your address with the link we mailed you, then open this invitation link again.");
  }
});

document.getElementById("other-account").addEventListener("click", () => {
  forget(); // this tab forgets the tokens; the session itself ends on its own
  show("sign-in");
});

if (saved().accessToken) accept();
else show("sign-in");
