/** Filters and list options → the query parameters of the list, changes and aggregate routes. */
import { TrellisError } from "./errors.js";
import type { DocumentOf } from "./types.js";

type Item<V> = V extends readonly (infer I)[] ? I : V;
type WithDates<I> = I extends string ? I | Date : I;
/** A value a filter compares with: the field's own type (an array field: one element); text fields (Dates are
 * ISO text) also take Date objects. */
export type FilterValue<V> = WithDates<NonNullable<Item<V>>>;

export interface Operators<V> {
  $eq?: FilterValue<V>;
  $ne?: FilterValue<V>;
  $lt?: FilterValue<V>;
  $lte?: FilterValue<V>;
  $gt?: FilterValue<V>;
  $gte?: FilterValue<V>;
  $in?: FilterValue<V>[];
  $nin?: FilterValue<V>[];
  /** Text: a case-insensitive substring; an array: holds the element. */
  $contains?: FilterValue<V>;
  $exists?: boolean;
}

/** `{price: {$lt: 10}, title: "x"}`: every condition holds. Live subscriptions and aggregates also take
 * `$and` / `$or` lists; a list takes `$and` only (its query string cannot say "or"). */
export type Where<T> = {
  [K in keyof DocumentOf<T>]?: FilterValue<DocumentOf<T>[K]> | Operators<DocumentOf<T>[K]>;
} & {
  $and?: Where<T>[];
  $or?: Where<T>[];
};

export type Names = string | readonly string[];

export function names(value: Names): string {
  return typeof value === "string" ? value : value.join(",");
}

function text(value: unknown, field: string): string {
  if (value instanceof Date) return value.toISOString();
  if (typeof value === "string" || typeof value === "number" || typeof value === "boolean") return String(value);
  throw invalid(`The filter on ${field} takes a string, number, boolean or Date`, field);
}

function invalid(message: string, field: string): TrellisError {
  return new TrellisError({ name: "INVALID_ARGUMENTS", status: 400, message, errors: { [field]: [message] } });
}

function isOperators(value: unknown): value is Record<string, unknown> {
  if (typeof value !== "object" || value === null || value instanceof Date || Array.isArray(value)) return false;
  const keys = Object.keys(value);
  return keys.length > 0 && keys.every((key) => key.startsWith("$"));
}

/** `where` as the list's query parameters (`price[$lt]=10`); `$or` cannot be said there. */
export function appendWhere(params: URLSearchParams, where: object | undefined): void {
  if (where === undefined) return;
  for (const [field, condition] of Object.entries(where)) {
    if (condition === undefined) continue;
    if (field === "$and") {
      for (const part of condition as object[]) appendWhere(params, part);
      continue;
    }
    if (field === "$or") {
      throw invalid("A list filter cannot use $or; use a subscription, an aggregate or GraphQL for it", "where.$or");
    }
    if (!isOperators(condition)) {
      params.append(field, text(condition, field));
      continue;
    }
    for (const [operator, value] of Object.entries(condition)) {
      if (value === undefined) continue;
      const key = `${field}[${operator}]`;
      const written = Array.isArray(value) ? value.map((item) => text(item, field)).join(",") : text(value, field);
      params.append(key, written);
    }
  }
}

/** `where` as JSON (subscriptions and aggregates take it as it is): Dates become ISO text. */
export function whereJson(where: object): unknown {
  return JSON.parse(JSON.stringify(where));
}

export function appendIfSet(params: URLSearchParams, key: string, value: string | number | boolean | undefined): void {
  if (value !== undefined) params.set(key, String(value));
}
