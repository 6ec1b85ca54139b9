/**
 * The operator dashboard (`/ui`) in Chromium against `wrangler dev`: login, the sessions list
 * and its filters, a session's transcript (tool calls, compaction, paging), sending a message
 * and seeing the reply, runs, usage and cost, retrying a dead delivery, jobs, the audit, CSRF
 * and logout. One gateway serves every test (a start costs seconds). Screenshots of every page
 * at 1280×800 and at phone width land in test-results/screenshots/.
 */
import type { Browser, BrowserContext, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  connectorConfig,
  directMessage,
  GATEWAY_TOKEN,
  type Gateway,
  waitFor,
} from "../e2e/support/gateway.ts";
import { type PlatformServer, startPlatformServer } from "../e2e/support/platform-server.ts";
import { startWorld, type World } from "../e2e/support/world.ts";
import { fakeTelegram } from "../support/platform-fakes.ts";
import { telegramRequest, telegramUpdate } from "../support/platform-requests.ts";
import { PLATFORM_SECRETS, telegramBot } from "../support/platform-world.ts";
import { UI_PAGES as PAGES } from "../ui-pages.ts";
import { chromiumPath, launchBrowser, newPage, PHONE, screenshot, visibleText } from "./support/browser.ts";

const LONG_EXCHANGES = 27;
const PHOTO_SENDER = 4242;

/** What `usage.summary` answers (SPEC §21), as far as the Usage page's test reads it. */
interface UsageFigures {
  runs: number;
  modelCalls: number;
  costUsd: number | null;
  unpricedCalls: number;
}
interface UsageSummary {
  from: string;
  to: string;
  rows: Array<UsageFigures & { group: string }>;
  total: UsageFigures;
}

/** Every day from `from` to `to` (`YYYY-MM-DD`), both included. */
function daysFrom(from: string, to: string): string[] {
  const days: string[] = [];
  for (let ms = Date.parse(`${from}T00:00:00Z`); ms <= Date.parse(`${to}T00:00:00Z`); ms += 86_400_000)
    days.push(new Date(ms).toISOString().slice(0, 10));
  return days;
}

/** A count as the page prints it (`1,234`), read back as a number. */
const countIn = (text: string) => Number(text.replace(/,/g, ""));

interface Delivery {
  deliveryId: string;
  sessionKey: string;
  status: string;
  lastError?: string;
}

