// benchmarks/ui_open.py's browser side: in headless Chromium, open each session by clicking it in the list, in
// alternating order round after round, and time in the page from the click until its turns and its newest turn's
// timeline are on the page and the next frame has been drawn; with the API requests and bytes that took.
//   node ui_open.mjs UI_URL ROUNDS THREAD...   (prints one JSON object)
import { debuggerBrowser, search } from "./debugger_page.mjs";

const [uiUrl, rounds, ...threads] = process.argv.slice(2);
const { browser, open, seen } = await debuggerBrowser(uiUrl);

async function timedOpen(page, threadId) {
  await page.click("#new-session");
  await search(page, threadId);
  const asked = [];
  const record = (r) => { if (!r.url().includes("/ui/")) asked.push(new URL(r.url()).pathname); };
  page.on("request", record);
  const done = page.evaluate((id) => new Promise((resolve) => {
    const button = document.querySelector(`#threads button.thread[data-thread="${id}"]`);
    let started = 0;
    const shown = () => document.querySelector("#session-label").dataset.thread === id
      && document.querySelectorAll("#timeline > li").length > 0 && document.querySelectorAll("#turns > li").length > 0;
    const watcher = new MutationObserver(() => {
      if (!started || !shown()) return;
      watcher.disconnect();
      const inDom = performance.now() - started;
      requestAnimationFrame(() => requestAnimationFrame(() => {  // the frame with it drawn has been produced
        const bytes = performance.getEntriesByType("resource").filter((e) => e.startTime >= started)
          .reduce((sum, e) => sum + e.decodedBodySize, 0);
        resolve({ inDom, drawn: performance.now() - started, bytes,
                  turns: document.querySelectorAll("#turns > li").length,
                  entries: document.querySelectorAll("#timeline > li").length });
      }));
    });
    watcher.observe(document.body, { subtree: true, childList: true, characterData: true, attributes: true });
    button.addEventListener("click", () => { started = performance.now(); }, { capture: true, once: true });
  }), threadId);
  await page.click(`#threads button.thread[data-thread="${threadId}"]`);
  const timing = await done;
  page.off("request", record);
  return { ...timing, requests: asked };
}

const result = { opens: {} };
try {
  const page = await open();
  for (let round = 0; round < Number(rounds); round++) {
    const order = round % 2 ? [...threads].reverse() : threads;
    for (const threadId of order) (result.opens[threadId] ??= []).push(await timedOpen(page, threadId));
  }
} catch (error) {
  result.error = String(error?.stack ?? error);
} finally {
  await browser.close();
}
result.offLoopback = seen.offLoopback;
result.console = seen.console;
console.log(JSON.stringify(result));
