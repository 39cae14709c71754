// Drives tus-js-client with parallelUploads: 2 against a live Trellis server: it sends each half of the file as a
// partial upload (Upload-Concat: partial), then creates the final upload concatenating them (tus concatenation).
// Input (environment): TRELLIS_URL, TRELLIS_USER_TOKEN, TUS_FILE (the file to send).
// Output: one JSON line with the outcome, the final upload's URL and file id, and every request's method,
// Upload-Concat header and status; the Python test asserts on it.
import { readFileSync } from "node:fs";
import * as tus from "tus-js-client";

const deadline = setTimeout(() => { console.error("timed out"); process.exit(2); }, 60000);
const content = readFileSync(process.env.TUS_FILE);
const requests = [];
let fileId = null;

const outcome = await new Promise((resolve) => {
  const upload = new tus.Upload(content, {
    endpoint: `${process.env.TRELLIS_URL}/storage/uploads`,
    headers: { Authorization: `Bearer ${process.env.TRELLIS_USER_TOKEN}` },
    parallelUploads: 2,
    chunkSize: 1024 * 1024,
    metadata: { filename: "parallel.bin", filetype: "application/octet-stream", isPublic: "false" },
    retryDelays: [],
    onAfterResponse: (req, res) => {
      requests.push({ method: req.getMethod(), concat: req.getHeader("Upload-Concat") ?? null, status: res.getStatus() });
      if (res.getHeader("Trellis-File-Id")) fileId = res.getHeader("Trellis-File-Id");
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
clearTimeout(deadline);
console.log(JSON.stringify({ ...outcome, fileId, requests }));
