// The page of use_stream_app.jsx (LangChain's React `useStream`) in headless Chromium against `reactgraph serve`.
// Run by tests/test_js_clients.py:  node browser_use_stream.mjs SERVICE_URL PAGE_URL PAGE_PORT
// (PAGE_URL: the loopback page http_get fetches; PAGE_PORT: where this serves the chat page, an origin the
// service's CORS settings let in). Chromium: $CHROMIUM or /usr/bin/chromium (no browser download).
// Prints one JSON object of what the page showed; the pytest test asserts on it.
import { createServer } from "node:http";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, dirname } from "node:path";
import { fileURLToPath } from "node:url";
import { build } from "esbuild";
import { chromium } from "playwright-core";

const [serviceUrl, pageUrl, pagePort] = process.argv.slice(2);
const here = dirname(fileURLToPath(import.meta.url));
const WAIT_MS = 60_000;
// as root, and quiet on a machine with no network: no background connections Chromium would make on its own
const CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-sync",
                       "--disable-background-networking", "--disable-component-update"];

const out = mkdtempSync(join(tmpdir(), "use-stream-"));
await build({ entryPoints: [join(here, "use_stream_app.jsx")], bundle: true, outfile: join(out, "app.js"),
              jsx: "automatic", define: { "process.env.NODE_ENV": '"production"' }, logLevel: "error" });
const files = {
  "/": ["text/html", '<!doctype html><meta charset="utf-8"><div id="root"></div><script src="/app.js"></script>'],
  "/app.js": ["text/javascript", readFileSync(join(out, "app.js"))],
  "/favicon.ico": ["image/x-icon", ""],
};
const server = createServer((req, res) => {
  const [type, body] = files[new URL(req.url, "http://x").pathname] ?? ["text/plain", "not found"];
  res.writeHead(files[new URL(req.url, "http://x").pathname] ? 200 : 404, { "content-type": type });
  res.end(body);
});
await new Promise((resolve) => server.listen(Number(pagePort), "127.0.0.1", resolve));

const browser = await chromium.launch({ executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
                                        args: CHROMIUM_ARGS });
const seen = { console: [], failed: [] };

async function open() {
  const page = await browser.newPage();
  page.on("console", (m) => { if (m.type() === "error") seen.console.push(m.text()); });
  page.on("response", (r) => { if (r.status() >= 400) seen.failed.push(`${r.status()} ${r.request().method()} ${r.url()}`); });
  await page.goto(`http://127.0.0.1:${pagePort}/?api=${encodeURIComponent(serviceUrl)}`);
  return page;
}

async function ask(page, question) {
  await page.fill("#question", question);
  await page.click("#send");
}

// until the run has ended with an answer on the page, or an approval is asked for
async function settled(page) {
  await page.waitForFunction(() => document.querySelector("#error")
    || document.querySelector("#interrupt")
    || (document.querySelector("#state")?.textContent === "ready" && document.querySelector("#answer")?.textContent),
  null, { timeout: WAIT_MS });
  return page.evaluate(() => ({
    messages: [...document.querySelectorAll(".message")].map((m) => [m.className.split(" ")[1], m.textContent]),
    interrupt: document.querySelector("#interrupt .action")?.textContent ?? null,
    buttons: [...document.querySelectorAll("#interrupt button")].map((b) => b.textContent.trim()),
    answer: document.querySelector("#answer")?.textContent ?? "",
    error: document.querySelector("#error")?.textContent ?? null,
  }));
}

async function decide(page, button) {
  await page.click(button);
  await page.waitForFunction(() => !document.querySelector("#interrupt button:disabled") , null, { timeout: WAIT_MS });
  await page.waitForFunction(() => !document.querySelector("#interrupt")
    || document.querySelector("#interrupt .action")?.textContent !== window.__lastAsked, null, { timeout: WAIT_MS });
  return settled(page);
}

async function remember(page) {
  await page.evaluate(() => { window.__lastAsked = document.querySelector("#interrupt .action")?.textContent; });
}

try {
  let page = await open();
  await ask(page, "计算 2 + 3 等于多少");
  seen.question = await settled(page);

  page = await open();
  await ask(page, `Fetch ${pageUrl}/approved`);
  seen.asked = await settled(page);
  await remember(page);
  seen.approve = await decide(page, "#approve");

  page = await open();
  await ask(page, `Fetch ${pageUrl}/as-asked`);
  await settled(page);
  await remember(page);
  await page.fill("#edit-url", `${pageUrl}/as-edited`);
  seen.edit = await decide(page, "#edit");
  if (seen.edit.interrupt) {  // the offline model asks for its own page again: a person turns it down
    await remember(page);
    seen.editThen = await decide(page, "#reject");
  }

  page = await open();
  await ask(page, `Fetch ${pageUrl}/rejected`);
  await settled(page);
  await remember(page);
  seen.reject = await decide(page, "#reject");
} finally {
  await browser.close();
  server.close();
  rmSync(out, { recursive: true, force: true });
}
console.log(JSON.stringify(seen));
