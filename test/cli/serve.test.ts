/**
 * `agent-server` run from a user's project folder (issue "Serve your own project"): the package's
 * bin over a fresh build, the project's own langgraph.json, graph file and @langchain/langgraph
 * (its node_modules linked to the repository's, so the test needs no network).
 */
import { chmodSync, existsSync, mkdirSync, readdirSync, writeFileSync } from "node:fs";
import path from "node:path";
import t from "tap";
import { Client } from "@langchain/langgraph-sdk";
import { binOf, buildPackage, makeProject, removeAll, repoPackage, runCli, snapshotTree, startCli, stopCli, tempDir } from "../support/cli-project.js";

const packageDir = await buildPackage();
const bin = binOf(packageDir);
t.teardown(() => removeAll(packageDir));

t.test("--help and --version", async (t) => {
  const cwd = tempDir("empty");
  t.teardown(() => removeAll(cwd));
  const help = await runCli(bin, ["--help"], cwd);
  t.equal(help.code, 0);
  t.match(help.stdout, /^Usage: agent-server <command> \[options\]/);
  for (const word of ["dev", "start", "replay", "rebuild", "dockerfile", "--config", "--port", "--host", "--data-dir", "--no-browser", "--version"]) {
    t.ok(help.stdout.includes(word), `help names ${word}`);
  }
  const devHelp = await runCli(bin, ["dev", "--help"], cwd);
  t.equal(devHelp.code, 0);
  t.match(devHelp.stdout, /^agent-server dev: Development server/);
  const version = await runCli(bin, ["--version"], cwd);
  t.equal(version.code, 0);
  t.equal(version.stdout, `${repoPackage.version}\n`);
  t.equal(version.stderr, "");
});

t.test("dev serves the project's graph with the project's env, and writes only into --data-dir", async (t) => {
  const project = makeProject({ nodeModules: "link" });
  const dataDir = path.join(tempDir("data"), "store");
  t.teardown(() => removeAll(project, path.dirname(dataDir)));
  const before = snapshotTree(project);

  const proc = await startCli(bin, ["dev", "--port", "0", "--host", "127.0.0.1", "--data-dir", dataDir, "--no-browser"], project);
  t.teardown(() => stopCli(proc));
  t.ok(proc.url, `started (stderr: ${proc.stderr})`);
  t.match(proc.url!, /^http:\/\/127\.0\.0\.1:\d+$/);
  const startLine = proc.stdout.split("\n").find((line) => line.includes("listening on"))!;
  t.ok(startLine.includes(`config: ${path.join(project, "langgraph.json")}`), startLine);
  t.ok(startLine.includes("graphs: shouter,") || startLine.includes("graphs: shouter "), "names the graph ids");
  t.ok(startLine.includes(`store: SQLite ${path.join(dataDir, "events.sqlite")}`), "names the store");

  const client = new Client({ apiUrl: proc.url! });
  const assistants = await client.assistants.search({ limit: 100 });
  t.same(assistants.map((a) => a.graph_id).sort(), ["shouter"], "only the project's graphs, not the repository's example");
  const thread = await client.threads.create();
  const output = await client.runs.wait(thread.thread_id, "shouter", { input: { text: "hi" } });
  t.same(output, { text: "hello from .env HI!" });

  t.equal(await stopCli(proc), 0, "SIGTERM stops it cleanly");
  t.ok(existsSync(path.join(dataDir, "events.sqlite")), "the log is in --data-dir");

  // The log's tools on the same data directory, with the server stopped.
  const replay = await runCli(bin, ["replay", "--data-dir", dataDir, "--thread", thread.thread_id], project);
  t.equal(replay.code, 0, replay.stderr);
  t.match(JSON.parse(replay.stdout), { thread_id: thread.thread_id });
  const rebuild = await runCli(bin, ["rebuild", "--data-dir", dataDir], project);
  t.equal(rebuild.code, 0, rebuild.stderr);
  t.match(JSON.parse(rebuild.stdout), { rebuild: { file: path.join(dataDir, "read-models.sqlite") } });
  t.same(snapshotTree(project), before, "nothing written into the project folder");
});

/** Sets the mode of every directory and file under `dir` (links not followed): read-only, or writable again. */
function setModes(dir: string, mode: "read-only" | "writable"): void {
  for (const entry of readdirSync(dir, { recursive: true, withFileTypes: true })) {
    const full = path.join(entry.parentPath, entry.name);
    if (entry.isSymbolicLink()) continue;
    if (entry.isDirectory()) chmodSync(full, mode === "read-only" ? 0o555 : 0o755);
    else chmodSync(full, mode === "read-only" ? 0o444 : 0o644);
  }
  chmodSync(dir, mode === "read-only" ? 0o555 : 0o755);
}

t.test("a read-only project folder serves: nothing is written beside the sources", async (t) => {
  const project = makeProject({ nodeModules: "link" });
  const dataRoot = tempDir("data");
  t.teardown(() => {
    setModes(project, "writable");
    removeAll(project, dataRoot);
  });
  setModes(project, "read-only");
  // Root writes through any mode: as root the server runs as nobody, who can read the package and the
  // project but write only into the data directory and the temp dir.
  const asRoot = process.getuid?.() === 0;
  const as = asRoot ? { uid: 65534, gid: 65534 } : {};
  if (asRoot) {
    chmodSync(packageDir, 0o755);
    chmodSync(dataRoot, 0o777);
  }
  const dataDir = path.join(dataRoot, "store");
  const proc = await startCli(bin, ["dev", "--port", "0", "--data-dir", dataDir], project, undefined, as);
  t.teardown(() => stopCli(proc));
  t.ok(proc.url, `started (stderr: ${proc.stderr})`);
  const client = new Client({ apiUrl: proc.url! });
  const thread = await client.threads.create();
  t.same(await client.runs.wait(thread.thread_id, "shouter", { input: { text: "read-only" } }), { text: "hello from .env READ-ONLY!" });
  t.equal(await stopCli(proc), 0, `stopped cleanly (stderr: ${proc.stderr})`);
  t.ok(existsSync(path.join(dataDir, "events.sqlite")), "the log is in --data-dir");
});

