/**
 * The graphs `langgraph.json` names, known before any graph file is loaded: their ids, files,
 * descriptions, default-assistant ids and settings. Everything here is read from the configuration
 * alone, so it imports nothing of LangGraph: the server answers with it while the graph runtime
 * (src/runtime/graph-runtime.ts) is still loading.
 */
import path from "node:path";
import { v5 as uuidv5 } from "uuid";
import { type GraphDefaults, type GraphSpec, graphDefaults } from "../langgraph-config.js";

/** Namespace of default-assistant ids (the Python server's, `langgraph_api.graph`; not RFC 4122's NAMESPACE_URL). */
export const NAMESPACE_GRAPH = "6ba7b821-9dad-11d1-80b4-00c04fd430c8";

/** Ids already computed: a SHA-1 per run otherwise (runs name their graph). Bounded: cleared when full. */
const defaultIds = new Map<string, string>();
const DEFAULT_IDS_MAX = 1024;

/** The id of a graph's default (system) assistant: uuid v5 of the graph id in NAMESPACE_GRAPH. */
export function defaultAssistantId(graphId: string): string {
  let id = defaultIds.get(graphId);
  if (id === undefined) {
    if (defaultIds.size >= DEFAULT_IDS_MAX) defaultIds.clear();
    id = uuidv5(graphId, NAMESPACE_GRAPH);
    defaultIds.set(graphId, id);
  }
  return id;
}

/** What registering a graph's default assistant takes (its name is the graph id, as the official servers register it). */
export interface DefaultAssistantSeed {
  assistant_id: string;
  graph_id: string;
  description: string | null;
  config: Record<string, unknown>;
  context: Record<string, unknown>;
  metadata: { created_by: "system" };
}

/** Asked for a graph id that is not registered (the HTTP layer maps it to 404). */
export class GraphNotFoundError extends Error {
  constructor(
    readonly graphId: string,
    readonly known: string[],
  ) {
    super(`Graph '${graphId}' not found. Expected one of: [${known.join(", ")}]`);
    this.name = "GraphNotFoundError";
  }
}

/** The configured graphs, by id, in the order langgraph.json lists them. */
export class GraphCatalogue {
  readonly #specs: Map<string, GraphSpec>;

  constructor(
    graphs: Record<string, GraphSpec>,
    /** The directory of langgraph.json: graph paths are relative to it. */
    readonly baseDir: string,
    private readonly settings: Record<string, GraphDefaults>,
  ) {
    this.#specs = new Map(Object.entries(graphs));
  }

  ids(): string[] {
    return [...this.#specs.keys()];
  }

  has(id: string): boolean {
    return this.#specs.has(id);
  }

  spec(id: string): GraphSpec {
    const spec = this.#specs.get(id);
    if (!spec) throw new GraphNotFoundError(id, this.ids());
    return spec;
  }

  description(id: string): string | null {
    return this.spec(id).description;
  }

  /** Absolute path of the graph's file. */
  file(id: string): string {
    return path.resolve(this.baseDir, this.spec(id).path);
  }

  /** Config/context for the graph's default assistant (from LANGGRAPH_CONFIG). */
  defaults(id: string): GraphDefaults {
    this.spec(id);
    return graphDefaults(this.settings, id);
  }

  /** One default (system) assistant per graph, in registration order. */
  defaultAssistants(): DefaultAssistantSeed[] {
    return this.ids().map((id) => ({
      assistant_id: defaultAssistantId(id),
      graph_id: id,
      description: this.description(id),
      ...this.defaults(id),
      metadata: { created_by: "system" },
    }));
  }
}
