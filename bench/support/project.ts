/**
 * The graph as users run it: from their own project folder, with its own node_modules holding its own
 * copies of @langchain/langgraph, @langchain/core and @langchain/langgraph-checkpoint (not the server's),
 * and the server installed there as a package (`npm install <tarball>`), its `@langchain/*` peers being
 * the project's copies: one LangGraph in the process, the project's.
 *
 * `makeBenchProject()` makes such a folder under the temp dir: package.json, tsconfig.json, langgraph.json
 * naming `agent` → ./src/agent.ts:graph (a copy of this repository's src/graphs/agent.ts), and a
 * node_modules where those three packages are real copies of this repository's (fs.cp: distinct
 * directories, hence distinct module instances, the split a project install gives, without the network),
 * `agent-server` holds the files `npm pack` ships (package.json, README, bin/, dist/ as built here, the
 * audit page), and every other package is a symlink to this repository's node_modules entry (as
 * test/cli/project-runtime.test.ts does).
 *
 * `benchGraph()` is the graph the server benchmarks (engine, runs, critical-path) run: such a project,
 * made once per process and removed when it exits, or with BENCH_GRAPH=repo this repository's own
 * langgraph.json and src/graphs/agent.ts (the comparison).
 */
import { rmSync } from "node:fs";
import { cp, mkdir, mkdtemp, readFile, readdir, rm, symlink, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { buildServer, repoRoot } from "./server.js";

/** The packages a project has its own copies of; every other one is linked to this repository's. */
export const PROJECT_COPIED_PACKAGES = ["@langchain/langgraph", "@langchain/core", "@langchain/langgraph-checkpoint"] as const;

export interface GraphSource {
  /** "project": a project folder with its own LangGraph copies; "repo": this repository's graph and packages. */
  kind: "project" | "repo";
  /** The folder the graph's packages resolve from (the project, or this repository). */
  dir: string;
  /** The langgraph.json the server is started on (its LANGGRAPH_JSON). */
  langgraphJson: string;
  /** The example graph's source file (exports `builder` and `graph`). */
  graphFile: string;
  /** One line for a benchmark's setup. */
  describe: string;
  /**
   * The server's main.js as this setup runs it: the package installed in the project (so its @langchain/*
   * are the project's), or undefined for this checkout's dist/main.js.
   */
  script?: string;
}

export interface BenchProject extends GraphSource {
  /** Removes the folder. */
  remove(): Promise<void>;
}

/**
 * `modules` (a project's node_modules, made if missing) gets real copies of `copied` from `fromModules` and a
 * symlink to every other entry of `fromModules` (scoped packages one by one, so a scope can mix both).
 */
export async function fillProjectModules(modules: string, fromModules: string, copied: readonly string[] = PROJECT_COPIED_PACKAGES): Promise<void> {
  await mkdir(modules, { recursive: true });
  for (const name of copied) {
    await mkdir(path.dirname(path.join(modules, name)), { recursive: true });
    await cp(path.join(fromModules, name), path.join(modules, name), { recursive: true, dereference: true });
  }
  for (const entry of await readdir(fromModules)) {
    if (entry.startsWith(".")) continue; // .bin, .package-lock.json, caches
    if (entry.startsWith("@")) {
      await mkdir(path.join(modules, entry), { recursive: true });
      for (const sub of await readdir(path.join(fromModules, entry))) {
        if (!copied.includes(`${entry}/${sub}`)) await symlink(path.join(fromModules, entry, sub), path.join(modules, entry, sub));
      }
      continue;
    }
    await symlink(path.join(fromModules, entry), path.join(modules, entry));
  }
}

/**
 * The server package in `modules` as `npm install <tarball>` lays it out: the files package.json's
 * "files" ships, dist/ as `npm run build` made it here. Returns its dist/main.js.
 */
export async function installServerPackage(modules: string): Promise<string> {
  buildServer();
  const manifest = JSON.parse(await readFile(path.join(repoRoot, "package.json"), "utf8")) as { name: string; files: string[] };
  const target = path.join(modules, manifest.name);
  await mkdir(target, { recursive: true });
  for (const entry of ["package.json", ...manifest.files.filter((f) => !f.startsWith("!"))]) {
    // Source maps too (the tarball leaves them out): the profiles of the engine benchmark read them.
    await cp(path.join(repoRoot, entry), path.join(target, entry), { recursive: true });
  }
  return path.join(target, "dist", "main.js");
}

/**
 * A temporary project folder running a copy of src/graphs/agent.ts on its own LangGraph copies (see the
 * header). `server`: "installed" (default) runs the package installed in the project; "beside" runs this
 * checkout's dist/main.js on the project's langgraph.json, so the process holds two copies of LangGraph.
 */
export async function makeBenchProject(server: "installed" | "beside" = "installed"): Promise<BenchProject> {
  const dir = await mkdtemp(path.join(tmpdir(), "agent-server-bench-project-"));
  try {
    await fillProjectModules(path.join(dir, "node_modules"), path.join(repoRoot, "node_modules"));
    const script = server === "installed" ? await installServerPackage(path.join(dir, "node_modules")) : undefined;
    await writeFile(path.join(dir, "package.json"), JSON.stringify({ name: "bench-project", private: true, type: "module" }, null, 2));
    await writeFile(
      path.join(dir, "tsconfig.json"),
      JSON.stringify({ compilerOptions: { target: "ES2022", module: "NodeNext", moduleResolution: "NodeNext", strict: true, noEmit: true } }, null, 2),
    );
    await mkdir(path.join(dir, "src"));
    await cp(path.join(repoRoot, "src", "graphs", "agent.ts"), path.join(dir, "src", "agent.ts"));
    const langgraphJson = path.join(dir, "langgraph.json");
    await writeFile(langgraphJson, JSON.stringify({ node_version: "20", graphs: { agent: "./src/agent.ts:graph" } }, null, 2));
    return {
      kind: "project",
      dir,
      langgraphJson,
      graphFile: path.join(dir, "src", "agent.ts"),
      describe:
        `agent (a copy of src/graphs/agent.ts in a project folder with its own copies of ${PROJECT_COPIED_PACKAGES.join(", ")}; the rest linked), ` +
        (script
          ? "served by the package installed in the project (one LangGraph: the project's)"
          : "served by this checkout's dist/main.js (two LangGraph copies)"),
      script,
      remove: () => rm(dir, { recursive: true, force: true }),
    };
  } catch (error) {
    await rm(dir, { recursive: true, force: true });
    throw error;
  }
}

/** This repository's own graph: its langgraph.json and src/graphs/agent.ts on its node_modules. */
export const REPO_GRAPH: GraphSource = {
  kind: "repo",
  dir: repoRoot,
  langgraphJson: path.join(repoRoot, "langgraph.json"),
  graphFile: path.join(repoRoot, "src", "graphs", "agent.ts"),
  describe: "agent (src/graphs/agent.ts, this repository's langgraph.json and node_modules)",
};

let shared: Promise<GraphSource> | undefined;

/**
 * The graph the server benchmarks run: BENCH_GRAPH=repo → REPO_GRAPH; otherwise (default, BENCH_GRAPH=project) one
 * project folder made on first use and shared by every benchmark of this process, removed when the process exits.
 */
export function benchGraph(env: NodeJS.ProcessEnv = process.env): Promise<GraphSource> {
  const wanted = env.BENCH_GRAPH ?? "project";
  if (wanted === "repo") return Promise.resolve(REPO_GRAPH);
  if (wanted !== "project") return Promise.reject(new Error(`BENCH_GRAPH must be "project" (default) or "repo", got "${wanted}"`));
  shared ??= makeBenchProject().then((project) => {
    process.once("exit", () => rmSync(project.dir, { recursive: true, force: true }));
    return project;
  });
  return shared;
}
