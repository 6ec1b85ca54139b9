/**
 * Chromium for the dashboard tests: the system's browser (Debian's `chromium` package, or
 * CHROMIUM_PATH) driven by playwright-core, which downloads no browser of its own. When none
 * is found the suite is skipped, and says so loudly with how to install one. Screenshots go to
 * test-results/screenshots/ (gitignored).
 */
import { existsSync, mkdirSync } from "node:fs";
import path from "node:path";
import { type Browser, type BrowserContext, chromium, type Locator, type Page } from "playwright-core";

const CANDIDATES = [
  process.env.CHROMIUM_PATH,
  "/usr/bin/chromium",
  "/usr/bin/chromium-browser",
  "/usr/bin/google-chrome",
  "/usr/bin/google-chrome-stable",
];

export const chromiumPath: string | undefined = CANDIDATES.find((p): p is string => !!p && existsSync(p));

if (!chromiumPath) {
  console.warn(
    "\n[browser tests] SKIPPED: no Chromium found (looked at CHROMIUM_PATH, /usr/bin/chromium, " +
      "/usr/bin/chromium-browser, /usr/bin/google-chrome). Install one to run the dashboard tests: " +
      "`sudo apt-get install -y chromium` (Debian/Ubuntu), or set CHROMIUM_PATH=/path/to/chrome.\n",
  );
}

export const DESKTOP = { width: 1280, height: 800 };
export const PHONE = { width: 390, height: 844 };

export async function launchBrowser(): Promise<Browser> {
  if (!chromiumPath) throw new Error("no Chromium to launch");
  // --no-sandbox: CI containers run as root, where Chromium's sandbox cannot start.
  return chromium.launch({
    executablePath: chromiumPath,
    headless: true,
    args: ["--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu"],
  });
}

export async function newPage(
  browser: Browser,
  viewport = DESKTOP,
): Promise<{ context: BrowserContext; page: Page }> {
  const context = await browser.newContext({ viewport, deviceScaleFactor: 1, isMobile: viewport === PHONE });
  const page = await context.newPage();
  page.setDefaultTimeout(30_000);
  return { context, page };
}

const SCREENSHOTS = path.resolve(import.meta.dirname, "../../../test-results/screenshots");

/** A full-page screenshot, test-results/screenshots/<name>.png; returns its path. */
export async function screenshot(page: Page, name: string): Promise<string> {
  mkdirSync(SCREENSHOTS, { recursive: true });
  const file = path.join(SCREENSHOTS, `${name}.png`);
  await page.screenshot({ path: file, fullPage: true });
  return file;
}

/** The text a reader sees in an element (table cells and lines apart, unlike textContent). */
export async function visibleText(locator: Locator): Promise<string> {
  // biome-ignore lint/performance/useDomNodeTextContent: the rendered text, with cells apart, is what a reader sees
  return locator.innerText();
}
