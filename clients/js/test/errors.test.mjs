// Every failure is a TrellisError carrying the server's own error body: each case makes the same call without
// the SDK and compares the SDK's error with what the server answered. Failures made on this side (no server,
// aborted) have the same shape.
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { test } from "node:test";
import { Trellis, TrellisError } from "trellis-client";
import { PASSWORD, client, createSchema, raw, signedUp, unique } from "./helpers.mjs";

const Item = unique("Item");
const ITEM = `/database/${Item}`;

async function failure(promise) {
  try {
    await promise;
  } catch (error) {
    assert.ok(error instanceof TrellisError, `not a TrellisError: ${error}`);
    assert.ok(error instanceof Error);
    return error;
  }
  assert.fail("it did not fail");
}

/** The same error body, but for the request's own id (each request has its own). */
function sameAsServer(error, answer) {
  const { requestId, ...rest } = error.toJSON();
  const { requestId: serverRequestId, ...server } = answer.body;
  assert.equal(error.status, answer.status);
  assert.deepEqual(rest, server);
  assert.equal(typeof requestId, typeof serverRequestId);
  assert.equal(error.name, answer.body.name);
  assert.equal(error.message, answer.body.message);
  assert.deepEqual(error.errors, answer.body.errors);
}

test("the server's errors, as it sent them", async () => {
  await createSchema(Item, { code: { type: "String", required: true, unique: true }, size: "Number" });
  const { t, accessToken } = await signedUp();
  const items = t.collection(Item);
  await items.create({ code: "a1" });
  const cases = [
    [() => items.get("0123456789abcdef0123456789abcdef"), () => raw("GET", `${ITEM}/0123456789abcdef0123456789abcdef`)],
    [() => items.create({ size: "big", colour: "red" }), () => raw("POST", ITEM, { body: { size: "big", colour: "red" } })],
    [() => items.create({ code: "a1" }), () => raw("POST", ITEM, { body: { code: "a1" } })],
    [() => items.list({ where: { size: { $lt: "x" } } }), () => raw("GET", `${ITEM}?size[$lt]=x`)],
    [() => items.list({ limit: 5000 }), () => raw("GET", `${ITEM}?limit=5000`)],
    [() => items.aggregate({ groupBy: "nothing" }), () => raw("GET", `${ITEM}/aggregate?groupBy=nothing`)],
    [() => client().request("GET", "/authentication/user"), () => raw("GET", "/authentication/user")],
    [() => t.request("GET", "/admin/database/schemas"), () => raw("GET", "/admin/database/schemas", { token: accessToken() })],
    [() => client().auth.signUp("not-an-email", PASSWORD), () => raw("POST", "/authentication/local/new", { body: { email: "not-an-email", password: PASSWORD } })],
    [() => t.storage.get("nope"), () => raw("GET", "/storage/file/nope", { token: accessToken() })],
    [() => t.teams.members("0123456789abcdef0123456789abcdef"), () => raw("GET", "/authentication/teams/0123456789abcdef0123456789abcdef/members", { token: accessToken() })],
  ];
  for (const [call, server] of cases) sameAsServer(await failure(call()), await server());
  const duplicate = await failure(items.create({ code: "a1" }));
  assert.equal(duplicate.name, "CONFLICT");
  assert.equal(duplicate.status, 409);
  assert.ok(duplicate.errors.code);
  const invalid = await failure(items.create({ size: "big" }));
  assert.equal(invalid.name, "INVALID_ARGUMENTS");
  assert.ok(invalid.errors.code && invalid.errors.size, JSON.stringify(invalid.errors));
});

test("failures of uploads, live data, functions and GraphQL are TrellisErrors too", async () => {
  const anonymous = client();
  const small = await failure(anonymous.storage.upload(new Blob(["x"]), { name: "x.txt" }));
  assert.equal(small.status, 401);
  assert.equal(small.name, "UNAUTHORIZED");
  const large = await failure(anonymous.storage.upload(randomBytes(5 * 1024 * 1024 + 1), { name: "x.bin" }));
  assert.equal(large.status, 401);
  assert.equal(large.name, "UNAUTHORIZED");
  const live = await failure(anonymous.collection("Missing").subscribe({}, () => {}).ready);
  assert.equal(live.status, 404);
  const { t } = await signedUp();
  const refused = await failure(t.functions.call("refuse", { day: "monday" }));
  assert.deepEqual(
    { ...refused.toJSON(), requestId: undefined },
    { name: "INVALID_ARGUMENTS", status: 422, message: "closed on monday", errors: { day: ["closed"] }, requestId: undefined },
  );
  const graph = await failure(t.graphql("{ nothing }"));
  assert.equal(graph.status, 400);
  assert.equal(graph.name, "GRAPHQL_VALIDATION_FAILED");
});

test("failures made on this side have the same shape", async () => {
  const offline = new Trellis("http://127.0.0.1:9");
  const unreachable = await failure(offline.collection(Item).list());
  assert.equal(unreachable.name, "NETWORK_ERROR");
  assert.equal(unreachable.status, 0);
  assert.match(unreachable.message, /could not be reached/);
  const stop = new AbortController();
  stop.abort();
  const aborted = await failure(client().collection(Item).list({ signal: stop.signal }));
  assert.deepEqual(aborted.toJSON(), { name: "ABORTED", status: 0, message: "The call was aborted" });
  const either = await failure(client().collection(Item).list({ where: { $or: [{ size: 1 }, { size: 2 }] } }));
  assert.equal(either.name, "INVALID_ARGUMENTS");
  assert.equal(either.status, 400);
  assert.ok(either.errors["where.$or"]);
  const twoFactor = await failure(client().auth.verifyTwoFactor("123456"));
  assert.equal(twoFactor.status, 400);
});
