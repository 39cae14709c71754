/** One subscription over Server-Sent Events (`GET /database/{schema}/changes`), for where a WebSocket
 * cannot open. Read with `fetch` (an EventSource cannot send the Bearer token); after a dropped stream it
 * reconnects with `Last-Event-ID`, so the server replays what was missed. */
import { TrellisError, errorFrom, networkError } from "./errors.js";
import { type Http, segments } from "./http.js";
import type { Tokens } from "./tokens.js";
import { type WireChange, wireChange } from "./changes.js";

export interface StreamTarget {
  schema: string;
  /** The changes route's query (filters, `events`, `search`). */
  query: URLSearchParams;
  /** The last eventId delivered, to resume after. */
  resumeAfter(): number | null;
  opened(): void;
  deliver(change: WireChange): void;
  /** The stream cannot go on (or never started). */
  failed(error: TrellisError): void;
}

const FIRST_DELAY_MS = 500;
const MAX_DELAY_MS = 10_000;

export class EventStream {
  private controller: AbortController | null = null;
  private closed = false;

  constructor(
    private readonly http: Http,
    private readonly tokens: Tokens,
    private readonly target: StreamTarget,
  ) {
    void this.run();
  }

  close(): void {
    this.closed = true;
    this.controller?.abort();
  }

  /** Open the stream again (another credential after a sign-in or sign-out); it resumes where it was. */
  restart(): void {
    this.controller?.abort();
  }

  private async run(): Promise<void> {
    let opened = false;
    let delay = FIRST_DELAY_MS;
    while (!this.closed) {
      const controller = new AbortController();
      this.controller = controller;
      try {
        const response = await this.open(controller.signal);
        if (response.status !== 200 || response.body === null) {
          const error = await failure(response);
          // Before the first change stream, or a refusal that will not change by waiting: give up.
          if (!opened || (error.status < 500 && error.status !== 429)) return this.target.failed(error);
        } else {
          if (!opened) this.target.opened();
          opened = true;
          delay = FIRST_DELAY_MS;
          await this.read(response.body);
        }
      } catch (error) {
        if (this.closed) return;
        if (!opened && !controller.signal.aborted) {
          return this.target.failed(error instanceof TrellisError ? error : networkError(error));
        }
      }
      if (this.closed) return;
      await new Promise((resolve) => setTimeout(resolve, delay));
      delay = Math.min(delay * 2, MAX_DELAY_MS);
    }
  }

  private async open(signal: AbortSignal): Promise<Response> {
    const headers: Record<string, string> = { Accept: "text/event-stream" };
    const after = this.target.resumeAfter();
    if (after !== null) headers["Last-Event-ID"] = String(after);
    const options = { query: this.target.query, headers, signal };
    const token = await this.tokens.current();
    const path = `/database${segments(this.target.schema)}/changes`;
    const response = await this.http.open("GET", path, options, token);
    if (response.status !== 401 || token === null) return response;
    await response.body?.cancel();
    return this.http.open("GET", path, options, await this.tokens.rejected(token));
  }

  private async read(body: ReadableStream<Uint8Array>): Promise<void> {
    const reader = body.getReader();
    const decoder = new TextDecoder();
    let buffered = "";
    let frame: Frame = {};
    for (;;) {
      const { done, value } = await reader.read();
      if (done) return;
      buffered += decoder.decode(value, { stream: true });
      let end: number;
      while ((end = buffered.indexOf("\n")) >= 0) {
        const line = buffered.slice(0, end).replace(/\r$/, "");
        buffered = buffered.slice(end + 1);
        if (line === "") {
          this.dispatch(frame);
          frame = {};
        } else if (!line.startsWith(":")) {
          addField(frame, line);
        }
      }
    }
  }

  private dispatch(frame: Frame): void {
    if (frame.data === undefined || frame.id === undefined) return;
    let document: unknown;
    try {
      document = JSON.parse(frame.data);
    } catch {
      return; // a frame cut by a dropped connection: the reconnect replays it
    }
    const change = wireChange({ eventId: Number(frame.id), event: frame.event, schema: this.target.schema, document });
    if (change !== null) this.target.deliver(change);
  }
}

interface Frame {
  id?: string;
  event?: string;
  data?: string;
}

function addField(frame: Frame, line: string): void {
  const colon = line.indexOf(":");
  const name = colon < 0 ? line : line.slice(0, colon);
  const value = colon < 0 ? "" : line.slice(colon + 1).replace(/^ /, "");
  if (name === "id") frame.id = value;
  else if (name === "event") frame.event = value;
  else if (name === "data") frame.data = frame.data === undefined ? value : `${frame.data}\n${value}`;
}

async function failure(response: Response): Promise<TrellisError> {
  const text = await response.text().catch(() => "");
  let body: unknown = text;
  try {
    body = JSON.parse(text);
  } catch {
    // not JSON: the text is the message
  }
  return errorFrom(response.status, body, text);
}
