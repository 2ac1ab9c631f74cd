import { existsSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { Worker, type WorkerOptions } from "node:worker_threads";

/**
 * A worker thread running a module of this server, found among `candidates` (relative to
 * `base`, the caller's `import.meta.url`): the `.js` of the bundle (where esbuild put the entry
 * beside the chunk) or the `.ts` of the sources. From the sources (tests, `tsx`), the thread
 * registers tsx itself: loader flags do not reach workers.
 */
export function moduleWorker(base: string, candidates: string[], options: WorkerOptions = {}): Worker {
  const urls = candidates.map((p) => new URL(p, base));
  const file = urls.find((url) => existsSync(fileURLToPath(url)));
  if (!file) throw new Error(`a worker thread's module is missing (looked for ${urls.map((u) => fileURLToPath(u)).join(", ")})`);
  if (!file.pathname.endsWith(".ts")) return new Worker(file, options);
  const tsx = JSON.stringify(import.meta.resolve("tsx/esm/api"));
  return new Worker(`import(${tsx}).then(({ register }) => { register(); return import(${JSON.stringify(file.href)}); })`, { ...options, eval: true });
}
