/**
 * Graph registry: the graphs of `langgraph.json`, loaded once at startup.
 *
 * Each `graphs.<id>` entry names a TypeScript (or JavaScript) file and an export. The file is
 * loaded at runtime (TypeScript transpiled by esbuild). An export may be
 *   - a compiled LangGraph.js graph                   (kind "compiled", cached),
 *   - a Promise of one                                (kind "promise", awaited at load, cached),
 *   - an uncompiled StateGraph builder                (kind "builder", compiled at load, cached),
 *   - a factory `(config) => graph | Promise<graph>`  (kind "factory", called on every `get`
 *     with the run's config; the result may also be a builder).
 *
 * Files are loaded by src/module-loader.ts (TypeScript transpiled by esbuild; packages are the
 * project's own, found from the file's place).
 */
import type { RunnableConfig } from "@langchain/core/runnables";
import type { CompiledGraph as LangGraphCompiledGraph } from "@langchain/langgraph";
import { channelGraphSchema, extractGraphSchema, runtimeGraphSchema, withChannelHints, type RawGraphSchema } from "./graph-schemas.js";
import type { TypeSchemaReader, TypeSchemas } from "./type-schemas/reader.js";
import { type GraphDefaults, type GraphSpec, parseLanggraphConfigEnv } from "../langgraph-config.js";
import { GraphCatalogue, GraphNotFoundError, type DefaultAssistantSeed } from "./graph-catalogue.js";
import { isPlainObject } from "../util/json.js";
import { findPackage, loadExport, loadingModules, moduleInputsOf } from "../module-loader.js";
import { readFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import semver from "semver";

export { GraphCatalogue, GraphNotFoundError, NAMESPACE_GRAPH, defaultAssistantId } from "./graph-catalogue.js";

// ---------------------------------------------------------------------------------------------
// types

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- any user graph, whatever its node names, state, input and output: its type parameters are used both ways (e.g. builder.addEdge takes node names), so no narrower type accepts them all
export type CompiledGraph = LangGraphCompiledGraph<any, any, any, any, any, any, any, any, any, any>;

/** A graph factory as exported by a graph file. */
export type GraphFactory = (config: RunnableConfig) => unknown;

export type GraphExportKind = "compiled" | "promise" | "builder" | "factory";

export type JsonSchema = Record<string, unknown>;

/** The schemas of one graph (PY shape). JSON Schema objects, or null when unknown. */
export interface GraphSchemas {
  input_schema: JsonSchema | null;
  output_schema: JsonSchema | null;
  state_schema: JsonSchema | null;
  config_schema: JsonSchema | null;
  context_schema: JsonSchema | null;
}

export interface AssistantGraphSchemas extends GraphSchemas {
  graph_id: string;
}

export interface DrawableGraph {
  nodes: { id: string | number; type: string; data: unknown; metadata?: Record<string, unknown> }[];
  edges: { source: string | number; target: string | number; data?: unknown; conditional?: boolean }[];
}

/** A default assistant as the Python server describes it: with the compiled graph's name. */
export interface DefaultAssistantSpec extends DefaultAssistantSeed {
  /** PY rule: the compiled graph's name unless it is "LangGraph" (or a factory), else the id. */
  name: string;
}

/** A graph file could not be loaded or its export is not a graph. */
export class GraphLoadError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "GraphLoadError";
  }
}

// ---------------------------------------------------------------------------------------------
// loading

export function isCompiledGraph(value: unknown): value is CompiledGraph {
  return (
    isPlainObject(value) &&
    typeof value.invoke === "function" &&
    typeof value.stream === "function" &&
    typeof value.getGraphAsync === "function" &&
    isPlainObject(value.nodes)
  );
}

function isGraphBuilder(value: unknown): value is { compile(): unknown } {
  return isPlainObject(value) && typeof value.compile === "function" && !isCompiledGraph(value);
}

function isThenable(value: unknown): value is PromiseLike<unknown> {
  return isPlainObject(value) && typeof value.then === "function";
}

/** The range of `@langchain/langgraph` this server supports, from its package.json (peer, else direct dependency). */
let supportedRange: string | null | undefined;

