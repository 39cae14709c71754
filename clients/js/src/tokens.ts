/** The signed-in session: its tokens, kept in the storage option, renewed before they expire and after a
 * 401 — once, however many calls are waiting — and across browser tabs without two tabs rotating the same
 * refresh token (the server would take the second use as a stolen token and end the session). */
import { TrellisError } from "./errors.js";
import { expiresSoon } from "./jwt.js";
import { type StorageLike, writeJson } from "./persistence.js";
import type { TokenPair, User } from "./types.js";

export interface Session extends TokenPair {
  user: User | null;
}

export type AuthEvent = "SIGNED_IN" | "SIGNED_OUT" | "TOKEN_REFRESHED" | "USER_UPDATED";
export type AuthListener = (event: AuthEvent, user: User | null) => void;

/** Exchanges a refresh token for a new pair (`POST /authentication/renew`). */
export type Renew = (refreshToken: string) => Promise<TokenPair>;

export class Tokens {
  private session: Session | null = null;
  private renewing: Promise<string | null> | null = null;
  private readonly listeners = new Set<AuthListener>();
  /** Resolved once the stored session has been read. */
  readonly ready: Promise<void>;

  constructor(
    private readonly storage: StorageLike,
    private readonly key: string,
    private readonly renew: Renew,
  ) {
    const stored = storage.getItem(key);
    this.ready =
      typeof stored === "string" || stored === null
        ? Promise.resolve(this.adopt(parse(stored), null))
        : stored.then((text) => this.adopt(parse(text), null));
    this.followOtherTabs();
  }

  get user(): User | null {
    return this.session?.user ?? null;
  }

  get userId(): string | null {
    return this.session?.userId ?? null;
  }

  onChange(listener: AuthListener): () => void {
    this.listeners.add(listener);
    return () => void this.listeners.delete(listener);
  }

  /** The access token to send now (renewed first when it is about to expire), or null when signed out. */
  async current(): Promise<string | null> {
    await this.ready;
    if (this.renewing !== null) return this.renewing;
    const session = this.session;
    if (session === null) return null;
    return expiresSoon(session.accessToken) ? this.refresh() : session.accessToken;
  }

  /** The server refused `used` with a 401: the token to retry with, or null when there is none (signed out).
   * Calls that were refused together share one renew; a call refused after it finished takes its result. */
  async rejected(used: string): Promise<string | null> {
    if (this.renewing !== null) return this.renewing;
    const session = this.session;
    if (session === null) return null;
    return session.accessToken !== used ? session.accessToken : this.refresh();
  }

  /** Renew now (one renew at a time in this client, and across tabs sharing the storage). */
  refresh(): Promise<string | null> {
    if (this.renewing === null) {
      this.renewing = withTabLock(`trellis-renew ${this.key}`, () => this.renewOnce()).finally(() => {
        this.renewing = null;
      });
    }
    return this.renewing;
  }

  async signedIn(pair: TokenPair, user: User | null): Promise<void> {
    await this.ready;
    await this.store({ ...pair, user }, "SIGNED_IN");
  }

  async userChanged(user: User): Promise<void> {
    if (this.session === null || this.session.userId !== user._id) return;
    await this.store({ ...this.session, user }, "USER_UPDATED");
  }

  async signedOut(): Promise<void> {
    await this.ready;
    if (this.session === null) return;
    await this.store(null, "SIGNED_OUT");
  }

  private async renewOnce(): Promise<string | null> {
    const mine = this.session;
    if (mine === null) return null;
    // Another tab (or client on the same storage) may have renewed while this one waited for the lock.
    const stored = parse(await this.storage.getItem(this.key));
    if (stored !== null && stored.refreshToken !== mine.refreshToken && !expiresSoon(stored.accessToken)) {
      this.adopt(stored, "TOKEN_REFRESHED");
      return stored.accessToken;
    }
    let pair: TokenPair;
    try {
      pair = await this.renew(mine.refreshToken);
    } catch (error) {
      if (error instanceof TrellisError && (error.status === 401 || error.status === 403)) {
        await this.store(null, "SIGNED_OUT"); // the session ended (signed out elsewhere, blocked, expired)
        return null;
      }
      throw error;
    }
    await this.store({ ...pair, user: mine.user }, "TOKEN_REFRESHED");
    return pair.accessToken;
  }

  private async store(session: Session | null, event: AuthEvent): Promise<void> {
    this.adopt(session, event);
    await writeJson(this.storage, this.key, session);
  }

  private adopt(session: Session | null, event: AuthEvent | null): void {
    this.session = session;
    if (event === null) return;
    for (const listener of this.listeners) {
      try {
        listener(event, this.user);
      } catch (error) {
        queueMicrotask(() => {
          throw error; // a listener's bug is reported, not turned into the caller's failure
        });
      }
    }
  }

  /** Another tab signed in, out or renewed: take its session (browsers with the default localStorage). */
  private followOtherTabs(): void {
    if (typeof window === "undefined" || typeof window.addEventListener !== "function") return;
    let local: Storage | undefined;
    try {
      local = window.localStorage;
    } catch {
      return;
    }
    if (this.storage !== local) return;
    window.addEventListener("storage", (event: StorageEvent) => {
      if (event.key !== this.key) return;
      const next = parse(event.newValue);
      const before = this.session;
      if (next?.accessToken === before?.accessToken) return;
      const kind: AuthEvent =
        next === null ? "SIGNED_OUT" : before !== null && before.userId === next.userId ? "TOKEN_REFRESHED" : "SIGNED_IN";
      this.adopt(next, kind);
    });
  }
}

function parse(text: string | null): Session | null {
  if (text === null) return null;
  try {
    const value: unknown = JSON.parse(text);
    if (typeof value !== "object" || value === null) return null;
    const session = value as Partial<Session>;
    if (typeof session.accessToken !== "string" || typeof session.refreshToken !== "string") return null;
    if (typeof session.userId !== "string") return null;
    return { accessToken: session.accessToken, refreshToken: session.refreshToken, userId: session.userId, user: session.user ?? null };
  } catch {
    return null;
  }
}

/** Runs `task` holding a lock shared by every tab of this origin (the Web Locks API), or just runs it where
 * there are no tabs (Node) or no such API. */
async function withTabLock<T>(name: string, task: () => Promise<T>): Promise<T> {
  const locks = typeof navigator === "undefined" ? undefined : (navigator as Partial<Navigator>).locks;
  if (locks === undefined) return task();
  return await locks.request(name, task);
}

