import { createExecutionContext } from "cloudflare:test";
import { env, exports } from "cloudflare:workers";
import { afterEach, describe, expect, it, vi } from "vitest";
import { app } from "../../src/http/app";
import { UI_PAGES as PAGES } from "../ui-pages";
import { seedSessions, sessionRow } from "./rpc-support";
import { TOKEN } from "./support";

const ORIGIN = "http://gw.test";

function send(path: string, init: RequestInit = {}, e: Env = env) {
  return app.fetch(
    new Request(`${ORIGIN}${path}`, { redirect: "manual", ...init }),
    e,
    createExecutionContext(),
  );
}

function post(
  path: string,
  fields: Record<string, string>,
  opts: { cookie?: string; origin?: string | null } = {},
) {
  const headers: Record<string, string> = { "content-type": "application/x-www-form-urlencoded" };
  if (opts.origin !== null) headers.origin = opts.origin ?? ORIGIN;
  if (opts.cookie) headers.cookie = opts.cookie;
  return send(path, { method: "POST", headers, body: new URLSearchParams(fields).toString() });
}

/** Logs in; returns the cookie header to send and the page's CSRF token. */
async function login(): Promise<{ cookie: string; csrf: string }> {
  const res = await post("/ui/login", { token: TOKEN, next: "/ui/sessions" });
  expect(res.status).toBe(303);
  const cookie = (res.headers.get("set-cookie") ?? "").split(";")[0] ?? "";
  const page = await send("/ui/sessions", { headers: { cookie } });
  expect(page.status).toBe(200);
  const csrf = /name="_csrf" value="([0-9a-f]+)"/.exec(await page.text())?.[1];
  expect(csrf).toMatch(/^[0-9a-f]{64}$/);
  return { cookie, csrf: csrf ?? "" };
}

afterEach(() => {
  vi.useRealTimers();
});

describe("dashboard /ui: access", () => {
  it("answers 503 naming GATEWAY_TOKEN on every page while the secret is unset", async () => {
    const closed = { ...env, GATEWAY_TOKEN: "" } as Env;
    for (const path of [...PAGES, "/ui/login"]) {
      const res = await send(path, {}, closed);
      expect(res.status, path).toBe(503);
      expect(await res.text()).toContain("GATEWAY_TOKEN");
    }
    expect((await send("/ui/login", { method: "POST" }, closed)).status).toBe(503);
  });

  it("redirects every page to the login form, keeping the wanted page in next", async () => {
    for (const path of PAGES) {
      const res = await send(path);
      expect(res.status, path).toBe(303);
      const location = new URL(res.headers.get("location") ?? "", ORIGIN);
      expect(location.pathname).toBe("/ui/login");
      expect(location.searchParams.get("next")).toBe(path === "/ui" ? "/ui" : path);
    }
    const form = await send("/ui/login?next=%2Fui%2Fruns%3Fstatus%3Derror");
    expect(form.status).toBe(200);
    expect(await form.text()).toContain('name="next" value="/ui/runs?status=error"');
  });

  it("refuses a wrong token with 401 and the form again, sets no cookie", async () => {
    const res = await post("/ui/login", { token: "not-the-token", next: "/ui/runs" });
    expect(res.status).toBe(401);
    expect(res.headers.get("set-cookie")).toBeNull();
    const html = await res.text();
    expect(html).toContain("That is not the operator token");
    expect(html).toContain('name="next" value="/ui/runs"');
  });

  it("logs in with the token: a signed HttpOnly SameSite=Strict cookie with an expiry, then the page asked for", async () => {
    const res = await post("/ui/login", { token: TOKEN, next: "/ui/runs?status=error" });
    expect(res.status).toBe(303);
    expect(res.headers.get("location")).toBe("/ui/runs?status=error");
    const cookie = res.headers.get("set-cookie") ?? "";
    expect(cookie).toMatch(/^switchboard_ui=\d+\.[0-9a-f-]+\.[^;]+;/);
    expect(cookie).toMatch(/Max-Age=43200/);
    expect(cookie).toMatch(/Expires=/);
    expect(cookie).toMatch(/Path=\/ui/);
    expect(cookie).toMatch(/HttpOnly/);
    expect(cookie).toMatch(/SameSite=Strict/);
    expect(cookie).not.toMatch(/Secure/);
    const https = await app.fetch(
      new Request("https://gw.test/ui/login", {
        method: "POST",
        headers: { "content-type": "application/x-www-form-urlencoded", origin: "https://gw.test" },
        body: new URLSearchParams({ token: TOKEN }).toString(),
      }),
      env,
      createExecutionContext(),
    );
    expect(https.headers.get("set-cookie")).toMatch(/Secure/);
  });

  it.each([
    ["https://evil.test/ui/sessions"],
    ["//evil.test/ui"],
    ["/ui/../rpc/status"],
    ["/uix"],
    ["/ui\\\\evil"],
    ["/ui/login?next=/ui"],
  ])("never redirects after login outside the dashboard (next=%s)", async (next) => {
    const res = await post("/ui/login", { token: TOKEN, next });
    expect(res.headers.get("location")).toBe("/ui/sessions");
  });

  it("shows pages with the login cookie, and not with a tampered or foreign one", async () => {
    const { cookie } = await login();
    await seedSessions([sessionRow({ key: "agent:main:ui-auth", agentId: "main" })]);
    for (const path of PAGES.slice(1)) {
      const res = await send(path.replace("agent:main:main", "agent:main:ui-auth"), { headers: { cookie } });
      expect(res.status, path).toBe(200);
      expect(res.headers.get("content-type")).toMatch(/^text\/html/);
      expect(res.headers.get("content-security-policy")).toContain("script-src 'self'");
    }
    // The session page of an unknown key is a 404 page, still past the login.
    expect((await send("/ui/session?key=agent:main:nobody", { headers: { cookie } })).status).toBe(404);
    const tampered = cookie.replace(/=(\d)/, (_m, d: string) => `=${(Number(d) + 1) % 10}`);
    expect((await send("/ui/sessions", { headers: { cookie: tampered } })).status).toBe(303);
    // Rotating GATEWAY_TOKEN logs everyone out.
    const rotated = { ...env, GATEWAY_TOKEN: "another-token" } as Env;
    expect((await send("/ui/sessions", { headers: { cookie } }, rotated)).status).toBe(303);
  });

  it("a login expires after 12 hours", async () => {
    const { cookie } = await login();
    vi.useFakeTimers({ toFake: ["Date"] });
    vi.setSystemTime(Date.now() + 12 * 3600_000 + 1000);
    expect((await send("/ui/sessions", { headers: { cookie } })).status).toBe(303);
  });
});

