// Sign-up, sign-in (with the two-factor step), providers, the kept session, onChange and sign-out.
import assert from "node:assert/strict";
import { test } from "node:test";
import { Trellis, TrellisError, memoryStorage } from "trellis-client";
import { PASSWORD, admin, client, configure, newEmail, raw, sessionKey, signedUp, totp, url } from "./helpers.mjs";

test("signUp signs the new user in; user and onChange follow", async () => {
  const t = client();
  const events = [];
  t.auth.onChange((event, user) => events.push([event, user?.email ?? null]));
  assert.equal(t.auth.user, null);
  const email = newEmail();
  const result = await t.auth.signUp(email, PASSWORD);
  assert.equal(result.signedIn, true);
  assert.equal(result.user.email, email);
  assert.equal(t.auth.user.email, email);
  assert.equal(t.auth.user.isActive, true);
  assert.deepEqual(events, [["SIGNED_IN", email]]);
  const me = await t.request("GET", "/authentication/user");
  assert.equal(me._id, t.auth.user._id);
});

test("the session lives in the storage option: a second client on it is signed in at once", async () => {
  const storage = memoryStorage();
  const first = new Trellis(url, { storage });
  const email = newEmail();
  await first.auth.signUp(email, PASSWORD);
  const second = new Trellis(url, { storage });
  assert.equal(second.auth.user.email, email); // read synchronously from a synchronous storage
  const me = await second.request("GET", "/authentication/user");
  assert.equal(me.email, email);
});

test("signIn answers the user; a wrong password is the server's 401", async () => {
  const { email } = await signedUp();
  const t = client();
  const result = await t.auth.signIn(email, PASSWORD);
  assert.deepEqual(result, { twoFactor: false, user: t.auth.user });
  assert.equal(result.user.email, email);
  await assert.rejects(client().auth.signIn(email, "not-the-password"), (error) => {
    assert.ok(error instanceof TrellisError);
    assert.equal(error.status, 401);
    assert.equal(error.name, "UNAUTHORIZED");
    return true;
  });
});

test("signOut ends the session on the server and here", async () => {
  const storage = memoryStorage();
  const t = new Trellis(url, { storage });
  await t.auth.signUp(newEmail(), PASSWORD);
  const { accessToken } = JSON.parse(storage.getItem(sessionKey));
  const events = [];
  t.auth.onChange((event, user) => events.push([event, user]));
  await t.auth.signOut();
  assert.equal(t.auth.user, null);
  assert.equal(storage.getItem(sessionKey), null);
  assert.deepEqual(events, [["SIGNED_OUT", null]]);
  assert.equal((await raw("GET", "/authentication/user", { token: accessToken })).status, 401);
  await t.auth.signOut(); // signed out already: nothing to do, no error
});

test("two-factor: signIn answers {twoFactor: true}, verifyTwoFactor finishes it", async () => {
  await configure("authentication", { twoFa: { enabled: true } });
  const { t, email } = await signedUp();
  const { secret } = await t.request("POST", "/authentication/twoFa/enable", { body: { method: "authenticator" } });
  const { recoveryCodes } = await t.request("POST", "/authentication/twoFa/verify", { body: { code: totp(secret) } });
  await t.auth.signOut();

  const result = await t.auth.signIn(email, PASSWORD);
  assert.deepEqual(result, { twoFactor: true });
  assert.equal(t.auth.user, null); // not signed in before the second factor
  await assert.rejects(t.auth.verifyTwoFactor("000000"), (error) => error instanceof TrellisError && error.status === 401);
  const user = await t.auth.verifyTwoFactor(recoveryCodes[0]);
  assert.equal(user.email, email);
  assert.equal(user.twoFaEnabled, true);
  assert.equal(t.auth.user.email, email);
  await assert.rejects(t.auth.verifyTwoFactor("123456"), (error) => error instanceof TrellisError && error.status === 400);
});

test("signInWithProvider starts at the server's provider route; fromRedirect takes the tokens it sends back", async () => {
  await configure("authentication", { oauth: { github: { enabled: true, clientId: "sdk-test", clientSecret: "sdk-secret" } } });
  const t = client();
  const start = t.auth.signInWithProvider("github"); // no window in Node: nothing to navigate, the URL is returned
  assert.equal(start, `${url}/authentication/init/github`);
  const answer = await fetch(start, { redirect: "manual" });
  assert.equal(answer.status, 302);
  assert.match(answer.headers.get("Location"), /^https:\/\/github\.com\/login\/oauth\/authorize\?/);

  // What the provider's hook hands the app's redirectUri: the token pair in the fragment.
  const { email } = await signedUp();
  const pair = (await raw("POST", "/authentication/local", { body: { email, password: PASSWORD } })).body;
  const back = `https://app.example/signed-in#${new URLSearchParams(pair)}`;
  const user = await t.auth.fromRedirect(back);
  assert.equal(user.email, email);
  assert.equal(t.auth.user.email, email);
  assert.equal(await t.auth.fromRedirect("https://app.example/elsewhere"), null);
});

test("refreshUser reads the user again and tells the listeners", async () => {
  const { t, id } = await signedUp();
  await admin("PATCH", `/authentication/users/${id}`, { isVerified: true });
  const events = [];
  t.auth.onChange((event, user) => events.push([event, user.isVerified]));
  assert.equal(t.auth.user.isVerified, false);
  const user = await t.auth.refreshUser();
  assert.equal(user.isVerified, true);
  assert.equal(t.auth.user.isVerified, true);
  assert.deepEqual(events, [["USER_UPDATED", true]]);
});
