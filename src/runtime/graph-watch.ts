/**
 * Development mode's reload: the graph files (with the local imports their bundles were made of),
 * langgraph.json and the .env it names are watched; after a change (debounced: editors write a
 * file in several steps) the graphs are loaded again and swapped in at once (GraphRegistry.reload),
 * so that runs in flight finish on the code they started with. A version that cannot be loaded is
 * reported in one line and the last good one keeps serving.
 *
 * Node 20's `fs.watch` is not recursive on Linux: each directory that holds a watched file is
 * watched (not the file itself: editors that save by writing a new file and renaming it over the
 * old one would leave a watch on the file with the old inode).
 */
import { watch, type FSWatcher } from "node:fs";
import path from "node:path";
import { isDeepStrictEqual } from "node:util";
import { loadLanggraphConfig } from "../langgraph-config.js";
import type { GraphRegistry } from "./graphs.js";

/** What one reload came to: `ok` false when the graphs could not be loaded (the previous ones serve). */
export interface GraphReloadOutcome {
  ok: boolean;
  /** The line printed for it. */
  message: string;
  /** The changed files that caused it (absolute paths). */
  changed: string[];
}

export interface GraphWatcherOptions {
  registry: Pick<GraphRegistry, "catalogue" | "files" | "reload">;
  /** Absolute path of langgraph.json. */
  configPath: string;
  /** The variables its `env` named when the server started (the values now in the environment, unless set otherwise). */
  env: Record<string, string>;
  /** Quiet time after the last change before reloading. */
  debounceMs?: number;
  /** Where the reload lines go (default: stdout for reloads, stderr for failures). */
  log?: (line: string, ok: boolean) => void;
  onReload?: (outcome: GraphReloadOutcome) => void;
}

const PREFIX = "agent-server dev:";

export class GraphWatcher {
  readonly #o: GraphWatcherOptions;
  readonly #debounceMs: number;
  /** Directory → its watcher. */
  readonly #watchers = new Map<string, FSWatcher>();
  /** The files whose changes count (absolute paths). */
  #files = new Set<string>();
  #envFile: string | undefined;
  #env: Record<string, string>;
  #changed = new Set<string>();
  #timer: NodeJS.Timeout | undefined;
  #reloading: Promise<void> | undefined;
  #closed = false;

  constructor(options: GraphWatcherOptions) {
    this.#o = options;
    this.#debounceMs = options.debounceMs ?? 150;
    this.#env = { ...options.env };
  }

