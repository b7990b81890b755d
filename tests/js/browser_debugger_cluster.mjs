// The debugger page on a Redis Cluster (tests/test_redis_cluster.py): a `reactgraph ui --store redis+cluster://…`
// clicked through in headless Chromium — a question answered live, its session found by the server's search and
// opened, a checkpoint's state, a new branch asked from the turn's first checkpoint, an approval approved, and a
// session asked elsewhere (on each of the cluster's masters) opened with its turns.
//   node browser_debugger_cluster.mjs UI_URL PAGE_URL THREAD...   (prints one JSON object)
import { debuggerBrowser, ask, shown, runFrom, decide, search, openSession } from "./debugger_page.mjs";

const [uiUrl, pageUrl, ...threads] = process.argv.slice(2);
const { browser, open, seen } = await debuggerBrowser(uiUrl);

try {
  const page = await open();
  seen.question = await ask(page, "计算 2 + 3 等于多少");
  const ours = await page.$eval("#session-label", (l) => l.dataset.thread);
  await page.click("#new-session");
  seen.found = await search(page, ours);
  await openSession(page, ours);
  const checkpoints = await page.$$("#checkpoints button");
  seen.checkpoints = checkpoints.length;
  await checkpoints[0].click();
  seen.firstState = await page.$eval("#state-view", (v) => v.textContent);
  await page.fill("#question", "计算 3 + 4 等于多少");
  seen.forked = await runFrom(page, "#state-view button.fork-ask");

  await page.click("#new-session");
  seen.asked = await ask(page, `Fetch ${pageUrl}/on-the-cluster`);
  seen.approved = await decide(page, "approve");

  seen.elsewhere = [];
  for (const thread of threads) {
    await openSession(page, thread);
    seen.elsewhere.push({ thread, turns: await page.$$eval("#turns button.turn .name", (b) => b.map((x) => x.textContent)),
                          answer: (await shown(page)).answer });
  }
} catch (error) {
  seen.error = String(error?.stack ?? error);
} finally {
  await browser.close();
}
console.log(JSON.stringify(seen));
