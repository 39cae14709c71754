/** `new Trellis(url, options)`: one client of one server, with its session. */
import { Auth } from "./auth.js";
import { Collection } from "./collection.js";
import { Functions } from "./functions.js";
import { type GraphqlVariables, graphql } from "./graphql.js";
import { type Fetch, Http, type RequestOptions } from "./http.js";
import { type StorageLike, defaultStorage } from "./persistence.js";
import { Storage } from "./storage.js";
import { Live, type RealtimeMode } from "./subscribe.js";
import { Teams } from "./teams.js";
import { Tokens } from "./tokens.js";
import type { TokenPair } from "./types.js";
import { UploadAddresses } from "./upload-addresses.js";

export interface TrellisOptions {
  /** Where the session and unfinished uploads are kept: localStorage in browsers, memory in Node. */
  storage?: StorageLike;
  /** Live data transport (default `"auto"`: Socket.IO over a WebSocket, else Server-Sent Events). */
  realtime?: RealtimeMode;
  /** The server's Socket.IO path (default `/realtime`). */
  socketPath?: string;
  /** Another fetch (default: the global one). */
  fetch?: Fetch;
}

export class Trellis {
  readonly url: string;
  readonly auth: Auth;
  readonly storage: Storage;
  readonly functions: Functions;
  readonly teams: Teams;
  /** Live subscriptions and their connection (`realtime.socket` is the Socket.IO socket while open). */
  readonly realtime: Live;
  private readonly http: Http;

  constructor(url: string, options: TrellisOptions = {}) {
    this.url = url.replace(/\/+$/, "");
    const storage = options.storage ?? defaultStorage();
    const fetcher = options.fetch ?? ((input: RequestInfo | URL, init?: RequestInit) => globalThis.fetch(input, init));
    const renew = (refreshToken: string): Promise<TokenPair> =>
      this.http.request("POST", "/authentication/renew", { body: { refreshToken }, auth: false });
    const tokens = new Tokens(storage, `trellis:${this.url}:session`, renew);
    this.http = new Http(this.url, tokens, fetcher);
    this.auth = new Auth(this.http, tokens);
    this.realtime = new Live(this.http, tokens, { realtime: options.realtime ?? "auto", socketPath: options.socketPath });
    this.storage = new Storage(this.http, tokens, new UploadAddresses(storage, `trellis:${this.url}:uploads`));
    this.functions = new Functions(this.http);
    this.teams = new Teams(this.http);
    if (typeof window !== "undefined" && typeof window.location?.href === "string" && window.location.hash.includes("accessToken=")) {
      void this.auth.fromRedirect(window.location.href).catch(() => undefined);
    }
  }

  /** The documents of one schema, typed as `T` (e.g. an interface from `flask trellis types --lang ts`). */
  collection<T extends object = Record<string, unknown>>(name: string): Collection<T> {
    return new Collection<T>(this.http, this.realtime, name);
  }

  graphql<D = Record<string, unknown>>(query: string, variables?: GraphqlVariables): Promise<D> {
    return graphql<D>(this.http, query, variables);
  }

  /** Any other route, with this client's session: the answer's JSON, or a TrellisError. */
  request<T = unknown>(method: string, path: string, options: RequestOptions = {}): Promise<T> {
    return this.http.request<T>(method, path, options);
  }

  /** End live subscriptions and their connection (a Node process can then exit). */
  close(): void {
    this.realtime.close();
  }
}
