/**
 * The operator dashboard at `/ui` (SPEC §13 later surfaces), mounted by src/http/app.ts:
 * server-rendered HTML over the operator RPC methods. Order of the guards: the static assets
 * are public; every other path answers 503 naming GATEWAY_TOKEN while it is unset; POSTs must
 * come from this origin (Hono's `csrf()`); the login form is open; everything else needs a
 * valid login cookie (GETs are redirected to the login form with `next`) and, for a POST, the
 * login's CSRF token (403 without it).
 */
import { Hono } from "hono";
import { csrf as sameOrigin } from "hono/csrf";
import { HTTPException } from "hono/http-exception";
import { ConfigError } from "../config/load";
import { ApiError } from "../http/errors";
import { APP_JS, STYLE_CSS } from "./assets";
import {
  CSRF_FIELD,
  csrfMatches,
  csrfTokenFor,
  currentLogin,
  endLogin,
  operatorToken,
  safeNext,
  startLogin,
  tokenMatches,
} from "./auth";
import { field, readForm, type UiContext, type UiEnv } from "./context";
import { ErrorPage, LoginPage } from "./pages/login";
import { actions } from "./routes-actions";
import { pages } from "./routes-pages";

const CSP = [
  "default-src 'none'",
  "style-src 'self'",
  "script-src 'self'",
  "img-src 'self'",
  "connect-src 'self'",
  "form-action 'self'",
  "frame-ancestors 'none'",
  "base-uri 'none'",
].join("; ");

function loginUrl(next: string): string {
  return `/ui/login?${new URLSearchParams({ next })}`;
}

/** The dashboard page the request came from (same origin only), to link back to. */
function backLink(c: UiContext): string | undefined {
  const referer = c.req.header("referer");
  if (!referer || !URL.canParse(referer)) return undefined;
  const url = new URL(referer);
  return url.origin === new URL(c.req.url).origin ? safeNext(`${url.pathname}${url.search}`) : undefined;
}

function errorPage(
  c: UiContext,
  status: 400 | 401 | 403 | 404 | 409 | 413 | 429 | 500 | 503,
  title: string,
  message: string,
) {
  c.status(status);
  return c.html(<ErrorPage title={title} message={message} csrf={c.get("csrfToken")} back={backLink(c)} />);
}

export const ui = new Hono<UiEnv>();

ui.use("*", async (c, next) => {
  await next();
  c.header("content-security-policy", CSP);
  c.header("x-frame-options", "DENY");
  c.header("x-content-type-options", "nosniff");
  c.header("referrer-policy", "same-origin");
  if (!c.res.headers.has("cache-control")) c.header("cache-control", "no-store");
});

ui.get("/assets/style.css", (c) =>
  c.body(STYLE_CSS, 200, {
    "content-type": "text/css; charset=utf-8",
    "cache-control": "public, max-age=300",
  }),
);
ui.get("/assets/app.js", (c) =>
  c.body(APP_JS, 200, {
    "content-type": "text/javascript; charset=utf-8",
    "cache-control": "public, max-age=300",
  }),
);

ui.use("*", async (c, next) => {
  const token = operatorToken(c.env);
  if (!token) {
    c.status(503);
    return c.html(
      <ErrorPage
        title="Dashboard disabled"
        message="The dashboard is disabled until the secret GATEWAY_TOKEN is set (wrangler secret put GATEWAY_TOKEN, or .dev.vars locally)."
      />,
    );
  }
  c.set("token", token);
  await next();
});

ui.use("*", sameOrigin());

ui.get("/login", async (c) => {
  const next = safeNext(c.req.query("next"));
  if (await currentLogin(c, c.get("token"))) return c.redirect(next, 303);
  return c.html(<LoginPage next={next} />);
});

ui.post("/login", async (c) => {
  const form = await readForm(c);
  const next = safeNext(field(form, "next"));
  const given = form.token;
  if (typeof given !== "string" || !tokenMatches(given, c.get("token"))) {
    c.status(401);
    return c.html(
      <LoginPage
        next={next}
        error={given ? "That is not the operator token (GATEWAY_TOKEN)." : "Enter the operator token."}
      />,
    );
  }
  await startLogin(c, c.get("token"));
  return c.redirect(next, 303);
});

ui.use("*", async (c, next) => {
  const token = c.get("token");
  const login = await currentLogin(c, token);
  if (!login) {
    const url = new URL(c.req.url);
    return c.redirect(
      loginUrl(c.req.method === "GET" ? safeNext(`${url.pathname}${url.search}`) : "/ui/sessions"),
      303,
    );
  }
  c.set("login", login);
  c.set("csrfToken", await csrfTokenFor(token, login));
  if (c.req.method === "POST") {
    const form = await readForm(c);
    if (!(await csrfMatches(token, login, form[CSRF_FIELD]))) {
      return errorPage(
        c,
        403,
        "Form refused",
        "This form has no valid CSRF token (it is older than your login, or did not come from this dashboard). Reload the page and try again.",
      );
    }
  }
  await next();
});

ui.post("/logout", (c) => {
  endLogin(c);
  return c.redirect("/ui/login", 303);
});

ui.route("/", pages);
ui.route("/", actions);

ui.all("*", (c) =>
  errorPage(c, 404, "Not found", `There is no dashboard page at ${new URL(c.req.url).pathname}.`),
);

ui.onError((error, c) => {
  if (error instanceof HTTPException && error.status === 403) {
    return errorPage(c, 403, "Form refused", "This form was not sent from this dashboard's origin.");
  }
  if (error instanceof ApiError) {
    const status = ([400, 401, 403, 404, 409, 413, 429, 503] as const).find((s) => s === error.status) ?? 500;
    return errorPage(c, status, status === 404 ? "Not found" : "Request refused", error.message);
  }
  if (error instanceof ConfigError) {
    // Past the login, the reader is the operator who can fix it.
    c.status(500);
    return c.html(
      <ErrorPage
        title="Invalid configuration"
        message="SWITCHBOARD_CONFIG is invalid; fix these problems:"
        details={[...error.problems]}
        csrf={c.get("csrfToken")}
      />,
    );
  }
  console.error("dashboard error", error);
  return errorPage(c, 500, "Internal error", "Something went wrong; see the gateway logs.");
});