t.test("without --data-dir the data goes to .agent-server in the current folder", async (t) => {
  const project = makeProject({ nodeModules: "link" });
  t.teardown(() => removeAll(project));
  const proc = await startCli(bin, ["start", "--port", "0"], project);
  t.teardown(() => stopCli(proc));
  t.ok(proc.url, `started (stderr: ${proc.stderr})`);
  t.match(proc.url!, /^http:\/\/127\.0\.0\.1:\d+$/, "127.0.0.1 by default");
  t.ok(proc.stdout.includes(`store: SQLite ${path.join(project, ".agent-server", "events.sqlite")}`), proc.stdout);
  t.equal(await stopCli(proc), 0);
});

t.test("a missing langgraph.json is one clear line", async (t) => {
  const cwd = tempDir("empty");
  t.teardown(() => removeAll(cwd));
  const result = await runCli(bin, ["dev", "--port", "0"], cwd);
  t.equal(result.code, 1);
  t.equal(result.stdout, "");
  t.equal(result.stderr.trim().split("\n").length, 1, result.stderr);
  t.match(result.stderr, `no langgraph.json at ${path.join(cwd, "langgraph.json")}`);
  const explicit = await runCli(bin, ["start", "--config", "elsewhere/langgraph.json"], cwd);
  t.equal(explicit.code, 1);
  t.match(explicit.stderr, `no langgraph.json at ${path.join(cwd, "elsewhere", "langgraph.json")}`);
});

t.test("a project whose @langchain/langgraph is outside the supported range is refused with one line", async (t) => {
  const project = makeProject({ nodeModules: "none" });
  t.teardown(() => removeAll(project));
  const pkgDir = path.join(project, "node_modules", "@langchain", "langgraph");
  mkdirSync(pkgDir, { recursive: true });
  writeFileSync(path.join(pkgDir, "package.json"), JSON.stringify({ name: "@langchain/langgraph", version: "0.2.74" }));
  const range = repoPackage.peerDependencies["@langchain/langgraph"]!;
  const result = await runCli(bin, ["dev", "--port", "0"], project);
  t.equal(result.code, 1);
  t.equal(result.stdout, "");
  t.equal(result.stderr.trim().split("\n").length, 1, result.stderr);
  t.match(result.stderr, "@langchain/langgraph 0.2.74");
  t.match(result.stderr, `supports @langchain/langgraph@${range}`);
  t.notOk(existsSync(path.join(project, ".agent-server")), "refused before opening anything");

  const missing = makeProject({ nodeModules: "none" });
  t.teardown(() => removeAll(missing));
  const none = await runCli(bin, ["dev", "--port", "0"], missing);
  t.equal(none.code, 1);
  t.match(none.stderr, /@langchain\/langgraph is not installed in /);
});

t.test("usage errors exit 2", async (t) => {
  const cwd = tempDir("empty");
  t.teardown(() => removeAll(cwd));
  for (const args of [["dev", "--bogus"], ["launch"], ["dev", "extra"], ["dev", "--port", "http"], ["start", "--port", "70000"]]) {
    const result = await runCli(bin, args, cwd);
    t.equal(result.code, 2, args.join(" "));
    t.match(result.stderr, /^agent-server: .*--help/);
  }
});

t.test("dockerfile writes the project's Dockerfile", async (t) => {
  const project = makeProject({ nodeModules: "link" });
  t.teardown(() => removeAll(project));
  const printed = await runCli(bin, ["dockerfile", "--output", "-"], project);
  t.equal(printed.code, 0, printed.stderr);
  t.match(printed.stdout, /^FROM node:20/m);
  t.match(printed.stdout, /agent-server", "start"/);
  const written = await runCli(bin, ["dockerfile"], project);
  t.equal(written.code, 0, written.stderr);
  t.ok(existsSync(path.join(project, "Dockerfile")));
  writeFileSync(path.join(project, "Dockerfile"), "FROM scratch\n");
  const refused = await runCli(bin, ["dockerfile"], project);
  t.equal(refused.code, 1, "a Dockerfile of the user's own is not overwritten");
});

t.test("version ranges and the store named on the start line", async (t) => {
  const { default: semver } = await import("semver");
  for (const [name, range] of Object.entries(repoPackage.peerDependencies)) {
    const installed = (await import(`${name}/package.json`, { with: { type: "json" } })).default as { version: string };
    t.ok(semver.satisfies(installed.version, range), `the installed ${name} ${installed.version} is in its peer range ${range}`);
  }
  const { describeStore } = await import("../../src/cli/serve.js");
  t.equal(
    describeStore({ eventstoreUrl: "esdb://admin:changeit@db1:2113,db2:2113?tls=false", dataDir: "/d" }),
    "EventStoreDB esdb://db1:2113,db2:2113?tls=false",
    "no credentials",
  );
  t.equal(describeStore({ eventstoreUrl: undefined, dataDir: "/d" }), "SQLite /d/events.sqlite");
});
