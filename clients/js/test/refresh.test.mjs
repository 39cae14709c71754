// Renewing the session: 20 calls in flight when the access token is refused (or found expired) make exactly one
// renew, and they all succeed after it. The client side counts its renew calls; tests/test_js_client.py checks
// on the server that each session's refresh token was rotated exactly once and the session is still valid
// (a second renew with the same refresh token would have revoked it as a stolen token).
import assert from "node:assert/strict";
import { test } from "node:test";
import { Trellis, memoryStorage } from "trellis-client";
import { PASSWORD, countingFetch, jwtPayload, newEmail, report, sessionKey, signJwt, url } from "./helpers.mjs";

const CALLS = 20;

/** A signed-up user's storage whose access token is replaced by `forge(payload)`. */
async function storageWithAccessToken(forge) {
  const storage = memoryStorage();
  await new Trellis(url, { storage }).auth.signUp(newEmail(), PASSWORD);
  const session = JSON.parse(storage.getItem(sessionKey));
  const payload = jwtPayload(session.accessToken);
  storage.setItem(sessionKey, JSON.stringify({ ...session, accessToken: forge(payload) }));
  return { storage, sessionId: payload.sid, userId: session.userId };
}

async function twentyCalls(t) {
  return Promise.all(Array.from({ length: CALLS }, () => t.request("GET", "/authentication/user")));
}

test("20 calls refused with a 401 together make one renew, then all succeed", async () => {
  // Signed with another key: the server refuses it, though the client sees a token valid for an hour.
  const { storage, sessionId, userId } = await storageWithAccessToken((payload) =>
    signJwt({ ...payload, exp: Math.floor(Date.now() / 1000) + 3600 }, "not-the-server-secret-not-the-server-secret"),
  );
  const counted = countingFetch();
  const t = new Trellis(url, { storage, fetch: counted.fetcher });
  const users = await twentyCalls(t);
  assert.deepEqual(new Set(users.map((user) => user._id)), new Set([userId]));
  assert.equal(counted.count("POST", "/authentication/renew"), 1);
  assert.equal(counted.calls.filter((call) => call.status === 401).length, CALLS); // every first try was refused
  assert.equal(counted.count("GET", "/authentication/user"), 2 * CALLS); // and each was sent again once
  report("renewedOnce", sessionId);
});

test("20 calls with an expired access token renew once before sending", async () => {
  const secret = process.env.TRELLIS_SECRET_KEY;
  const past = Math.floor(Date.now() / 1000) - 120;
  const { storage, sessionId, userId } = await storageWithAccessToken((payload) =>
    signJwt({ ...payload, iat: past - 3600, nbf: past - 3600, exp: past }, secret),
  );
  const counted = countingFetch();
  const t = new Trellis(url, { storage, fetch: counted.fetcher });
  const users = await twentyCalls(t);
  assert.deepEqual(new Set(users.map((user) => user._id)), new Set([userId]));
  assert.equal(counted.count("POST", "/authentication/renew"), 1);
  assert.equal(counted.calls.filter((call) => call.status === 401).length, 0); // renewed first: none refused
  assert.equal(counted.count("GET", "/authentication/user"), CALLS);
  report("renewedOnce", sessionId);
});

test("a client whose storage another client (a tab) renewed takes those tokens instead of renewing again", async () => {
  const secret = process.env.TRELLIS_SECRET_KEY;
  const past = Math.floor(Date.now() / 1000) - 120;
  const { storage, sessionId, userId } = await storageWithAccessToken((payload) =>
    signJwt({ ...payload, iat: past - 3600, nbf: past - 3600, exp: past }, secret),
  );
  const first = countingFetch();
  const second = countingFetch();
  const tabA = new Trellis(url, { storage, fetch: first.fetcher });
  const tabB = new Trellis(url, { storage, fetch: second.fetcher }); // holds the expired token too
  assert.equal((await twentyCalls(tabA))[0]._id, userId);
  assert.equal((await twentyCalls(tabB))[0]._id, userId);
  assert.equal(first.count("POST", "/authentication/renew"), 1);
  assert.equal(second.count("POST", "/authentication/renew"), 0);
  report("renewedOnce", sessionId);
});

test("a refused renew signs the client out and the call fails with the server's 401", async () => {
  const { storage } = await storageWithAccessToken((payload) => signJwt(payload, "another-key-another-key-another-key"));
  const session = JSON.parse(storage.getItem(sessionKey));
  storage.setItem(sessionKey, JSON.stringify({ ...session, refreshToken: "not-a-refresh-token" }));
  const t = new Trellis(url, { storage });
  const events = [];
  t.auth.onChange((event) => events.push(event));
  await assert.rejects(t.request("GET", "/authentication/user"), { name: "UNAUTHORIZED", status: 401 });
  assert.equal(t.auth.user, null);
  assert.equal(storage.getItem(sessionKey), null);
  assert.deepEqual(events, ["SIGNED_OUT"]);
});
