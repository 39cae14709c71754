/** Signing up, in and out: `t.auth`. The session's tokens live in the client's storage option and are
 * renewed by the client itself (see tokens.ts). */
import { TrellisError } from "./errors.js";
import type { Http } from "./http.js";
import { segments } from "./http.js";
import type { AuthListener, Tokens } from "./tokens.js";
import type { TokenPair, User } from "./types.js";

/** `twoFactor: true`: the password was right and a second factor is on; finish with `verifyTwoFactor(code)`. */
export type SignInResult = { twoFactor: false; user: User } | { twoFactor: true };

export interface SignUpResult {
  user: User;
  /** false when the server signs nobody in on registration (address verification required, or
   * `local.signInOnRegister` off): sign in once allowed. */
  signedIn: boolean;
}

interface Registered extends Partial<TokenPair> {
  user: User;
}

interface Challenge {
  twoFaRequired: true;
  twoFaToken: string;
}

export class Auth {
  private twoFaToken: string | null = null;

  constructor(
    private readonly http: Http,
    private readonly tokens: Tokens,
  ) {}

  /** The signed-in user, or null. */
  get user(): User | null {
    return this.tokens.user;
  }

  /** Called on every sign-in, sign-out, renewal and user update (in this tab or, in browsers, another);
   * returns a function that stops it. */
  onChange(listener: AuthListener): () => void {
    return this.tokens.onChange(listener);
  }

  async signUp(email: string, password: string): Promise<SignUpResult> {
    const registered = await this.http.request<Registered>("POST", "/authentication/local/new", {
      body: { email, password },
      auth: false,
    });
    const { accessToken, refreshToken, userId } = registered;
    if (accessToken === undefined || refreshToken === undefined || userId === undefined) {
      return { user: registered.user, signedIn: false };
    }
    await this.tokens.signedIn({ accessToken, refreshToken, userId }, registered.user);
    return { user: registered.user, signedIn: true };
  }

  async signIn(email: string, password: string): Promise<SignInResult> {
    const answer = await this.http.request<TokenPair | Challenge>("POST", "/authentication/local", {
      body: { email, password },
      auth: false,
    });
    if ("twoFaRequired" in answer) {
      this.twoFaToken = answer.twoFaToken;
      return { twoFactor: true };
    }
    return { twoFactor: false, user: await this.start(answer) };
  }

  /** The second step of a sign-in that answered `{twoFactor: true}`: an authenticator code, an SMS code or a
   * recovery code. */
  async verifyTwoFactor(code: string): Promise<User> {
    const twoFaToken = this.twoFaToken;
    if (twoFaToken === null) {
      throw new TrellisError({ name: "INVALID_ARGUMENTS", status: 400, message: "No sign-in is waiting for a second factor" });
    }
    const pair = await this.http.request<TokenPair>("POST", "/authentication/twoFa/authorize", {
      body: { twoFaToken, code },
      auth: false,
    });
    this.twoFaToken = null;
    return this.start(pair);
  }

  /** Sign in with an external provider (`google`, `github`, `microsoft`, or an OpenID Connect provider's
   * name): in a browser the page goes to the provider, which sends it back to the provider's `redirectUri`
   * with the tokens in the fragment (this SDK picks them up there). Returns the URL that starts it. */
  signInWithProvider(name: string): string {
    const url = `${this.http.baseUrl}/authentication/init${segments(name)}`;
    if (typeof window !== "undefined" && typeof window.location?.assign === "function") window.location.assign(url);
    return url;
  }

  /** Take the tokens a provider's redirect put in the URL fragment (`#accessToken=…&refreshToken=…&userId=…`)
   * and remove them from the address bar; null when there are none. Done on start in browsers. */
  async fromRedirect(href: string): Promise<User | null> {
    const hash = new URL(href).hash.replace(/^#/, "");
    const fields = new URLSearchParams(hash);
    const accessToken = fields.get("accessToken");
    const refreshToken = fields.get("refreshToken");
    const userId = fields.get("userId");
    if (accessToken === null || refreshToken === null || userId === null) return null;
    if (typeof window !== "undefined" && window.location?.href === href && typeof history !== "undefined") {
      history.replaceState(history.state, "", href.split("#")[0]);
    }
    return this.start({ accessToken, refreshToken, userId });
  }

  /** The user as the server has it now (also updates `user`). */
  async refreshUser(): Promise<User> {
    const user = await this.http.request<User>("GET", "/authentication/user");
    await this.tokens.userChanged(user);
    return user;
  }

  /** End the session on the server (its tokens stop working) and here. */
  async signOut(): Promise<void> {
    try {
      if (this.tokens.userId !== null) await this.http.request("POST", "/authentication/logout");
    } catch (error) {
      // Already ended on the server (401): signed out all the same.
      if (!(error instanceof TrellisError) || error.status !== 401) throw error;
    } finally {
      await this.tokens.signedOut();
    }
  }

  private async start(pair: TokenPair): Promise<User> {
    const user = await this.http.request<User>("GET", "/authentication/user", {
      headers: { Authorization: `Bearer ${pair.accessToken}` },
      auth: false,
    });
    await this.tokens.signedIn(pair, user);
    return user;
  }
}
