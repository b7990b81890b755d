// Driving the debugger page (reactgraph/ui) in headless Chromium (Debian's, no download) as a person would, for
// the browser tests, the page's benchmark (benchmarks/ui_open.py) and its screenshots (.ci/update-ui-screenshots).
// Every request a page makes is seen here: one to anything but loopback is refused and reported (`offLoopback`),
// a console error or warning and a 4xx/5xx answer are recorded.
import { chromium } from "playwright-core";

export const WAIT_MS = 60_000;
const CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-sync",
                       "--disable-background-networking", "--disable-component-update"];
const LOOPBACK = new Set(["127.0.0.1", "localhost", "[::1]"]);
export const PHONE = { width: 390, height: 844 };
export const LAPTOP = { width: 1280, height: 800 };

/** A browser, and `open(viewport)`: a new page on the debugger at `uiUrl`, ready to use. */
export async function debuggerBrowser(uiUrl, seen = { console: [], failed: [], offLoopback: [], requests: 0 }) {
  const browser = await chromium.launch({ executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
                                          args: CHROMIUM_ARGS });

  async function open(viewport = LAPTOP) {
    const context = await browser.newContext({ viewport });
    await context.route("**/*", (route) => {
      const url = new URL(route.request().url());
      seen.requests += 1;
      if (LOOPBACK.has(url.hostname)) return route.continue();
      seen.offLoopback.push(url.href);
      return route.abort("blockedbyclient");
    });
    const page = await context.newPage();
    page.on("console", (m) => { if (["error", "warning"].includes(m.type())) seen.console.push(m.text()); });
    page.on("pageerror", (e) => seen.console.push(`pageerror: ${e.message}`));
    page.on("request", (r) => {  // what the page asks the server for its sessions list
      if (r.method() === "POST" && r.url().endsWith("/threads/search")) (seen.searches ??= []).push(r.postDataJSON());
    });
    page.on("response", (r) => {
      if (r.status() >= 400) seen.failed.push(`${r.status()} ${r.request().method()} ${r.url()}`);
    });
    const response = await page.goto(uiUrl);
    seen.csp = response.headers()["content-security-policy"] ?? null;
    await page.waitForSelector("body[data-ready=true]", { timeout: WAIT_MS });
    // which graph nodes were highlighted as running, at any moment of a run
    await page.evaluate(() => {
      window.__ran = new Set();
      new MutationObserver((records) => {  // running then done within one task: the old class value tells
        for (const r of records) if ((r.oldValue || "").includes("running")) window.__ran.add(r.target.dataset.node);
        for (const g of document.querySelectorAll("g.node.running")) window.__ran.add(g.dataset.node);
      }).observe(document.querySelector("#graph-view"), { subtree: true, attributes: true, attributeOldValue: true,
                                                           attributeFilter: ["class"] });
    });
    return page;
  }

  return { browser, open, seen };
}

/** Until the page shows no run going (done, waiting for a person, or failed) and a question may be asked. */
export async function settled(page) {
  await page.waitForFunction(() => ["done", "waiting", "failed"].includes(document.querySelector("#run-status").dataset.state)
    && !document.querySelector("#ask").disabled, null, { timeout: WAIT_MS });
}

export async function ask(page, question, { keyboard = false } = {}) {
  await page.evaluate(() => window.__ran.clear());
  await page.fill("#question", question);
  if (keyboard) {
    await page.focus("#question");
    await page.keyboard.press("Control+Enter");
  } else {
    await page.click("#ask");
  }
  await page.waitForSelector("#run-status[data-state=running]", { timeout: WAIT_MS }).catch(() => {});
  await settled(page);
  return shown(page);
}

/** What the page shows of the run or turn on screen. */
export function shown(page) {
  return page.evaluate(() => ({
    status: document.querySelector("#run-status").textContent,
    state: document.querySelector("#run-status").dataset.state,
    entries: [...document.querySelectorAll("#timeline > li")].map((li) => ({
      kind: li.className.replace("entry ", ""), tool: li.dataset.tool ?? null, status: li.dataset.status ?? null,
      text: li.textContent })),
    answer: document.querySelector("#final-answer")?.textContent ?? null,
    ran: [...(window.__ran ?? [])].sort(),
    usage: document.querySelector("#usage").textContent,
    problem: document.querySelector("#problem").hidden ? null : document.querySelector("#problem").textContent,
  }));
}