describe.skipIf(!chromiumPath)("operator dashboard in a browser", () => {
  let world: World;
  let gw: Gateway;
  let browser: Browser;
  let context: BrowserContext;
  let page: Page;
  let aliceKey: string;
  let dead: Delivery;
  let platform: PlatformServer;
  const telegram = fakeTelegram(PLATFORM_SECRETS.TELEGRAM_BOT_TOKEN);

  const wait = (runId: string) => gw.call<{ status: string }>("agent.wait", { runId, timeoutMs: 60_000 });
  const url = (path: string) => `${gw.url}${path}`;

  beforeAll(async () => {
    // A Telegram bot beside the bridge, whose photos are kept in R2 (SPEC §22).
    platform = await startPlatformServer({ "/telegram": telegram });
    world = await startWorld({
      retry: { attempts: 1, baseDelayMs: 1 },
      agents: {
        defaults: { model: "echo/echo" },
        list: [
          { id: "main", default: true },
          { id: "ops", model: "fake/ops-model" },
          // A model with no price: its calls are unpriced, never $0.
          { id: "free", model: "fake/free-model" },
        ],
      },
      pricing: { "fake/ops-model": { input: 10, output: 30 } },
      delivery: { maxAttempts: 2, baseDelayMs: 100, maxDelayMs: 200 },
      extra: {
        cron: {
          jobs: [{ id: "nightly-report", schedule: "0 3 * * *", message: "Write the nightly report" }],
        },
        media: { r2: "MEDIA" },
      },
      connectors: (bridge) => ({
        ...connectorConfig(bridge),
        photos: { ...telegramBot(platform.base("/telegram")), dmPolicy: "open" },
      }),
      vars: PLATFORM_SECRETS,
    });
    gw = world.gw;

    // bob's reply is delivered; alice's goes dead while the connector is down.
    const bob = await gw.inbound(
      "telegram",
      directMessage({ messageId: "b1", from: "bob", text: "status please" }),
    );
    await wait(bob.body.runId!);
    world.connector.down();
    const alice = await gw.inbound(
      "telegram",
      directMessage({ messageId: "a1", from: "alice", text: "hello from telegram", senderName: "Alice" }),
    );
    aliceKey = alice.body.sessionKey!;
    await wait(alice.body.runId!);
    dead = await waitFor(
      async () =>
        (
          await gw.call<{ deliveries: Delivery[] }>("deliveries.list", {
            sessionKey: aliceKey,
            status: "dead",
          })
        ).deliveries[0],
      30_000,
      { intervalMs: 200, what: "alice's reply is dead" },
    );
    await gw.call("sessions.patch", { key: aliceKey, label: "alice-support" });
    // A tool call and its result, then a compaction entry, in alice's transcript.
    await wait(
      (await gw.call<{ runId: string }>("agent", { sessionKey: aliceKey, message: "call:current_time {}" }))
        .runId,
    );
    await wait((await gw.call<{ runId: string }>("sessions.compact", { key: aliceKey })).runId);
    // A run that fails, with its cause.
    world.model.fail(500, 3, "the ops model is down");
    await wait(
      (await gw.call<{ runId: string }>("agent", { agentId: "ops", message: "deploy status" })).runId,
    );
    // A transcript longer than one page (50 messages).
    for (let i = 1; i <= LONG_EXCHANGES; i++) {
      const sent = await gw.call<{ runId: string }>("agent", {
        sessionKey: "agent:main:long-thread",
        message: `message ${i}`,
      });
      await wait(sent.runId);
    }

    browser = await launchBrowser();
    ({ context, page } = await newPage(browser));
  });

  afterAll(async () => {
    await browser?.close();
    await world?.dispose();
    await platform?.close();
  });

  it("without login, every /ui page redirects to the login form", async () => {
    for (const path of PAGES) {
      const res = await gw.fetch(path, { redirect: "manual" });
      expect(res.status, path).toBe(303);
      const location = new URL(res.headers.get("location") ?? "", gw.url);
      expect(location.pathname).toBe("/ui/login");
      expect(location.searchParams.get("next")).toBe(path);
    }
    await page.goto(url("/ui/runs"));
    expect(new URL(page.url()).pathname).toBe("/ui/login");
    await page.locator("form[aria-label='Log in']").waitFor();
  });

  it("refuses a wrong token with a clear error, then logs in and lands on the page asked for", async () => {
    await page.fill("input[name=token]", "not-the-token");
    const [wrong] = await Promise.all([
      page.waitForResponse((r) => r.request().method() === "POST"),
      page.click("button[type=submit]"),
    ]);
    expect(wrong.status()).toBe(401);
    await page.getByText("That is not the operator token").waitFor();
    await screenshot(page, "login-desktop");
    await page.fill("input[name=token]", GATEWAY_TOKEN);
    await page.click("button[type=submit]");
    await page.waitForURL((u) => u.pathname === "/ui/runs");
    const cookies = await context.cookies();
    expect(cookies.find((c) => c.name === "switchboard_ui")).toMatchObject({
      httpOnly: true,
      sameSite: "Strict",
      path: "/ui",
    });
  });

  it("lists sessions newest first and finds one with the filters", async () => {
    await page.goto(url("/ui/sessions"));
    const rows = page.locator("table[aria-label=Sessions] tbody tr");
    expect(await rows.count()).toBeGreaterThanOrEqual(4);
    await page.getByText(aliceKey).first().waitFor();
    await screenshot(page, "sessions-desktop");
    await page.fill("input[name=label]", "alice-support");
    await page.selectOption("select[name=kind]", "other");
    await page.fill("input[name=channel]", "telegram");
    await page.click("form[aria-label='Filter sessions'] button[type=submit]");
    await page.waitForURL((u) => u.searchParams.get("label") === "alice-support");
    expect(await rows.count()).toBe(1);
    expect(await visibleText(rows.first())).toContain(aliceKey);
    await page.fill("input[name=channel]", "slack");
    await page.click("form[aria-label='Filter sessions'] button[type=submit]");
    await page.getByText("No sessions match.").waitFor();
    await page.goBack();
    await rows.first().locator("a").click();
    await page.waitForURL((u) => u.pathname === "/ui/session" && u.searchParams.get("key") === aliceKey);
  });

  it("reads the session's transcript: messages, collapsible tool calls and results, the compaction entry", async () => {
    await page.getByText("hello from telegram").first().waitFor();
    await page.locator(".msg.assistant", { hasText: "echo: hello from telegram" }).waitFor();
    const call = page.locator("details.tool", { hasText: "Tool call current_time" });
    const result = page.locator("details.tool", { hasText: "Result of current_time" });
    expect(await call.count()).toBe(1);
    expect(await result.count()).toBe(1);
    expect(await result.evaluate((d) => (d as HTMLDetailsElement).open)).toBe(false);
    await result.locator("summary").click();
    expect(await result.evaluate((d) => (d as HTMLDetailsElement).open)).toBe(true);
    await page.locator(".msg.compaction", { hasText: "Summary of the messages before" }).waitFor();
    expect(await visibleText(page.locator("dl.fields"))).toContain("alice-support");
    await screenshot(page, "session-desktop");
  });

  it("shows a photo a chat sent, kept in R2, in the transcript", async () => {
    // A 2×2 JPEG (Telegram's photos are JPEGs), made by the browser itself.
    const photo = Uint8Array.from(
      atob(
        (
          await page.evaluate(() => {
            const canvas = document.createElement("canvas");
            canvas.width = 2;
            canvas.height = 2;
            const g = canvas.getContext("2d") as CanvasRenderingContext2D;
            g.fillStyle = "#c00";
            g.fillRect(0, 0, 2, 2);
            return canvas.toDataURL("image/jpeg");
          })
        ).split(",")[1] ?? "",
      ),
      (c) => c.charCodeAt(0),
    );
    telegram.files.set("photo-1", { data: photo, mimeType: "image/jpeg" });
    const update = telegramUpdate({ from: PHOTO_SENDER, text: "" }) as { message: Record<string, unknown> };
    delete update.message.text;
    update.message.caption = "our new logo";
    update.message.photo = [{ file_id: "photo-1", file_size: photo.byteLength, width: 2, height: 2 }];
    const req = telegramRequest(update, PLATFORM_SECRETS.TELEGRAM_WEBHOOK_SECRET);
    const res = await gw.fetch("/connectors/photos", {
      method: "POST",
      headers: req.headers,
      body: req.body,
    });
    expect(res.status).toBe(200);
    const key = `agent:main:photos:dm:${PHOTO_SENDER}`;
    await waitFor(() => telegram.shown(String(PHOTO_SENDER)).length > 0, 60_000, {
      what: "the photo's reply",
    });
    await page.goto(url(`/ui/session?key=${encodeURIComponent(key)}`));
    const img = page.locator(".msg.user img");
    await img.waitFor();
    await img.scrollIntoViewIfNeeded();
    // Served from /ui/media/… with the browser's own session: the bytes sent, decoded at 2×2.
    const src = await img.getAttribute("src");
    expect(src).toMatch(/^\/ui\/media\//);
    const served = await page.request.get(url(src ?? ""));
    expect(served.status(), await served.text()).toBe(200);
    expect(served.headers()["content-type"]).toBe("image/jpeg");
    expect(new Uint8Array(await served.body())).toEqual(photo);
    await waitFor(() => img.evaluate((i) => (i as HTMLImageElement).complete), 10_000, {
      what: "the image loaded",
    });
    expect(await img.evaluate((i) => (i as HTMLImageElement).naturalWidth)).toBe(2);
    expect(await visibleText(page.locator(".msg.user").first())).toContain("our new logo");
    await screenshot(page, "session-photo-desktop");
  });

  it("sends a message and the reply appears on the session page", async () => {
    await page.fill("form[aria-label='Send a message'] textarea", "ping from the dashboard");
    await page.click("form[aria-label='Send a message'] button[type=submit]");
    await page.waitForURL((u) => u.searchParams.get("notice") === "sent");
    await page.locator(".msg.user", { hasText: "ping from the dashboard" }).waitFor({ timeout: 60_000 });
    await page
      .locator(".msg.assistant", { hasText: "echo: ping from the dashboard" })
      .waitFor({ timeout: 60_000 });
    await page.locator("#session-live[data-active='0']").waitFor({ timeout: 60_000 });
    await screenshot(page, "session-reply-desktop");
    // Not delivered to the chat: the dashboard sends with deliver: false.
    expect(
      world.connector.attemptsFor({ sessionKey: aliceKey, text: "echo: ping from the dashboard" }),
    ).toEqual([]);
  });

  it("updates the session page while a run is in progress, without a reload", async () => {
    world.model.reset();
    const hang = world.model.hang();
    await page.goto(url(`/ui/session?key=${encodeURIComponent("agent:ops:main")}`));
    await page.fill("form[aria-label='Send a message'] textarea", "a slow question");
    await page.click("form[aria-label='Send a message'] button[type=submit]");
    await page.waitForURL((u) => u.searchParams.get("notice") === "sent");
    await hang.started;
    await page.locator("#session-live[data-active='1']").waitFor();
    let navigations = 0;
    page.on("framenavigated", () => navigations++);
    hang.release({ text: "a slow answer" });
    await page.locator(".msg.assistant", { hasText: "a slow answer" }).waitFor({ timeout: 60_000 });
    await page.locator("#session-live[data-active='0']").waitFor({ timeout: 60_000 });
    expect(navigations).toBe(0);
  });

  it("pages back through a long transcript", async () => {
    await page.goto(url(`/ui/session?key=${encodeURIComponent("agent:main:long-thread")}`));
    await page.locator(".msg.assistant", { hasText: `echo: message ${LONG_EXCHANGES}` }).waitFor();
    const first = page.locator(".msg.user .text", { hasText: /^message 1$/ });
    expect(await first.count()).toBe(0);
    await page.getByText("« Older messages").click();
    await page.waitForURL((u) => u.searchParams.has("before"));
    await first.waitFor();
    await page.getByText("Newest messages »").waitFor();
  });

  it("searches transcripts and opens a hit at its message, in the transcript from before a reset", async () => {
    // message 3 of the long thread is in the transcript the reset leaves behind.
    const before = await gw.call<{ sessionId: string }>("sessions.get", { key: "agent:main:long-thread" });
    await gw.call("sessions.reset", { key: "agent:main:long-thread" });
    await page.goto(url("/ui/search"));
    await page.fill("input[name=q]", '"message 3"');
    await page.click("search form button[type=submit]");
    await page.waitForURL((u) => u.pathname === "/ui/search" && u.searchParams.get("q") === '"message 3"');
    const hits = page.locator("ol.hits li.hit");
    await hits.first().waitFor();
    const answer = await gw.call<{ results: Array<{ seq: number; role: string; sessionId: string }> }>(
      "sessions.search",
      { query: '"message 3"', limit: 50, archived: "all" },
    );
    // The page shows what sessions.search answers, the match marked.
    expect(await hits.count()).toBe(answer.results.length);
    expect(await hits.first().locator("mark").allTextContents()).toEqual(["message", "3"]);
    const user = answer.results.find((h) => h.role === "user");
    expect(user?.sessionId).toBe(before.sessionId);
    await screenshot(page, "search-desktop");
    await page.locator(`ol.hits a.excerpt[href$='#m${user?.seq}']`).first().click();
    await page.waitForURL(
      (u) => u.pathname === "/ui/session" && u.searchParams.get("sessionId") === before.sessionId,
    );
    const target = page.locator(`#m${user?.seq}`);
    await target.waitFor();
    expect(await target.locator(".text").textContent()).toBe("message 3");
    expect(await page.evaluate(() => window.location.hash)).toBe(`#m${user?.seq}`);
    await page.getByText("from before a reset of this session").waitFor();
  });

  it("shows runs with status, error cause, duration and tokens", async () => {
    await page.goto(url("/ui/runs"));
    const table = page.locator("table[aria-label=Runs]");
    await table.locator("tbody tr").first().waitFor();
    const text = await visibleText(table);
    expect(text).toMatch(/\bok\b/);
    expect(text).toMatch(/\d+(\.\d)? (ms|s)/);
    await screenshot(page, "runs-desktop");
    await page.selectOption("select[name=status]", "error");
    await page.click("form[aria-label='Filter runs'] button[type=submit]");
    await page.waitForURL((u) => u.searchParams.get("status") === "error");
    const errors = await visibleText(table);
    expect(errors).toContain("agent:ops:main");
    expect(errors).not.toMatch(/\bok\b/);
    expect((await visibleText(table.locator("tbody tr td:last-child").first())).length).toBeGreaterThan(0);
  });

  it("opens a run from the runs list: its timeline drawn with the spans runs.get has", async () => {
    world.model.push({ toolCalls: [{ name: "current_time" }] }, { text: "it is time" });
    const { runId } = await gw.call<{ runId: string }>("agent", {
      sessionKey: "agent:ops:timeline",
      message: "what time is it?",
    });
    await wait(runId);
    const run = await gw.call<{
      timeline: Array<{ phase: string; name?: string; ms: number; outcome?: string }>;
    }>("runs.get", { runId });
    expect(run.timeline.map((s) => s.phase)).toEqual(["queued", "model", "tool", "model"]);

    await page.goto(url("/ui/runs?session=agent:ops:timeline"));
    await page.locator(`table[aria-label=Runs] a[title="${runId}"]`).click();
    await page.waitForURL((u) => u.pathname === "/ui/run" && u.searchParams.get("id") === runId);
    const spans = page.locator("svg.timeline[role=img] g.span");
    expect(
      await spans.evaluateAll((gs) =>
        gs.map((g) => ({
          phase: g.getAttribute("data-phase"),
          name: g.getAttribute("data-name") || undefined,
          ms: Number(g.getAttribute("data-ms")),
          outcome: g.getAttribute("data-outcome") || undefined,
        })),
      ),
    ).toEqual(run.timeline.map((s) => ({ phase: s.phase, name: s.name, ms: s.ms, outcome: s.outcome })));
    const rows = page.locator("table[aria-label='Timeline spans'] tbody tr");
    expect(await rows.count()).toBe(run.timeline.length);
    expect(await visibleText(rows.nth(2).locator("td").first())).toBe("tool current_time");
    await screenshot(page, "run-desktop");
  });

  it("shows usage: a bar per day of the range, and the totals and top sessions usage.summary has", async () => {
    // A priced run whose cost stands out (1200 × $10 + 300 × $30 per million = $0.021), and an
    // unpriced one.
    world.model.push({ text: "the usage report", usage: { prompt: 1200, completion: 300 } });
    await wait(
      (await gw.call<{ runId: string }>("agent", { sessionKey: "agent:ops:usage-report", message: "report" }))
        .runId,
    );
    await wait((await gw.call<{ runId: string }>("agent", { agentId: "free", message: "hello" })).runId);
    const summary = (params: Record<string, unknown>) => gw.call<UsageSummary>("usage.summary", params);
    const [days, sessions, models] = await Promise.all([
      summary({ groupBy: "day" }),
      summary({ groupBy: "session", limit: 10 }),
      summary({ groupBy: "model", limit: 10 }),
    ]);
    expect(sessions.rows[0]?.group).toBe("agent:ops:usage-report");
    expect(days.total.unpricedCalls).toBeGreaterThan(0);

    await page.getByRole("navigation", { name: "Main" }).getByRole("link", { name: "Usage" }).click();
    await page.waitForURL((u) => u.pathname === "/ui/usage");
    // The default range is usage.summary's: the last 30 days, a bar for each.
    expect(await page.inputValue("input[name=from]")).toBe(days.from);
    expect(await page.inputValue("input[name=to]")).toBe(days.to);
    const chart = page.locator("svg.cost-chart[role=img]");
    const bars = chart.locator("g.bar");
    expect(await bars.count()).toBe(30);
    expect(await bars.evaluateAll((gs) => gs.map((g) => g.getAttribute("data-day")))).toEqual(
      daysFrom(days.from, days.to),
    );
    // Each bar carries its day's cost as usage.summary has it (none: 0).
    const barCosts = await bars.evaluateAll((gs) => gs.map((g) => g.getAttribute("data-usd")));
    const byDay = new Map(days.rows.map((r) => [r.group, r.costUsd]));
    for (const [i, day] of daysFrom(days.from, days.to).entries()) {
      const cost = byDay.has(day) ? byDay.get(day) : 0;
      expect(barCosts[i], day).toBe(cost === null ? "" : String(cost));
    }
    const today = days.rows.find((r) => r.group === days.to);
    expect(today?.costUsd).toBeGreaterThan(0.02);
    expect(await bars.last().locator("title").textContent()).toMatch(
      new RegExp(`^${days.to}: \\$\\d+\\.\\d+ \\+ ${today!.unpricedCalls} unpriced calls$`),
    );

    // The totals and the top session are usage.summary's numbers.
    const totals = page.locator("table[aria-label=Totals] tbody tr");
    expect(countIn(await visibleText(totals.locator("td[data-field=runs]")))).toBe(days.total.runs);
    const totalCost = totals.locator("td[data-field=cost] > span");
    expect(Number(await totalCost.getAttribute("data-usd"))).toBe(days.total.costUsd);
    expect(await visibleText(totalCost.locator(".usd"))).toMatch(/^\$\d+\.\d{2,4}$/);
    const top = page.locator("table[aria-label='Top sessions'] tbody tr");
    expect(await top.count()).toBe(sessions.rows.length);
    expect(await visibleText(top.first().locator("td").first())).toBe(sessions.rows[0]!.group);
    expect(await top.first().locator("td").first().locator("a").getAttribute("href")).toBe(
      `/ui/session?key=${encodeURIComponent(sessions.rows[0]!.group)}`,
    );
    expect(Number(await top.first().locator("td[data-field=cost] > span").getAttribute("data-usd"))).toBe(
      sessions.rows[0]!.costUsd,
    );
    expect(await visibleText(top.first().locator("td[data-field=cost] .usd"))).toBe("$0.02");
    // The model without a price reads "—, unpriced", not $0.
    expect(models.rows.find((r) => r.group === "fake/free-model")?.costUsd).toBeNull();
    const free = page.locator("table[aria-label='Top models'] tbody tr", { hasText: "fake/free-model" });
    expect(await visibleText(free.locator("td[data-field=cost]"))).toBe("— unpriced");
    await screenshot(page, "usage-desktop");

    // Another range from the form: a week, a bar a day.
    const weekAgo = new Date(Date.parse(`${days.to}T00:00:00Z`) - 6 * 86_400_000).toISOString().slice(0, 10);
    await page.fill("input[name=from]", weekAgo);
    await page.click("form[aria-label='Usage range'] button[type=submit]");
    await page.waitForURL((u) => u.searchParams.get("from") === weekAgo);
    expect(await bars.count()).toBe(7);
    expect(countIn(await visibleText(totals.locator("td[data-field=runs]")))).toBe(
      (await summary({ from: weekAgo, to: days.to })).total.runs,
    );

    // A bad range is a 400 (the RPC's, or the page's for a day off the calendar or a range past a
    // year), shown as the dashboard shows any refused request.
    for (const [query, says] of [
      [`from=${days.to}&to=${weekAgo}`, `\`from\` (${days.to}) is after \`to\` (${weekAgo})`],
      ["from=last-week", "`from`: must be a day, YYYY-MM-DD"],
      [`from=2000-01-01&to=${days.to}`, "the range is at most 366 days"],
      ["from=2025-02-30", "`from` must be a calendar day"],
    ] as const) {
      const res = await page.goto(url(`/ui/usage?${query}`));
      expect(res?.status(), query).toBe(400);
      expect(await visibleText(page.locator("p.error[role=alert]")), query).toContain(says);
    }
  });

  it("retries a dead delivery: it is queued again and delivered once the connector is back", async () => {
    world.connector.up();
    await page.goto(url("/ui/deliveries?status=dead"));
    const row = page.locator(`tr[data-delivery="${dead.deliveryId}"]`);
    await row.waitFor();
    expect(await visibleText(row)).toContain("dead");
    expect(await visibleText(row)).toContain(dead.lastError ?? "503");
    await screenshot(page, "deliveries-desktop");
    await row.getByRole("button", { name: "Retry" }).click();
    await page.getByText("Delivery queued again").waitFor();
    await waitFor(() => world.connector.deliveriesFor({ deliveryId: dead.deliveryId }).length > 0, 30_000, {
      intervalMs: 100,
      what: "the retried delivery reaches the connector",
    });
    expect(world.connector.deliveriesFor({ deliveryId: dead.deliveryId })[0]?.body?.text).toBe(
      "echo: hello from telegram",
    );
    await waitFor(
      async () => {
        await page.goto(url(`/ui/deliveries?session=${encodeURIComponent(aliceKey)}`));
        return (await visibleText(row)).includes("delivered");
      },
      30_000,
      { intervalMs: 250, what: "the delivery shows delivered" },
    );
  });

  it("shows the scheduled jobs with their next run, and the security audit", async () => {
    await page.goto(url("/ui/jobs"));
    const jobs = await visibleText(page.locator("table[aria-label='Scheduled jobs']"));
    expect(jobs).toContain("nightly-report");
    expect(jobs).toContain("0 3 * * *");
    expect(jobs).toMatch(/never/);
    await screenshot(page, "jobs-desktop");
    await page.goto(url("/ui/audit"));
    expect(await visibleText(page.locator("table[aria-label=Secrets]"))).toContain("GATEWAY_TOKEN");
    expect(await visibleText(page.locator("table[aria-label=Endpoints]"))).toContain("/ui/*");
    await screenshot(page, "audit-desktop");
  });

  it("refuses a state-changing POST without the CSRF token (403), from the logged-in browser", async () => {
    const res = await context.request.post(url("/ui/session/patch"), {
      form: { key: aliceKey, label: "hijacked" },
      headers: { origin: gw.url },
      maxRedirects: 0,
    });
    expect(res.status()).toBe(403);
    expect(await res.text()).toContain("CSRF");
    const entry = await gw.call<{ label?: string }>("sessions.get", { key: aliceKey });
    expect(entry.label).toBe("alice-support");
  });

  it("reads well at phone width", async () => {
    const phone = await newPage(browser, PHONE);
    try {
      await phone.page.goto(url("/ui/login?next=/ui/sessions"));
      await phone.page.fill("input[name=token]", GATEWAY_TOKEN);
      await phone.page.click("button[type=submit]");
      await phone.page.waitForURL((u) => u.pathname === "/ui/sessions");
      // The page itself never scrolls sideways; wide tables scroll inside their own box.
      const overflow = await phone.page.evaluate(
        () => document.documentElement.scrollWidth - window.innerWidth,
      );
      expect(overflow).toBeLessThanOrEqual(0);
      await screenshot(phone.page, "sessions-phone");
      await phone.page.goto(url(`/ui/session?key=${encodeURIComponent(aliceKey)}`));
      expect(
        await phone.page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth),
      ).toBeLessThanOrEqual(0);
      await screenshot(phone.page, "session-phone");
      await phone.page.goto(url("/ui/deliveries"));
      await screenshot(phone.page, "deliveries-phone");
      await phone.page.goto(url("/ui/usage"));
      expect(
        await phone.page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth),
      ).toBeLessThanOrEqual(0);
      await screenshot(phone.page, "usage-phone");
    } finally {
      await phone.context.close();
    }
  });

  it("logs out: the login form again, and pages redirect to it", async () => {
    await page.goto(url("/ui/sessions"));
    await page.getByRole("button", { name: "Log out" }).click();
    await page.waitForURL((u) => u.pathname === "/ui/login");
    expect((await context.cookies()).find((c) => c.name === "switchboard_ui")).toBeUndefined();
    await page.goto(url("/ui/deliveries"));
    expect(new URL(page.url()).pathname).toBe("/ui/login");
    expect(new URL(page.url()).searchParams.get("next")).toBe("/ui/deliveries");
  });
});