export function supportedLangGraphRange(): string | null {
  if (supportedRange !== undefined) return supportedRange;
  supportedRange = null;
  // The nearest package.json up from this module: the server's, from the sources or from the bundle.
  let dir = path.dirname(fileURLToPath(import.meta.url));
  for (;;) {
    try {
      const manifest = JSON.parse(readFileSync(path.join(dir, "package.json"), "utf8")) as Record<string, Record<string, string> | undefined>;
      supportedRange = manifest.peerDependencies?.["@langchain/langgraph"] ?? manifest.dependencies?.["@langchain/langgraph"] ?? null;
      return supportedRange;
    } catch {
      const parent = path.dirname(dir);
      if (parent === dir) return supportedRange;
      dir = parent;
    }
  }
}

/**
 * Why a graph file's export may not be a graph this server can run: the LangGraph its project
 * has, when that is outside the supported range ("" when it is not, or cannot be told).
 */
function langGraphVersionNote(file: string | undefined): string {
  const pkg = file === undefined ? undefined : findPackage("@langchain/langgraph", path.dirname(file));
  const range = supportedLangGraphRange();
  if (!pkg?.version || !range || !semver.validRange(range) || semver.satisfies(pkg.version, range)) return "";
  return `: the graph's @langchain/langgraph is ${pkg.version} (${pkg.dir}), and this server supports ${range}`;
}

/** A compiled graph from a resolved export value (compiling a builder). */
function toCompiled(value: unknown, what: string, file?: string): CompiledGraph {
  if (isCompiledGraph(value)) return value;
  if (isGraphBuilder(value)) {
    const compiled = value.compile();
    if (isCompiledGraph(compiled)) return compiled;
  }
  throw new GraphLoadError(`${what} is not a compiled LangGraph graph${langGraphVersionNote(file)}`);
}

interface Entry {
  id: string;
  kind: GraphExportKind;
  graph?: CompiledGraph;
  factory?: GraphFactory;
}

// ---------------------------------------------------------------------------------------------
// schemas

/**
 * Schemas of a compiled graph (runtime extraction, see graph-schemas.ts). The context schema is
 * reported as both config_schema and context_schema, as the JS server does.
 */
export function graphSchemas(graph: CompiledGraph): GraphSchemas {
  return pythonShape(extractGraphSchema(graph));
}

function pythonShape(s: RawGraphSchema): GraphSchemas {
  return { input_schema: s.input, output_schema: s.output, state_schema: s.state, config_schema: s.config, context_schema: s.config };
}

/** The root graph's entry of a type-schema answer (the one key without `|`), as the official server picks it. */
function typedRoot(typed: TypeSchemas | undefined): RawGraphSchema | undefined {
  const root = typed && Object.keys(typed).find((k) => !k.includes("|"));
  return root ? typed[root] : undefined;
}

/** A subgraph's entry (`root|ns`), else the root's, as the official server falls back. */
function typedSubgraph(typed: TypeSchemas | undefined, ns: string): RawGraphSchema | undefined {
  const root = typed && Object.keys(typed).find((k) => !k.includes("|"));
  return root ? (typed[`${root}|${ns}`] ?? typed[root]) : undefined;
}

/**
 * A subgraph's entry of /subgraphs: the JS server's raw parser object (`state`, `input`, `output`,
 * `config`) and the Python server's `*_schema` keys, so clients of either find theirs.
 */
export type SubgraphSchemas = RawGraphSchema & GraphSchemas;

// ---------------------------------------------------------------------------------------------
// the registry

export interface GraphViewOptions {
  /** Config handed to a factory graph (ignored for cached graphs). */
  config?: RunnableConfig;
}

/** The catalogue's graphs, loaded: what runs them, and what describes them (schemas, drawings). */
export class GraphRegistry {
  /** Replaced whole by `reload`: a run takes its graph from whichever map is current at its start. */
  #entries: Map<string, Entry>;
  readonly #typeSchemas: TypeSchemaReader | undefined;
  #typedBatchAsked = false;

