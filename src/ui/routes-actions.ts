/**
 * The dashboard's state-changing forms (POST, logged in, CSRF-checked by the app): each calls
 * one operator RPC method and redirects (303) to the page to look at next, with a notice code.
 * A refused call renders the RPC's error with its status.
 */
import { Hono } from "hono";
import { safeNext } from "./auth";
import { field, readForm, requiredField, rpc, type UiEnv } from "./context";
import { sessionHref } from "./layout";

function withNotice(path: string, notice: string): string {
  const url = new URL(path, "http://dashboard.invalid");
  url.searchParams.set("notice", notice);
  return `${url.pathname}${url.search}`;
}

/** The form's one-time id (layout's SubmitId) as the run's idempotency key, when it came. */
function submitted(form: Parameters<typeof field>[0]): { idempotencyKey?: string } {
  const id = field(form, "submitId");
  return id ? { idempotencyKey: `ui:${id.slice(0, 200)}` } : {};
}

export const actions = new Hono<UiEnv>()
  .post("/session/send", async (c) => {
    const form = await readForm(c);
    const key = requiredField(form, "key");
    const sent = await rpc<{ runId: string; sessionKey: string }>(c, "chat.send", {
      sessionKey: key,
      message: requiredField(form, "message"),
      deliver: false,
      ...submitted(form),
    });
    return c.redirect(sessionHref(sent.sessionKey, { run: sent.runId, notice: "sent" }), 303);
  })

  .post("/agent", async (c) => {
    const form = await readForm(c);
    const agentId = field(form, "agentId");
    const sent = await rpc<{ runId: string; sessionKey: string }>(c, "agent", {
      message: requiredField(form, "message"),
      deliver: false,
      ...(agentId ? { agentId } : {}),
      ...submitted(form),
    });
    return c.redirect(sessionHref(sent.sessionKey, { run: sent.runId, notice: "sent" }), 303);
  })

  .post("/session/patch", async (c) => {
    const form = await readForm(c);
    const key = requiredField(form, "key");
    const policy = field(form, "sendPolicy") ?? "inherit";
    // A blank field clears the setting (the entry's default applies again).
    await rpc(c, "sessions.patch", {
      key,
      label: field(form, "label") ?? null,
      model: field(form, "model") ?? null,
      sendPolicy: policy === "inherit" ? null : policy,
    });
    return c.redirect(sessionHref(key, { notice: "patched" }), 303);
  })

  .post("/session/reset", async (c) => {
    const form = await readForm(c);
    const key = requiredField(form, "key");
    await rpc(c, "sessions.reset", { key });
    return c.redirect(sessionHref(key, { notice: "reset" }), 303);
  })

  .post("/deliveries/retry", async (c) => {
    const form = await readForm(c);
    const result = await rpc<{ requeued: boolean }>(c, "deliveries.retry", {
      deliveryId: requiredField(form, "deliveryId"),
    });
    const back = safeNext(field(form, "next") ?? "/ui/deliveries");
    return c.redirect(withNotice(back, result.requeued ? "retried" : "retry-noop"), 303);
  })

  .post("/pairing/approve", async (c) => {
    const form = await readForm(c);
    await rpc(c, "pairing.approve", {
      channel: requiredField(form, "channel"),
      code: requiredField(form, "code"),
    });
    return c.redirect(withNotice("/ui/pairing", "approved"), 303);
  })

  .post("/pairing/revoke", async (c) => {
    const form = await readForm(c);
    await rpc(c, "pairing.revoke", {
      channel: requiredField(form, "channel"),
      peerId: requiredField(form, "peerId"),
    });
    return c.redirect(withNotice("/ui/pairing", "revoked"), 303);
  });
