/** Files: `t.storage.upload(file, …)` (one request below 5 MiB, resumable tus uploads from there on) and
 * `t.storage.url(id, {width, …})` for an `<img src>`, transformed on the server. */
import type { Http } from "./http.js";
import { segments } from "./http.js";
import type { Tokens } from "./tokens.js";
import { uploadResumably } from "./tus.js";
import type { Deleted } from "./types.js";
import type { UploadAddresses } from "./upload-addresses.js";

/** Bytes to upload: a File (browsers), a Blob, or bytes (a Node Buffer is a Uint8Array). */
export type UploadInput = Blob | Uint8Array | ArrayBuffer;

export interface UploadOptions {
  /** id of one of the user's folders */
  folder?: string;
  /** A public file is served without credentials (default: the folder's setting). */
  isPublic?: boolean;
  onProgress?: (sent: number, total: number) => void;
  /** Default: the File's name, else "file". */
  name?: string;
  /** Default: the File's or Blob's type, else application/octet-stream (the server sniffs it anyway). */
  contentType?: string;
  /** Ends the upload; a resumable one resumes when the same file is uploaded again. */
  signal?: AbortSignal;
}

export interface StoredFile {
  _id: string;
  /** Sanitised: ASCII, safe in paths. */
  name: string;
  /** The name as uploaded. */
  displayName: string;
  folder: string | null;
  owner: string;
  size: number;
  contentType: string;
  sha256: string;
  isPublic: boolean;
  provider: string;
  url: string;
  createdAt: string;
  updatedAt: string;
}

export interface ImageTransform {
  /** 1 to 4096 pixels */
  width?: number;
  height?: number;
  /** With width and height: cover (crop), contain (pad), inside (default), fill (stretch). */
  fit?: "cover" | "contain" | "inside" | "fill";
  /** Default: the source's. */
  format?: "webp" | "jpeg" | "png";
  /** 1 to 100 (JPEG and WebP) */
  quality?: number;
}

/** Files from this size on go up in resumable chunks. */
export const RESUMABLE_FROM_BYTES = 5 * 1024 * 1024;

export class Storage {
  constructor(
    private readonly http: Http,
    private readonly tokens: Tokens,
    private readonly addresses: UploadAddresses,
  ) {}

  async upload(file: UploadInput, options: UploadOptions = {}): Promise<StoredFile> {
    const input = file instanceof ArrayBuffer ? new Uint8Array(file) : file;
    const size = input instanceof Blob ? input.size : input.byteLength;
    const name = options.name ?? (input as Partial<File>).name ?? "file";
    const type = options.contentType || (input instanceof Blob ? input.type : "") || "application/octet-stream";
    const id =
      size < RESUMABLE_FROM_BYTES
        ? await this.uploadAtOnce(input, name, type, size, options)
        : await uploadResumably(this.tokens, this.addresses, {
            endpoint: `${this.http.baseUrl}/storage/uploads`,
            input,
            name,
            type,
            metadata: {
              ...(options.folder === undefined ? {} : { folder: options.folder }),
              ...(options.isPublic === undefined ? {} : { isPublic: String(options.isPublic) }),
            },
            onProgress: options.onProgress,
            signal: options.signal,
          });
    return this.get(id);
  }

  /** A URL that serves the file without credentials: a public file's own, or a signed one (1 h) for a
   * private file of the user's; with a transform for images. */
  async url(id: string, transform: ImageTransform = {}): Promise<string> {
    const answer = await this.http.request<{ url: string }>("GET", `/storage/getUrl${segments(id)}`, {
      query: { ...transform },
    });
    return answer.url;
  }

  get(id: string): Promise<StoredFile> {
    return this.http.request("GET", `/storage/file${segments(id)}`);
  }

  delete(id: string): Promise<Deleted> {
    return this.http.request("DELETE", `/storage/file${segments(id)}`);
  }

  private async uploadAtOnce(
    input: Blob | Uint8Array,
    name: string,
    type: string,
    size: number,
    options: UploadOptions,
  ): Promise<string> {
    const form = new FormData();
    form.append("file", input instanceof Blob ? input.slice(0, size, type) : new Blob([new Uint8Array(input)], { type }), name);
    if (options.folder !== undefined) form.append("folder", options.folder);
    if (options.isPublic !== undefined) form.append("isPublic", String(options.isPublic));
    options.onProgress?.(0, size);
    const stored = await this.http.request<{ id: string }>(
      "POST",
      "/storage/upload",
      options.signal === undefined ? { form } : { form, signal: options.signal },
    );
    options.onProgress?.(size, size);
    return stored.id;
  }
}
