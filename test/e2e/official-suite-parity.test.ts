import t, { type Test } from "tap";
import { execFile } from "node:child_process";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { repoRoot, startTestServer } from "../support/server.js";
import { spawnServer } from "../support/process.js";
import { Client } from "@langchain/langgraph-sdk";

/**
 * Differences the official JS server's own API test suite (libs/langgraph-api/tests/api.test.mts)
 * found when run against this server; each is checked here through the real server and the SDK.
 * Then the comparison test/parity/official-suite.sh makes of a run's failures with the expected ones
 * its README lists (offline, on made-up vitest reports: `--compare`), and its refusal of another commit.
 */

const graphs = path.join(repoRoot, "test", "graphs");

t.test("LANGGRAPH_CONFIG given in langgraph.json's env configures the default assistants", async (t) => {
  const dir = await mkdtemp(path.join(os.tmpdir(), "agent-server-lgconfig-"));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  const config = (env: Record<string, string>) => ({
    graphs: { agent: path.join(graphs, "agent.ts:graph"), context: path.join(graphs, "parity", "context.ts:graph") },
    env,
  });
  const fromFile = JSON.stringify({ agent: { configurable: { model_name: "from-file" } }, context: { context: { model: "from-file" } } });
  await writeFile(path.join(dir, "langgraph.json"), JSON.stringify(config({ LANGGRAPH_CONFIG: fromFile })));

  // The official test graphs set it this way (their langgraph.json's env), not in the environment.
  const env = { LANGGRAPH_JSON: path.join(dir, "langgraph.json"), DATA_DIR: path.join(dir, "data") };
  const server = await spawnServer(env);
  t.teardown(() => void server.child.kill());
  t.ok(server.url, `the server started: ${server.stderr}`);
  const client = new Client({ apiUrl: server.url! });
  const [agent] = await client.assistants.search({ graphId: "agent", metadata: { created_by: "system" } });
  t.same(agent.config, { configurable: { model_name: "from-file" } }, "the default assistant's config");
  const [context] = await client.assistants.search({ graphId: "context", metadata: { created_by: "system" } });
  t.same(context.context, { model: "from-file" }, "the default assistant's context");
  t.same(await client.runs.wait(null, "context", { input: {} }), { model: "from-file" }, "a run of the graph id gets that context");
  server.child.kill();
  await server.exited;

  // A variable set in the environment wins over the file's, as for every variable of `env`.
  const fromEnv = JSON.stringify({ context: { context: { model: "from-env" } } });
  const again = await spawnServer({ ...env, DATA_DIR: path.join(dir, "data-env"), LANGGRAPH_CONFIG: fromEnv });
  t.teardown(() => void again.child.kill());
  t.ok(again.url, `the server started: ${again.stderr}`);
  t.same(await new Client({ apiUrl: again.url! }).runs.wait(null, "context", { input: {} }), { model: "from-env" });
});

t.test("a run's SSE ids count its events from 0, the first run and a resumed subgraph run alike", async (t) => {
  const srv = await startTestServer({ env: { LANGGRAPH_JSON: path.join(graphs, "parity", "langgraph.json") } });
  t.teardown(() => srv.close());
  const client = srv.client;
  const thread = await client.threads.create();
  const ids = (parts: { id?: string }[]) => parts.map((p) => p.id);
  const upTo = (n: number) => Array.from({ length: n }, (_, i) => String(i));
  const collect = async <T>(iter: AsyncIterable<T>) => {
    const out: T[] = [];
    for await (const part of iter) out.push(part);
    return out;
  };

  const first = await collect(client.runs.stream(thread.thread_id, "nested_interrupt", { input: {}, streamMode: "values" }));
  t.same(
    first.map((p) => p.event),
    ["metadata", "values"],
    "metadata, then the input until the interrupt",
  );
  t.same(ids(first), upTo(first.length), "ids 0, 1 as the official server's");
  t.equal((await client.threads.get(thread.thread_id)).status, "interrupted");

  const resumed = await collect(
    client.runs.stream(thread.thread_id, "nested_interrupt", { command: { resume: "Paris" }, streamMode: ["values", "updates"], streamSubgraphs: true }),
  );
  t.ok(
    resumed.some((p) => p.event.startsWith("updates|child:")),
    "subgraph events are streamed",
  );
  t.same(ids(resumed), upTo(resumed.length), "the resumed run's ids start at 0 too");

  // Last-Event-ID is one of those ids: joining after id 0 gives exactly the events after it.
  const runId = (first[0].data as { run_id: string }).run_id;
  const rest = await collect(client.runs.joinStream(thread.thread_id, runId, { lastEventId: "0" }));
  t.same(rest, first.slice(1), "after id 0");
  t.same(await collect(client.runs.joinStream(thread.thread_id, runId, { lastEventId: "-1" })), first, "from the start");
});

