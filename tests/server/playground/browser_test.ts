// The playground in a real headless Chromium (Debian's `chromium`, driven by playwright-core): the
// page loads its model list, a message typed and sent with Enter streams back over many updates,
// the panel shows the server's numbers, and with --api-key the page works once the key is typed.
//
// SLUICE_SKIP_BROWSER=1 skips it; otherwise a missing browser fails, saying what to install.
// SLUICE_CHROMIUM names another browser binary. SLUICE_PLAYGROUND_SCREENSHOT=docs/playground.png
// also saves the README's screenshot, taken mid-reply in a second turn.

import { type BrowserContext, chromium, type Page } from "playwright-core";
import { assert, assertEquals, assertMatch } from "../../helpers/testing.ts";
import { MODEL_ID, startServer, type TestServerOptions } from "../harness.ts";

const CHROMIUM = Deno.env.get("SLUICE_CHROMIUM") ?? "/usr/bin/chromium";
const SKIP = Deno.env.get("SLUICE_SKIP_BROWSER") === "1";
const SCREENSHOT = Deno.env.get("SLUICE_PLAYGROUND_SCREENSHOT");

// No network here: nothing in the background may try to reach it.
const CHROMIUM_ARGS = [
  "--headless",
  "--no-sandbox",
  "--disable-gpu",
  "--disable-quic",
  "--no-first-run",
  "--disable-background-networking",
  "--disable-component-update",
  "--disable-sync",
];

const READING_RATE = 25; // tokens/s: a reply of 40 tokens plays out over ~1.6 s

Deno.test({
  name: "playground: chat streams in a real browser, the panel shows the server's state",
  ignore: SKIP,
  // Playwright's driver keeps node:child_process and socket ops of its own until the browser exits.
  sanitizeOps: false,
  sanitizeResources: false,
  fn: async (t) => {
    await withBrowser(async (browser) => {
      await t.step("without an API key", async () => {
        await withPage(browser, {}, async (page) => {
          await expectModelLoaded(page);
          await setSampling(page);
          const growth = await sendAndWatch(page, "Hello! Tell me about sluices.");
          assertStreamed(growth);
          await expectPanelNumbers(page);
          if (SCREENSHOT) await screenshotMidReply(page, SCREENSHOT);
        });
      });

      await t.step("with an API key, typed into the page", async () => {
        await withPage(browser, { config: { apiKey: "sesame" } }, async (page) => {
          await page.locator("#notice", { hasText: "needs an API key" }).waitFor();
          // /state lists every request: the panel needs the key too, and says so.
          await expectText(page, "#status", /^needs key$/);
          await page.getByLabel("API key").fill("sesame");
          await page.getByLabel("API key").press("Tab"); // commits the field: `change`
          await expectText(page, "#status", /^ready$/);
          await expectModelLoaded(page);
          await setSampling(page);
          assertStreamed(await sendAndWatch(page, "Hi"));
        });
      });
    });
  },
});

/** Launches Chromium with a fresh profile; closes it and removes the profile whatever happens. */
async function withBrowser(fn: (browser: BrowserContext) => Promise<void>): Promise<void> {
  try {
    await Deno.stat(CHROMIUM);
  } catch {
    throw new Error(
      `No Chromium at ${CHROMIUM}: install Debian's package (apt-get install -y chromium), ` +
        "point SLUICE_CHROMIUM at a Chromium binary, or set SLUICE_SKIP_BROWSER=1 to skip",
    );
  }
  const profile = await Deno.makeTempDir({ prefix: "sluice-chromium-" });
  let browser: BrowserContext | null = null;
  try {
    browser = await chromium.launchPersistentContext(profile, {
      executablePath: CHROMIUM,
      headless: true,
      args: CHROMIUM_ARGS,
      viewport: { width: 1200, height: 800 },
      timeout: 60_000,
    });
    await fn(browser);
  } finally {
    await browser?.close();
    assertEquals(processesUsing(profile), [], "Chromium left processes behind");
    await Deno.remove(profile, { recursive: true });
  }
}

/** Process ids whose command line mentions `text` (Linux /proc). */
function processesUsing(text: string): number[] {
  const pids: number[] = [];
  for (const entry of Deno.readDirSync("/proc")) {
    if (!/^\d+$/.test(entry.name)) continue;
    try {
      if (Deno.readTextFileSync(`/proc/${entry.name}/cmdline`).includes(text)) {
        pids.push(Number(entry.name));
      }
    } catch { /* it exited while we looked */ }
  }
  return pids;
}

/** Starts a server with the tiny model, opens the page on it, and closes both afterwards. */
async function withPage(
  browser: BrowserContext,
  options: TestServerOptions,
  fn: (page: Page) => Promise<void>,
): Promise<void> {
  const server = await startServer(options);
  const page = await browser.newPage();
  const problems: string[] = [];
  page.on("pageerror", (e) => problems.push(`page error: ${e.message}`));
  page.on("console", (m) => {
    // A 401 before the key is typed is expected; anything else the page logs is a fault.
    if (m.type() === "error" && !m.text().includes("401")) problems.push(`console: ${m.text()}`);
  });
  try {
    await page.goto(server.url);
    await fn(page);
    assertEquals(problems, []);
  } finally {
    await page.close();
    await server.close();
  }
}

