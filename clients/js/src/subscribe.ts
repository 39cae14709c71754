/** Live subscriptions of one client: one Socket.IO connection (namespace `/database`, path `/realtime`)
 * shared by every subscription, or a Server-Sent Events stream per subscription where a WebSocket cannot
 * open. Each subscription remembers the last change it delivered; after a reconnect it subscribes again with
 * `since` set to that eventId, so the server replays exactly what followed: nothing missed, nothing twice. */
import { type Socket, io } from "socket.io-client";
import { type Change, type ChangeKind, type WireChange, wireChange } from "./changes.js";
import { TrellisError, abortedError, errorFrom, isRecord } from "./errors.js";
import type { Http } from "./http.js";
import { type Where, appendWhere, whereJson } from "./query.js";
import { EventStream } from "./sse.js";
import type { Tokens } from "./tokens.js";

export type { Change, ChangeKind } from "./changes.js";
/** Ends the subscription. `ready` resolves once the server accepted it and rejects with the server's
 * `TrellisError` when it refused it (a refusal also goes to `onError`, whether or not `ready` is awaited). */
export interface Unsubscribe {
  (): void;
  readonly ready: Promise<void>;
}

/** `"auto"`: Socket.IO over a WebSocket, falling back to Server-Sent Events when the WebSocket cannot
 * open; or one of the two always. */
export type RealtimeMode = "auto" | "socket.io" | "sse";

export interface LiveOptions {
  realtime: RealtimeMode;
  /** The Socket.IO path (default `/realtime` under the server URL). */
  socketPath?: string | undefined;
}

interface Request {
  schema: string;
  where?: unknown;
  search?: string;
  events?: ChangeKind[];
}

interface Entry {
  request: Request;
  /** The typed SSE query, built once (its where cannot hold `$or`). */
  streamQuery: () => URLSearchParams;
  deliver: (change: WireChange) => void;
  onError: ((error: TrellisError) => void) | undefined;
  lastEventId: number | null;
  serverId: string | null;
  /** The connection generation a subscribe was sent on and not yet acknowledged. */
  sentOn: number | null;
  stream: EventStream | null;
  started: { resolve: () => void; reject: (error: TrellisError) => void } | null;
  retriedAuth: boolean;
}

const RESUBSCRIBE_DELAY_MS = 1000;

export class Live {
  private socketIo: Socket | null = null;
  private readonly entries = new Set<Entry>();
  private readonly byServerId = new Map<string, Entry>();
  private mode: "socket.io" | "sse";
  private everConnected = false;
  /** Increases on every connect: an acknowledgement of an older connection is stale. */
  private generation = 0;
  private socketToken: string | null = null;
  private retriedConnectAuth = false;

  constructor(
    private readonly http: Http,
    private readonly tokens: Tokens,
    private readonly options: LiveOptions,
  ) {
    this.mode = options.realtime === "sse" ? "sse" : "socket.io";
    tokens.onChange((event) => {
      if (event === "SIGNED_IN" || event === "SIGNED_OUT") this.reconnect();
    });
  }

  /** The Socket.IO socket while subscriptions use one (for its events, or to test a dropped connection). */
  get socket(): Socket | null {
    return this.socketIo;
  }

  subscribe<T>(
    schema: string,
    options: { where?: Where<T>; search?: string; events?: ChangeKind[]; onError?: (error: TrellisError) => void },
    callback: (change: Change<T>) => void,
  ): Unsubscribe {
    const request: Request = { schema };
    if (options.where !== undefined) request.where = whereJson(options.where);
    if (options.search !== undefined) request.search = options.search;
    if (options.events !== undefined) request.events = options.events;
    const entry: Entry = {
      request,
      streamQuery: () => {
        const query = new URLSearchParams();
        appendWhere(query, options.where);
        if (options.search !== undefined) query.set("search", options.search);
        if (options.events !== undefined) query.set("events", options.events.join(","));
        return query;
      },
      deliver: (change) => callback(change as Change<T>),
      onError: options.onError,
      lastEventId: null,
      serverId: null,
      sentOn: null,
      stream: null,
      started: null,
      retriedAuth: false,
    };
    const started = new Promise<void>((resolve, reject) => {
      entry.started = { resolve, reject };
    });
    this.entries.add(entry);
    if (this.mode === "sse") this.stream(entry);
    else if (this.socketIo === null) this.socketIo = this.connect();
    else this.send(entry); // when connected; else the connect handler sends it
    started.catch(() => undefined); // a refusal is reported to onError too: awaiting ready is optional
    return Object.assign(() => this.unsubscribe(entry), { ready: started });
  }

