// The debugger page's screenshots for docs/ui.md, taken by .ci/update-ui-screenshots against a `reactgraph ui` on a
// scratch Redis: a run's graph and timeline, the state tree, an approval, time travel, two graphs side by side, a
// comparison report, and a phone's screen. Each view is clicked to as a person would; nothing leaves loopback.
//   node ui_screenshots.mjs UI_URL OUT_DIR   (writes OUT_DIR/<view>.png; prints one JSON object)
import { debuggerBrowser, ask, decide, runFrom, openSession, search, PHONE, WAIT_MS } from "./debugger_page.mjs";

const [uiUrl, out] = process.argv.slice(2);
const { browser, open, seen } = await debuggerBrowser(uiUrl);
seen.views = [];

// the whole page, or one element of it (all of it, however tall)
async function shot(page, name, { element, fullPage = false } = {}) {
  const path = `${out}/${name}.png`;
  if (element) await page.locator(element).screenshot({ path });
  else await page.screenshot({ path, fullPage });
  seen.views.push(name);
}

try {
  const page = await open();
  // a run: the graph with the nodes it ran, and its timeline as it streamed
  const run = await ask(page, "北京和上海的天气分别怎么样？哪个城市更热？");
  if (run.state !== "done") throw new Error(`the weather question ended ${run.state}: ${run.problem}`);
  const weather = await page.$eval("#session-label", (l) => l.dataset.thread);
  await shot(page, "run", { fullPage: true });

  // the state at a checkpoint as a folding tree, its messages opened
  const checkpoints = await page.$$("#checkpoints button");
  await checkpoints[checkpoints.length - 1].click();
  const messages = page.locator("#state-view details", { has: page.locator(":scope > summary", { hasText: "messages:" }) })
    .first();
  await messages.locator(":scope > summary").click();
  for (const n of [0, 2]) await messages.locator(":scope > .children > li > details > summary").nth(n).click();
  await page.locator("#state-view").evaluate((v) => { v.scrollTop = 0; });
  await shot(page, "state", { element: "#inspector" });

  // time travel: the turn's first checkpoint, a question asked from it, an edit ready to save and run on
  await openSession(page, weather);
  await (await page.$$("#checkpoints button"))[0].click();
  await page.fill("#question", "广州的天气怎么样？");
  await runFrom(page, "#state-view button.fork-ask");
  await (await page.$$("#checkpoints button"))[0].click();
  await page.click("#state-view details.fork-edit summary");
  await page.fill("#state-view .fork-values", JSON.stringify({ final_answer: "广州更热。" }));
  await page.fill("#state-view .fork-as-node", "finalize");
  await search(page, "");
  await page.locator("#state-view .time-travel").scrollIntoViewIfNeeded();
  await shot(page, "time-travel", { element: "#inspector" });

  // an approval: http_get asks a person first; rejected with a message, so nothing is fetched
  await page.click("#new-session");
  const asked = await ask(page, "Fetch https://example.com/");
  if (asked.state !== "waiting") throw new Error(`no approval was asked for: ${asked.state}`);
  await shot(page, "approval", { element: "#center" });
  await page.fill("#approval .message", "not now");
  await decide(page, "reject");

  // two graphs side by side on one question, each with its cost
  await page.click("#new-session");
  await page.click("#pair-toggle");
  await page.fill("#question", "计算 (15 + 27) * 3 等于多少");
  await page.click("#pair-run");
  await page.waitForFunction(() => document.querySelector("#pair").dataset.state === "done", null,
                             { timeout: WAIT_MS });
  await page.locator("#pair").scrollIntoViewIfNeeded();
  await shot(page, "side-by-side", { element: "#center" });
  await page.click("#pair-toggle");

  // a `reactgraph compare` report: its tables with intervals, and its plots
  await page.click("#comparisons button.comparison");
  await page.waitForSelector("#comparison-view:not([hidden]) .plots figure", { timeout: WAIT_MS });
  await page.waitForFunction(() => [...document.querySelectorAll("#comparison-view img")].every((i) => i.complete),
                             null, { timeout: WAIT_MS });
  await shot(page, "comparison", { element: "#comparison-view" });

  // a phone's screen: one column
  const phone = await open(PHONE);
  await openSession(phone, weather);
  await search(phone, "");
  await phone.evaluate(() => document.querySelector("#ask-form").scrollIntoView());
  await shot(phone, "phone");
} catch (error) {
  seen.error = String(error?.stack ?? error);
} finally {
  await browser.close();
}
console.log(JSON.stringify(seen));
