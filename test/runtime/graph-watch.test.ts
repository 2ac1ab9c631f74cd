/**
 * Development mode's reload of the graphs (LANGGRAPH_WATCH, on by default in `agent-server dev`):
 * an edit of a graph's local import is served by the next run, a run in flight finishes on the code
 * it started with, a version that cannot be loaded is reported and the last good one keeps serving.
 */
import { test } from "tap";
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { loadConfig } from "../../src/config.js";
import type { GraphReloadOutcome } from "../../src/runtime/graph-watch.js";
import { repoRoot, startTestServer } from "../support/server.js";

const GRAPH = `import { Annotation, StateGraph, START, END } from "@langchain/langgraph";
import { answer } from "./answer";

const State = Annotation.Root({ hold: Annotation<boolean>, answer: Annotation<string> });
const hooks = globalThis as unknown as { devReloadEntered?: () => void; devReloadHold?: Promise<void> };

export const graph = new StateGraph(State)
  .addNode("respond", async (state: typeof State.State) => {
    // A run the test holds: it tells the test it runs, and waits until released.
    if (state.hold) {
      hooks.devReloadEntered?.();
      await hooks.devReloadHold;
    }
    return { answer: answer() };
  })
  .addEdge(START, "respond")
  .addEdge("respond", END)
  .compile();
`;

const answerFile = (value: string) => `export const answer = (): string => ${JSON.stringify(value)};\n`;

test("LANGGRAPH_WATCH is off unless set", async (t) => {
  t.equal(loadConfig({}).watch, false);
  t.equal(loadConfig({ LANGGRAPH_DEV: "true" }).watch, false, "the CLI's dev turns it on, not dev mode itself");
  t.equal(loadConfig({ LANGGRAPH_WATCH: "true" }).watch, true);
});

test("dev reload: new runs get the new code, runs in flight the old, a broken version is reported and skipped", async (t) => {
  const project = mkdtempSync(path.join(os.tmpdir(), "agent-server-dev-reload-"));
  t.teardown(() => rmSync(project, { recursive: true, force: true }));
  writeFileSync(path.join(project, "package.json"), JSON.stringify({ name: "dev-reload", private: true, type: "module" }));
  writeFileSync(path.join(project, "langgraph.json"), JSON.stringify({ graphs: { dev: "./src/graph.ts:graph" } }));
  symlinkSync(path.join(repoRoot, "node_modules"), path.join(project, "node_modules"), "dir");
  const src = path.join(project, "src");
  mkdirSync(src);
  writeFileSync(path.join(src, "graph.ts"), GRAPH);
  writeFileSync(path.join(src, "answer.ts"), answerFile("A"));

  // Each reload's outcome, and waiters for the next one that matches.
  const outcomes: GraphReloadOutcome[] = [];
  const waiters: { ok: boolean; resolve: (o: GraphReloadOutcome) => void }[] = [];
  const onGraphReload = (outcome: GraphReloadOutcome) => {
    outcomes.push(outcome);
    for (const w of waiters.splice(0)) {
      if (w.ok === outcome.ok) w.resolve(outcome);
      else waiters.push(w);
    }
  };
  const nextReload = (ok: boolean, what: string) =>
    new Promise<GraphReloadOutcome>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`no ${ok ? "successful" : "failed"} reload after ${what}`)), 20_000);
      waiters.push({ ok, resolve: (o) => (clearTimeout(timer), resolve(o)) });
    });

  // The failure line goes to stderr: kept, to check it is printed.
  const printed: string[] = [];
  const consoleError = console.error;
  console.error = (...args: unknown[]) => void printed.push(args.map(String).join(" "));
  t.teardown(() => void (console.error = consoleError));

  const server = await startTestServer({
    env: { LANGGRAPH_JSON: path.join(project, "langgraph.json"), LANGGRAPH_WATCH: "true" },
    deps: { onGraphReload },
  });
  t.teardown(() => server.close());
  const { client } = server;
  const answer = async () => {
    const thread = await client.threads.create();
    const values = (await client.runs.wait(thread.thread_id, "dev", { input: { hold: false } })) as { answer?: string };
    return values.answer;
  };

  t.equal(await answer(), "A", "the first version answers");

  // A run held inside its node while the import changes.
  const hooks = globalThis as unknown as { devReloadEntered?: () => void; devReloadHold?: Promise<void> };
  let release!: () => void;
  hooks.devReloadHold = new Promise<void>((resolve) => (release = resolve));
  const entered = new Promise<void>((resolve) => (hooks.devReloadEntered = resolve));
  t.teardown(() => {
    release();
    delete hooks.devReloadEntered;
    delete hooks.devReloadHold;
  });
  const heldThread = await client.threads.create();
  const held = await client.runs.create(heldThread.thread_id, "dev", { input: { hold: true } });
  await entered;

  const reloadedToB = nextReload(true, "the edit to B");
  writeFileSync(path.join(src, "answer.ts"), answerFile("B"));
  const outcome = await reloadedToB;
  t.match(outcome.message, /graphs reloaded \(changed: .*answer\.ts/, "the reload names the changed file");
  t.equal(await answer(), "B", "a run started after the reload gets the new code");

  release();
  await client.runs.join(heldThread.thread_id, held.run_id);
  const heldState = await client.threads.getState(heldThread.thread_id);
  t.equal((heldState.values as { answer?: string }).answer, "A", "the run in flight finished on the code it started with");

  const failed = nextReload(false, "the syntax error");
  writeFileSync(path.join(src, "answer.ts"), "export const answer = (): string => ;\n");
  const failure = await failed;
  t.match(
    failure.message,
    /reload failed, the last good graphs keep serving: Graph "dev": cannot load \.\/src\/graph\.ts: src\/answer\.ts:1:\d+: \S/,
    "one line with the file and the error",
  );
  t.notMatch(failure.message, /\n/);
  t.ok(
    printed.some((line) => line === failure.message),
    "the failure is printed",
  );
  t.equal(await answer(), "B", "the last good version keeps serving");

  const reloadedToC = nextReload(true, "the fix");
  writeFileSync(path.join(src, "answer.ts"), answerFile("C"));
  await reloadedToC;
  t.equal(await answer(), "C", "the fixed version is served");
  t.ok(outcomes.length >= 3);
});