  /** End every subscription and the connection (a subscribe still waiting for the server fails: ABORTED). */
  close(): void {
    for (const entry of [...this.entries]) {
      this.unsubscribe(entry);
      entry.started?.reject(abortedError());
      entry.started = null;
    }
  }

  private unsubscribe(entry: Entry): void {
    if (!this.entries.delete(entry)) return;
    entry.stream?.close();
    if (entry.serverId !== null) {
      this.byServerId.delete(entry.serverId);
      if (this.socketIo?.connected === true) this.socketIo.emit("unsubscribe", { subscriptionId: entry.serverId });
    }
    if (this.entries.size === 0) this.closeSocket();
  }

  // ---- Socket.IO ---------------------------------------------------------------------------------------

  private connect(): Socket {
    const base = new URL(this.http.baseUrl);
    const prefix = base.pathname.replace(/\/$/, "");
    const socket = io(`${base.origin}/database`, {
      path: this.options.socketPath ?? `${prefix}/realtime`,
      transports: ["websocket"],
      forceNew: true, // its own connection: dropping one client's never drops another's
      auth: (reply) => {
        this.tokens.current().then(
          (token) => {
            this.socketToken = token;
            reply(token === null ? {} : { token });
          },
          () => reply({}),
        );
      },
    });
    socket.on("connect", () => {
      this.everConnected = true;
      this.retriedConnectAuth = false;
      this.generation += 1;
      for (const entry of this.entries) this.send(entry);
    });
    socket.on("disconnect", () => {
      // The server forgets a connection's subscriptions: each is sent again, with since, on the next connect.
      this.byServerId.clear();
      for (const entry of this.entries) entry.serverId = null;
    });
    socket.on("change", (value: unknown) => this.received(value));
    socket.on("subscriptionError", (value: unknown) => this.lost(value));
    socket.on("connect_error", (error: Error & { data?: unknown }) => this.connectFailed(socket, error));
    return socket;
  }

  private closeSocket(): void {
    const socket = this.socketIo;
    this.socketIo = null;
    if (socket !== null) {
      socket.removeAllListeners();
      socket.disconnect();
    }
  }

  /** Sign-in or sign-out: the connection (or each stream) opens again with the new credential. */
  private reconnect(): void {
    if (this.socketIo !== null) {
      this.socketIo.disconnect();
      this.socketIo.connect();
    }
    for (const entry of this.entries) entry.stream?.restart();
  }

  private send(entry: Entry): void {
    const socket = this.socketIo;
    if (socket === null || !socket.connected || entry.serverId !== null || entry.sentOn === this.generation) return;
    const generation = this.generation;
    entry.sentOn = generation;
    const payload = entry.lastEventId === null ? entry.request : { ...entry.request, since: entry.lastEventId };
    socket.emit("subscribe", payload, (ack: unknown) => {
      const subscriptionId = isRecord(ack) && typeof ack["subscriptionId"] === "string" ? ack["subscriptionId"] : null;
      if (generation !== this.generation) return; // the connection it was for is gone, and the server forgot it
      entry.sentOn = null;
      if (!this.entries.has(entry)) {
        if (subscriptionId !== null) socket.emit("unsubscribe", { subscriptionId }); // ended meanwhile
        return;
      }
      if (subscriptionId === null) return this.refused(entry, ackError(ack));
      entry.serverId = subscriptionId;
      // Where the server started it: a reconnect before the first change resumes from there.
      if (entry.lastEventId === null && isRecord(ack) && typeof ack["since"] === "number") entry.lastEventId = ack["since"];
      entry.retriedAuth = false;
      this.byServerId.set(subscriptionId, entry);
      entry.started?.resolve();
      entry.started = null;
    });
  }

