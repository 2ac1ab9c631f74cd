import t, { type Test } from "tap";
import { readFile } from "node:fs/promises";
import path from "node:path";
import type { Page } from "playwright-core";
import { repoRoot, startTestServer, TEST_GRAPHS } from "../support/server.js";
import { APP_PAGE, bundleApp, launchChromium, servePage, skipWithoutBrowser } from "../support/browser.js";
import { WORDS } from "../graphs/chat.js";

/**
 * `@langchain/react`'s `useStream` against this server in a real headless Chromium: the page of
 * test/browser/use-stream-app.tsx (the README's example), bundled with esbuild, served from a
 * second origin. Over both transports of the thread streaming protocol it submits a message and
 * renders the reply token by token, survives a reload mid-run (it reattaches to the run and shows
 * the rest), comes back to the finished thread for a second turn, answers an interrupt (also after
 * a reload), and shows the final state.
 */

const GRAPHS = path.join(path.dirname(TEST_GRAPHS), "langgraph.react.json");
const APP = path.join(repoRoot, "test", "browser", "use-stream-app.tsx");
const TRANSPORTS = ["sse", "websocket"] as const;
const FINAL = (text: string) => `You said: ${text}. ${WORDS.join(" ")}`;

// Runs in the page before its scripts: every text the AI message showed, in order (one page load).
const RECORD_AI_TEXTS = `
  window.__aiTexts = [];
  new MutationObserver(() => {
    const last = [...document.querySelectorAll('#messages li[data-type="ai"]')].at(-1);
    const text = last ? last.textContent : null;
    if (text && window.__aiTexts.at(-1) !== text) window.__aiTexts.push(text);
  }).observe(document, { subtree: true, childList: true, characterData: true });
`;

const aiTexts = (tab: Page) => tab.evaluate(() => (globalThis as unknown as { __aiTexts: string[] }).__aiTexts);
const texts = (tab: Page, type: string) => tab.locator(`#messages li[data-type="${type}"]`).allTextContents();
/** The message contents of the state the page shows (`useStream`'s values: messages as serialized LangChain messages). */
async function stateMessages(tab: Page): Promise<unknown[] | undefined> {
  const values = JSON.parse((await tab.locator("#state").textContent()) ?? "null") as {
    messages?: { kwargs?: { content: unknown }; content?: unknown }[];
  } | null;
  return values?.messages?.map((m) => textOf(m.kwargs?.content ?? m.content));
}

/** A message content as text (a string, or content blocks as the streamed messages carry them). */
const textOf = (content: unknown): unknown =>
  Array.isArray(content) ? content.map((block: { text?: unknown }) => (typeof block.text === "string" ? block.text : "")).join("") : content;

t.test("the README's useStream example is this page", async (t) => {
  const app = await readFile(APP, "utf8");
  const readme = await readFile(path.join(repoRoot, "README.md"), "utf8");
  const code = app.slice(app.indexOf("import { useState }"));
  t.ok(code.length > 500, "the page's code");
  t.ok(readme.includes(`\`\`\`tsx\n${code}\`\`\``), "README.md shows the page's code, unchanged");
});

