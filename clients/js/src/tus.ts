/** A resumable upload over tus 1.0.0 (`/storage/uploads`) with tus-js-client: sent in chunks with
 * progress, retried, and resumed from the server's offset when the same file is uploaded again after an
 * interruption. Resolves to the new file's id. */
import { type DetailedError, type HttpRequest, Upload } from "tus-js-client";
import { TrellisError, abortedError, errorFrom, networkError } from "./errors.js";
import type { Tokens } from "./tokens.js";
import type { UploadAddresses } from "./upload-addresses.js";

export interface ResumableUpload {
  endpoint: string;
  input: Blob | Uint8Array;
  name: string;
  type: string;
  metadata: Record<string, string>;
  onProgress: ((sent: number, total: number) => void) | undefined;
  signal: AbortSignal | undefined;
}

const CHUNK_SIZE = 2 * 1024 * 1024;
const RETRY_DELAYS_MS = [0, 1000, 3000, 5000, 10_000];
const SAMPLE_BYTES = 64 * 1024;

export async function uploadResumably(
  tokens: Tokens,
  addresses: UploadAddresses,
  job: ResumableUpload,
): Promise<string> {
  const input = await forThisPlatform(job.input);
  const print = await fingerprint(job, tokens.userId ?? "anonymous");
  let sentWith: string | null = null;
  return new Promise<string>((resolve, reject) => {
    const upload = new Upload(input, {
      endpoint: job.endpoint,
      chunkSize: CHUNK_SIZE,
      retryDelays: RETRY_DELAYS_MS,
      metadata: { filename: job.name, filetype: job.type, ...job.metadata },
      fingerprint: () => Promise.resolve(print),
      urlStorage: addresses,
      storeFingerprintForResuming: true,
      removeFingerprintOnSuccess: true,
      onBeforeRequest: async (request: HttpRequest) => {
        sentWith = await tokens.current();
        if (sentWith !== null) request.setHeader("Authorization", `Bearer ${sentWith}`);
      },
      onShouldRetry: (error: DetailedError) => {
        const status = error.originalResponse?.getStatus() ?? 0;
        if (status === 401 && sentWith !== null) {
          void tokens.rejected(sentWith).catch(() => undefined); // the retry waits for the renewed token
          return true;
        }
        return status === 0 || status === 409 || status === 423 || status >= 500;
      },
      onProgress: (sent, total) => job.onProgress?.(sent, total),
      onSuccess: ({ lastResponse }) => {
        const fileId = lastResponse.getHeader("Trellis-File-Id");
        if (fileId) resolve(fileId);
        else reject(new TrellisError({ name: "INTERNAL_SERVER_ERROR", status: 500, message: "The upload finished without a file id" }));
      },
      onError: (error) => reject(uploadError(error)),
    });
    if (job.signal !== undefined) {
      if (job.signal.aborted) return reject(abortedError());
      // The stored address stays: uploading the same file again resumes.
      job.signal.addEventListener("abort", () => void upload.abort().finally(() => reject(abortedError())), { once: true });
    }
    upload.findPreviousUploads().then(
      (previous) => {
        const last = previous[previous.length - 1];
        if (last !== undefined) upload.resumeFromPreviousUpload(last);
        upload.start();
      },
      (error: unknown) => reject(networkError(error)),
    );
  });
}

function uploadError(error: Error | DetailedError): TrellisError {
  const response = "originalResponse" in error ? error.originalResponse : null;
  if (response === null) return networkError(error);
  const text = response.getBody();
  let body: unknown = text;
  try {
    body = JSON.parse(text);
  } catch {
    // not JSON: the text is the message
  }
  return errorFrom(response.getStatus(), body, text);
}

interface BufferLike {
  from(data: ArrayBufferLike, byteOffset?: number, length?: number): Uint8Array;
}

/** tus-js-client's Node build reads Buffers, its browser build Blobs. */
async function forThisPlatform(input: Blob | Uint8Array): Promise<Blob | Uint8Array> {
  const runtime = globalThis as { process?: { versions?: { node?: string } }; Buffer?: BufferLike };
  const NodeBuffer = runtime.Buffer;
  if (runtime.process?.versions?.node === undefined || NodeBuffer === undefined) {
    return input instanceof Blob ? input : new Blob([new Uint8Array(input)]);
  }
  if (input instanceof Blob) return NodeBuffer.from(await input.arrayBuffer());
  return NodeBuffer.from(input.buffer, input.byteOffset, input.byteLength);
}

/** Names the file for resuming: who uploads what where, with its size and, for a File, its date, else a
 * hash of its first and last bytes. */
async function fingerprint(job: ResumableUpload, userId: string): Promise<string> {
  const size = job.input instanceof Blob ? job.input.size : job.input.byteLength;
  const parts = ["trellis", job.endpoint, userId, job.name, job.type, String(size), JSON.stringify(job.metadata)];
  const lastModified = (job.input as Partial<File>).lastModified;
  if (typeof lastModified === "number") {
    parts.push(String(lastModified));
  } else {
    const head = await sample(job.input, 0, Math.min(SAMPLE_BYTES, size));
    const tail = await sample(job.input, Math.max(0, size - SAMPLE_BYTES), size);
    parts.push(hash(head), hash(tail));
  }
  return parts.join("|");
}

async function sample(input: Blob | Uint8Array, start: number, end: number): Promise<Uint8Array> {
  return input instanceof Blob ? new Uint8Array(await input.slice(start, end).arrayBuffer()) : input.subarray(start, end);
}

/** A 53-bit hash (cyrb53): enough to tell files apart, not a security measure. */
function hash(bytes: Uint8Array): string {
  let h1 = 0xdeadbeef;
  let h2 = 0x41c6ce57;
  for (const byte of bytes) {
    h1 = Math.imul(h1 ^ byte, 2654435761);
    h2 = Math.imul(h2 ^ byte, 1597334677);
  }
  h1 = Math.imul(h1 ^ (h1 >>> 16), 2246822507) ^ Math.imul(h2 ^ (h2 >>> 13), 3266489909);
  h2 = Math.imul(h2 ^ (h2 >>> 16), 2246822507) ^ Math.imul(h1 ^ (h1 >>> 13), 3266489909);
  return (4294967296 * (2097151 & h2) + (h1 >>> 0)).toString(36);
}
