// Drives tus-js-client with parallelUploads: 2 (it sends each half as a partial upload with Upload-Concat, then
// a final upload concatenating them) against a live Trellis server, which does not offer concatenation.
// Input (environment): TRELLIS_URL, TRELLIS_USER_TOKEN, TUS_FILE (the file to send).
// Output: one JSON line with the outcome, the error's status and body, and every request's method and status;
// the Python test asserts on it.
import { readFileSync } from "node:fs";
import * as tus from "tus-js-client";

const deadline = setTimeout(() => { console.error("timed out"); process.exit(2); }, 60000);
const content = readFileSync(process.env.TUS_FILE);
const requests = [];

const outcome = await new Promise((resolve) => {
  const upload = new tus.Upload(content, {
    endpoint: `${process.env.TRELLIS_URL}/storage/uploads`,
    headers: { Authorization: `Bearer ${process.env.TRELLIS_USER_TOKEN}` },
    parallelUploads: 2,
    metadata: { filename: "parallel.bin", filetype: "application/octet-stream", isPublic: "false" },
    retryDelays: [],
    onAfterResponse: (req, res) => {
      requests.push({ method: req.getMethod(), concat: req.getHeader("Upload-Concat") ?? null, status: res.getStatus() });
    },
    onError: (error) => resolve({
      ok: false,
      status: error.originalResponse ? error.originalResponse.getStatus() : null,
      body: error.originalResponse ? error.originalResponse.getBody() : String(error),
    }),
    onSuccess: () => resolve({ ok: true, url: upload.url }),
  });
  upload.start();
});
// Let the other half's request (sent in parallel) finish before reporting.
await new Promise((resolve) => setTimeout(resolve, 500));
clearTimeout(deadline);
console.log(JSON.stringify({ ...outcome, requests }));