test("dev reload: a .env change reaches the next run; graphs added to langgraph.json ask for a restart", async (t) => {
  const project = mkdtempSync(path.join(os.tmpdir(), "agent-server-dev-reload-"));
  t.teardown(() => rmSync(project, { recursive: true, force: true }));
  writeFileSync(path.join(project, "package.json"), JSON.stringify({ name: "dev-reload-env", private: true, type: "module" }));
  const langgraphJson = path.join(project, "langgraph.json");
  writeFileSync(langgraphJson, JSON.stringify({ graphs: { greet: "./graph.ts:graph" }, env: ".env" }));
  writeFileSync(path.join(project, ".env"), "DEV_RELOAD_GREETING=hello\n");
  symlinkSync(path.join(repoRoot, "node_modules"), path.join(project, "node_modules"), "dir");
  writeFileSync(
    path.join(project, "graph.ts"),
    `import { Annotation, StateGraph, START, END } from "@langchain/langgraph";
const State = Annotation.Root({ greeting: Annotation<string> });
export const graph = new StateGraph(State)
  .addNode("greet", () => ({ greeting: process.env.DEV_RELOAD_GREETING ?? "(unset)" }))
  .addEdge(START, "greet")
  .addEdge("greet", END)
  .compile();
`,
  );
  t.teardown(() => void delete process.env.DEV_RELOAD_GREETING);

  const printed: string[] = [];
  const consoleError = console.error;
  console.error = (...args: unknown[]) => void printed.push(args.map(String).join(" "));
  t.teardown(() => void (console.error = consoleError));

  let onReload: ((o: GraphReloadOutcome) => void) | undefined;
  const nextReload = (what: string) =>
    new Promise<GraphReloadOutcome>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`no reload after ${what}`)), 20_000);
      onReload = (o) => {
        clearTimeout(timer);
        onReload = undefined;
        resolve(o);
      };
    });
  const server = await startTestServer({
    env: { LANGGRAPH_JSON: langgraphJson, LANGGRAPH_WATCH: "true" },
    deps: { onGraphReload: (o) => onReload?.(o) },
  });
  t.teardown(() => server.close());
  const greeting = async () => {
    const thread = await server.client.threads.create();
    return ((await server.client.runs.wait(thread.thread_id, "greet", { input: {} })) as { greeting?: string }).greeting;
  };
  t.equal(await greeting(), "hello");

  const afterEnv = nextReload("the .env edit");
  writeFileSync(path.join(project, ".env"), "DEV_RELOAD_GREETING=bonjour\n");
  t.ok((await afterEnv).ok);
  t.equal(await greeting(), "bonjour", "the .env's new value is in the environment");

  const afterConfig = nextReload("the langgraph.json edit");
  writeFileSync(langgraphJson, JSON.stringify({ graphs: { greet: "./graph.ts:graph", other: "./graph.ts:graph" }, env: ".env" }));
  t.ok((await afterConfig).ok, "the current graphs are reloaded");
  t.ok(
    printed.some((line) => /graphs were added, removed or pointed elsewhere: restart agent-server/.test(line)),
    "a restart is asked for",
  );
  t.equal(await greeting(), "bonjour", "the current graphs keep serving");
});
