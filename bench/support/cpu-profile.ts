/**
 * Reads a V8 `.cpuprofile` (written by `node --cpu-prof`) and attributes its self-time to the
 * server's phases by source path. Frames of the bundle (dist/*.js) are mapped back to their src/
 * file through the bundle's source map. A frame that names no phase (a native function such as
 * JSON.stringify or a better-sqlite3 call, node's own modules, a generic library such as zod) is
 * charged to the nearest caller that does, so `JSON.stringify` called by the checkpointer counts
 * as checkpoint time. Samples with no such caller are "node/other"; "(garbage collector)",
 * "(program)" and "(idle)" keep their own names.
 */
import { readFileSync } from "node:fs";
import { SourceMap } from "node:module";
import { fileURLToPath } from "node:url";

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number; columnNumber: number };
  children?: number[];
}

export interface CpuProfile {
  nodes: ProfileNode[];
  startTime: number;
  endTime: number;
  samples: number[];
  timeDeltas: number[];
}

/** A phase and the path fragments that belong to it; the first rule that matches wins. */
export interface PhaseRule {
  phase: string;
  paths: readonly string[];
}

/** The phases of a run, as the engine benchmark reports them. */
export const RUN_PHASES: readonly PhaseRule[] = [
  {
    phase: "checkpoint",
    paths: ["src/runtime/checkpointer", "src/runtime/checkpoint-cache", "src/runtime/serialize", "node_modules/@langchain/langgraph-checkpoint/"],
  },
  { phase: "graph", paths: ["src/runtime/", "src/graphs/", "node_modules/@langchain/", "node_modules/langsmith/"] },
  { phase: "fold", paths: ["src/read-models/", "projections/"] },
  { phase: "decide/append", paths: ["src/eventstore/", "src/domain/", "src/app/", "src/webhooks/", "node_modules/better-sqlite3/"] },
  {
    phase: "http",
    paths: [
      "src/http/",
      "node_modules/fastify",
      "node_modules/@fastify/",
      "node_modules/find-my-way/",
      "node_modules/avvio/",
      "node_modules/light-my-request/",
      "node_modules/fast-json-stringify/",
      "node_modules/pino",
      "node:_http",
      "node:net",
      "node:internal/http",
    ],
  },
];

/** The server's package name: its bundle, installed in a project, is node_modules/<name>/dist/. */
const SERVER_PACKAGE = (JSON.parse(readFileSync(new URL("../../package.json", import.meta.url), "utf8")) as { name: string }).name;

/** What the profile's own pseudo-frames are called; they are reported as they are. */
const PSEUDO = new Set(["(garbage collector)", "(program)", "(idle)", "(root)"]);

/** Maps bundle positions back to their sources; one map per bundle file, read once. */
class SourceResolver {
  private readonly maps = new Map<string, SourceMap | null>();

  source(url: string, line: number, column: number): string {
    // Only our bundle (this checkout's, or the package installed in a project): a package's own dist/
    // (LangChain ships source maps) maps to paths without node_modules/ in them, and its time would
    // then be charged to whatever called it.
    const ours = url.includes("/dist/") && (!url.includes("/node_modules/") || url.includes(`/node_modules/${SERVER_PACKAGE}/dist/`));
    if (!url.startsWith("file://") || !ours) return url;
    let map = this.maps.get(url);
    if (map === undefined) {
      try {
        map = new SourceMap(JSON.parse(readFileSync(`${fileURLToPath(url)}.map`, "utf8")));
      } catch {
        map = null;
      }
      this.maps.set(url, map);
    }
    const entry = map?.findEntry(line, column) as { originalSource?: string } | undefined;
    return entry?.originalSource ?? url;
  }
}

/** The phase a source path belongs to, or undefined (then its caller's phase applies). */
export function phaseOf(source: string, rules: readonly PhaseRule[]): string | undefined {
  const normal = source.replaceAll("\\", "/");
  for (const rule of rules) if (rule.paths.some((p) => normal.includes(p))) return rule.phase;
  return undefined;
}

/** Milliseconds of self-time per phase (and per pseudo-frame), over the samples in [fromUs, toUs) of the profile's clock. */
export function attributeProfile(
  profile: CpuProfile,
  rules: readonly PhaseRule[] = RUN_PHASES,
  window?: { fromUs: number; toUs: number },
): Record<string, number> {
  const resolver = new SourceResolver();
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const parent = new Map<number, number>();
  for (const n of profile.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
  const phaseCache = new Map<number, string>();
  const phaseOfNode = (id: number): string => {
    const cached = phaseCache.get(id);
    if (cached) return cached;
    const node = byId.get(id)!;
    const frame = node.callFrame;
    let phase: string | undefined = PSEUDO.has(frame.functionName)
      ? frame.functionName
      : phaseOf(resolver.source(frame.url, frame.lineNumber, frame.columnNumber), rules);
    if (!phase) {
      const up = parent.get(id);
      phase = up === undefined || byId.get(up)!.callFrame.functionName === "(root)" ? "node/other" : phaseOfNode(up);
    }
    phaseCache.set(id, phase);
    return phase;
  };
  const totals: Record<string, number> = {};
  let t = profile.startTime;
  for (let i = 0; i < profile.samples.length; i++) {
    t += profile.timeDeltas[i];
    // A sample's time is the gap until the next one.
    const dt = (profile.timeDeltas[i + 1] ?? 0) / 1000;
    if (window && (t < window.fromUs || t >= window.toUs)) continue;
    const phase = phaseOfNode(profile.samples[i]);
    totals[phase] = (totals[phase] ?? 0) + dt;
  }
  return totals;
}

/** Reads a .cpuprofile file. */
export function readProfile(file: string): CpuProfile {
  return JSON.parse(readFileSync(file, "utf8")) as CpuProfile;
}
