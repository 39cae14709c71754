/** Reading (never verifying: the server does) the times inside an access token, to renew it in time. */

interface Claims {
  exp?: number;
  iat?: number;
  sid?: string;
}

const MARGIN_MS = 30_000;

function base64UrlDecode(part: string): string {
  const base64 = part.replace(/-/g, "+").replace(/_/g, "/");
  const padded = base64 + "=".repeat((4 - (base64.length % 4)) % 4);
  const bytes = Uint8Array.from(atob(padded), (char) => char.charCodeAt(0));
  return new TextDecoder().decode(bytes);
}

export function claimsOf(token: string): Claims {
  const payload = token.split(".")[1];
  if (payload === undefined) return {};
  try {
    const parsed: unknown = JSON.parse(base64UrlDecode(payload));
    return typeof parsed === "object" && parsed !== null ? (parsed as Claims) : {};
  } catch {
    return {};
  }
}

/** True when the token has expired or will within the renewal margin: 30 s, or a quarter of its
 * lifetime for short-lived tokens. A token without `exp` never expires here (the server's 401 decides). */
export function expiresSoon(token: string, now: number = Date.now()): boolean {
  const { exp, iat } = claimsOf(token);
  if (typeof exp !== "number") return false;
  const lifetime = typeof iat === "number" ? (exp - iat) * 1000 : 4 * MARGIN_MS;
  return exp * 1000 - Math.min(MARGIN_MS, lifetime / 4) <= now;
}