  private received(value: unknown): void {
    if (!isRecord(value) || typeof value["subscriptionId"] !== "string") return;
    const entry = this.byServerId.get(value["subscriptionId"]);
    const change = wireChange(value);
    if (entry !== undefined && change !== null) this.deliver(entry, change);
  }

  /** `subscriptionError`: the server ended a subscription it could not serve; subscribe again from the last
   * change delivered (or where the server says it stopped), unless the log no longer reaches back. */
  private lost(value: unknown): void {
    if (!isRecord(value) || typeof value["subscriptionId"] !== "string") return;
    const entry = this.byServerId.get(value["subscriptionId"]);
    if (entry === undefined) return;
    this.byServerId.delete(value["subscriptionId"]);
    entry.serverId = null;
    const error = ackError(value);
    if (error.status === 410) return this.fail(entry, error);
    if (entry.lastEventId === null && typeof value["since"] === "number") entry.lastEventId = value["since"];
    setTimeout(() => this.send(entry), RESUBSCRIBE_DELAY_MS);
  }

  private refused(entry: Entry, error: TrellisError): void {
    // The token the connection was opened with expired: renew it, and open the connection again.
    if (error.status === 401 && this.socketToken !== null && !entry.retriedAuth) {
      entry.retriedAuth = true;
      this.tokens.rejected(this.socketToken).then(
        (renewed) => (renewed === null ? this.fail(entry, error) : this.reconnect()),
        (failure: unknown) => this.fail(entry, failure instanceof TrellisError ? failure : error),
      );
      return;
    }
    this.fail(entry, error);
  }

  private connectFailed(socket: Socket, error: Error & { data?: unknown }): void {
    if (socket !== this.socketIo) return;
    if (socket.active) {
      // The transport failed; Socket.IO tries again by itself. A WebSocket that never opened: use SSE.
      if (this.options.realtime === "auto" && !this.everConnected) this.fallBackToStreams();
      return;
    }
    const refusal = errorFrom(0, error.data, error.message);
    if (refusal.status === 401 && this.socketToken !== null && !this.retriedConnectAuth) {
      this.retriedConnectAuth = true;
      this.tokens.rejected(this.socketToken).then(
        () => socket.connect(),
        () => this.failAll(refusal),
      );
      return;
    }
    this.failAll(refusal);
  }

  private failAll(error: TrellisError): void {
    for (const entry of [...this.entries]) this.fail(entry, error);
  }

  // ---- Server-Sent Events -----------------------------------------------------------------------------

  private fallBackToStreams(): void {
    this.mode = "sse";
    this.closeSocket();
    for (const entry of this.entries) this.stream(entry);
  }

  private stream(entry: Entry): void {
    let query: URLSearchParams;
    try {
      query = entry.streamQuery();
    } catch (error) {
      return this.fail(entry, error as TrellisError);
    }
    entry.stream = new EventStream(this.http, this.tokens, {
      schema: entry.request.schema,
      query,
      resumeAfter: () => entry.lastEventId,
      opened: () => {
        entry.started?.resolve();
        entry.started = null;
      },
      deliver: (change) => this.deliver(entry, change),
      failed: (error) => this.fail(entry, error),
    });
  }

  // ---- both ---------------------------------------------------------------------------------------------

  private deliver(entry: Entry, change: WireChange): void {
    if (entry.lastEventId !== null && change.eventId <= entry.lastEventId) return; // replayed twice: once only
    entry.lastEventId = change.eventId;
    try {
      entry.deliver(change);
    } catch (error) {
      queueMicrotask(() => {
        throw error; // the callback's own bug: reported, and the next changes still arrive
      });
    }
  }

  /** The subscription cannot go on: the caller learns why (the pending subscribe, or its onError). */
  private fail(entry: Entry, error: TrellisError): void {
    this.unsubscribe(entry);
    entry.started?.reject(error);
    entry.started = null;
    entry.onError?.(error);
  }
}

function ackError(value: unknown): TrellisError {
  const error = isRecord(value) ? value["error"] : undefined;
  const status = isRecord(error) && typeof error["status"] === "number" ? error["status"] : 500;
  return errorFrom(status, error, "The subscription was refused");
}
