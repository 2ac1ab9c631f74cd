/**
 * The LangGraph packages a project brings: the server is installed into the user's project and
 * shares that project's `@langchain/*` (its graphs' `instanceof`, Command and checkpointer classes
 * must be the server's), so a version outside the tested ranges is refused before starting.
 */
import { existsSync, readFileSync } from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";
import semver from "semver";

/**
 * The installed version of `name` as a module in `projectDir` resolves it (its node_modules and
 * those above it), or undefined when it is not installed.
 */
export function installedVersion(name: string, projectDir: string): { version: string; dir: string } | undefined {
  const require = createRequire(path.join(projectDir, "package.json"));
  for (const dir of require.resolve.paths(name) ?? []) {
    const file = path.join(dir, name, "package.json");
    if (!existsSync(file)) continue;
    const version = (JSON.parse(readFileSync(file, "utf8")) as { version?: unknown }).version;
    return { version: typeof version === "string" ? version : "(no version)", dir: path.dirname(file) };
  }
  return undefined;
}

/**
 * The first problem with the project's LangGraph packages, as one line, or undefined when they
 * fit. `@langchain/langgraph` must be installed; the others are checked when the project resolves
 * them (with a strict layout such as pnpm's they are the graph package's own).
 */
export function checkPeers(projectDir: string, peers: Record<string, string>, self: string): string | undefined {
  for (const [name, range] of Object.entries(peers)) {
    const found = installedVersion(name, projectDir);
    if (!found) {
      if (name !== "@langchain/langgraph") continue;
      return `${name} is not installed in ${projectDir}: ${self} needs ${name}@${range} (npm install ${name}@"${range}")`;
    }
    if (!semver.satisfies(found.version, range)) {
      return `${name} ${found.version} (${found.dir}) is not supported: ${self} supports ${name}@${range}`;
    }
  }
  return undefined;
}