  /** Use `loadGraphRegistry` or `loadGraphs`. */
  constructor(
    readonly catalogue: GraphCatalogue,
    entries: Entry[],
    typeSchemas?: TypeSchemaReader,
  ) {
    this.#entries = new Map(entries.map((e) => [e.id, e]));
    this.#typeSchemas = typeSchemas;
  }

  /**
   * The schemas read from the graph file's types (undefined without a reader, or when they
   * cannot be read). The first ask reads every graph whose runtime schema says nothing, in one
   * compiler pass: asking for them one by one would type-check the same libraries again each time.
   */
  async #typed(id: string): Promise<TypeSchemas | undefined> {
    if (!this.#typeSchemas) return undefined;
    let ids = [id];
    if (!this.#typedBatchAsked) {
      this.#typedBatchAsked = true;
      ids = [id, ...this.ids().filter((other) => other !== id && this.#mayNeedTypes(other))];
    }
    const targets = ids.map((other) => ({ sourceFile: this.catalogue.file(other), exportSymbol: this.catalogue.spec(other).exportName }));
    return (await this.#typeSchemas.read(targets))[0];
  }

  #hinted(schema: RawGraphSchema | undefined, graph: unknown): RawGraphSchema | undefined {
    return schema && withChannelHints(schema, graph);
  }

  #mayNeedTypes(id: string): boolean {
    const graph = this.#entry(id).graph;
    return !graph || runtimeGraphSchema(graph) === undefined;
  }

  ids(): string[] {
    return this.catalogue.ids();
  }

  /** The project files the graphs were loaded from: each graph file and, for TypeScript, its local imports. */
  files(): string[] {
    return [...new Set(this.ids().flatMap((id) => [this.file(id), ...moduleInputsOf(this.file(id))]))];
  }

  /**
   * Loads every graph's file again (new module instances) and, once all have loaded, puts them in
   * place of the current ones at once: runs already executing keep the graph they started with,
   * runs that start later get the new one. Throws GraphLoadError when a graph cannot be loaded,
   * leaving the current graphs in place.
   */
  async reload(): Promise<void> {
    const entries = await loadingModules(() => loadEntries(this.catalogue, this.catalogue.baseDir, { fresh: true }));
    this.#entries = new Map(entries.map((e) => [e.id, e]));
    // Types may have changed with the code: the next ask reads them again in one pass.
    this.#typedBatchAsked = false;
  }

  has(id: string): boolean {
    return this.catalogue.has(id);
  }

  #entry(id: string): Entry {
    const entry = this.#entries.get(id);
    if (!entry) throw new GraphNotFoundError(id, this.ids());
    return entry;
  }

  description(id: string): string | null {
    return this.catalogue.description(id);
  }

  kind(id: string): GraphExportKind {
    return this.#entry(id).kind;
  }

  /** Absolute path of the graph's file. */
  file(id: string): string {
    return this.catalogue.file(id);
  }

  /** The graph to run: the cached graph, or the factory's result for this config. */
  async get(id: string, config: RunnableConfig = {}): Promise<CompiledGraph> {
    const entry = this.#entry(id);
    if (entry.graph) return entry.graph;
    const factory = entry.factory!;
    const produced = await factory(config);
    return toCompiled(produced, `Graph "${id}": the factory's result`, this.file(id));
  }

  /** Drawable graph `{nodes, edges}` (`getGraphAsync({xray}).toJSON()`). */
  async drawable(id: string, options: GraphViewOptions & { xray?: boolean | number } = {}): Promise<DrawableGraph> {
    const graph = await this.get(id, options.config);
    const drawn = await graph.getGraphAsync({ ...(options.config ?? {}), xray: options.xray ?? false });
    return drawn.toJSON() as DrawableGraph;
  }

  async schemas(id: string, options: GraphViewOptions = {}): Promise<AssistantGraphSchemas> {
    const graph = await this.get(id, options.config);
    const schema = runtimeGraphSchema(graph) ?? this.#hinted(typedRoot(await this.#typed(id)), graph) ?? channelGraphSchema(graph);
    return { graph_id: id, ...pythonShape(schema) };
  }

