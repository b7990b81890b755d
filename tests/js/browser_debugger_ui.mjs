// The debugger page (reactgraph/ui) in headless Chromium against a real `reactgraph ui`, clicked through as a
// person would: each graph drawn, a question answered live on each, the state tree, a session found by search,
// approvals approved, edited and rejected from the page, a hostile tool output shown as text, both screen sizes.
// Every request the page makes is seen here: one to anything but loopback is refused and reported (`offLoopback`).
// Run by tests/test_debugger_ui.py:  node browser_debugger_ui.mjs UI_URL PAGE_URL [SCREENSHOT_DIR]
// (PAGE_URL: the loopback page the approved http_get fetches). Prints one JSON object; the test asserts on it.
import { chromium } from "playwright-core";

const [uiUrl, pageUrl, shots] = process.argv.slice(2);
const WAIT_MS = 60_000;
const CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-sync",
                       "--disable-background-networking", "--disable-component-update"];
const LOOPBACK = new Set(["127.0.0.1", "localhost", "[::1]"]);

const browser = await chromium.launch({ executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
                                        args: CHROMIUM_ARGS });
const seen = { console: [], failed: [], offLoopback: [], requests: 0 };

async function open(viewport = { width: 1280, height: 800 }) {
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
  page.on("response", (r) => { if (r.status() >= 400) seen.failed.push(`${r.status()} ${r.request().method()} ${r.url()}`); });
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

async function ask(page, question, { keyboard = false } = {}) {
  await page.evaluate(() => window.__ran.clear());
  await page.fill("#question", question);
  if (keyboard) {
    await page.focus("#question");
    await page.keyboard.press("Control+Enter");
  } else {
    await page.click("#ask");
  }
  await page.waitForSelector("#run-status[data-state=running]", { timeout: WAIT_MS }).catch(() => {});
  await page.waitForFunction(() => ["done", "waiting", "failed"].includes(document.querySelector("#run-status").dataset.state)
    && !document.querySelector("#ask").disabled, null, { timeout: WAIT_MS });
  return shown(page);
}

function shown(page) {
  return page.evaluate(() => ({
    status: document.querySelector("#run-status").textContent,
    state: document.querySelector("#run-status").dataset.state,
    entries: [...document.querySelectorAll("#timeline > li")].map((li) => ({
      kind: li.className.replace("entry ", ""), tool: li.dataset.tool ?? null, status: li.dataset.status ?? null,
      text: li.textContent })),
    answer: document.querySelector("#final-answer")?.textContent ?? null,
    ran: [...window.__ran].sort(),
    usage: document.querySelector("#usage").textContent,
    problem: document.querySelector("#problem").hidden ? null : document.querySelector("#problem").textContent,
  }));
}

// click a button that starts a run; what the page shows once that run has ended (its run id is a new one)
async function runFrom(page, selector) {
  const before = await page.$eval("#run-status", (s) => s.dataset.run ?? "");
  await page.click(selector);
  await page.waitForFunction((old) => {
    const status = document.querySelector("#run-status");
    return (status.dataset.run ?? "") !== old && ["done", "failed"].includes(status.dataset.state)
      && !document.querySelector("#ask").disabled;
  }, before, { timeout: WAIT_MS });
  return shown(page);
}

// click a decision of the pending approval; what the page shows once the resumed run has ended (or paused again)
async function decide(page, decision) {
  await page.click(`#approval button[data-decision=${decision}]`);
  await page.waitForFunction(() => document.querySelector("#run-status").dataset.state === "running"
    || document.querySelector("#approval").hidden, null, { timeout: WAIT_MS });
  await page.waitForFunction(() => ["done", "waiting", "failed"].includes(document.querySelector("#run-status").dataset.state)
    && !document.querySelector("#ask").disabled, null, { timeout: WAIT_MS });
  return shown(page);
}

async function screenshot(page, name) {
  if (shots) await page.screenshot({ path: `${shots}/${name}.png`, fullPage: false });
}

try {
  const page = await open();
  seen.graphs = await page.$$eval(".graph-choice", (b) => b.map((x) => x.dataset.graph));
  seen.nodes = await page.$$eval("#graph-view g.node", (g) => g.map((x) => x.dataset.node));
  seen.edges = await page.$$eval("#graph-view path.edge", (p) => p.length);

  seen.question = await ask(page, "计算 2 + 3 等于多少");
  await screenshot(page, "run-1280");

  // the state at the turn's first checkpoint, then a branch of the tree opened
  const checkpoints = await page.$$("#checkpoints button");
  seen.checkpoints = checkpoints.length;
  await checkpoints[0].click();
  seen.firstState = await page.$eval("#state-view", (v) => v.textContent);
  await checkpoints[checkpoints.length - 1].click();
  const summary = page.locator("#state-view summary", { hasText: "messages:" }).first();
  await summary.focus();
  await page.keyboard.press("Enter");  // open it from the keyboard
  seen.tree = await page.evaluate(() => ({
    keys: [...document.querySelectorAll("#state-view .json-tree > li > details > .children > li .key")]
      .map((k) => k.textContent.replace(": ", "")).slice(0, 40),
    messagesOpen: [...document.querySelectorAll("#state-view details")].some((d) => d.open
      && d.querySelector(":scope > summary .key")?.textContent === "messages: "),
    text: document.querySelector("#state-view").textContent,
  }));

  // time travel: the same session asked another question from the turn's first checkpoint (a new branch), then
  // the newest checkpoint's state edited and the run taken on from it
  await checkpoints[0].click();
  await page.fill("#question", "计算 3 + 4 等于多少");
  seen.forked = await runFrom(page, "#state-view button.fork-ask");
  const latest = await page.$$("#checkpoints button");
  await latest[latest.length - 1].click();
  await page.click("#state-view details.fork-edit summary");
  await page.fill("#state-view .fork-values", JSON.stringify({ final_answer: "edited on the page" }));
  await page.fill("#state-view .fork-as-node", "finalize");
  seen.editRun = await runFrom(page, "#state-view button.fork-run");
  const after = await page.$$("#checkpoints button");
  await after[after.length - 1].click();
  seen.editedState = await page.$eval("#state-view", (v) => v.textContent);
  seen.historyLengths = [checkpoints.length, latest.length, after.length];

  // the session is listed, found by search, and nothing matches nonsense
  await page.fill("#thread-search", "2 + 3");
  seen.searchHit = await page.$$eval("#threads button.thread", (b) => b.map((x) => x.textContent));
  await page.fill("#thread-search", "no-such-session-anywhere");
  seen.searchMiss = await page.$eval("#threads", (l) => l.textContent);
  await page.fill("#thread-search", "");

  // an approval: asked, shown with its buttons, approved, and the run goes on to its answer
  await page.click("#new-session");
  seen.asked = await ask(page, `Fetch ${pageUrl}/approved`);
  seen.approval = await page.evaluate(() => ({
    tools: [...document.querySelectorAll("#approval .action-request")].map((r) => r.dataset.tool),
    buttons: [...document.querySelectorAll("#approval button")].map((b) => b.dataset.decision),
    text: document.querySelector("#approval").textContent,
    waitingNode: [...document.querySelectorAll("g.node.waiting")].map((g) => g.dataset.node),
  }));
  await screenshot(page, "approval-1280");
  seen.approved = await decide(page, "approve");
  seen.approvalHidden = await page.$eval("#approval", (a) => a.hidden);

  // an edit: the person's arguments run instead of the model's; then a reject, with a message the model reads
  await page.click("#new-session");
  await ask(page, `Fetch ${pageUrl}/as-asked`);
  await page.click("#approval .action-request details.edit summary");
  await page.fill("#approval .edit-args", JSON.stringify({ url: `${pageUrl}/as-edited` }));
  seen.edited = await decide(page, "edit");
  if (seen.edited.state === "waiting") {  // the offline model asks for its own page again: a person says no
    seen.editedThen = await decide(page, "reject");
  }
  await page.click("#new-session");
  await ask(page, `Fetch ${pageUrl}/rejected`);
  await page.fill("#approval .message", "not that page");
  seen.rejected = await decide(page, "reject");

  // a tool's output with markup and script in it: text on the page, nothing made of it; sent from the keyboard
  await page.click("#new-session");
  seen.hostile = await ask(page, "北京天气怎么样", { keyboard: true });
  seen.injected = await page.evaluate(() => ({
    images: document.querySelectorAll("img").length,
    scripts: document.querySelectorAll("script").length,
    bold: document.querySelectorAll("#timeline b, #state-view b").length,
    pwned: window.__pwned ?? null,
  }));
  await screenshot(page, "hostile-1280");
  seen.wide = await page.evaluate(() => ({ scroll: document.documentElement.scrollWidth, width: innerWidth }));

  // the other paradigms: Plan-and-Solve's plan and its steps, a Reflexion trial and its verdict
  for (const [graph, node] of [["plan_solve", "execute_step"], ["reflexion", "trial"]]) {
    await page.click(`.graph-choice[data-graph=${graph}]`);
    await page.waitForSelector(`#graph-view g.node[data-node=${node}]`, { timeout: WAIT_MS });
    await page.click("#new-session");
    seen[graph] = await ask(page, "计算 2 + 3 等于多少");
    seen[graph].nodes = await page.$$eval("#graph-view g.node", (g) => g.map((x) => x.dataset.node));
  }

  // two graphs side by side on one question: both timelines live, each with its status and cost
  await page.click(".graph-choice[data-graph=react]");
  await page.click("#pair-toggle");
  await page.fill("#question", "计算 (15 + 27) * 3 等于多少");
  await page.click("#pair-run");
  await page.waitForFunction(() => document.querySelector("#pair").dataset.state === "done", null,
                             { timeout: WAIT_MS });
  seen.pair = await page.evaluate(() => [...document.querySelectorAll(".pair-column")].map((column) => ({
    graph: column.dataset.graph,
    status: column.querySelector(".pair-status").textContent,
    state: column.querySelector(".pair-status").dataset.state,
    usage: column.querySelector(".pair-usage").textContent,
    kinds: [...column.querySelectorAll(".pair-timeline > li")].map((li) => li.className.replace("entry ", "")),
    answer: column.querySelector(".final-answer, [id$=final-answer]")?.textContent ?? column.textContent,
  })));
  await screenshot(page, "side-by-side-1280");
  seen.pairWide = await page.evaluate(() => ({ scroll: document.documentElement.scrollWidth, width: innerWidth }));

  // a comparison of `reactgraph compare`: its tables (with intervals) and its plots, fetched with credentials
  const listed = await page.$$eval("#comparisons button.comparison", (b) => b.map((x) => x.textContent));
  await page.click("#comparisons button.comparison");
  await page.waitForSelector("#comparison-view:not([hidden]) .plots figure", { timeout: WAIT_MS });
  await page.waitForFunction(() => [...document.querySelectorAll("#comparison-view img")].every((i) => i.complete),
                             null, { timeout: WAIT_MS });
  seen.comparison = await page.evaluate((names) => ({
    listed: names,
    text: document.querySelector("#comparison-view").textContent,
    plots: document.querySelectorAll("#comparison-view img").length,
    loaded: [...document.querySelectorAll("#comparison-view img")].filter((i) => i.naturalWidth > 0).length,
  }), listed);
  await screenshot(page, "comparison-1280");

  // a phone's screen: one column, nothing wider than the screen
  const phone = await open({ width: 390, height: 844 });
  // one of this script's sessions (the store may hold other programs' sessions too, some with no turn yet)
  await phone.fill("#thread-search", "2 + 3");
  await phone.click("#threads button.thread");
  await phone.waitForSelector("#timeline > li", { timeout: WAIT_MS });
  seen.phone = await phone.evaluate(() => ({ scroll: document.documentElement.scrollWidth, width: innerWidth,
    columns: getComputedStyle(document.querySelector("main")).gridTemplateColumns.split(" ").length }));
  await screenshot(phone, "session-390");
} catch (error) {
  seen.error = String(error?.stack ?? error);
} finally {
  await browser.close();
}
console.log(JSON.stringify(seen));
