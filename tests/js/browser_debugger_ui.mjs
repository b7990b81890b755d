// The debugger page (reactgraph/ui) in headless Chromium against a real `reactgraph ui`, clicked through as a
// person would: each graph drawn, a question answered live on each, the state tree, a session found by search,
// approvals approved, edited and rejected from the page, a hostile tool output shown as text, both screen sizes.
// Every request the page makes is seen here: one to anything but loopback is refused and reported (`offLoopback`).
// Run by tests/test_debugger_ui.py:  node browser_debugger_ui.mjs UI_URL PAGE_URL LONG_THREAD [SCREENSHOT_DIR]
// (PAGE_URL: the loopback page the approved http_get fetches; LONG_THREAD: a session of many turns). Prints one
// JSON object; the test asserts on it.
import { debuggerBrowser, ask, shown, runFrom, decide, search, sessionShown, fits, tabOrder, unreached, PHONE,
         WAIT_MS } from "./debugger_page.mjs";

const [uiUrl, pageUrl, longThread, shots] = process.argv.slice(2);
const { browser, open, seen } = await debuggerBrowser(uiUrl);

async function screenshot(page, name) {
  if (shots) await page.screenshot({ path: `${shots}/${name}.png`, fullPage: false });
}

// Time travel, side by side and comparisons on a phone with the keyboard alone: each of their controls reached
// with Tab, a fork asked from a checkpoint and two graphs asked side by side with Enter, all within the screen.
async function phoneByKeyboard(phone) {
  const enter = async (selector) => { await phone.focus(selector); await phone.keyboard.press("Enter"); };
  await enter("#checkpoints button.checkpoint");  // the turn's first checkpoint
  await enter("#state-view details.fork-edit summary");
  await enter("#pair-toggle");
  await enter("#comparisons button.comparison");
  await phone.waitForSelector("#comparison-view:not([hidden]) .plots figure", { timeout: WAIT_MS });
  const panels = "#state-view .time-travel, #pair, #comparisons, #comparison-view";
  const reached = await tabOrder(phone);
  const result = { reached, unreached: await unreached(phone, panels), wide: await fits(phone),
                   outside: await outside(phone, panels) };
  await screenshot(phone, "comparison-390");
  await phone.fill("#question", "计算 6 + 7 等于多少");
  result.fork = await runFrom(phone, () => enter("#state-view button.fork-ask"));
  await phone.fill("#question", "计算 (15 + 27) * 3 等于多少");
  await enter("#pair-run");
  await phone.waitForFunction(() => document.querySelector("#pair").dataset.state === "done", null,
                              { timeout: WAIT_MS });
  result.pair = await phone.$$eval(".pair-status", (s) => s.map((x) => x.dataset.state));
  result.pairWide = await fits(phone);
  result.pairOutside = await outside(phone, "#pair");
  await screenshot(phone, "side-by-side-390");
  return result;
}

// A session of many turns: opened with a bounded number of requests (its newest turns), its earlier turns read
// when asked for, and its first turn whole when shown.
async function longSession(page, threadId) {
  await search(page, threadId);
  const asked = [];
  const record = (r) => { if (!r.url().includes("/ui/")) asked.push(`${r.method()} ${new URL(r.url()).pathname}`); };
  page.on("request", record);
  await page.click(`#threads button.thread[data-thread="${threadId}"]`);
  await sessionShown(page, threadId);
  page.off("request", record);
  const result = { openedWith: asked, turnsFirst: await page.$$eval("#turns > li", (l) => l.length),
                   moreShown: await page.$eval("#more-turns", (b) => !b.hidden) };
  while (await page.$eval("#more-turns", (b) => !b.hidden)) {
    const before = await page.$$eval("#turns > li", (l) => l.length);
    await page.click("#more-turns");
    await page.waitForFunction((n) => document.querySelectorAll("#turns > li").length > n
      || document.querySelector("#more-turns").hidden, before, { timeout: WAIT_MS });
  }
  result.turns = await page.$$eval("#turns button.turn .name", (b) => b.map((x) => x.textContent));
  await page.click("#turns button.turn");  // the first turn
  await page.waitForSelector("#turns button.turn[aria-current=true]", { timeout: WAIT_MS });
  result.firstTimeline = (await shown(page)).entries.map((e) => e.kind);
  const checkpoints = await page.$$("#checkpoints button");
  result.firstCheckpoints = checkpoints.length;
  await checkpoints[0].click();
  result.firstState = await page.$eval("#state-view", (v) => v.textContent);
  return result;
}

// the visible controls under `selector` that reach past the screen's edges
function outside(page, selector) {
  return page.evaluate((sel) => [...document.querySelectorAll(sel)].flatMap((panel) =>
    [...panel.querySelectorAll("button, input, select, textarea, summary, table, img")]).filter((e) => {
    const box = e.getBoundingClientRect();
    const scroller = e.closest("#comparison-view");  // a wide table scrolls inside its own box
    return box.width > 0 && !scroller && (box.left < 0 || box.right > innerWidth + 1);
  }).map((e) => e.id || e.className || e.tagName), selector);
}

try {
  const page = await open();
  seen.graphs = await page.$$eval(".graph-choice", (b) => b.map((x) => x.dataset.graph));
  seen.nodes = await page.$$eval("#graph-view g.node", (g) => g.map((x) => x.dataset.node));
  seen.edges = await page.$$eval("#graph-view path.edge", (p) => p.length);

  seen.question = await ask(page, "计算 2 + 3 等于多少");
  const ours = await page.$eval("#session-label", (l) => l.dataset.thread);
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

  // the session is listed, found by the server's search (its first question, its id), and nothing matches nonsense
  seen.searchHit = await search(page, "2 + 3");
  seen.searchById = await search(page, ours.slice(0, 13).toUpperCase());
  seen.ours = ours;
  await search(page, "no-such-session-anywhere");
  seen.searchMiss = await page.$eval("#threads", (l) => l.textContent);
  await search(page, "");

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

  seen.long = await longSession(page, longThread);

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

  // a phone's screen: one column, nothing wider than the screen; the newer panels by keyboard alone
  const phone = await open(PHONE);
  await search(phone, ours);
  await phone.focus(`#threads button.thread[data-thread="${ours}"]`);
  await phone.keyboard.press("Enter");
  await phone.waitForSelector("#timeline > li", { timeout: WAIT_MS });
  seen.phone = await fits(phone);
  await screenshot(phone, "session-390");
  seen.phoneKeys = await phoneByKeyboard(phone);
} catch (error) {
  seen.error = String(error?.stack ?? error);
} finally {
  await browser.close();
}
console.log(JSON.stringify(seen));