  /**
   * Schemas of the subgraphs, keyed by namespace (`child`, `child|grandchild` with recurse).
   * `namespace` restricts the answer to that subgraph.
   */
  async subgraphs(id: string, options: GraphViewOptions & { namespace?: string; recurse?: boolean } = {}): Promise<Record<string, SubgraphSchemas>> {
    const graph = await this.get(id, options.config);
    const out: Record<string, SubgraphSchemas> = {};
    let typed: Promise<TypeSchemas | undefined> | undefined;
    for await (const [ns, subgraph] of graph.getSubgraphsAsync(options.namespace, options.recurse ?? false)) {
      const schema =
        runtimeGraphSchema(subgraph) ?? this.#hinted(typedSubgraph(await (typed ??= this.#typed(id)), ns), subgraph) ?? channelGraphSchema(subgraph);
      out[ns] = { ...schema, ...pythonShape(schema) };
    }
    return out;
  }

  /** Config/context for the graph's default assistant (from LANGGRAPH_CONFIG). */
  defaults(id: string): GraphDefaults {
    return this.catalogue.defaults(id);
  }

  /** One default (system) assistant per graph, in registration order, named as the Python server names it. */
  defaultAssistants(): DefaultAssistantSpec[] {
    return this.catalogue.defaultAssistants().map((seed) => {
      const graphName = this.#entry(seed.graph_id).graph?.name;
      return { ...seed, name: graphName && graphName !== "LangGraph" ? graphName : seed.graph_id };
    });
  }
}

export interface LoadGraphRegistryOptions {
  /** Default-assistant settings; default: parsed from `process.env.LANGGRAPH_CONFIG`. */
  graphDefaults?: Record<string, GraphDefaults>;
  /** Reads schemas from the graph files' TypeScript types where the runtime says nothing; none: it is not done. */
  typeSchemas?: TypeSchemaReader;
}

/**
 * Loads every graph of `config.graphs` (paths relative to `baseDir`). Throws GraphLoadError
 * naming the graph when a file cannot be loaded or an export is missing or not a graph.
 */
export async function loadGraphRegistry(
  config: { graphs: Record<string, GraphSpec> },
  baseDir: string,
  options: LoadGraphRegistryOptions = {},
): Promise<GraphRegistry> {
  const defaults = options.graphDefaults ?? parseLanggraphConfigEnv(process.env.LANGGRAPH_CONFIG);
  return loadGraphs(new GraphCatalogue(config.graphs, baseDir, defaults), baseDir, options.typeSchemas);
}

/** Loads every graph of the catalogue (see loadGraphRegistry). */
export async function loadGraphs(catalogue: GraphCatalogue, baseDir: string, typeSchemas?: TypeSchemaReader): Promise<GraphRegistry> {
  // One loading scope for all graphs: esbuild's service is started once and stopped after the last.
  return loadingModules(async () => new GraphRegistry(catalogue, await loadEntries(catalogue, baseDir), typeSchemas));
}

async function loadEntries(catalogue: GraphCatalogue, baseDir: string, options: { fresh?: boolean } = {}): Promise<Entry[]> {
  const entries: Entry[] = [];
  for (const id of catalogue.ids()) {
    const spec = catalogue.spec(id);
    const { value } = await loadExport({ file: spec.path, exportName: spec.exportName }, baseDir, `Graph "${id}"`, (m) => new GraphLoadError(m), options);
    const what = `Graph "${id}": export "${spec.exportName}" of ${spec.path}`;
    const file = catalogue.file(id);
    if (typeof value === "function" && !isCompiledGraph(value)) {
      entries.push({ id, kind: "factory", factory: value as GraphFactory });
    } else if (isThenable(value)) {
      let resolved: unknown;
      try {
        resolved = await value;
      } catch (err) {
        throw new GraphLoadError(`${what} rejected: ${(err as Error).message.split("\n")[0]}`);
      }
      entries.push({ id, kind: "promise", graph: toCompiled(resolved, what, file) });
    } else if (isCompiledGraph(value)) {
      entries.push({ id, kind: "compiled", graph: value });
    } else {
      entries.push({ id, kind: "builder", graph: toCompiled(value, what, file) });
    }
  }
  return entries;
}
