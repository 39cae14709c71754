/** Sharing one document of a schema under access control: `collection.grants(id)`. */
import { type Http, segments } from "./http.js";

/** A subject (`User:<id>`, `Team:<id>`, `User:*`, `*`) holding a relation (`owner`, `editor`, `reader`…). */
export interface Grant {
  subject: string;
  relation: string;
}

export interface GrantRecord extends Grant {
  /** `<Schema>:<documentId>` */
  resource: string;
}

export class Grants {
  private readonly path: string;

  constructor(
    private readonly http: Http,
    schema: string,
    id: string,
  ) {
    this.path = `/database${segments(schema, id)}/grants`;
  }

  /** Who holds what on the document (needs `read`). */
  list(): Promise<{ grants: Grant[]; count: number }> {
    return this.http.request("GET", this.path);
  }

  /** Grant `relation` to `subject` (needs `share`). */
  add(subject: string, relation: string): Promise<GrantRecord> {
    return this.http.request("POST", this.path, { body: { subject, relation } });
  }

  /** Take it back (needs `share`). */
  remove(subject: string, relation: string): Promise<GrantRecord> {
    return this.http.request("DELETE", this.path, { query: { subject, relation } });
  }
}
