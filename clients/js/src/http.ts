/** Calls to the server: `fetch` with the session's Bearer token, JSON in and out, and every failure turned
 * into a TrellisError. A 401 renews the session once and the call is sent again once. */
import { abortedError, errorFrom, networkError } from "./errors.js";
import type { Tokens } from "./tokens.js";

export type QueryValue = string | number | boolean | null | undefined;
export type Query = URLSearchParams | Record<string, QueryValue>;

export interface RequestOptions {
  query?: Query;
  /** Sent as JSON. */
  body?: unknown;
  /** Sent as multipart/form-data instead of `body`. */
  form?: FormData;
  headers?: Record<string, string>;
  signal?: AbortSignal;
  /** false: send no credential (default: the session's access token, when signed in). */
  auth?: boolean;
}

/** An answer whatever its status: `body` is the parsed JSON, the text, or null. */
export interface Answer {
  status: number;
  headers: Headers;
  body: unknown;
}

export type Fetch = typeof fetch;

export class Http {
  constructor(
    readonly baseUrl: string,
    private readonly tokens: Tokens,
    private readonly fetcher: Fetch,
  ) {}

  /** The answer's JSON; a TrellisError for any status from 400 up. */
  async request<T>(method: string, path: string, options: RequestOptions = {}): Promise<T> {
    const answer = await this.send(method, path, options);
    if (answer.status >= 400) {
      throw errorFrom(answer.status, answer.body, typeof answer.body === "string" ? answer.body : "");
    }
    return answer.body as T;
  }

  /** The answer, whatever its status (for routes whose errors have their own shape, such as GraphQL). */
  async send(method: string, path: string, options: RequestOptions = {}): Promise<Answer> {
    const token = options.auth === false ? null : await this.tokens.current();
    const answer = await this.once(method, path, options, token);
    if (answer.status !== 401 || token === null) return answer;
    const renewed = await this.tokens.rejected(token);
    return renewed === null ? answer : this.once(method, path, options, renewed);
  }

  /** The raw response of one attempt (a stream's body is left unread). */
  async open(method: string, path: string, options: RequestOptions, token: string | null): Promise<Response> {
    const headers: Record<string, string> = { Accept: "application/json", ...options.headers };
    let body: BodyInit | undefined;
    if (options.form !== undefined) {
      body = options.form;
    } else if (options.body !== undefined) {
      headers["Content-Type"] = "application/json";
      body = JSON.stringify(options.body);
    }
    if (token !== null) headers["Authorization"] = `Bearer ${token}`;
    const init: RequestInit = { method, headers };
    if (body !== undefined) init.body = body;
    if (options.signal !== undefined) init.signal = options.signal;
    try {
      return await this.fetcher(this.url(path, options.query), init);
    } catch (error) {
      throw options.signal?.aborted === true ? abortedError(error) : networkError(error);
    }
  }

  url(path: string, query?: Query): string {
    const params = query instanceof URLSearchParams ? query : toParams(query ?? {});
    const text = params.toString();
    return this.baseUrl + path + (text === "" ? "" : `?${text}`);
  }

  private async once(method: string, path: string, options: RequestOptions, token: string | null): Promise<Answer> {
    const response = await this.open(method, path, options, token);
    let text: string;
    try {
      text = await response.text();
    } catch (error) {
      throw options.signal?.aborted === true ? abortedError(error) : networkError(error);
    }
    return { status: response.status, headers: response.headers, body: parseBody(response, text) };
  }
}

function toParams(query: Record<string, QueryValue>): URLSearchParams {
  const params = new URLSearchParams();
  for (const [key, value] of Object.entries(query)) {
    if (value !== undefined && value !== null) params.append(key, String(value));
  }
  return params;
}

function parseBody(response: Response, text: string): unknown {
  if (text === "") return null;
  if ((response.headers.get("Content-Type") ?? "").includes("json")) {
    try {
      return JSON.parse(text);
    } catch {
      return text;
    }
  }
  return text;
}

/** `path` with each dynamic segment escaped: `segment("Task", id)` → `/Task/<id>`. */
export function segments(...parts: string[]): string {
  return parts.map((part) => `/${encodeURIComponent(part)}`).join("");
}