t.test("multitask rollback of a run that had started: gone as soon as the rolling-back run is created", async (t) => {
  const srv = await startTestServer();
  t.teardown(() => srv.close());
  const client = srv.client;
  const thread = await client.threads.create();
  const human = (content: string) => ({ role: "human", content });
  const slow = await client.runs.create(thread.thread_id, "delay", { input: { delay: 60_000, messages: [human("first")] } });
  // Started: its first event (metadata) is written with its claim.
  for await (const part of client.runs.joinStream(thread.thread_id, slow.run_id, { lastEventId: "-1" })) if (part.event === "metadata") break;
  t.equal((await client.runs.get(thread.thread_id, slow.run_id)).status, "running");

  const winner = await client.runs.create(thread.thread_id, "agent", { input: { messages: [human("second")] }, multitaskStrategy: "rollback" });
  await t.rejects(client.runs.get(thread.thread_id, slow.run_id), /404/, "the rolled-back run is deleted at once");
  t.same(
    (await client.runs.list(thread.thread_id)).map((r) => r.run_id),
    [winner.run_id],
  );
  await client.runs.join(thread.thread_id, winner.run_id);
  t.equal((await client.runs.get(thread.thread_id, winner.run_id)).status, "success");
  const state = await client.threads.getState<{ messages: { content: string }[] }>(thread.thread_id);
  t.equal(state.values.messages[0].content, "second", "the rolled-back run left nothing in the thread");
  const history = await client.threads.getHistory(thread.thread_id, { limit: 100 });
  t.notOk(
    history.some((s) => s.metadata?.run_id === slow.run_id),
    "nor any checkpoint",
  );
});

// ------------------------------------------------------------------ the script's comparison with the README's list

const script = path.join(repoRoot, "test", "parity", "official-suite.sh");

/** The README's ```expected-failures block: "suite: name" lines. */
async function expectedFailures(): Promise<string[]> {
  const readme = await readFile(path.join(repoRoot, "test", "parity", "README.md"), "utf8");
  const block = /^```expected-failures\n([\s\S]*?)^```/m.exec(readme);
  if (!block) throw new Error("no expected-failures block in test/parity/README.md");
  return block[1]
    .split("\n")
    .map((l) => l.trim())
    .filter((l) => l && !l.startsWith("#"));
}

type Outcome = "passed" | "failed" | "skipped";

/** A vitest JSON report of one file, as `--reporter=json` writes it, holding the given "a > b > title" tests. */
function report(tests: Record<string, Outcome>, fileError?: string) {
  const assertionResults = Object.entries(tests).map(([name, status]) => {
    const parts = name.split(" > ");
    return { ancestorTitles: parts.slice(0, -1), title: parts[parts.length - 1], fullName: parts.join(" "), status };
  });
  const failed = fileError !== undefined || assertionResults.some((a) => a.status === "failed");
  return {
    success: !failed,
    testResults: [{ name: "/tmp/x/tests/suite.test.mts", status: failed ? "failed" : "passed", message: fileError ?? "", assertionResults }],
  };
}

/** Runs `official-suite.sh --compare` on reports made of `failing` (suite: name) plus a passing test each. */
async function compare(t: Test, failing: string[], opts: { passing?: string[]; env?: Record<string, string>; fileError?: Record<string, string> } = {}) {
  const dir = await mkdtemp(path.join(os.tmpdir(), "official-suite-compare-"));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  for (const suite of ["api", "auth"]) {
    const tests: Record<string, Outcome> = { "some passing test": "passed", "a skipped one": "skipped" };
    const mine = (list: string[]) => list.filter((n) => n.startsWith(`${suite}: `)).map((n) => n.slice(suite.length + 2));
    for (const n of mine(failing)) tests[n] = "failed";
    for (const n of mine(opts.passing ?? [])) tests[n] = "passed";
    await writeFile(path.join(dir, `${suite}.json`), JSON.stringify(report(tests, opts.fileError?.[suite])));
    await writeFile(path.join(dir, `${suite}.exit`), failing.some((n) => n.startsWith(`${suite}: `)) || opts.fileError?.[suite] ? "1\n" : "0\n");
  }
  const env = { ...process.env, SUITES: "api auth", API_PORT: "2024", ...opts.env };
  return new Promise<{ code: number; out: string }>((resolve) => {
    execFile("bash", [script, "--compare", dir], { cwd: repoRoot, env }, (error, stdout, stderr) => {
      resolve({ code: error ? Number((error as { code?: number }).code ?? 1) : 0, out: stdout + stderr });
    });
  });
}

t.test("official-suite.sh --compare: exactly the README's expected failures exit 0", async (t) => {
  const expected = await expectedFailures();
  t.ok(expected.length > 0, "the README lists expected failures");
  for (const line of expected) t.match(line, /^(api|auth): \S/, `"suite: name": ${line}`);
  const { code, out } = await compare(t, expected);
  t.equal(code, 0, out);
  t.match(out, `${expected.length} failed, ${expected.length} of them expected`);
  t.match(out, "OK: exactly the expected failures");
  t.notMatch(out, "NEW failures");
});

