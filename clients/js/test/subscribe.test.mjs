// Live data: subscribe with where and events, unsubscribe, Server-Sent Events (chosen, and as the fallback when
// the WebSocket cannot open), resuming a stream after it was reopened, and refusals.
import assert from "node:assert/strict";
import { before, test } from "node:test";
import { TrellisError } from "trellis-client";
import { client, createSchema, signedUp, unique, until } from "./helpers.mjs";

const Score = unique("Score");
before(() => createSchema(Score, { player: { type: "String", required: true }, points: "Number" }));

/** Subscribes `t` and collects what arrives. */
async function collect(t, options = {}) {
  const seen = [];
  const unsubscribe = t.collection(Score).subscribe(options, (change) => seen.push(change));
  await unsubscribe.ready;
  return { seen, unsubscribe };
}

test("subscribe delivers the changes its where and events ask for, in order", async () => {
  const { t } = await signedUp();
  const writer = (await signedUp()).t.collection(Score);
  const everything = await collect(t);
  const high = await collect(t, { where: { points: { $gte: 10 } } });
  const deletes = await collect(t, { events: ["delete"] });
  const low = await writer.create({ player: "ann", points: 3 });
  await writer.update(low._id, { points: 12 }); // now matches points >= 10: an "enter" for that subscription
  await writer.update(low._id, { points: 15 });
  await writer.delete(low._id);
  await until(() => everything.seen.length === 4 && deletes.seen.length === 1 && high.seen.length === 3, "the changes");
  assert.deepEqual(everything.seen.map((change) => change.event), ["create", "update", "update", "delete"]);
  assert.deepEqual(high.seen.map((change) => change.event), ["enter", "update", "delete"]);
  assert.deepEqual(deletes.seen.map((change) => [change.event, change.document]), [["delete", { _id: low._id }]]);
  const created = everything.seen[0];
  assert.equal(created.schema, Score);
  assert.deepEqual(created.document, low);
  assert.equal(typeof created.at, "string");
  const ids = everything.seen.map((change) => change.eventId);
  assert.deepEqual(ids, [...ids].sort((a, b) => a - b));
  for (const subscription of [everything, high, deletes]) subscription.unsubscribe();
  assert.equal(t.realtime.socket, null); // the last one closed the connection
});

test("after unsubscribe no change arrives", async () => {
  const t = client(); // anonymous: the schema's documents are public
  const writer = client().collection(Score);
  const { seen, unsubscribe } = await collect(t);
  await writer.create({ player: "bob", points: 1 });
  await until(() => seen.length === 1, "the first change");
  unsubscribe();
  await writer.create({ player: "bob", points: 2 });
  const watcher = await collect(client()); // proves the second change was sent to subscribers
  await writer.create({ player: "bob", points: 3 });
  await until(() => watcher.seen.length === 1, "the watcher's change");
  watcher.unsubscribe();
  assert.equal(seen.length, 1);
});

test("Server-Sent Events carry the same changes", async () => {
  const t = client({ realtime: "sse" });
  const writer = client().collection(Score);
  const { seen, unsubscribe } = await collect(t, { where: { player: "sse" }, events: ["create", "update"] });
  const doc = await writer.create({ player: "sse", points: 1 });
  await writer.create({ player: "other", points: 1 });
  await writer.update(doc._id, { points: 2 });
  await writer.delete(doc._id);
  await until(() => seen.length === 2, "two changes");
  assert.deepEqual(seen.map((change) => [change.event, change.document.points]), [["create", 1], ["update", 2]]);
  assert.equal(seen[0].schema, Score);
  assert.ok(seen[0].eventId < seen[1].eventId);
  unsubscribe();
});

test("where a WebSocket cannot open, subscriptions fall back to Server-Sent Events", async () => {
  const t = client({ socketPath: "/no-socket-io-here" });
  const writer = client().collection(Score);
  const { seen, unsubscribe } = await collect(t, { where: { player: "fallback" } });
  assert.equal(t.realtime.socket, null);
  await writer.create({ player: "fallback", points: 7 });
  await until(() => seen.length === 1, "the change over SSE");
  assert.equal(seen[0].document.points, 7);
  unsubscribe();
});

test("a stream opened again (here: signing in) resumes after the last change, none missed or repeated", async () => {
  const t = client({ realtime: "sse" });
  const writer = (await signedUp()).t.collection(Score);
  const { seen, unsubscribe } = await collect(t, { where: { player: "burst" } });
  const { email } = await signedUp();
  const written = [];
  const burst = (async () => {
    for (let n = 0; n < 60; n += 1) written.push((await writer.create({ player: "burst", points: n }))._id);
  })();
  await until(() => seen.length >= 10, "the first changes");
  await t.auth.signIn(email, "correct-horse-battery-staple"); // the stream reopens with the new credential
  await burst;
  await until(() => seen.length >= 60, "every change", 60000);
  await new Promise((resolve) => setTimeout(resolve, 300));
  assert.deepEqual(seen.map((change) => change.document.points), Array.from({ length: 60 }, (_, n) => n));
  unsubscribe();
});

test("a refused subscription is a TrellisError with the server's fields", async () => {
  for (const realtime of ["socket.io", "sse"]) {
    const t = client({ realtime });
    await assert.rejects(t.collection("NoSuchSchema").subscribe({}, () => {}).ready, (error) => {
      assert.ok(error instanceof TrellisError, realtime);
      assert.equal(error.status, 404);
      assert.equal(error.name, "NOT_FOUND");
      return true;
    });
    await assert.rejects(t.collection(Score).subscribe({ where: { nothing: 1 } }, () => {}).ready, (error) => {
      assert.ok(error instanceof TrellisError, realtime);
      assert.equal(error.status, 400);
      assert.ok(error.errors, realtime);
      return true;
    });
  }
});
