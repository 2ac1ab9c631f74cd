/**
 * Loading user code named in langgraph.json as `./file.ts:export` (graphs, auth, custom routes,
 * the store's embedding function): one parser for the spec, one importer, one wording of the
 * errors. Ground floor: imports nothing of the server.
 *
 * Graphs must share the server's module instances of `@langchain/langgraph` / `@langchain/core`
 * (tsx's `tsImport()` would give them private copies): see `importFile`.
 */
import { randomUUID } from "node:crypto";
import { rm, writeFile } from "node:fs/promises";
import path from "node:path";
import { pathToFileURL } from "node:url";

export interface ModuleSpec {
  /** The file part, as written (relative to the config file's directory). */
  file: string;
  /** The export after the last colon; undefined when the spec names none. */
  exportName: string | undefined;
}

/**
 * `./file.ts:export` → file and export. A colon that belongs to a Windows drive letter (`C:\…`),
 * or one followed by a path, is not an export separator.
 */
export function parseModuleSpec(spec: string): ModuleSpec {
  const idx = spec.lastIndexOf(":");
  if (idx <= 1 || /[\\/]/.test(spec.slice(idx + 1))) return { file: spec.trim(), exportName: undefined };
  return { file: spec.slice(0, idx).trim(), exportName: spec.slice(idx + 1).trim() || undefined };
}

const TYPESCRIPT = /\.(ts|mts|cts|tsx)$/;

/** Loads in progress (they may share esbuild's service), and whether any of them used it. */
let loadsInProgress = 0;
let esbuildUsed = false;

/**
 * Runs `load` and then, once no other load is in progress, stops esbuild's service: a child
 * process (~12 MiB) that outlives the builds. A later build starts a new one on demand.
 */
export async function loadingModules<T>(load: () => Promise<T>): Promise<T> {
  loadsInProgress += 1;
  try {
    return await load();
  } finally {
    loadsInProgress -= 1;
    if (loadsInProgress === 0 && esbuildUsed) {
      esbuildUsed = false;
      const { stop } = await import("esbuild");
      await stop();
    }
  }
}

/** Runs `work` with esbuild inside a loading scope: its service is stopped once the last scope ends. */
export function withEsbuild<T>(work: (esbuild: typeof import("esbuild")) => Promise<T>): Promise<T> {
  return loadingModules(async () => {
    esbuildUsed = true;
    return work(await import("esbuild"));
  });
}

/**
 * Imports a file. TypeScript is transpiled with esbuild (bundling the file's own relative
 * imports, keeping packages external) into a hidden .mjs beside the source, imported, then
 * removed. Beside the source, bare imports resolve to the same node_modules as the server's, so
 * graphs share the server's module instances (`instanceof`, Command, checkpointer classes match);
 * and no module-loader hook thread is started (on Node 20 a loader costs a second V8 isolate).
 */
export async function importFile(file: string): Promise<Record<string, unknown>> {
  if (!TYPESCRIPT.test(file)) return (await import(pathToFileURL(file).href)) as Record<string, unknown>;
  const { build } = await import("esbuild");
  esbuildUsed = true;
  const result = await build({
    entryPoints: [file], bundle: true, packages: "external", format: "esm", platform: "node", target: "node20",
    write: false, sourcemap: "inline", logLevel: "silent",
  });
  const compiled = path.join(path.dirname(file), `.${path.basename(file)}.${randomUUID()}.mjs`);
  await writeFile(compiled, result.outputFiles[0].contents);
  try {
    return (await import(pathToFileURL(compiled).href)) as Record<string, unknown>;
  } finally {
    await rm(compiled, { force: true });
  }
}

/** The first line of an error's message (a stack or a compiler listing says too much for one line). */
const firstLine = (error: unknown) => String((error as Error)?.message ?? error).split("\n")[0];

/**
 * The named export of `spec.file` (resolved against `baseDir`). Failures are reported through
 * `fail(message)` (each caller's own error class), worded `${where}: cannot load <file>: <why>` or
 * `${where}: <file> has no export "<name>"`. The export is wrapped, so that one which is a Promise
 * (a graph may be exported as one) reaches the caller unresolved.
 */
export async function loadExport(
  spec: { file: string; exportName: string },
  baseDir: string,
  where: string,
  fail: (message: string) => Error,
): Promise<{ value: unknown }> {
  let mod: Record<string, unknown>;
  try {
    mod = await loadingModules(() => importFile(path.resolve(baseDir, spec.file)));
  } catch (error) {
    throw fail(`${where}: cannot load ${spec.file}: ${firstLine(error)}`);
  }
  if (!(spec.exportName in mod) || mod[spec.exportName] === undefined) throw fail(`${where}: ${spec.file} has no export "${spec.exportName}"`);
  return { value: mod[spec.exportName] };
}
