/** `t.functions.call(name, params)`: a function of the server's functions folder (`POST /functions/{name}`). */
import type { Http } from "./http.js";
import { segments } from "./http.js";

export class Functions {
  constructor(private readonly http: Http) {}

  /** The function's result; its `Reject` (or any refusal) is a TrellisError with the server's fields. */
  async call<R = unknown>(name: string, params: Record<string, unknown> = {}): Promise<R> {
    const answer = await this.http.request<{ result: R }>("POST", `/functions${segments(name)}`, { body: params });
    return answer.result;
  }
}
