import t from "tap";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { startTestServer, TEST_GRAPHS, type TestServer } from "../support/server.js";
import { bundleSdkForBrowser, skipWithoutBrowser, launchChromium, servePage } from "../support/browser.js";

/**
 * A browser client on another origin (a page on a second 127.0.0.1 port, the official SDK
 * bundled for the browser) creates a thread, streams a run and resumes the stream with
 * Last-Event-ID, in a real headless Chromium: it works with the default CORS policy and is
 * blocked by a restrictive `http.cors.allow_origins`.
 */

// Runs in the page: everything goes through the SDK's fetch, so the browser enforces CORS.
const SCENARIO = `
export async function scenario(apiUrl: string) {
  const { Client } = await import("@langchain/langgraph-sdk");
  const client = new Client({ apiUrl });
  try {
    const thread = await client.threads.create({ metadata: { from: "browser" } });
    const events: string[] = [];
    const ids: string[] = [];
    let runId = "";
    for await (const chunk of client.runs.stream(thread.thread_id, "agent", {
      input: { messages: [{ role: "user", content: "hello from the browser" }] },
      streamMode: ["values"],
      streamResumable: true,
    })) {
      events.push(chunk.event);
      ids.push(String((chunk as { id?: string }).id));
      if (chunk.event === "metadata") runId = (chunk.data as { run_id: string }).run_id;
    }
    // Resume after the first event: Last-Event-ID is a request header the preflight must allow.
    const resumed: string[] = [];
    for await (const chunk of client.runs.joinStream(thread.thread_id, runId, { lastEventId: ids[0] })) resumed.push(chunk.event);
    const found = await client.threads.search({ metadata: { from: "browser" } });
    return { ok: true, threadId: thread.thread_id, runId, events, resumed, searched: found.length };
  } catch (error) {
    return { ok: false, error: String(error) };
  }
}`;

interface Outcome {
  ok: boolean;
  error?: string;
  threadId?: string;
  runId?: string;
  events?: string[];
  resumed?: string[];
  searched?: number;
}

t.test("a browser client on another origin", { skip: skipWithoutBrowser() }, async (t) => {
  const bundle = await bundleSdkForBrowser(SCENARIO);
  const page = await servePage(bundle);
  t.teardown(() => page.close());
  const browser = await launchChromium();
  t.teardown(() => browser.close());

  async function runIn(srv: TestServer): Promise<Outcome> {
    const tab = await browser.context.newPage();
    try {
      await tab.goto(page.url);
      return (await tab.evaluate(async (apiUrl) => {
        const w = globalThis as unknown as { LangGraph: { scenario(url: string): Promise<unknown> } };
        return w.LangGraph.scenario(apiUrl);
      }, srv.url)) as Outcome;
    } finally {
      await tab.close();
    }
  }

  t.test("default policy: create, stream, resume with Last-Event-ID, search", async (t) => {
    const srv = await startTestServer();
    t.teardown(() => srv.close());
    const outcome = await runIn(srv);
    t.ok(outcome.ok, `succeeded: ${outcome.error ?? ""}`);
    t.equal(outcome.events?.[0], "metadata");
    t.ok(outcome.events?.includes("values"), "values streamed");
    t.same(outcome.resumed, outcome.events?.slice(1), "resumed after the first event");
    t.notOk(outcome.resumed?.includes("metadata"), "the event before Last-Event-ID is not sent again");
    t.equal(outcome.searched, 1, "X-Pagination-Total readable, search works");
    const thread = await srv.client.threads.get(outcome.threadId!);
    t.same(thread.metadata?.from, "browser", "the thread really was created by the browser");
  });

  t.test("a restrictive allow_origins blocks the same page", async (t) => {
    const dir = await mkdtemp(path.join(os.tmpdir(), "agent-server-cors-"));
    t.teardown(() => rm(dir, { recursive: true, force: true }));
    const config = path.join(dir, "langgraph.json");
    await writeFile(
      config,
      JSON.stringify({
        graphs: { agent: `${path.join(path.dirname(TEST_GRAPHS), "agent.ts")}:graph` },
        http: { cors: { allow_origins: ["https://app.example.com"] } },
      }),
    );
    const srv = await startTestServer({ env: { LANGGRAPH_JSON: config } });
    t.teardown(() => srv.close());
    const outcome = await runIn(srv);
    t.equal(outcome.ok, false, "the browser refused the cross-origin call");
    t.match(outcome.error, /Failed to fetch|NetworkError|TypeError/);
    t.same(await srv.client.threads.search(), [], "the preflight stopped the POST: nothing was created");
  });
});
