/**
 * Dashboard login state: the operator proves they hold GATEWAY_TOKEN once (constant-time
 * compare), and gets a signed, HttpOnly, SameSite=Strict cookie `<expiresAt>.<nonce>` that
 * expires after LOGIN_TTL_MS. The cookie's signing key and every CSRF token are HMACs keyed by
 * GATEWAY_TOKEN itself, so rotating the token logs everyone out and voids every open form.
 * State-changing forms carry a CSRF token bound to the login cookie's value.
 */
import type { Context } from "hono";
import { deleteCookie, getSignedCookie, setSignedCookie } from "hono/cookie";
import { equalsSecret, hmacHex, safeEqual } from "../auth/signature";

export const LOGIN_COOKIE = "switchboard_ui";
export const LOGIN_TTL_MS = 12 * 60 * 60 * 1000;
export const CSRF_FIELD = "_csrf";
const COOKIE_PATH = "/ui";

export function operatorToken(env: Env): string | undefined {
  const value = (env as unknown as Record<string, unknown>).GATEWAY_TOKEN;
  return typeof value === "string" && value !== "" ? value : undefined;
}

/** The key the login cookie is signed with: derived from the token, never the token itself. */
function cookieKey(token: string): Promise<string> {
  return hmacHex(token, "switchboard dashboard login cookie v1");
}

/** The CSRF token of a login: bound to the cookie value, so it dies with the login. */
export function csrfTokenFor(token: string, cookieValue: string): Promise<string> {
  return hmacHex(token, `switchboard dashboard csrf v1\n${cookieValue}`);
}

export function tokenMatches(given: string, token: string): boolean {
  return equalsSecret(given, token);
}

function isHttps(c: Context): boolean {
  return new URL(c.req.url).protocol === "https:";
}

/** Sets the login cookie; returns its value (what the CSRF token is bound to). */
export async function startLogin(c: Context, token: string, now = Date.now()): Promise<string> {
  const expiresAt = now + LOGIN_TTL_MS;
  const value = `${expiresAt}.${crypto.randomUUID()}`;
  await setSignedCookie(c, LOGIN_COOKIE, value, await cookieKey(token), {
    path: COOKIE_PATH,
    httpOnly: true,
    secure: isHttps(c),
    sameSite: "Strict",
    maxAge: Math.floor(LOGIN_TTL_MS / 1000),
    expires: new Date(expiresAt),
  });
  return value;
}

export function endLogin(c: Context): void {
  deleteCookie(c, LOGIN_COOKIE, { path: COOKIE_PATH, secure: isHttps(c) });
}

/** The value of a valid, unexpired login cookie, or undefined. */
export async function currentLogin(c: Context, token: string, now = Date.now()): Promise<string | undefined> {
  const value = await getSignedCookie(c, await cookieKey(token), LOGIN_COOKIE);
  if (!value) return undefined;
  const expiresAt = Number(value.slice(0, value.indexOf(".")));
  return Number.isFinite(expiresAt) && expiresAt > now ? value : undefined;
}

/** Whether a submitted CSRF token is the one of this login (constant time). */
export async function csrfMatches(token: string, cookieValue: string, given: unknown): Promise<boolean> {
  if (typeof given !== "string" || given === "") return false;
  return safeEqual(given, await csrfTokenFor(token, cookieValue));
}

export const HOME = "/ui/sessions";

/**
 * A post-login or post-action destination: a path of the dashboard (with its query), never
 * another origin or another part of the gateway; anything else is the sessions page.
 */
export function safeNext(next: unknown): string {
  if (typeof next !== "string" || next.length > 2000) return HOME;
  if (!/^\/ui(\/|\?|$)/.test(next) || /[\\\s]/.test(next)) return HOME;
  const url = new URL(next, "http://dashboard.invalid");
  if (url.origin !== "http://dashboard.invalid" || !/^\/ui(\/|$)/.test(url.pathname)) return HOME;
  if (url.pathname.startsWith("/ui/login")) return HOME;
  return `${url.pathname}${url.search}`;
}
