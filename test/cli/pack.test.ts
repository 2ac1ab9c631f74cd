/**
 * The package as users get it: `npm pack` of the package folder, the tarball laid out in a fresh
 * project's node_modules as `npm install ./<tarball>` lays it (unpacked, its bin linked, its
 * dependencies and peers beside it; tests reach no address but the loopback, so they are this
 * repository's installed copies), then the project's own `node_modules/.bin/agent-server dev`
 * serving the project's graph.
 */
import { execFile } from "node:child_process";
import { existsSync, mkdirSync, readFileSync, readdirSync, renameSync, rmSync, symlinkSync } from "node:fs";
import path from "node:path";
import { promisify } from "node:util";
import t from "tap";
import { Client } from "@langchain/langgraph-sdk";
import { buildPackage, cleanEnv, makeProject, removeAll, repoPackage, snapshotTree, startCli, stopCli, tempDir } from "../support/cli-project.js";
import { repoRoot } from "../support/server.js";

const run = promisify(execFile);
const OTHER_LANGGRAPH = "langgraph-1-5";
const npm = process.platform === "win32" ? "npm.cmd" : "npm";

t.test("npm pack, the tarball installed into a project, its agent-server dev", async (t) => {
  t.match(repoPackage.scripts.prepack, /npm run build/, "npm pack builds dist/ first");
  // The package folder holds the same files `npm pack` takes from the repository after its prepack build
  // (without touching the repository's dist/); its scripts are not run again here.
  const packageDir = await buildPackage();
  const packs = tempDir("tarball");
  t.teardown(() => removeAll(packageDir, packs));
  rmSync(path.join(packageDir, "node_modules"));
  const { stdout: packed } = await run(npm, ["pack", "--ignore-scripts", "--json", "--pack-destination", packs], { cwd: packageDir, env: cleanEnv() });
  const [info] = JSON.parse(packed) as { filename: string; files: { path: string }[] }[];
  const shipped = info!.files.map((f) => f.path);
  for (const file of [
    "bin/agent-server.mjs",
    "dist/cli.js",
    "dist/main.js",
    "dist/index.js",
    "dist/webhooks/sender-worker.js",
    "dist/runtime/type-schemas/worker.js",
    "package.json",
  ]) {
    t.ok(shipped.includes(file), `the tarball holds ${file}`);
  }
  t.notOk(
    shipped.some((f) => f.startsWith("src/") && f.endsWith(".ts")),
    "no TypeScript sources",
  );

  const project = makeProject({ nodeModules: "none" });
  t.teardown(() => removeAll(project));
  // Installed as npm lays a package out, without the registry (tests reach no address but the
  // loopback): the tarball unpacked to node_modules/agent-server with its bin linked, and its
  // dependencies and peers beside it, linked to this repository's installed copies of the same versions.
  const modules = path.join(project, "node_modules");
  mkdirSync(path.join(modules, ".bin"), { recursive: true });
  await run("tar", ["-xzf", path.join(packs, info!.filename), "-C", modules]);
  renameSync(path.join(modules, "package"), path.join(modules, repoPackage.name));
  const repoModules = path.join(repoRoot, "node_modules");
  const dependencies = Object.keys({ ...repoPackage.dependencies, ...repoPackage.peerDependencies });
  for (const name of dependencies) {
    mkdirSync(path.dirname(path.join(modules, name)), { recursive: true });
    // The project's LangGraph is another minor version than the server is developed on (a dev dependency alias).
    const installed = name === "@langchain/langgraph" ? OTHER_LANGGRAPH : name;
    symlinkSync(path.join(repoModules, installed), path.join(modules, name), "dir");
  }
  // Their own dependencies, hoisted as npm hoists them, for the packages above to find.
  for (const entry of readdirSync(repoModules)) {
    const names = entry.startsWith("@") ? readdirSync(path.join(repoModules, entry)).map((n) => `${entry}/${n}`) : [entry];
    for (const name of names) {
      if (name.startsWith(".") || existsSync(path.join(modules, name))) continue;
      mkdirSync(path.dirname(path.join(modules, name)), { recursive: true });
      symlinkSync(path.join(repoModules, name), path.join(modules, name), "dir");
    }
  }
  symlinkSync(path.join("..", repoPackage.name, "bin", "agent-server.mjs"), path.join(modules, ".bin", "agent-server"));
  t.ok(existsSync(path.join(modules, repoPackage.name, "dist", "cli.js")), "the unpacked package holds its built server");
  const projectLangGraph = JSON.parse(readFileSync(path.join(modules, "@langchain", "langgraph", "package.json"), "utf8")) as { version: string };
  const ownLangGraph = JSON.parse(readFileSync(path.join(repoModules, "@langchain", "langgraph", "package.json"), "utf8")) as { version: string };
  t.not(
    projectLangGraph.version.split(".").slice(0, 2).join("."),
    ownLangGraph.version.split(".").slice(0, 2).join("."),
    `the project's @langchain/langgraph ${projectLangGraph.version} is another minor than ${ownLangGraph.version}`,
  );

  const bin = path.join(project, "node_modules", ".bin", "agent-server");
  const dataDir = path.join(tempDir("data"), "store");
  t.teardown(() => removeAll(path.dirname(dataDir)));
  const before = snapshotTree(project);
  const proc = await startCli(bin, ["dev", "--port", "0", "--data-dir", dataDir], project);
  t.teardown(() => stopCli(proc));
  t.ok(proc.url, `started (stderr: ${proc.stderr})`);
  t.ok(proc.stdout.includes(`config: ${path.join(project, "langgraph.json")}, graphs: shouter`), proc.stdout);
  const client = new Client({ apiUrl: proc.url! });
  const thread = await client.threads.create();
  t.same(await client.runs.wait(thread.thread_id, "shouter", { input: { text: "packed" } }), { text: "hello from .env PACKED!" });
  t.equal(await stopCli(proc), 0);
  t.same(snapshotTree(project), before, "nothing written into the project folder");
});
