/**
 * Schemas read from graphs' TypeScript types (extract.ts), off the request path and cached:
 *   - the compiler runs in a worker thread (worker.ts), one per batch, ended when it answers or
 *     after `timeoutMs`; graphs asked for together share one compiler pass;
 *   - answers are kept in memory per graph (one entry per graph of langgraph.json) and on disk
 *     under `cacheDir`, keyed by the graph file's content hash; an entry also lists the hashes of
 *     the project files it was read from (tsconfig, imported graph files) and is used only while
 *     they are unchanged, so a restart answers at once.
 * A graph the pass cannot read answers undefined: the caller falls back to what the runtime tells.
 */
import { createHash } from "node:crypto";
import { mkdir, readFile, rename, writeFile } from "node:fs/promises";
import { createRequire } from "node:module";
import path from "node:path";
import type { Worker } from "node:worker_threads";
import { moduleWorker } from "../../util/module-worker.js";
import type { TypeGraphSchema, TypeSchemaResult, TypeSchemaTarget } from "./extract.js";

export type { TypeGraphSchema, TypeSchemaTarget } from "./extract.js";

/** Schemas of one graph file's export: the root under the export's name, subgraphs under `export|node|…`. */
export type TypeSchemas = Record<string, TypeGraphSchema>;

/** Bumped when extract.ts would answer differently for the same files. */
const PARSER_VERSION = 1;
/** The packages whose types the answers depend on besides the project's files: an upgrade reads again. */
const TOOLCHAIN = ["typescript", "typescript-json-schema", "@langchain/langgraph", "@langchain/core"]
  .map((name) => {
    try {
      return `${name}@${(createRequire(import.meta.url)(`${name}/package.json`) as { version: string }).version}`;
    } catch {
      return name;
    }
  })
  .join(" ");

export interface TypeSchemaReaderOptions {
  /** Directory of the disk cache (DATA_DIR/type-schemas); none: memory only. */
  cacheDir?: string;
  /** A compiler pass still running after this long is ended; its graphs answer undefined. */
  timeoutMs?: number;
  log?: (message: string) => void;
}

interface CacheEntry {
  version: number;
  files: Record<string, string>;
  graphs: TypeSchemas;
}

type WorkerAnswer = { results: (TypeSchemaResult | { error: string })[] } | { error: string };

const sha256 = (data: string | Buffer) => createHash("sha256").update(data).digest("hex");

async function hashOf(file: string): Promise<string | undefined> {
  try {
    return sha256(await readFile(file));
  } catch {
    return undefined;
  }
}

const keyOf = (t: TypeSchemaTarget) => `${t.sourceFile}\0${t.exportSymbol}`;

export class TypeSchemaReader {
  readonly #memo = new Map<string, Promise<TypeSchemas | undefined>>();
  readonly #workers = new Set<Worker>();
  readonly #cacheDir: string | undefined;
  readonly #timeoutMs: number;
  readonly #log: (message: string) => void;
  #closed = false;
  #passes = 0;

  constructor(options: TypeSchemaReaderOptions = {}) {
    this.#cacheDir = options.cacheDir;
    this.#timeoutMs = options.timeoutMs ?? 120_000;
    this.#log = options.log ?? (() => {});
  }