/** Press a control that starts a run (`press`: a click, or keys); what the page shows once that run has ended. */
export async function runFrom(page, press) {
  const before = await page.$eval("#run-status", (s) => s.dataset.run ?? "");
  await (typeof press === "string" ? page.click(press) : press());
  await page.waitForFunction((old) => {
    const status = document.querySelector("#run-status");
    return (status.dataset.run ?? "") !== old && ["done", "failed"].includes(status.dataset.state)
      && !document.querySelector("#ask").disabled;
  }, before, { timeout: WAIT_MS });
  return shown(page);
}

/** Click a decision of the pending approval; what the page shows once the resumed run has ended (or paused). */
export async function decide(page, decision) {
  await page.click(`#approval button[data-decision=${decision}]`);
  await page.waitForFunction(() => document.querySelector("#run-status").dataset.state === "running"
    || document.querySelector("#approval").hidden, null, { timeout: WAIT_MS });
  await settled(page);
  return shown(page);
}

/** Type `text` in the sessions' search; the sessions the server found for it (their buttons' text). */
export async function search(page, text) {
  // the same text again would still ask the server (after the list already shows it): typed only if new
  if (await page.inputValue("#thread-search") !== text) await page.fill("#thread-search", text);
  await page.waitForFunction((t) => document.querySelector("#threads").dataset.text === t.trim(), text,
                             { timeout: WAIT_MS });
  return page.$$eval("#threads button.thread", (b) => b.map((x) => x.textContent));
}

/** Open a session found by searching for its id (from a new session's empty page, so that what is shown is
 * this opening's): until its turns and the newest turn's timeline are shown. */
export async function openSession(page, threadId) {
  await page.click("#new-session");
  await search(page, threadId);
  await page.click(`#threads button.thread[data-thread="${threadId}"]`);
  await sessionShown(page, threadId);
}

export async function sessionShown(page, threadId) {
  await page.waitForFunction((id) => document.querySelector("#session-label").textContent.includes(id.slice(0, 8))
    && document.querySelectorAll("#timeline > li").length > 0 && document.querySelectorAll("#turns > li").length > 0,
  threadId, { timeout: WAIT_MS });
}

/** Whether the page is no wider than its screen, and how many columns its layout has. */
export function fits(page) {
  return page.evaluate(() => ({ scroll: document.documentElement.scrollWidth, width: innerWidth,
    columns: getComputedStyle(document.querySelector("main")).gridTemplateColumns.split(" ").length }));
}

/** Press Tab until focus comes back to an element it has been on (at most `presses` times), marking each element
 * focused on the way (`data-tabbed`); the elements reached, in order. */
export async function tabOrder(page, presses = 600) {
  await page.evaluate(() => {
    for (const e of document.querySelectorAll("[data-tabbed]")) e.removeAttribute("data-tabbed");
    document.activeElement?.blur();
  });
  const reached = [];
  for (let i = 0; i < presses; i++) {
    await page.keyboard.press("Tab");
    const here = await page.evaluate(() => {
      const e = document.activeElement;
      if (!e || e === document.body) return null;
      const again = e.hasAttribute("data-tabbed");
      e.setAttribute("data-tabbed", "");
      return again ? "again" : e.id || e.getAttribute("class") || e.tagName.toLowerCase();
    });
    if (here === "again") break;  // round the page once (past its end, focus leaves it, then comes back)
    if (here) reached.push(here);
  }
  return reached;
}

/** The visible controls under `selector` that Tab did not reach (after `tabOrder`). */
export function unreached(page, selector) {
  return page.evaluate((sel) => [...document.querySelectorAll(sel)].flatMap((panel) => [panel,
    ...panel.querySelectorAll("a[href], button, input, select, textarea, summary, [tabindex]")])
    .filter((e) => e.matches("a[href], button, input, select, textarea, summary, [tabindex]")
      && !e.disabled && e.getClientRects().length > 0 && !e.hasAttribute("data-tabbed"))
    .map((e) => e.id || e.getAttribute("class") || e.tagName.toLowerCase()), selector);
}
