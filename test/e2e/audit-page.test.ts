import t from "tap";
import { mkdir } from "node:fs/promises";
import path from "node:path";
import { startTestServer, repoRoot } from "../support/server.js";
import { skipWithoutBrowser, launchChromium } from "../support/browser.js";

/** The /audit page in a real headless Chromium, against a real server with an API key. */

t.test("audit page", { skip: skipWithoutBrowser() }, async (t) => {
  const srv = await startTestServer({ env: { LANGGRAPH_API_KEY: "k-auditor" } });
  t.teardown(() => srv.close());
  const thread = await srv.client.threads.create({ metadata: { auditor: "page-test" } });
  await srv.client.runs.wait(thread.thread_id, "agent", { input: { messages: [{ role: "user", content: "audit me" }] } });
  const [run] = await srv.client.runs.list(thread.thread_id);

  const browser = await launchChromium();
  t.teardown(() => browser.close());
  const page = await browser.context.newPage();
  await page.goto(`${srv.url}/audit`);

  // Find by metadata: the server wants the key, the page asks for it and sends it.
  await page.fill("#search", JSON.stringify({ auditor: "page-test" }));
  await page.click("#go");
  await page.waitForSelector("#keybox", { state: "visible" });
  t.match(await page.textContent("#message"), /API key/);
  await page.fill("#key", "k-auditor");
  await page.click("#key-save");
  await page.click(`a.result:has-text("${thread.thread_id}")`);

  // The timeline: grouped by run, who and which request, outputs folded away.
  await page.waitForSelector(`section.group[data-run="${run.run_id}"]`);
  t.equal(await page.textContent("#thread-title"), `Thread ${thread.thread_id}`);
  const threadActors = await page.$$eval('section.group[data-run="thread"] td.actor', (cells) => cells.map((c) => c.textContent));
  t.ok(threadActors.length > 0 && threadActors.every((a) => a === "api-key"), "requests made with the key are the key's");
  const runActors = await page.$$eval(`section.group[data-run="${run.run_id}"] td.actor`, (cells) => cells.map((c) => c.textContent ?? ""));
  t.ok(
    runActors.some((a) => a.startsWith("worker:")),
    "the worker's events are its own",
  );
  const runTypes = await page.$$eval(`section.group[data-run="${run.run_id}"] td.type`, (cells) => cells.map((c) => c.textContent));
  t.ok(runTypes.includes("RunEnded") && !runTypes.includes("RunOutput"));
  t.match(await page.textContent(`section.group[data-run="${run.run_id}"] details.outputs summary`), /\d+ output chunks/);
  t.equal(await page.getAttribute(`section.group[data-run="${run.run_id}"] details.outputs`, "open"), null, "folded");
  const requestIds = await page.$$eval('section.group[data-run="thread"] td.request', (cells) => cells.map((c) => c.textContent ?? ""));
  t.ok(requestIds.every((id) => /^[0-9a-f-]{36}$/.test(id)));

  // Click the run's end: the state then, and what changed from the point before.
  await page.click(`section.group[data-run="${run.run_id}"] tr.event:has(td.type:text-is("RunEnded"))`);
  await page.waitForFunction(`(document.getElementById("state").textContent || "").includes('"runs"')`);
  const state = JSON.parse((await page.textContent("#state")) ?? "{}") as { runs: { status: string }[] };
  t.same(
    state.runs.map((r) => r.status),
    ["success"],
  );
  await page.click(`section.group[data-run="${run.run_id}"] tr.event:has(td.type:text-is("RunFinished"))`);
  await page.waitForFunction(`(document.getElementById("diff").textContent || "").includes("thread.status")`);
  t.match(await page.textContent("#diff"), /thread\.status: "busy" → "idle"/);

  const dir = path.join(repoRoot, ".test-results");
  await mkdir(dir, { recursive: true });
  await page.screenshot({ path: path.join(dir, "audit-page.png"), fullPage: true });
});
