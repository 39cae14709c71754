// What the tests share: the live server's address and master key (from tests/test_js_client.py), admin calls
// made without the SDK, fresh clients and users, and facts handed back to the Python side.
import { appendFileSync } from "node:fs";
import { createHmac, randomBytes } from "node:crypto";
import { Trellis, memoryStorage } from "trellis-client";

export const url = process.env.TRELLIS_URL;
export const masterKey = process.env.TRELLIS_MASTER_KEY;
export const PASSWORD = "correct-horse-battery-staple";

if (!url || !masterKey) throw new Error("Run through tests/test_js_client.py: TRELLIS_URL and TRELLIS_MASTER_KEY are needed");

/** A name no other test uses (schema names: a letter, then letters, digits and _). */
export function unique(prefix) {
  return `${prefix}${randomBytes(4).toString("hex")}`;
}

export function newEmail() {
  return `${unique("user")}@example.com`;
}

/** An administrative call (master key), as an administrator's tool would make it; throws on an error. */
export async function admin(method, path, body) {
  const response = await fetch(url + path, {
    method,
    headers: { masterkey: masterKey, ...(body === undefined ? {} : { "Content-Type": "application/json" }) },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await response.text();
  if (!response.ok) throw new Error(`${method} ${path} answered ${response.status}: ${text}`);
  return text ? JSON.parse(text) : null;
}

/** The raw answer of a call without the SDK: {status, body}. */
export async function raw(method, path, { body, token, headers = {} } = {}) {
  const response = await fetch(url + path, {
    method,
    headers: {
      ...headers,
      ...(token ? { Authorization: `Bearer ${token}` } : {}),
      ...(body === undefined ? {} : { "Content-Type": "application/json" }),
    },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await response.text();
  return { status: response.status, body: text ? JSON.parse(text) : null };
}

export function createSchema(name, fields, modelOptions) {
  return admin("POST", "/admin/database/schemas", { name, fields, ...(modelOptions ? { modelOptions } : {}) });
}

export function configure(module, changes) {
  return admin("PUT", `/config/${module}`, changes);
}

/** A client with its own memory storage (unless given one). */
export function client(options = {}) {
  return new Trellis(url, { storage: memoryStorage(), ...options });
}

/** A client signed up (and so signed in) as a new user. */
export async function signedUp(options = {}) {
  const storage = options.storage ?? memoryStorage();
  const t = client({ ...options, storage });
  const email = newEmail();
  await t.auth.signUp(email, PASSWORD);
  return { t, email, id: t.auth.user._id, accessToken: () => JSON.parse(storage.getItem(sessionKey)).accessToken };
}

/** A client signed in as a user an administrator created (such an address counts as verified). */
export async function verifiedUser(options = {}) {
  const email = newEmail();
  await admin("POST", "/authentication/users", { email, password: PASSWORD });
  const t = client(options);
  await t.auth.signIn(email, PASSWORD);
  return { t, email, id: t.auth.user._id };
}

/** The key the SDK keeps its session under in its storage. */
export const sessionKey = `trellis:${url}:session`;

/** A facts line for the Python side (server-side checks), in TRELLIS_TEST_REPORT. */
export function report(key, value) {
  if (process.env.TRELLIS_TEST_REPORT) appendFileSync(process.env.TRELLIS_TEST_REPORT, `${JSON.stringify({ key, value })}\n`);
}

export async function until(check, what, timeoutMs = 30000) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}

function base64url(data) {
  return Buffer.from(data).toString("base64url");
}

export function jwtPayload(token) {
  return JSON.parse(Buffer.from(token.split(".")[1], "base64url").toString());
}

/** An HS256 JWT of `payload` signed with `secret` (what the server's own tokens are). */
export function signJwt(payload, secret) {
  const head = base64url(JSON.stringify({ alg: "HS256", typ: "JWT" }));
  const body = base64url(JSON.stringify(payload));
  const signature = createHmac("sha256", secret).update(`${head}.${body}`).digest("base64url");
  return `${head}.${body}.${signature}`;
}

/** The authenticator app's code (RFC 6238: 30 s steps, 6 digits, HMAC-SHA1) of a base32 secret. */
export function totp(secret, at = Date.now()) {
  const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567";
  let bits = "";
  for (const char of secret.replace(/=+$/, "").toUpperCase()) bits += alphabet.indexOf(char).toString(2).padStart(5, "0");
  const key = Buffer.from(bits.match(/.{8}/g).map((byte) => parseInt(byte, 2)));
  const counter = Buffer.alloc(8);
  counter.writeBigUInt64BE(BigInt(Math.floor(at / 30000)));
  const digest = createHmac("sha1", key).update(counter).digest();
  const offset = digest[digest.length - 1] & 0xf;
  return String((digest.readUInt32BE(offset) & 0x7fffffff) % 1000000).padStart(6, "0");
}

/** A fetch that counts the calls per "METHOD path" (and statuses), for assertions on what the SDK sent. */
export function countingFetch() {
  const calls = [];
  const fetcher = async (input, init = {}) => {
    const response = await fetch(input, init);
    const target = new URL(String(input));
    calls.push({ method: init.method ?? "GET", path: target.pathname, status: response.status });
    return response;
  };
  return { fetcher, calls, count: (method, path) => calls.filter((c) => c.method === method && c.path === path).length };
}
