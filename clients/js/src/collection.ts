/** The documents of one schema: `t.collection<Task>("Task")`. */
import { Grants } from "./grants.js";
import { type Http, segments } from "./http.js";
import { type Names, type Where, appendIfSet, appendWhere, names, whereJson } from "./query.js";
import type { Change, ChangeKind, Live, Unsubscribe } from "./subscribe.js";
import type { TrellisError } from "./errors.js";
import type { Deleted, DocumentOf, NewDocument } from "./types.js";

export interface ListOptions<T> {
  where?: Where<T>;
  /** `"-price,title"` or `["-price", "title"]`. */
  sort?: Names;
  skip?: number;
  /** 1 to 1000 (default 25). */
  limit?: number;
  /** false: no total (the server skips counting). */
  count?: boolean;
  /** Full-text words over the schema's searchable fields. */
  search?: string;
  /** Relation fields to expand, dots for nesting (`"author,author.company"`). */
  populate?: Names;
  select?: Names;
  /** `Team:<id>`: act as that team (access control). */
  scope?: string;
  signal?: AbortSignal;
}

export interface ListResult<T> {
  documents: DocumentOf<T>[];
  /** Every match, before `skip` and `limit`. */
  count: number;
}

export interface GetOptions {
  populate?: Names;
  select?: Names;
  scope?: string;
}

export interface WriteOptions {
  /** `Team:<id>`: the team, not the caller, owns what is created (and acts on the rest). */
  scope?: string;
}

export interface AggregateOptions<T> {
  /** Up to 5 fields; a Date field may be bucketed: `"createdAt:week"`. None: one group of every match. */
  groupBy?: Names;
  count?: boolean;
  sum?: Names;
  avg?: Names;
  min?: Names;
  max?: Names;
  /** `count`, `-count`, a group field, or `-sum.amount`. */
  sort?: Names;
  limit?: number;
  search?: string;
  where?: Where<T>;
  scope?: string;
}

export interface AggregateGroup {
  key: Record<string, unknown>;
  count?: number;
  sum?: Record<string, number>;
  avg?: Record<string, number | null>;
  min?: Record<string, number | string | null>;
  max?: Record<string, number | string | null>;
}

export interface AggregateResult {
  groups: AggregateGroup[];
  /** Groups before `limit`. */
  count: number;
}

export interface SubscribeOptions<T> {
  where?: Where<T>;
  search?: string;
  /** Some of create, update, delete, enter, leave (default: all). */
  events?: ChangeKind[];
  /** A failure after the subscription started (it can no longer resume, e.g. `RESYNC_REQUIRED`). */
  onError?: (error: TrellisError) => void;
}

export class Collection<T extends object = Record<string, unknown>> {
  private readonly path: string;

  constructor(
    private readonly http: Http,
    private readonly live: Live,
    readonly name: string,
  ) {
    this.path = `/database${segments(name)}`;
  }

  list(options?: ListOptions<T> & { count?: true }): Promise<ListResult<T>>;
  list(options: ListOptions<T> & { count: false }): Promise<{ documents: DocumentOf<T>[] }>;
  async list(options: ListOptions<T> = {}): Promise<{ documents: DocumentOf<T>[]; count?: number }> {
    const query = new URLSearchParams();
    appendWhere(query, options.where);
    appendIfSet(query, "skip", options.skip);
    appendIfSet(query, "limit", options.limit);
    if (options.sort !== undefined) query.set("sort", names(options.sort));
    if (options.count === false) query.set("count", "none");
    appendIfSet(query, "search", options.search);
    if (options.populate !== undefined) query.set("populate", names(options.populate));
    if (options.select !== undefined) query.set("select", names(options.select));
    appendIfSet(query, "scope", options.scope);
    return this.http.request("GET", this.path, options.signal === undefined ? { query } : { query, signal: options.signal });
  }

  async get(id: string, options: GetOptions = {}): Promise<DocumentOf<T>> {
    const query = new URLSearchParams();
    if (options.populate !== undefined) query.set("populate", names(options.populate));
    if (options.select !== undefined) query.set("select", names(options.select));
    appendIfSet(query, "scope", options.scope);
    return this.http.request("GET", this.path + segments(id), { query });
  }

  create(data: NewDocument<T>, options: WriteOptions = {}): Promise<DocumentOf<T>> {
    return this.http.request("POST", this.path, { body: data, query: { scope: options.scope } });
  }

  /** All or nothing, in one transaction (1 to 1000 documents). */
  async createMany(docs: NewDocument<T>[], options: WriteOptions = {}): Promise<DocumentOf<T>[]> {
    const created = await this.http.request<{ docs: DocumentOf<T>[] }>("POST", `${this.path}/many`, {
      body: { docs },
      query: { scope: options.scope },
    });
    return created.docs;
  }

  /** Change some fields (PATCH); `null` removes an optional field. */
  update(id: string, changes: Partial<NewDocument<T>>, options: WriteOptions = {}): Promise<DocumentOf<T>> {
    return this.http.request("PATCH", this.path + segments(id), { body: changes, query: { scope: options.scope } });
  }

  /** Replace the whole document (PUT): fields left out are gone, defaults apply. */
  replace(id: string, doc: NewDocument<T>, options: WriteOptions = {}): Promise<DocumentOf<T>> {
    return this.http.request("PUT", this.path + segments(id), { body: doc, query: { scope: options.scope } });
  }

  delete(id: string, options: WriteOptions = {}): Promise<Deleted> {
    return this.http.request("DELETE", this.path + segments(id), { query: { scope: options.scope } });
  }

  async aggregate(options: AggregateOptions<T> = {}): Promise<AggregateResult> {
    const query = new URLSearchParams();
    for (const key of ["groupBy", "sum", "avg", "min", "max", "sort"] as const) {
      const value = options[key];
      if (value !== undefined) query.set(key, names(value));
    }
    if (options.count === true) query.set("count", "true");
    appendIfSet(query, "limit", options.limit);
    appendIfSet(query, "search", options.search);
    if (options.where !== undefined) query.set("where", JSON.stringify(whereJson(options.where)));
    appendIfSet(query, "scope", options.scope);
    return this.http.request("GET", `${this.path}/aggregate`, { query });
  }

  /** Changes to the documents as they commit; resolves once the server has accepted the subscription.
   * After a dropped connection it resumes after the last change delivered: none is missed or repeated. */
  subscribe(options: SubscribeOptions<T>, callback: (change: Change<T>) => void): Unsubscribe {
    return this.live.subscribe<T>(this.name, options, callback);
  }

  /** Sharing of one document (schemas under access control). */
  grants(id: string): Grants {
    return new Grants(this.http, this.name, id);
  }
}
