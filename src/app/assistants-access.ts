/**
 * The assistant operations every edge calls, on behalf of a caller: each runs custom auth's
 * `assistants:<action>` handler and honours its filters (an assistant the caller may not see is
 * not found; searches and counts filter in SQL), then the command or query of assistants.ts.
 */
import type { AppContext } from "./context.js";
import type { ThreadLifecycle } from "./thread-lifecycle.js";
import type { AuthAction } from "./auth/engine.js";
import { authorize, type Caller } from "./auth/caller.js";
import { authorizeAssistant } from "./auth/guards.js";
import { assistantHidden } from "./visible-assistants.js";
import {
  assistantVersions,
  countAssistants,
  createAssistant,
  deleteAssistant,
  findAssistantConsistent,
  getAssistant,
  patchAssistant,
  resolveAssistantId,
  searchAssistants,
  setLatestVersion,
  type AssistantQuery,
} from "./assistants.js";
import { searchThreads } from "./threads.js";
import { filterMatches } from "../read-models/auth-filters.js";
import type { AssistantSortField } from "../read-models/assistants.js";
import { conflict, notFound } from "../domain/errors.js";
import type { Assistant, AssistantVersion, PatchAssistant } from "../domain/assistants.js";
import type { JsonObject, SortOrder } from "../domain/json.js";
import { filtersOnSealedMetadata } from "./sealed-metadata.js";

export interface AssistantCreateRequest {
  graph_id: string;
  assistant_id?: string;
  config?: JsonObject;
  context?: JsonObject;
  metadata?: JsonObject;
  if_exists?: "raise" | "do_nothing";
  name?: string;
  description?: string | null;
}

export class AssistantsAccess {
  constructor(
    private readonly ctx: AppContext,
    private readonly lifecycle: ThreadLifecycle,
  ) {}

  /** `assistants:<action>` on one assistant (id or graph id); 404 when it is not visible. */
  private guard<V extends { assistant_id: string }>(caller: Caller, action: AuthAction<"assistants">, value: V) {
    return authorizeAssistant(this.ctx, caller, action, value.assistant_id, value);
  }

  /**
   * `assistants:read` on one assistant; 404 when it is not visible. The same check every edge that
   * runs an assistant makes (visible-assistants.ts), so what a caller may run they may read, and the reverse.
   */
  private async guardRead(caller: Caller, idOrGraph: string): Promise<void> {
    if (await assistantHidden(this.ctx, caller, idOrGraph)) throw notFound("Assistant not found");
  }

  async create(caller: Caller, body: AssistantCreateRequest): Promise<Assistant> {
    const { value, filters } = await authorize(caller, "assistants", "create", {
      graph_id: body.graph_id,
      assistant_id: body.assistant_id,
      config: body.config ?? {},
      context: body.context ?? {},
      metadata: body.metadata ?? {},
      name: body.name ?? "Untitled",
      description: body.description ?? null,
      if_exists: body.if_exists ?? "raise",
    });
    // Someone else's assistant with that id: a conflict (its content stays hidden).
    const existing = value.assistant_id ? await findAssistantConsistent(this.ctx, value.assistant_id) : undefined;
    if (existing && filters && !filterMatches(existing.metadata, filters)) throw conflict("Assistant already exists");
    return createAssistant(this.ctx, { ...value, config: value.config ?? {}, context: value.context ?? {}, metadata: value.metadata ?? {} });
  }

  async search(caller: Caller, q: AssistantQuery & { sort_by?: AssistantSortField; sort_order?: SortOrder; limit: number; offset: number }) {
    const { filters } = await authorize(caller, "assistants", "search", { ...q });
    if (filtersOnSealedMetadata(this.ctx, q.metadata)) return { page: [], total: 0 };
    return searchAssistants(this.ctx, q, filters);
  }

  async count(caller: Caller, q: AssistantQuery): Promise<number> {
    const { filters } = await authorize(caller, "assistants", "search", { ...q });
    if (filtersOnSealedMetadata(this.ctx, q.metadata)) return 0;
    return countAssistants(this.ctx, q, filters);
  }

  async get(caller: Caller, idOrGraph: string): Promise<Assistant> {
    await this.guardRead(caller, idOrGraph);
    return getAssistant(this.ctx, idOrGraph);
  }

  async patch(caller: Caller, idOrGraph: string, body: PatchAssistant): Promise<Assistant> {
    const { value } = await this.guard(caller, "update", { assistant_id: idOrGraph, ...body });
    const { assistant_id: _id, ...patch } = value;
    return patchAssistant(this.ctx, idOrGraph, patch);
  }

  /** Deletes the assistant; with `deleteThreads`, also the threads it ran on that the caller may delete. */
  async delete(caller: Caller, idOrGraph: string, deleteThreads: boolean): Promise<void> {
    await this.guard(caller, "delete", { assistant_id: idOrGraph });
    const threadFilters = deleteThreads
      ? (await authorize(caller, "threads", "delete", { metadata: { assistant_id: resolveAssistantId(this.ctx, idOrGraph) } })).filters
      : undefined;
    const assistantId = await deleteAssistant(this.ctx, idOrGraph);
    if (!deleteThreads) return;
    // Threads the assistant ran on carry its id in their metadata (stamped at run creation).
    // Each delete takes the thread out of the search, so the next page starts after the ones kept.
    let kept = 0;
    for (;;) {
      const { page } = await searchThreads(this.ctx, { metadata: { assistant_id: assistantId }, limit: 100, offset: kept }, threadFilters);
      if (page.length === 0) break;
      for (const thread of page) {
        if (filterMatches(thread.metadata, threadFilters)) await this.lifecycle.delete(thread.thread_id);
        else kept++;
      }
    }
  }

  async versions(caller: Caller, idOrGraph: string, q: { metadata?: JsonObject; limit: number; offset: number }): Promise<AssistantVersion[]> {
    await this.guardRead(caller, idOrGraph);
    return assistantVersions(this.ctx, idOrGraph, q);
  }

  async setLatest(caller: Caller, idOrGraph: string, version: number): Promise<Assistant> {
    await this.guard(caller, "update", { assistant_id: idOrGraph, version });
    return setLatestVersion(this.ctx, idOrGraph, version);
  }

  /** The graph and the config it is drawn with (graph, schemas, subgraphs): reading the assistant. */
  async graphConfig(caller: Caller, idOrGraph: string): Promise<{ graphId: string; config: JsonObject }> {
    const a = await this.get(caller, idOrGraph);
    return { graphId: a.graph_id, config: { ...a.config, configurable: { ...(a.config.configurable as object), ...a.context } } };
  }
}
