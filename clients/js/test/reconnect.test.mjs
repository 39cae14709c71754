// A Socket.IO connection dropped twice (closed from here, as a network failure would) while another client
// writes 200 documents one after the other: the subscriber receives every change exactly once, in order. After
// each reconnect the SDK subscribes again with since = the last eventId it delivered; the server replays what
// followed.
import assert from "node:assert/strict";
import { test } from "node:test";
import { createSchema, signedUp, unique, until } from "./helpers.mjs";

const WRITES = 200;

test("200 writes across two dropped connections arrive exactly once, in order", async () => {
  const Tick = unique("Tick");
  await createSchema(Tick, { n: { type: "Number", required: true } });
  const subscriber = (await signedUp()).t;
  const writer = (await signedUp()).t.collection(Tick);
  const seen = [];
  const unsubscribe = subscriber.collection(Tick).subscribe({}, (change) => seen.push(change));
  await unsubscribe.ready;
  const socket = subscriber.realtime.socket;
  let connects = 0;
  let written = 0;
  const drops = [];
  socket.on("connect", () => {
    connects += 1;
    drops[drops.length - 1].writtenAtReconnect = written;
  });

  // The writer waits at 60 and 150 for the drop due by then (at 30 and 120 changes seen), so that writes go
  // on while the connection is down however fast the changes arrive.
  const pauses = new Map([
    [60, 1],
    [150, 2],
  ]);
  const burst = (async () => {
    for (let n = 0; n < WRITES; n += 1) {
      if (pauses.has(n)) await until(() => drops.length >= pauses.get(n), `drop ${pauses.get(n)}`, 60000);
      await writer.create({ n });
      written += 1;
    }
  })();
  for (const after of [30, 120]) {
    await until(() => seen.length >= after, `${after} changes`, 60000);
    drops.push({ seenAtDrop: seen.length, writtenAtDrop: written });
    socket.io.engine.close(); // the transport dies; Socket.IO reconnects by itself
    await until(() => connects === drops.length, "the reconnect", 30000);
  }
  await burst;
  await until(() => seen.length >= WRITES, "every change", 60000);
  await new Promise((resolve) => setTimeout(resolve, 500)); // a duplicate would arrive meanwhile

  assert.deepEqual(seen.map((change) => change.document.n), Array.from({ length: WRITES }, (_, n) => n));
  assert.deepEqual(seen.map((change) => change.event), Array(WRITES).fill("create"));
  for (let i = 1; i < seen.length; i += 1) assert.ok(seen[i].eventId > seen[i - 1].eventId, `eventIds in order at ${i}`);
  assert.ok(connects >= 2, `reconnects: ${connects}`); // a loaded machine may miss a heartbeat and reconnect once more
  // Writes went on while the connection was down: those changes came through the replay after `since`.
  for (const drop of drops) assert.ok(drop.writtenAtReconnect > drop.seenAtDrop, JSON.stringify(drops));
  unsubscribe();
});

test("a connection dropped before the first change still receives what was written while it was down", async () => {
  const Early = unique("Early");
  await createSchema(Early, { n: { type: "Number", required: true } });
  const subscriber = (await signedUp()).t;
  const writer = (await signedUp()).t.collection(Early);
  const seen = [];
  const unsubscribe = subscriber.collection(Early).subscribe({}, (change) => seen.push(change));
  await unsubscribe.ready;
  const socket = subscriber.realtime.socket;
  let reconnected = false;
  socket.once("disconnect", async () => {
    for (let n = 0; n < 5; n += 1) await writer.create({ n }); // while nothing listens
    socket.once("connect", () => {
      reconnected = true;
    });
    socket.connect();
  });
  socket.io.reconnection(false); // this test reconnects by hand, once its writes are in
  socket.io.engine.close();
  await until(() => reconnected, "the reconnect", 30000);
  await until(() => seen.length >= 5, "the changes made while it was down", 30000);
  await new Promise((resolve) => setTimeout(resolve, 300));
  assert.deepEqual(seen.map((change) => change.document.n), [0, 1, 2, 3, 4]);
  unsubscribe();
});
