/**
 * The semantic index of the store (`store.index` in langgraph.json): `embed` names an export
 * loaded like a graph (`./embed.ts:embed`), either
 *   - a function `(texts: string[]) => number[][] | Promise<number[][]>`, or
 *   - a LangChain `Embeddings` object (`embedDocuments(texts)`, `embedQuery(text)`).
 * Provider strings (`openai:text-embedding-3-small`) would need network access and a provider
 * package; they are refused at start with a message saying what to write instead.
 */
import { loadExport, parseModuleSpec } from "../module-loader.js";
import { LanggraphConfigError, type StoreConfig } from "../langgraph-config.js";

export interface StoreIndex {
  dims: number;
  /** Field paths embedded when a put names none (`["$"]`: the whole value). */
  fields: string[];
  embedDocuments(texts: string[]): Promise<number[][]>;
  embedQuery(text: string): Promise<number[]>;
}

export async function loadStoreIndex(config: StoreConfig["index"] | undefined, baseDir: string, label = "langgraph.json"): Promise<StoreIndex | undefined> {
  if (!config) return undefined;
  const where = `${label}: store.index.embed`;
  const { file, exportName } = parseModuleSpec(config.embed);
  if (!exportName || !/^[./]/.test(file)) {
    throw new LanggraphConfigError(
      `${where}: expected a path to an embedding function ("./embed.ts:embed"); provider embeddings ("${config.embed}") are not supported`,
    );
  }
  const { value } = await loadExport({ file, exportName }, baseDir, where, (m) => new LanggraphConfigError(m));
  const checked = (vectors: unknown, count: number): number[][] => {
    if (!Array.isArray(vectors) || vectors.length !== count)
      throw new Error(`store.index.embed returned ${Array.isArray(vectors) ? vectors.length : typeof vectors} vectors for ${count} texts`);
    for (const v of vectors) {
      if (!Array.isArray(v) || v.length !== config.dims || v.some((x) => typeof x !== "number" || !Number.isFinite(x))) {
        throw new Error(`store.index.embed returned a vector that is not ${config.dims} finite numbers (store.index.dims)`);
      }
    }
    return vectors as number[][];
  };
  const fields = config.fields ?? ["$"];
  if (typeof value === "function") {
    const fn = value as (texts: string[]) => unknown;
    return {
      dims: config.dims,
      fields,
      embedDocuments: async (texts) => (texts.length ? checked(await fn(texts), texts.length) : []),
      embedQuery: async (text) => checked(await fn([text]), 1)[0],
    };
  }
  if (typeof value === "object" && value !== null && typeof (value as { embedDocuments?: unknown }).embedDocuments === "function") {
    const e = value as { embedDocuments(t: string[]): Promise<unknown>; embedQuery?(t: string): Promise<unknown> };
    return {
      dims: config.dims,
      fields,
      embedDocuments: async (texts) => (texts.length ? checked(await e.embedDocuments(texts), texts.length) : []),
      embedQuery: async (text) => checked([e.embedQuery ? await e.embedQuery(text) : ((await e.embedDocuments([text])) as unknown[])[0]], 1)[0],
    };
  }
  throw new LanggraphConfigError(`${where}: export "${exportName}" of ${file} is not a function or an Embeddings object`);
}
