/**
 * The LangGraph packages a project brings: the server is installed into the user's project and
 * shares that project's `@langchain/*` (its graphs' `instanceof`, Command and checkpointer classes
 * must be the server's), so a version outside the tested ranges is refused before starting.
 */
import { existsSync, readFileSync } from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";

type Version = [number, number, number, boolean];

function parseVersion(text: string): Version | undefined {
  const m = /^v?(\d+)\.(\d+)\.(\d+)(-[0-9A-Za-z.-]+)?(\+[0-9A-Za-z.-]+)?$/.exec(text.trim());
  return m ? [Number(m[1]), Number(m[2]), Number(m[3]), m[4] !== undefined] : undefined;
}

/** Compares numbers first; a prerelease sorts before its release. */
function compare(a: Version, b: Version): number {
  for (let i = 0; i < 3; i++) if (a[i] !== b[i]) return (a[i] as number) - (b[i] as number);
  return a[3] === b[3] ? 0 : a[3] ? -1 : 1;
}

function satisfiesComparator(v: Version, comparator: string): boolean {
  const m = /^(\^|~|>=|<=|>|<|=)?\s*(.+)$/.exec(comparator);
  const bound = m && parseVersion(m[2]!);
  if (!m || !bound) throw new Error(`unsupported version range ${JSON.stringify(comparator)}`);
  const c = compare(v, bound);
  switch (m[1]) {
    case "^": {
      const upper: Version = bound[0] > 0 ? [bound[0] + 1, 0, 0, true] : bound[1] > 0 ? [0, bound[1] + 1, 0, true] : [0, 0, bound[2] + 1, true];
      return c >= 0 && compare(v, upper) < 0;
    }
    case "~":
      return c >= 0 && compare(v, [bound[0], bound[1] + 1, 0, true]) < 0;
    case ">=": return c >= 0;
    case "<=": return c <= 0;
    case ">": return c > 0;
    case "<": return c < 0;
    default: return c === 0;
  }
}

/**
 * Whether `version` is in `range`: the forms peerDependencies use here (`^1.2.3`, `~1.2.3`,
 * `>=1.2.3 <2.0.0`, `||` alternatives). A prerelease is compared by its numbers only.
 */
export function satisfies(version: string, range: string): boolean {
  const v = parseVersion(version);
  if (!v) return false;
  return range.split("||").some((alternative) => {
    const comparators = alternative.trim().replace(/(\^|~|>=|<=|>|<|=)\s+/g, "$1").split(/\s+/).filter(Boolean);
    return comparators.every((c) => satisfiesComparator(v, c));
  });
}

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
    if (!satisfies(found.version, range)) {
      return `${name} ${found.version} (${found.dir}) is not supported: ${self} supports ${name}@${range}`;
    }
  }
  return undefined;
}
