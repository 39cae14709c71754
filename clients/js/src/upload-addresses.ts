/** Where tus-js-client keeps the addresses of unfinished uploads, by file fingerprint: in the client's
 * storage option, so an upload interrupted by a page reload (localStorage) or a crash resumes where the
 * server stopped receiving it. */
import type { PreviousUpload, UrlStorage } from "tus-js-client";
import { type StorageLike, readJson, writeJson } from "./persistence.js";

type Addresses = Record<string, PreviousUpload>;

export class UploadAddresses implements UrlStorage {
  constructor(
    private readonly storage: StorageLike,
    private readonly key: string,
  ) {}

  async findAllUploads(): Promise<PreviousUpload[]> {
    return Object.values(await this.read());
  }

  async findUploadsByFingerprint(fingerprint: string): Promise<PreviousUpload[]> {
    const all = await this.read();
    return Object.entries(all)
      .filter(([key]) => key.startsWith(`${fingerprint}::`))
      .map(([, upload]) => upload);
  }

  async removeUpload(urlStorageKey: string): Promise<void> {
    const all = await this.read();
    delete all[urlStorageKey];
    await writeJson(this.storage, this.key, Object.keys(all).length === 0 ? null : all);
  }

  async addUpload(fingerprint: string, upload: PreviousUpload): Promise<string> {
    const all = await this.read();
    const urlStorageKey = `${fingerprint}::${Math.random().toString(36).slice(2)}`;
    all[urlStorageKey] = { ...upload, urlStorageKey };
    await writeJson(this.storage, this.key, all);
    return urlStorageKey;
  }

  private async read(): Promise<Addresses> {
    return (await readJson<Addresses>(this.storage, this.key)) ?? {};
  }
}
