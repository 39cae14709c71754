/** A change as a subscriber receives it, whichever transport carried it. */
import { isRecord } from "./errors.js";
import type { DocumentOf } from "./types.js";

export type ChangeKind = "create" | "update" | "delete" | "enter" | "leave";

interface ChangeBase {
  /** The change's number in the server's event log: increasing, in commit order. */
  eventId: number;
  schema: string;
  /** When it committed (ISO 8601; Socket.IO only). */
  at?: string;
}

/** `create`, `update`, `enter`: the whole document after the change. `delete`: its `_id`. `leave`: the
 * document, or only its `_id` when it left because the subscriber may no longer read it. */
export type Change<T> =
  | (ChangeBase & { event: "create" | "update" | "enter"; document: DocumentOf<T> })
  | (ChangeBase & { event: "delete"; document: { _id: string } })
  | (ChangeBase & { event: "leave"; document: Partial<DocumentOf<T>> & { _id: string } });

/** What both transports hand over: checked enough to be safe to route and order. */
export interface WireChange {
  eventId: number;
  event: ChangeKind;
  schema: string;
  document: { _id: string };
  at?: string;
}

const KINDS: ReadonlySet<string> = new Set<ChangeKind>(["create", "update", "delete", "enter", "leave"]);

export function wireChange(value: unknown): WireChange | null {
  if (!isRecord(value)) return null;
  const { eventId, event, schema, document, at } = value;
  if (typeof eventId !== "number" || typeof event !== "string" || !KINDS.has(event)) return null;
  if (typeof schema !== "string" || !isRecord(document) || typeof document["_id"] !== "string") return null;
  const change: WireChange = { eventId, event: event as ChangeKind, schema, document: document as { _id: string } };
  if (typeof at === "string") change.at = at;
  return change;
}
