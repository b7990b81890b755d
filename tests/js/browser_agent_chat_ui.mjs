// agent-chat-ui (LangChain's chat UI, a built checkout served by `next start`) in headless Chromium against
// `reactgraph serve`: a question, then an http_get approved, one edited and one rejected through its inbox.
// Run by tests/test_js_clients.py when $REACTGRAPH_AGENT_CHAT_UI names a built checkout:
//   node browser_agent_chat_ui.mjs UI_URL SERVICE_URL PAGE_URL
// Prints one JSON object of what the page showed; the pytest test asserts on it.
import { chromium } from "playwright-core";

const [uiUrl, serviceUrl, pageUrl] = process.argv.slice(2);
const WAIT_MS = 60_000;
// as root, and quiet on a machine with no network: no background connections Chromium would make on its own
const CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-sync",
                       "--disable-background-networking", "--disable-component-update"];
const browser = await chromium.launch({ executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
                                        args: CHROMIUM_ARGS });
const seen = { failed: [] };

async function open() {
  const page = await browser.newPage();
  page.on("response", (r) => {
    if (r.status() >= 400 && r.url().startsWith(serviceUrl)) seen.failed.push(`${r.status()} ${r.url()}`);
  });
  const query = new URLSearchParams({ apiUrl: serviceUrl, assistantId: "react" });
  await page.goto(`${uiUrl}/?${query}`);
  return page;
}

const body = (page) => page.innerText("body");

async function ask(page, question) {
  await page.fill("form textarea", question);
  await page.keyboard.press("Enter");
}

// until the page shows `text` and no run is going (the composer shows Send, not Cancel)
async function shows(page, text) {
  await page.waitForFunction((t) => document.body.innerText.includes(t)
    && ![...document.querySelectorAll("form button")].some((b) => b.textContent.trim() === "Cancel"),
  text, { timeout: WAIT_MS });
  return body(page);
}

try {
  let page = await open();
  await ask(page, "计算 2 + 3 等于多少");
  seen.question = await shows(page, "2 + 3 = 5");

  page = await open();
  await ask(page, `Fetch ${pageUrl}/approved`);
  await page.getByRole("button", { name: "Approve", exact: true }).waitFor({ timeout: WAIT_MS });
  seen.asked = await body(page);
  await page.getByRole("button", { name: "Approve", exact: true }).click();
  seen.approve = await shows(page, "Content: ok");

  page = await open();
  await ask(page, `Fetch ${pageUrl}/as-asked`);
  const url = page.locator("textarea", { hasText: `${pageUrl}/as-asked` }).first();
  await url.waitFor({ timeout: WAIT_MS });
  await url.fill(`${pageUrl}/as-edited`);
  await page.getByRole("button", { name: "Submit", exact: true }).click();
  seen.edit = await shows(page, "A person edited this call");
  // the offline model asks for its own page again: a person turns it down
  await page.getByRole("button", { name: "Submit rejection" }).waitFor({ timeout: WAIT_MS });
  await page.fill("textarea[placeholder^='Share feedback']", "done");
  await page.getByRole("button", { name: "Submit rejection" }).click();
  seen.editThen = await shows(page, "I could not find the answer");

  page = await open();
  await ask(page, `Fetch ${pageUrl}/rejected`);
  await page.getByRole("button", { name: "Submit rejection" }).waitFor({ timeout: WAIT_MS });
  await page.fill("textarea[placeholder^='Share feedback']", "not that page");
  await page.getByRole("button", { name: "Submit rejection" }).click();
  seen.reject = await shows(page, "I could not find the answer");
} catch (error) {
  seen.error = String(error).slice(0, 2000);
} finally {
  await browser.close();
}
console.log(JSON.stringify(seen));