async function expectModelLoaded(page: Page): Promise<void> {
  await page.locator(`#model option[value="${MODEL_ID}"]`).waitFor({ state: "attached" });
  assertEquals(await page.getByLabel("Model").inputValue(), MODEL_ID);
  // The picker says which models are loaded.
  await expectText(
    page,
    `#model option[value="${MODEL_ID}"]`,
    new RegExp(`^${MODEL_ID} · loaded$`),
  );
}

/** Sampling settings through their labels: a paced, reproducible reply. */
async function setSampling(page: Page): Promise<void> {
  await page.getByLabel("temperature").fill("0.8");
  await page.getByLabel("seed").fill("7");
  await page.getByLabel("max_tokens").fill("40");
  await page.getByLabel("reading_rate").fill(String(READING_RATE));
}

interface Growth {
  /** The reply's length in characters at each change, with the time of the change (ms). */
  updates: { chars: number; at: number }[];
  text: string;
  meta: string;
}

/** Types a message, sends it with Enter, and records how the reply grows until it is complete. */
async function sendAndWatch(page: Page, message: string): Promise<Growth> {
  // Browser-side code as a string: this file is type-checked without the DOM's types.
  await page.evaluate(`(() => {
    window.replyUpdates = [];
    new MutationObserver(() => {
      const replies = document.querySelectorAll("li.assistant .text");
      const chars = replies.length ? replies[replies.length - 1].textContent.length : 0;
      const last = window.replyUpdates[window.replyUpdates.length - 1];
      if (chars > 0 && (!last || last.chars !== chars)) {
        window.replyUpdates.push({ chars, at: performance.now() });
      }
    }).observe(document.getElementById("messages"), {
      subtree: true, childList: true, characterData: true,
    });
  })()`);
  const before = await page.locator("li.assistant").count();
  const prompt = page.getByLabel("Message");
  await prompt.fill(message);
  await prompt.press("Enter");
  // Done when one more reply is no longer busy (a locator: the page's CSP forbids eval'd code).
  await page.locator('li.assistant[aria-busy="false"]').nth(before).waitFor({ timeout: 60_000 });
  const reply = page.locator("li.assistant").last();
  const failure = await reply.locator(".text").textContent();
  assertEquals(
    await reply.getAttribute("class"),
    "message assistant",
    `the reply failed: ${failure}`,
  );
  assertEquals(await prompt.inputValue(), "", "the prompt was sent and cleared");
  return {
    updates: await page.evaluate("window.replyUpdates") as Growth["updates"],
    text: await reply.locator(".text").textContent() ?? "",
    meta: await reply.locator(".meta").textContent() ?? "",
  };
}

/** The reply arrived piece by piece at its reading rate, not all at once. */
function assertStreamed({ updates, text, meta }: Growth): void {
  assert(text.length > 0, "the reply has text");
  assert(updates.length >= 3, `the reply grew in ${updates.length} updates, want several`);
  for (let i = 1; i < updates.length; i++) assert(updates[i].chars > updates[i - 1].chars);
  const spanMs = updates.at(-1)!.at - updates[0].at;
  assert(spanMs > 300, `the reply grew over ${spanMs.toFixed(0)} ms, want a paced stream`);
  assertMatch(meta, /^\d+ tokens · first token \d+ ms/);
}

async function expectPanelNumbers(page: Page): Promise<void> {
  await expectText(page, "#status", /^ready$/);
  await expectText(page, "#tokens-generated", /^[1-9]\d*$/);
  await expectText(page, "#ttft-mean", /^\d+ ms$/);
  await expectText(page, "#tps-generated", /^\d+\.\d$/);
  await expectText(page, "#kv-device", /^\d+ \/ [1-9]\d*/);
  for (const id of ["#running", "#waiting", "#paused"]) await expectText(page, id, /^\d+$/);
}

/** Waits (up to 5 s: the panel refreshes every second) for an element's text to match. */
async function expectText(page: Page, selector: string, pattern: RegExp): Promise<void> {
  const deadline = performance.now() + 5000;
  let text: string | null = null;
  while (performance.now() < deadline) {
    text = await page.locator(selector).textContent();
    if (text !== null && pattern.test(text)) return;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`${selector} shows ${JSON.stringify(text)}, want ${pattern}`);
}

/** A second, longer turn, captured while it streams with the panel showing it. */
async function screenshotMidReply(page: Page, path: string): Promise<void> {
  await page.getByLabel("max_tokens").fill("300");
  await page.getByLabel("reading_rate").fill("12");
  const prompt = page.getByLabel("Message");
  await prompt.fill("And how does the server keep every stream smooth?");
  await prompt.press("Enter");
  await expectText(page, "#running", /^[1-9]/);
  await expectText(page, "#streams tr:first-child td:nth-child(5)", /^[1-9]\d*\.\d s$/);
  await page.screenshot({ path, type: "png" });
  await page.getByRole("button", { name: "Stop" }).click();
  await page.locator("#notice", { hasText: "Stopped." }).waitFor();
}
