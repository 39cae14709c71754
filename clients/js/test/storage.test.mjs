// Files: a small upload in one request, a large one over tus with progress, resuming an interrupted upload from
// the stored address, URLs with image transforms, get and delete.
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { readFileSync } from "node:fs";
import { test } from "node:test";
import { Trellis, TrellisError, memoryStorage } from "trellis-client";
import { PASSWORD, admin, countingFetch, newEmail, url } from "./helpers.mjs";

const MiB = 1024 * 1024;

async function user(options = {}) {
  const counted = countingFetch();
  const storage = memoryStorage();
  const t = new Trellis(url, { storage, fetch: counted.fetcher, ...options });
  await t.auth.signUp(newEmail(), PASSWORD);
  return { t, counted, storage };
}

async function download(t, id) {
  const response = await fetch(await t.storage.url(id)); // a signed URL: no credentials needed
  assert.equal(response.status, 200);
  return Buffer.from(await response.arrayBuffer());
}

test("a small file goes up in one request", async () => {
  const { t, counted } = await user();
  const progress = [];
  const file = await t.storage.upload(new Blob(["hello from node"], { type: "text/plain" }), {
    name: "hello.txt",
    onProgress: (sent, total) => progress.push([sent, total]),
  });
  assert.equal(file.displayName, "hello.txt");
  assert.equal(file.size, 15);
  assert.equal(file.owner, t.auth.user._id);
  assert.equal(file.isPublic, false);
  assert.deepEqual(progress, [[0, 15], [15, 15]]);
  assert.equal(counted.count("POST", "/storage/upload"), 1);
  assert.equal(counted.count("POST", "/storage/uploads"), 0);
  assert.equal((await download(t, file._id)).toString(), "hello from node");
  assert.deepEqual(await t.storage.get(file._id), file);
  assert.deepEqual(await t.storage.delete(file._id), { _id: file._id, deleted: true });
  await assert.rejects(t.storage.get(file._id), { name: "NOT_FOUND", status: 404 });
});

test("a file over 5 MiB goes up resumably (tus), reporting progress", async () => {
  const { t, counted } = await user();
  const content = randomBytes(6 * MiB + 12345);
  const progress = [];
  const file = await t.storage.upload(content, { name: "big.bin", onProgress: (sent, total) => progress.push([sent, total]) });
  assert.equal(file.size, content.length);
  assert.equal(file.displayName, "big.bin");
  assert.equal(counted.count("POST", "/storage/upload"), 0);
  assert.ok(progress.length >= 4, `progress reported ${progress.length} times`);
  assert.ok(progress.every(([, total]) => total === content.length));
  for (let i = 1; i < progress.length; i += 1) assert.ok(progress[i][0] >= progress[i - 1][0], "progress never goes back");
  assert.deepEqual(progress.at(-1), [content.length, content.length]);
  assert.ok(progress.some(([sent]) => sent > 0 && sent < content.length), "progress between the first and last byte");
  assert.ok((await download(t, file._id)).equals(content));
  const listed = await admin("GET", `/admin/storage/files?owner=${t.auth.user._id}`);
  assert.equal(listed.count, 1);
});

test("an interrupted upload resumes from the server's offset when the same file is uploaded again", async () => {
  const { t, storage } = await user();
  const content = randomBytes(7 * MiB);
  const stop = new AbortController();
  const first = [];
  await assert.rejects(
    t.storage.upload(content, {
      name: "resumed.bin",
      isPublic: true,
      signal: stop.signal,
      onProgress: (sent) => {
        first.push(sent);
        if (sent >= 2 * MiB) stop.abort(); // after the first chunk: as a closed tab would
      },
    }),
    (error) => error instanceof TrellisError && error.name === "ABORTED",
  );
  assert.ok(storage.getItem(`trellis:${url}:uploads`), "the upload's address is kept for resuming");
  const second = [];
  const file = await t.storage.upload(content, { name: "resumed.bin", isPublic: true, onProgress: (sent) => second.push(sent) });
  assert.ok(second[0] >= 2 * MiB, `resumed from ${second[0]}`);
  assert.equal(file.size, content.length);
  assert.equal(file.isPublic, true);
  assert.ok((await download(t, file._id)).equals(content));
  assert.equal(storage.getItem(`trellis:${url}:uploads`), null, "a finished upload's address is forgotten");
  const listed = await admin("GET", `/admin/storage/files?owner=${t.auth.user._id}`);
  assert.equal(listed.count, 1);
});

test("url() gives a URL for an <img src>, transformed on the server", async () => {
  const { t } = await user();
  const png = readFileSync(process.env.TRELLIS_TEST_IMAGE);
  const image = await t.storage.upload(new Blob([png], { type: "image/png" }), { name: "photo.png", isPublic: true });
  assert.equal(image.contentType, "image/png");
  const plain = await t.storage.url(image._id);
  assert.equal(plain, image.url);
  const thumb = await t.storage.url(image._id, { width: 32, height: 32, fit: "cover", format: "webp", quality: 70 });
  const response = await fetch(thumb);
  assert.equal(response.status, 200);
  assert.equal(response.headers.get("Content-Type"), "image/webp");
  const bytes = Buffer.from(await response.arrayBuffer());
  assert.equal(bytes.subarray(0, 4).toString(), "RIFF");
  assert.equal(bytes.subarray(8, 12).toString(), "WEBP");
  const privately = await t.storage.upload(new Blob([png], { type: "image/png" }), { name: "private.png" });
  const signed = await t.storage.url(privately._id, { width: 10, format: "jpeg" });
  assert.match(signed, /\/storage\/signed\//);
  const small = await fetch(signed);
  assert.equal(small.headers.get("Content-Type"), "image/jpeg");
  await assert.rejects(t.storage.url(privately._id, { width: 99999 }), { name: "INVALID_ARGUMENTS", status: 400 });
});