describe("dashboard /ui: forms", () => {
  it("refuses a state-changing POST without the CSRF token (403) and changes nothing", async () => {
    await seedSessions([sessionRow({ key: "agent:main:ui-csrf", agentId: "main", label: "before" })]);
    const { cookie, csrf } = await login();
    const missing = await post(
      "/ui/session/patch",
      { key: "agent:main:ui-csrf", label: "after" },
      { cookie },
    );
    expect(missing.status).toBe(403);
    expect(await missing.text()).toContain("CSRF");
    const wrong = await post(
      "/ui/session/patch",
      { key: "agent:main:ui-csrf", label: "after", _csrf: "0".repeat(64) },
      { cookie },
    );
    expect(wrong.status).toBe(403);
    const other = await login();
    const foreign = await post(
      "/ui/session/patch",
      { key: "agent:main:ui-csrf", label: "after", _csrf: other.csrf },
      { cookie },
    );
    expect(foreign.status).toBe(403);
    const page = await send("/ui/session?key=agent:main:ui-csrf", { headers: { cookie } });
    expect(await page.text()).toContain('name="label" value="before"');
    expect(csrf).not.toBe(other.csrf);
  });

  it("refuses a form posted from another origin (403), even with the token", async () => {
    const { cookie, csrf } = await login();
    const res = await post(
      "/ui/session/reset",
      { key: "agent:main:main", _csrf: csrf },
      { cookie, origin: "https://evil.test" },
    );
    expect(res.status).toBe(403);
  });

  it("applies a patch with the CSRF token and comes back to the session with a notice", async () => {
    await seedSessions([sessionRow({ key: "agent:main:ui-patch", agentId: "main" })]);
    const { cookie, csrf } = await login();
    const res = await post(
      "/ui/session/patch",
      { key: "agent:main:ui-patch", label: "patched-label", model: "", sendPolicy: "deny", _csrf: csrf },
      { cookie },
    );
    expect(res.status).toBe(303);
    expect(res.headers.get("location")).toBe("/ui/session?key=agent%3Amain%3Aui-patch&notice=patched");
    const entry = await exports.default.fetch(`${ORIGIN}/rpc/sessions.get`, {
      method: "POST",
      headers: { authorization: `Bearer ${TOKEN}` },
      body: JSON.stringify({ key: "agent:main:ui-patch" }),
    });
    expect(((await entry.json()) as { payload: Record<string, unknown> }).payload).toMatchObject({
      label: "patched-label",
      sendPolicy: "deny",
    });
  });

  it("a send form submitted twice (same submitId) queues one run", async () => {
    const { cookie, csrf } = await login();
    const page = await send("/ui/sessions", { headers: { cookie } });
    const submitId = /name="submitId" value="([0-9a-f-]{36})"/.exec(await page.text())?.[1] ?? "";
    expect(submitId).not.toBe("");
    const fields = { message: "only once from the form", submitId, _csrf: csrf };
    const first = await post("/ui/agent", fields, { cookie });
    const second = await post("/ui/agent", fields, { cookie });
    expect(first.status).toBe(303);
    expect(second.headers.get("location")).toBe(first.headers.get("location"));
    expect(first.headers.get("location")).toMatch(/[?&]run=[0-9a-f-]{36}/);
  });

  it("shows an RPC refusal as a page with its status", async () => {
    const { cookie, csrf } = await login();
    const res = await post("/ui/session/reset", { key: "agent:main:nobody-here", _csrf: csrf }, { cookie });
    expect(res.status).toBe(404);
    expect(await res.text()).toContain("session not found: agent:main:nobody-here");
    const bad = await send("/ui/sessions?kind=sideways", { headers: { cookie } });
    expect(bad.status).toBe(400);
    expect(await bad.text()).toContain("kinds");
  });

  it("logs out with the CSRF token: the cookie is cleared", async () => {
    const { cookie, csrf } = await login();
    expect((await post("/ui/logout", {}, { cookie })).status).toBe(403);
    const res = await post("/ui/logout", { _csrf: csrf }, { cookie });
    expect(res.status).toBe(303);
    expect(res.headers.get("location")).toBe("/ui/login");
    expect(res.headers.get("set-cookie")).toMatch(/^switchboard_ui=;.*Max-Age=0/);
  });
});
