// tus-js-client (unmodified) in two steps, so the Python test can back up and restore the server between them.
// TUS_STEP=start: a new upload sends two 1 MiB chunks and is aborted; prints {"url"}.
// TUS_STEP=resume (TUS_URL): a new Upload resumes that URL and finishes it; prints the offset its HEAD found,
// the offsets it sent from and the file id.
// Input (environment): TRELLIS_URL, TRELLIS_USER_TOKEN, TUS_FILE (the file to send).
import { readFileSync } from "node:fs";
import * as tus from "tus-js-client";

const deadline = setTimeout(() => { console.error("timed out"); process.exit(2); }, 60000);
const content = readFileSync(process.env.TUS_FILE);
const common = {
  endpoint: `${process.env.TRELLIS_URL}/storage/uploads`,
  headers: { Authorization: `Bearer ${process.env.TRELLIS_USER_TOKEN}` },
  chunkSize: 1024 * 1024,
  metadata: { filename: "resumed.bin", filetype: "application/octet-stream" },
  retryDelays: [200, 1000],
};

function start() {
  return new Promise((resolve, reject) => {
    let chunks = 0;
    const upload = new tus.Upload(content, {
      ...common,
      onChunkComplete: () => {
        chunks += 1;
        if (chunks === 2) upload.abort().then(() => resolve({ url: upload.url }));
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

const result = process.env.TUS_STEP === "start" ? await start() : await resume(process.env.TUS_URL);
clearTimeout(deadline);
console.log(JSON.stringify(result));