t.test("@langchain/react useStream in Chromium", { skip: skipWithoutBrowser() }, async (t) => {
  const srv = await startTestServer({ env: { LANGGRAPH_JSON: GRAPHS } });
  t.teardown(() => srv.close());
  const page = await servePage(await bundleApp(APP), APP_PAGE);
  t.teardown(() => page.close());
  const browser = await launchChromium();
  t.teardown(() => browser.close());

  /** A new tab on the page; `errors` collects what the page threw. */
  async function open(t: Test, assistant: string, transport: string): Promise<{ tab: Page; errors: string[] }> {
    const tab = await browser.context.newPage();
    t.teardown(() => tab.close());
    const errors: string[] = [];
    tab.on("pageerror", (error) => errors.push(String(error)));
    await tab.addInitScript(RECORD_AI_TEXTS);
    await tab.goto(`${page.url}/?${new URLSearchParams({ api: srv.url, assistant, transport })}`);
    return { tab, errors };
  }

  async function send(tab: Page, text: string) {
    await tab.locator("input[name=text]").fill(text);
    await tab.locator("button", { hasText: "Send" }).click();
  }

  for (const transport of TRANSPORTS) {
    t.test(`${transport}: streams the reply, survives a reload mid-run, shows the final state`, async (t) => {
      // An assistant of the chat graph that takes 6 s to reply: time enough to reload on a busy machine.
      const slow = await srv.client.assistants.create({ graphId: "chat", config: { configurable: { delay: 600 } } });
      const { tab, errors } = await open(t, slow.assistant_id, transport);
      await send(tab, "hello");
      // Token by token: the reply grows while the run goes on. The page may attach to the run's
      // stream late on a busy machine and render the first two chunks at once; from there on each
      // chunk is a render of its own.
      await tab.locator('#messages li[data-type="ai"]', { hasText: "two" }).waitFor();
      const before = await aiTexts(tab);
      t.ok(before.length >= 2, `the reply was rendered in pieces: ${JSON.stringify(before)}`);
      t.ok(
        before.every((text, i) => i === 0 || (text.startsWith(before[i - 1]!) && text.length > before[i - 1]!.length)),
        `each piece grows the one before: ${JSON.stringify(before)}`,
      );
      t.notOk(
        before.some((text) => text === FINAL("hello")),
        "not finished yet",
      );
      t.same(await texts(tab, "human"), ["hello"]);
      const threadId = new URL(tab.url()).searchParams.get("thread");
      t.match(threadId, /^[0-9a-f-]{36}$/, "the page keeps its thread in the address");
      const [run] = await srv.client.runs.list(threadId!);
      t.equal(run?.status, "running", "the run is in flight when the page reloads");

      await tab.reload();
      await tab.locator('#messages li[data-type="ai"]', { hasText: "ten." }).waitFor();
      await tab.locator("#status", { hasText: "idle" }).waitFor();
      const after = await aiTexts(tab);
      // The reloaded page found no reply in the thread's state: what it shows came from the run's stream.
      t.not(after[0], FINAL("hello"), `reattached mid-run, the reply grew again: ${JSON.stringify(after)}`);
      t.equal(after.at(-1), FINAL("hello"));
      t.same(await texts(tab, "human"), ["hello"], "the human message once");
      t.same(await texts(tab, "ai"), [FINAL("hello")], "the reply once");
      t.same(await stateMessages(tab), ["hello", FINAL("hello")], "final state");
      t.equal((await srv.client.runs.get(threadId!, run!.run_id)).status, "success");

      // Coming back to the finished thread: the page shows it from the thread's state, then goes on with a second turn.
      await tab.reload();
      await tab.locator('#messages li[data-type="ai"]', { hasText: "ten." }).waitFor();
      t.same(await texts(tab, "ai"), [FINAL("hello")], "the finished thread, shown once");
      await send(tab, "again");
      await tab.locator('#messages li[data-type="ai"]', { hasText: `You said: again. ${WORDS.join(" ")}` }).waitFor();
      await tab.locator("#status", { hasText: "idle" }).waitFor();
      t.same(await texts(tab, "ai"), [FINAL("hello"), FINAL("again")]);
      const server = await srv.client.threads.getState<{ messages: { content: string }[] }>(threadId!);
      t.same(
        server.values.messages.map((m) => m.content),
        ["hello", FINAL("hello"), "again", FINAL("again")],
        "the server's state agrees",
      );
      t.same(errors, [], "nothing thrown in the page");
    });

    t.test(`${transport}: answers an interrupt, also after a reload`, async (t) => {
      const { tab, errors } = await open(t, "interrupt", transport);
      await send(tab, "go");
      await tab.locator("#interrupt", { hasText: "Continue?" }).waitFor();
      await tab.locator("#status", { hasText: "idle" }).waitFor();
      // The question is the thread's: a reloaded page asks it again.
      await tab.reload();
      await tab.locator("#interrupt", { hasText: "Continue?" }).waitFor();
      t.same(await texts(tab, "human"), ["go"]);
      await tab.locator("#interrupt button", { hasText: "Yes" }).click();
      await tab.locator('#messages li[data-type="ai"]', { hasText: "You answered: yes" }).waitFor();
      await tab.locator("#status", { hasText: "idle" }).waitFor();
      // The client drops the question when the server has answered its respond command, which can reach
      // the page after the resumed run's reply and end have come over the stream: wait for that answer.
      await tab.locator("#interrupt").waitFor({ state: "detached" });
      t.equal(await tab.locator("#interrupt").count(), 0, "the question is gone");
      t.same(await texts(tab, "human"), ["go"]);
      t.same(await texts(tab, "ai"), ["You answered: yes"]);
      t.same(await stateMessages(tab), ["go", "You answered: yes"], "final state");
      const threadId = new URL(tab.url()).searchParams.get("thread")!;
      const runs = await srv.client.runs.list(threadId);
      t.same(runs.map((r) => r.status).sort(), ["interrupted", "success"], "the first run interrupted, the answer resumed it");
      t.same(errors, [], "nothing thrown in the page");
    });
  }
});