  /** Starts watching (reads langgraph.json for the .env it names). */
  async start(): Promise<void> {
    const loaded = await loadLanggraphConfig(this.#o.configPath, { applyEnv: false }).catch(() => undefined);
    this.#envFile = loaded?.config.env.kind === "file" ? path.resolve(loaded.baseDir, loaded.config.env.path) : undefined;
    this.#refresh();
  }

  /** Stops watching; a reload under way is awaited (its graphs are still put in place). */
  async close(): Promise<void> {
    this.#closed = true;
    clearTimeout(this.#timer);
    for (const watcher of this.#watchers.values()) watcher.close();
    this.#watchers.clear();
    await this.#reloading;
  }

  #log(line: string, ok: boolean): void {
    if (this.#o.log) this.#o.log(line, ok);
    else if (ok) console.log(line);
    else console.error(line);
  }

  /** Watches the directories of the current files, and no others. */
  #refresh(): void {
    if (this.#closed) return;
    const files = new Set([...this.#o.registry.files(), this.#o.configPath, ...(this.#envFile ? [this.#envFile] : [])].map((f) => path.resolve(f)));
    this.#files = files;
    const dirs = new Set([...files].map((f) => path.dirname(f)));
    for (const [dir, watcher] of this.#watchers) {
      if (dirs.has(dir)) continue;
      watcher.close();
      this.#watchers.delete(dir);
    }
    for (const dir of dirs) {
      if (this.#watchers.has(dir)) continue;
      try {
        const watcher = watch(dir, { persistent: false }, (_event, filename) => {
          // Some platforms do not name the file: any file of the directory may have changed.
          const changed = filename ? [path.join(dir, filename.toString())] : [...this.#files].filter((f) => path.dirname(f) === dir);
          for (const file of changed) if (this.#files.has(file)) this.#schedule(file);
        });
        // A directory removed while watched: it is watched again at the next reload, if it is back.
        watcher.on("error", () => {
          watcher.close();
          if (this.#watchers.get(dir) === watcher) this.#watchers.delete(dir);
        });
        this.#watchers.set(dir, watcher);
      } catch (error) {
        this.#log(`${PREFIX} cannot watch ${dir}: ${(error as Error).message}`, false);
      }
    }
  }

  #schedule(file: string): void {
    if (this.#closed) return;
    this.#changed.add(file);
    clearTimeout(this.#timer);
    this.#timer = setTimeout(() => this.#flush(), this.#debounceMs);
  }

  /** One reload at a time: changes made during one are reloaded after it. */
  #flush(): void {
    if (this.#closed || this.#changed.size === 0) return;
    if (this.#reloading) return;
    const changed = [...this.#changed];
    this.#changed.clear();
    this.#reloading = this.#reload(changed).finally(() => {
      this.#reloading = undefined;
      this.#flush();
    });
  }

  async #reload(changed: string[]): Promise<void> {
    const baseDir = path.dirname(this.#o.configPath);
    const names = changed.map((f) => path.relative(baseDir, f) || f).join(", ");
    if (changed.includes(this.#o.configPath) || (this.#envFile !== undefined && changed.includes(this.#envFile))) {
      const problem = await this.#rereadConfig();
      if (problem !== undefined) {
        this.#report({ ok: false, message: `${PREFIX} ${problem}; the last good graphs keep serving`, changed });
        return;
      }
    }
    let outcome: GraphReloadOutcome;
    try {
      await this.#o.registry.reload();
      outcome = { ok: true, message: `${PREFIX} graphs reloaded (changed: ${names})`, changed };
    } catch (error) {
      const why = (error instanceof Error ? error.message : String(error)).split("\n")[0];
      outcome = { ok: false, message: `${PREFIX} reload failed, the last good graphs keep serving: ${why}`, changed };
    }
    // The new bundles may import other files than the old ones.
    this.#refresh();
    this.#report(outcome);
  }

  #report(outcome: GraphReloadOutcome): void {
    if (this.#closed) return;
    this.#log(outcome.message, outcome.ok);
    this.#o.onReload?.(outcome);
  }

  /**
   * Reads langgraph.json and its .env again: the environment gets the .env's new values (a
   * variable set otherwise than by the .env is left alone); graphs added, removed or pointed
   * elsewhere need a restart, which is said. A problem reading them is returned.
   */
  async #rereadConfig(): Promise<string | undefined> {
    let loaded;
    try {
      loaded = await loadLanggraphConfig(this.#o.configPath, { applyEnv: false });
    } catch (error) {
      return (error instanceof Error ? error.message : String(error)).split("\n")[0];
    }
    this.#envFile = loaded.config.env.kind === "file" ? path.resolve(loaded.baseDir, loaded.config.env.path) : undefined;
    const env = loaded.env;
    for (const [key, old] of Object.entries(this.#env)) {
      if (!(key in env) && process.env[key] === old) delete process.env[key];
    }
    for (const [key, value] of Object.entries(env)) {
      if (process.env[key] === undefined || process.env[key] === this.#env[key]) process.env[key] = value;
    }
    this.#env = { ...env };
    const catalogue = this.#o.registry.catalogue;
    const now = Object.fromEntries(catalogue.ids().map((id) => [id, `${catalogue.spec(id).path}:${catalogue.spec(id).exportName}`]));
    const next = Object.fromEntries(Object.entries(loaded.config.graphs).map(([id, spec]) => [id, `${spec.path}:${spec.exportName}`]));
    if (!isDeepStrictEqual(now, next)) {
      this.#log(
        `${PREFIX} langgraph.json's graphs were added, removed or pointed elsewhere: restart agent-server to serve them (the current graphs are reloaded)`,
        false,
      );
    }
    return undefined;
  }
}
