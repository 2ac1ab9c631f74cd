/**
 * The graph runtime, loaded once, on first demand or when the server asks for it after listening
 * (see graph-runtime.ts for why it is not loaded before). Imports nothing of LangGraph: only types.
 */
import type { GraphRegistry } from "./graphs.js";
import type { EventSourcedCheckpointSaver } from "./checkpointer.js";

/** The loaded graphs and the checkpointer that runs and thread state use. */
export interface GraphRuntime {
  graphs: GraphRegistry;
  checkpointer: EventSourcedCheckpointSaver;
}

export class LazyGraphRuntime {
  #loading: Promise<GraphRuntime> | undefined;

  constructor(private readonly load: () => Promise<GraphRuntime>) {}

  /** The runtime, loading it on the first call; every caller shares that one load. */
  get(): Promise<GraphRuntime> {
    return (this.#loading ??= this.load());
  }

  /** For teardown: the runtime if a load was started (awaited), undefined if none was or it failed. */
  async ifStarted(): Promise<GraphRuntime | undefined> {
    return this.#loading?.catch(() => undefined);
  }
}