  /** The schemas of each target, in order (undefined where its types could not be read). */
  async read(targets: TypeSchemaTarget[]): Promise<(TypeSchemas | undefined)[]> {
    const fresh = targets.filter((t, i) => !this.#memo.has(keyOf(t)) && targets.findIndex((o) => keyOf(o) === keyOf(t)) === i);
    if (fresh.length > 0) {
      const settled = this.#resolve(fresh);
      fresh.forEach((t, i) => {
        const answer = settled.then((all) => all[i]);
        this.#memo.set(
          keyOf(t),
          answer.then((a) => a.schemas),
        );
        // A pass that failed as a whole (timeout, crash) is tried again by a later request; a
        // graph whose types cannot be read keeps its answer (asking again would read them again).
        void answer.then((a) => a.retry && this.#memo.delete(keyOf(t)));
      });
    }
    return Promise.all(targets.map((t) => this.#memo.get(keyOf(t))!));
  }

  /** Compiler passes started so far (each one a worker thread). */
  get passes(): number {
    return this.#passes;
  }

  /** Ends the compiler passes under way (their graphs answer undefined). */
  async close(): Promise<void> {
    this.#closed = true;
    await Promise.all([...this.#workers].map((w) => w.terminate()));
  }

  async #resolve(targets: TypeSchemaTarget[]): Promise<{ schemas: TypeSchemas | undefined; retry: boolean }[]> {
    const cached = await Promise.all(targets.map((t) => this.#fromCache(t)));
    const answers = cached.map((schemas) => ({ schemas, retry: false }));
    const missing = targets.map((t, i) => ({ t, i })).filter(({ i }) => cached[i] === undefined);
    if (missing.length === 0) return answers;
    const results = this.#closed ? undefined : await this.#compile(missing.map(({ t }) => t));
    await Promise.all(
      missing.map(async ({ t, i }, j) => {
        const result = results?.[j];
        if (!result) answers[i] = { schemas: undefined, retry: true };
        else if ("error" in result) this.#log(`type schemas of ${t.sourceFile}:${t.exportSymbol}: ${result.error}`);
        else {
          answers[i] = { schemas: result.graphs, retry: false };
          await this.#toCache(t, result);
        }
      }),
    );
    return answers;
  }

  /** One compiler pass in a worker thread; undefined when it failed or timed out. */
  #compile(targets: TypeSchemaTarget[]): Promise<(TypeSchemaResult | { error: string })[] | undefined> {
    return new Promise((resolve) => {
      let worker: Worker;
      try {
        worker = moduleWorker(import.meta.url, ["./type-schemas/worker.js", "./runtime/type-schemas/worker.js", "./worker.ts"]);
      } catch (error) {
        this.#log(`type schemas: ${(error as Error).message}`);
        return resolve(undefined);
      }
      this.#passes += 1;
      this.#workers.add(worker);
      worker.unref(); // never holds the process open by itself
      let done = false;
      const finish = (answer: (TypeSchemaResult | { error: string })[] | undefined, why?: string) => {
        if (done) return;
        done = true;
        clearTimeout(timer);
        if (why) this.#log(`type schemas of ${targets.map((t) => t.sourceFile).join(", ")}: ${why}`);
        this.#workers.delete(worker);
        void worker.terminate();
        resolve(answer);
      };
      const timer = setTimeout(() => finish(undefined, `no answer within ${this.#timeoutMs} ms`), this.#timeoutMs);
      timer.unref();
      worker.once("message", (m: WorkerAnswer) => ("results" in m ? finish(m.results) : finish(undefined, m.error)));
      worker.once("error", (error) => finish(undefined, error.message));
      worker.once("exit", (code) => finish(undefined, `the worker exited (code ${code})`));
      worker.postMessage(targets);
    });
  }

  #cacheFile(t: TypeSchemaTarget, content: string): string | undefined {
    if (!this.#cacheDir) return undefined;
    return path.join(this.#cacheDir, `${sha256([PARSER_VERSION, TOOLCHAIN, t.sourceFile, t.exportSymbol, content].join("\0"))}.json`);
  }

  async #fromCache(t: TypeSchemaTarget): Promise<TypeSchemas | undefined> {
    let content: string;
    try {
      content = await readFile(t.sourceFile, "utf8");
    } catch {
      return undefined;
    }
    const file = this.#cacheFile(t, content);
    if (!file) return undefined;
    let entry: CacheEntry;
    try {
      entry = JSON.parse(await readFile(file, "utf8")) as CacheEntry;
    } catch {
      return undefined; // absent, or torn by a crash: read again
    }
    if (entry.version !== PARSER_VERSION) return undefined;
    for (const [dep, hash] of Object.entries(entry.files)) if ((await hashOf(dep)) !== hash) return undefined;
    return entry.graphs;
  }

  async #toCache(t: TypeSchemaTarget, result: TypeSchemaResult): Promise<void> {
    try {
      const content = await readFile(t.sourceFile, "utf8");
      const file = this.#cacheFile(t, content);
      if (!file) return;
      const files: Record<string, string> = {};
      for (const dep of result.files) {
        const hash = await hashOf(dep);
        if (hash) files[dep] = hash;
      }
      const entry: CacheEntry = { version: PARSER_VERSION, files, graphs: result.graphs };
      await mkdir(path.dirname(file), { recursive: true });
      // Written aside and renamed: a reader never sees half an entry.
      const tmp = `${file}.${process.pid}.tmp`;
      await writeFile(tmp, JSON.stringify(entry));
      await rename(tmp, file);
    } catch (error) {
      this.#log(`type schemas: cache not written: ${(error as Error).message}`);
    }
  }
}
