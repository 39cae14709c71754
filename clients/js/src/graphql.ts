/** `t.graphql(query, variables)`: the data, or a TrellisError made of the first GraphQL error (its
 * `extensions` carry the server's name, status and field errors). */
import { errorFrom, isRecord } from "./errors.js";
import type { Http } from "./http.js";

export type GraphqlVariables = Record<string, unknown>;

export async function graphql<D>(http: Http, query: string, variables?: GraphqlVariables): Promise<D> {
  const answer = await http.send("POST", "/graphql", { body: variables === undefined ? { query } : { query, variables } });
  const body = isRecord(answer.body) ? answer.body : {};
  const errors = Array.isArray(body["errors"]) ? body["errors"] : [];
  const first: unknown = errors[0];
  if (isRecord(first)) {
    const extensions = isRecord(first["extensions"]) ? first["extensions"] : {};
    const status = typeof extensions["status"] === "number" ? extensions["status"] : answer.status >= 400 ? answer.status : 400;
    return Promise.reject(
      errorFrom(status, {
        name: typeof extensions["code"] === "string" ? extensions["code"] : "GRAPHQL_ERROR",
        status,
        message: typeof first["message"] === "string" ? first["message"] : "GraphQL error",
        errors: extensions["errors"],
      }),
    );
  }
  if (answer.status >= 400) throw errorFrom(answer.status, answer.body);
  return body["data"] as D;
}
