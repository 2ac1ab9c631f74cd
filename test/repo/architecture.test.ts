import { test } from "tap";
import { execFile } from "node:child_process";
import { promisify } from "node:util";
import path from "node:path";
import os from "node:os";
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { appendCallers } from "../support/append-callers.js";

const root = path.resolve(import.meta.dirname, "../..");

/**
 * The layering of docs/architecture.md, drawn from the imports by dependency-cruiser with the rules of
 * .dependency-cruiser.cjs: no file imports a higher layer, an edge never imports another edge,
 * the ground floor imports no layer, and there is no import cycle.
 */
test("imports point down the layers, with no cycle", async (t) => {
  const bin = path.join(root, "node_modules", ".bin", "depcruise");
  const { stdout } = await promisify(execFile)(bin, ["src", "projections", "--config", ".dependency-cruiser.cjs", "--output-type", "json"], {
    cwd: root,
    maxBuffer: 64 * 1024 * 1024,
  }).catch((error: { stdout?: string }) => ({ stdout: error.stdout ?? "" }));
  const result = JSON.parse(stdout) as { summary: { violations: { rule: { name: string }; from: string; to: string }[]; totalCruised: number } };
  t.ok(result.summary.totalCruised > 150, `every module was cruised (${result.summary.totalCruised})`);
  t.same(
    result.summary.violations.map((v) => `${v.rule.name}: ${v.from} -> ${v.to}`),
    [],
    "no layer violation",
  );
});

/** The value imports of zod in `text` other than a namespace import (type-only imports are erased by the build). */
function zodValueImports(text: string): string[] {
  return [...text.matchAll(/^import\s+(?!type\b)(?!\*\s+as\s+\w+\s+from)[^;]*?from\s+["']zod(?:\/[^"']*)?["']/gm)].map((m) => m[0]);
}

/**
 * zod is imported as a namespace (`import * as z from "zod"`), never as the named binding `{ z }`: esbuild keeps
 * every export of a re-exported namespace it cannot see through, so `{ z }` put all of zod into the bundle,
 * its 40-odd locales included, and the server's start ran 75 M instructions more (1,310 M against 1,232 M to
 * the listening line, `bench start`'s count), ~36 ms of each start. Type-only imports cost nothing.
 */
test("zod is imported as a namespace, so that the bundle keeps only the zod the server uses", async (t) => {
  t.same(
    [
      'import { z } from "zod";',
      'import { z, type ZodType } from "zod";',
      'import z from "zod";',
      'import { string } from "zod/v4";',
      'import type { ZodType } from "zod";',
      'import * as z from "zod";',
    ].map((line) => zodValueImports(line).length),
    [1, 1, 1, 1, 0, 0],
    "the check catches named and default imports and lets namespace and type-only imports through",
  );
  const files = ["src", "projections"].flatMap((dir) =>
    (readdirSync(path.join(root, dir), { recursive: true }) as string[]).filter((f) => f.endsWith(".ts")).map((f) => path.join(dir, f)),
  );
  t.ok(files.length > 150, `every source file was read (${files.length})`);
  t.same(
    files.flatMap((f) => zodValueImports(readFileSync(path.join(root, f), "utf8")).map((i) => `${f}: ${i}`)),
    [],
    "no named or default import of zod",
  );
});

const sourceFiles = (...dirs: string[]) =>
  dirs.flatMap((dir) =>
    (readdirSync(path.join(root, dir), { recursive: true }) as string[]).filter((f) => f.endsWith(".ts")).map((f) => path.join(root, dir, f)),
  );

/**
 * The command pipeline (src/commands/pipeline.ts) is the only caller of the event store's `append` above
 * the store itself (whose decorators and chunked writes call the store they wrap): every write says
 * there what it expects, what a conflict means to it and what it waits for.
 */
test("only the command pipeline appends to the event log", async (t) => {
  const files = sourceFiles("src", "projections");
  t.ok(files.length > 150, `every source file was read (${files.length})`);
  const callers = appendCallers(root, files).filter((c) => !c.startsWith(`src${path.sep}eventstore${path.sep}`));
  t.ok(
    callers.length > 0 && callers.every((c) => c.startsWith(path.join("src", "commands", "pipeline.ts:"))),
    `the pipeline appends, nobody else: ${callers.join(", ")}`,
  );

  // The check sees a call through any name the store goes by.
  const dir = mkdtempSync(path.join(os.tmpdir(), "append-probe-"));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const probe = path.join(dir, "probe.ts");
  writeFileSync(
    probe,
    [
      `import type { EventStore } from ${JSON.stringify(path.join(root, "src", "eventstore", "types.js"))};`,
      "export async function sneak(log: EventStore, rows: string[]) {",
      "  rows.push('not a store');",
      '  const { append } = { append: (s: string) => log.append(s, [], "any") };',
      '  return append("x");',
      "}",
    ].join("\n"),
  );
  t.same(appendCallers(root, [probe]), [`${path.relative(root, probe)}:4`], "a call through another name is found; an array's push or a local append is not");
});
