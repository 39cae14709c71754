// Drives tus-js-client (the official tus client) through a resumed upload against a live Trellis server:
// a first Upload sends two 1 MiB chunks and is aborted, a second one resumes it from its URL.
// Input (environment): TRELLIS_URL, TRELLIS_USER_TOKEN, TUS_FILE (the file to send); TUS_STEP to run one
// step only, so a test can act on the server between them: "start" (prints {"url"}) or "resume" (TUS_URL).
// Output: one JSON line with the upload's URL, the offset the resumed upload found, its chunk offsets and the
// file id of the finished upload; the Python test asserts on it.
import { readFileSync } from "node:fs";
import * as tus from "tus-js-client";

const deadline = setTimeout(() => { console.error("timed out"); process.exit(2); }, 60000);
const content = readFileSync(process.env.TUS_FILE);
const common = {
  endpoint: `${process.env.TRELLIS_URL}/storage/uploads`,
  headers: { Authorization: `Bearer ${process.env.TRELLIS_USER_TOKEN}` },
  chunkSize: 1024 * 1024,
  metadata: { filename: "from-tus-js-client.bin", filetype: "application/octet-stream", isPublic: "false" },
  retryDelays: [200, 1000, 3000],
};

function firstPart() {
  return new Promise((resolve, reject) => {
    let chunks = 0;
    const upload = new tus.Upload(content, {
      ...common,
      onChunkComplete: () => {
        chunks += 1;
        if (chunks === 2) upload.abort().then(() => resolve(upload.url));
      },
      onError: reject,
      onSuccess: () => reject(new Error("the first part should not finish")),
    });
    upload.start();
  });
}

function resume(url) {
  return new Promise((resolve, reject) => {
    const seen = { resumedFrom: null, patches: [], fileId: null };
    const upload = new tus.Upload(content, {
      ...common,
      uploadUrl: url,
      onBeforeRequest: (req) => {
        if (req.getMethod() === "PATCH") seen.patches.push(Number(req.getHeader("Upload-Offset")));
      },
      onAfterResponse: (req, res) => {
        if (req.getMethod() === "HEAD") seen.resumedFrom = Number(res.getHeader("Upload-Offset"));
        const fileId = res.getHeader("Trellis-File-Id");
        if (fileId) seen.fileId = fileId;
      },
      onError: reject,
      onSuccess: () => resolve({ ...seen, url: upload.url }),
    });
    upload.start();
  });
}

const step = process.env.TUS_STEP;
let result;
if (step === "start") {
  result = { url: await firstPart() };
} else if (step === "resume") {
  result = await resume(process.env.TUS_URL);
} else {
  const url = await firstPart();
  result = { firstUrl: url, ...(await resume(url)) };
}
clearTimeout(deadline);
console.log(JSON.stringify(result));