t.test("official-suite.sh --compare: a new failure exits 1 and is named", async (t) => {
  const expected = await expectedFailures();
  const { code, out } = await compare(t, [...expected, "api: threads crud > brand new failure", "auth: another one"]);
  t.equal(code, 1, out);
  t.match(out, /NEW failures[^\n]*\n {2}api: threads crud > brand new failure\n {2}auth: another one\n/);
  t.notMatch(out, "OK:");
});

t.test("official-suite.sh --compare: expected failures that now pass exit 0 with a note naming them", async (t) => {
  const expected = await expectedFailures();
  const [nowPassing, ...rest] = expected;
  const { code, out } = await compare(t, rest, { passing: [nowPassing] });
  t.equal(code, 0, out);
  t.match(out, "expected to fail but did not");
  t.match(out, `  ${nowPassing}  [passed]`);
  t.match(out, "a subset of them");
  // One no longer in the suite at all (renamed, removed) is named as such.
  const gone = await compare(t, rest);
  t.equal(gone.code, 0, gone.out);
  t.match(gone.out, `  ${nowPassing}  [not run: no test of that name]`);
});

t.test("official-suite.sh --compare: a file that failed outside its tests, or vitest failing with no failed test, is a new failure", async (t) => {
  const expected = await expectedFailures();
  const broken = await compare(
    t,
    expected.filter((n) => n.startsWith("api: ")),
    { fileError: { auth: "Cannot find package 'postgres'\n  at somewhere" } },
  );
  t.equal(broken.code, 1, broken.out);
  t.match(broken.out, "auth: (suite.test.mts failed outside its tests: Cannot find package 'postgres')");

  const dir = await mkdtemp(path.join(os.tmpdir(), "official-suite-compare-"));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  await writeFile(path.join(dir, "auth.json"), JSON.stringify({ testResults: [] }));
  await writeFile(path.join(dir, "auth.exit"), "1\n");
  const noTest = await new Promise<{ code: number; out: string }>((resolve) =>
    execFile("bash", [script, "--compare", dir], { env: { ...process.env, SUITES: "auth" } }, (error, stdout, stderr) =>
      resolve({ code: error ? Number((error as { code?: number }).code ?? 1) : 0, out: stdout + stderr }),
    ),
  );
  t.equal(noTest.code, 1, noTest.out);
  t.match(noTest.out, "auth: (vitest exited 1 with no failing test");
});

t.test("official-suite.sh --compare: SUITES limits the expected list; another API_PORT expects generative ui to fail", async (t) => {
  const expected = await expectedFailures();
  const auth = expected.filter((n) => n.startsWith("auth: "));
  const only = await compare(t, auth, { env: { SUITES: "auth" } });
  t.equal(only.code, 0, only.out);
  t.match(only.out, `${auth.length} expected for: auth`);
  t.notMatch(only.out, "api: ");

  t.notOk(expected.includes("api: generative ui"), "it passes on the default port 2024");
  const port = await compare(t, [...expected, "api: generative ui"], { env: { API_PORT: "3024" } });
  t.equal(port.code, 0, port.out);
  const onDefault = await compare(t, [...expected, "api: generative ui"]);
  t.equal(onDefault.code, 1, onDefault.out);
  t.match(onDefault.out, /NEW failures[^\n]*\n {2}api: generative ui\n/);
});

t.test("official-suite.sh refuses another langgraphjs commit than the pinned one without --any-commit", async (t) => {
  const text = await readFile(script, "utf8");
  const pinned = /^PINNED_COMMIT=([0-9a-f]{40})$/m.exec(text);
  t.ok(pinned, "PINNED_COMMIT is a full commit id at the top of the script");
  const readme = await readFile(path.join(repoRoot, "test", "parity", "README.md"), "utf8");
  t.match(readme, pinned![1], "the README names the pinned commit");

  // A local git repository standing in for a langgraphjs clone: it has neither the pinned commit nor the network.
  const dir = await mkdtemp(path.join(os.tmpdir(), "official-suite-clone-"));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  const git = (...args: string[]) =>
    new Promise<string>((resolve, reject) =>
      execFile("git", ["-C", dir, ...args], { env: { ...process.env, GIT_CONFIG_NOSYSTEM: "1", HOME: dir } }, (e, out) =>
        e ? reject(e) : resolve(out.trim()),
      ),
    );
  await git("init", "-q");
  await git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "--allow-empty", "-m", "other");
  const other = await git("rev-parse", "HEAD");
  const run = (...args: string[]) =>
    new Promise<{ code: number; out: string }>((resolve) =>
      execFile("bash", [script, ...args], { env: { ...process.env, HOME: dir } }, (error, stdout, stderr) =>
        resolve({ code: error ? Number((error as { code?: number }).code ?? 1) : 0, out: stdout + stderr }),
      ),
    );
  const missing = await run(dir);
  t.equal(missing.code, 2, missing.out);
  t.match(missing.out, `has no commit ${pinned![1]}`);
  const refused = await run(dir, other);
  t.equal(refused.code, 2, refused.out);
  t.match(refused.out, `refusing: ${other} is langgraphjs ${other}`);
  t.match(refused.out, "--any-commit");
});
