/**
 * Loading user code named in langgraph.json as `./file.ts:export` (graphs, auth, custom routes,
 * the store's embedding function): one parser for the spec, one importer, one wording of the
 * errors, and where a project's own packages are. Ground floor: imports nothing of the server.
 *
 * User code runs on the packages of its own project (its node_modules, found from the file's
 * location), which may be other copies than the server's: see `importFile` and `findPackage`.
 */
import { createHash, randomUUID } from "node:crypto";
import { readFileSync, realpathSync, statSync } from "node:fs";
import { lstat, mkdir, mkdtemp, rename, rm, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { pathToFileURL } from "node:url";
import type { Plugin } from "esbuild";

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
 * process that outlives the builds. A later build starts a new one on demand.
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

// ---------------------------------------------------------------------------------------------
// where transpiled files go

let configuredCacheDir: string | undefined;
let cacheDirReady: Promise<string> | undefined;

/**
 * Where transpiled user files are written (the server gives a directory of DATA_DIR); unset, a
 * directory of the OS temp dir that only this user can write. Never the project's folder: it
 * need not be writable, and must not be littered.
 */
export function setModuleCacheDir(dir: string | undefined): void {
  configuredCacheDir = dir === undefined ? undefined : path.resolve(dir);
  cacheDirReady = undefined;
}

async function ownedTempDir(): Promise<string> {
  const uid = process.getuid?.();
  const dir = path.join(os.tmpdir(), `agent-server-modules-${uid ?? "user"}`);
  await mkdir(dir, { recursive: true, mode: 0o700 });
  const st = await lstat(dir);
  // A shared temp dir: a directory someone else made (or may write) could hand us their code to run.
  if (st.isDirectory() && !st.isSymbolicLink() && (uid === undefined || st.uid === uid) && (st.mode & 0o022) === 0) return dir;
  return mkdtemp(path.join(os.tmpdir(), "agent-server-modules-"));
}

function cacheDir(): Promise<string> {
  return (cacheDirReady ??= (async () => {
    if (configuredCacheDir === undefined) return ownedTempDir();
    await mkdir(configuredCacheDir, { recursive: true, mode: 0o700 });
    return configuredCacheDir;
  })().catch((error: unknown) => {
    cacheDirReady = undefined;
    throw error;
  }));
}

/** Source file → the transpiled file last imported for it. */
const transpiled = new Map<string, string>();

/** The transpiled file last imported for a TypeScript source (undefined when none was). */
export function transpiledFileOf(source: string): string | undefined {
  return transpiled.get(path.resolve(source));
}

/** Distinct module instances per load of a file, as with a file of its own (the cached file is shared). */
let loadCount = 0;

/** Source file → the files its last load read (for a bundle: esbuild's inputs; else the file alone). */
const inputs = new Map<string, string[]>();

/**
 * The project files the last load of `source` was made of (absolute paths): for TypeScript, the
 * bundle's inputs (the file and its local imports, not packages); for JavaScript, the file alone
 * (Node imports its local imports itself). Empty when it was never loaded. Development mode
 * watches these to reload graphs on change.
 */
export function moduleInputsOf(source: string): string[] {
  return inputs.get(path.resolve(source)) ?? [];
}

export interface ImportOptions {
  /**
   * A new module instance of a JavaScript file too (TypeScript always gets one): a reload must see
   * the file's new contents, which Node's module cache would otherwise hide. Its own imports
   * still come from that cache.
   */
  fresh?: boolean;
}

// ---------------------------------------------------------------------------------------------
// importing

/** A specifier that names a package (or a builtin), not a file. */
const isBare = (specifier: string) => !/^(\.{1,2}(\/|$)|\/|[a-zA-Z]:[\\/]|\\\\|[a-zA-Z][a-zA-Z0-9+.-]*:)/.test(specifier);

const NODE_MODULES = /[\\/]node_modules[\\/]/;

/** The package a bare specifier names: `@scope/name` or `name`, without the subpath. */
const packageName = (specifier: string) =>
  specifier
    .split("/")
    .slice(0, specifier.startsWith("@") ? 2 : 1)
    .join("/");

const RESOLVING = Symbol("agent-server resolving a package");

/**
 * Packages stay outside the bundle but are resolved from the importing file, as Node would from
 * the source's own place, and imported by absolute URL: the transpiled file lives elsewhere, and
 * the graph must get its project's copies (one module instance each with the rest of the
 * project). A bare specifier that resolves to a project file (a tsconfig `paths` alias) is bundled.
 */
const projectPackages: Plugin = {
  name: "project-packages",
  setup(build) {
    build.onResolve({ filter: /.*/ }, async (args) => {
      if (args.pluginData === RESOLVING || args.kind === "entry-point" || args.kind === "require-call" || !isBare(args.path)) return undefined;
      const found = await build.resolve(args.path, { kind: args.kind, resolveDir: args.resolveDir, importer: args.importer, pluginData: RESOLVING });
      // Unresolvable here: left for Node, whose error names the package.
      if (found.errors.length > 0) return { path: args.path, external: true };
      if (found.external) return { path: found.path, external: true };
      // A package (of node_modules, possibly a link to a workspace folder) stays a module of its own.
      if (!NODE_MODULES.test(found.path) && !findPackage(packageName(args.path), args.resolveDir)) return { path: found.path };
      return { path: pathToFileURL(found.path).href, external: true };
    });
  },
};

/**
 * Imports a file. TypeScript is transpiled with esbuild (bundling the file's own relative
 * imports, keeping packages external but resolved from the source's place) into a cache
 * directory (see setModuleCacheDir), named by the content's hash, and imported from there. No
 * module-loader hook thread is started (on Node 20 a loader costs a second V8 isolate).
 * `import.meta.url` (and `dirname`, `filename`) name the source file, so that files read
 * relative to it are found.
 */
export async function importFile(file: string, options: ImportOptions = {}): Promise<Record<string, unknown>> {
  if (!TYPESCRIPT.test(file)) {
    inputs.set(path.resolve(file), [path.resolve(file)]);
    loadCount += 1;
    return (await import(`${pathToFileURL(file).href}${options.fresh ? `?load=${loadCount}` : ""}`)) as Record<string, unknown>;
  }
  const { build } = await import("esbuild");
  esbuildUsed = true;
  const dir = await cacheDir();
  const source = path.resolve(file);
  const result = await build({
    entryPoints: [source],
    bundle: true,
    format: "esm",
    platform: "node",
    target: "node20",
    // Node's own conditions (esbuild would add "module", which Node does not read).
    conditions: [],
    define: {
      "import.meta.url": JSON.stringify(pathToFileURL(source).href),
      "import.meta.filename": JSON.stringify(source),
      "import.meta.dirname": JSON.stringify(path.dirname(source)),
    },
    // In the cache directory, so that the source map's paths are relative to where the file goes.
    outfile: path.join(dir, "module.mjs"),
    write: false,
    sourcemap: "inline",
    logLevel: "silent",
    plugins: [projectPackages],
    // The files the bundle was made of, so that development mode knows what to watch.
    metafile: true,
  });
  const workingDir = process.cwd();
  inputs.set(
    source,
    Object.keys(result.metafile.inputs)
      .filter((input) => !/^[a-z][\w-]*:(?![\\/])/i.test(input))
      .map((input) => path.resolve(workingDir, input)),
  );
  const contents = result.outputFiles[0].contents;
  const compiled = path.join(dir, `${createHash("sha256").update(contents).digest("hex").slice(0, 32)}.mjs`);
  if (
    !(await lstat(compiled).then(
      (s) => s.isFile(),
      () => false,
    ))
  ) {
    // Whole or absent: another process may be loading the same file.
    const partial = `${compiled}.${process.pid}.${randomUUID()}.tmp`;
    await writeFile(partial, contents, { mode: 0o600 });
    await rename(partial, compiled).catch(async (error: unknown) => {
      await rm(partial, { force: true });
      throw error;
    });
  }
  transpiled.set(source, compiled);
  loadCount += 1;
  return (await import(`${pathToFileURL(compiled).href}?load=${loadCount}`)) as Record<string, unknown>;
}

// ---------------------------------------------------------------------------------------------
// the project's packages

export interface PackageInfo {
  name: string;
  /** The package's directory (symlinks resolved, as Node resolves them). */
  dir: string;
  version: string | undefined;
  manifest: Record<string, unknown>;
}

/**
 * The package `name` as Node finds it from `from` (a file or a directory): the first
 * `node_modules/<name>` up the directory tree. Undefined when there is none.
 */
export function findPackage(name: string, from: string): PackageInfo | undefined {
  let dir = path.resolve(from);
  try {
    if (!statSync(dir).isDirectory()) dir = path.dirname(dir);
  } catch {
    dir = path.dirname(dir);
  }
  for (;;) {
    if (path.basename(dir) !== "node_modules") {
      const candidate = path.join(dir, "node_modules", name);
      try {
        const manifest = JSON.parse(readFileSync(path.join(candidate, "package.json"), "utf8")) as Record<string, unknown>;
        return { name, dir: realpathSync(candidate), version: typeof manifest.version === "string" ? manifest.version : undefined, manifest };
      } catch {
        // not here: look further up
      }
    }
    const parent = path.dirname(dir);
    if (parent === dir) return undefined;
    dir = parent;
  }
}

/** Node's conditions for an `import` (in the order of the exports map, the first that matches wins). */
const IMPORT_CONDITIONS = new Set(["node", "import", "default"]);

function exportTarget(target: unknown): string | undefined {
  if (typeof target === "string") return target;
  if (Array.isArray(target)) {
    for (const t of target) {
      const found = exportTarget(t);
      if (found !== undefined) return found;
    }
    return undefined;
  }
  if (target && typeof target === "object") {
    for (const [condition, value] of Object.entries(target)) {
      if (!IMPORT_CONDITIONS.has(condition)) continue;
      const found = exportTarget(value);
      if (found !== undefined) return found;
    }
  }
  return undefined;
}

/**
 * The file URL an `import "<name><subpath>"` gets in Node (exact `exports` entries, or `main` for
 * the root of a package without exports): the same module instance the project's code imports.
 */
export function packageEntryUrl(pkg: PackageInfo, subpath = "."): string | undefined {
  const exports = pkg.manifest.exports;
  let target: string | undefined;
  if (exports === undefined) {
    if (subpath !== ".") return undefined;
    target = typeof pkg.manifest.main === "string" ? pkg.manifest.main : "index.js";
  } else if (typeof exports === "string" || Array.isArray(exports)) {
    target = subpath === "." ? exportTarget(exports) : undefined;
  } else if (exports && typeof exports === "object") {
    const keys = Object.keys(exports);
    const sugar = keys.length > 0 && !keys[0].startsWith(".");
    target = sugar ? (subpath === "." ? exportTarget(exports) : undefined) : exportTarget((exports as Record<string, unknown>)[subpath]);
  }
  return target === undefined ? undefined : pathToFileURL(path.join(pkg.dir, target)).href;
}

interface EsbuildMessage {
  text: string;
  location: { file: string; line: number; column: number } | null;
}

/**
 * The first line of an error's message (a stack or a compiler listing says too much for one line).
 * An esbuild failure's first line only counts its errors: its first error is told instead, with
 * the file, line and column it is at.
 */
const firstLine = (error: unknown, baseDir: string) => {
  const first = (error as { errors?: EsbuildMessage[] } | undefined)?.errors?.[0];
  if (first && typeof first.text === "string") {
    // esbuild's paths are relative to the working directory; the project's own read better.
    const file = first.location && path.relative(baseDir, path.resolve(first.location.file));
    const at = first.location ? `${file}:${first.location.line}:${first.location.column}: ` : "";
    return `${at}${first.text}`.split("\n")[0];
  }
  return String((error as Error)?.message ?? error).split("\n")[0];
};

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
  options: ImportOptions = {},
): Promise<{ value: unknown }> {
  let mod: Record<string, unknown>;
  try {
    mod = await loadingModules(() => importFile(path.resolve(baseDir, spec.file), options));
  } catch (error) {
    throw fail(`${where}: cannot load ${spec.file}: ${firstLine(error, baseDir)}`);
  }
  if (!(spec.exportName in mod) || mod[spec.exportName] === undefined) throw fail(`${where}: ${spec.file} has no export "${spec.exportName}"`);
  return { value: mod[spec.exportName] };
}
