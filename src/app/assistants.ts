import { canonicalId, isUuid } from "../domain/ids.js";
import type { AppContext } from "./context.js";
import { authConditions, type AuthFilters } from "../read-models/auth-filters.js";
import {
  assistantStream,
  decideCreateAssistant,
  decideDeleteAssistant,
  decidePatchAssistant,
  decideSetLatestVersion,
  type Assistant,
  type AssistantState,
  type AssistantVersion,
  type CreateAssistant,
  type PatchAssistant,
} from "../domain/assistants.js";
import type { JsonObject } from "../domain/json.js";
import type { AssistantFilter, AssistantSortField } from "../read-models/assistants.js";
import type { SortOrder } from "../read-models/statements.js";
import { invalid, notFound } from "../domain/errors.js";
import { defaultAssistantId as defaultAssistantIdFor } from "../runtime/graph-catalogue.js";
import { newTimeOrderedId } from "../util/new-id.js";

/** Application service of assistants: commands through the deciders, queries on the read model. */

/** An assistant id in the API may also be a graph id (it names that graph's default assistant). */
export function resolveAssistantId(ctx: AppContext, idOrGraph: string): string {
  const id = assistantIdOf(ctx, idOrGraph);
  if (id === undefined) throw invalid(`assistant_id: "${idOrGraph}" is neither a UUID nor a known graph id`);
  return id;
}

/**
 * The id an assistant reference names: a UUID (in any case: a reference may come from a graph's
 * own configuration or a protocol command as well as a request schema), or a graph id for that
 * graph's default assistant; undefined when it is neither.
 */
export function assistantIdOf(ctx: AppContext, idOrGraph: string): string | undefined {
  if (isUuid(idOrGraph)) return canonicalId(idOrGraph);
  return ctx.graphs.has(idOrGraph) ? defaultAssistantIdFor(idOrGraph) : undefined;
}

export function findAssistant(ctx: AppContext, assistantId: string): Assistant | undefined {
  return ctx.readModels.assistants.get(assistantId);
}

/** Like findAssistant; a miss first catches up with the assistant's own stream (another process may have written it). */
export async function findAssistantConsistent(ctx: AppContext, assistantId: string): Promise<Assistant | undefined> {
  const found = findAssistant(ctx, assistantId);
  if (found) return found;
  await ctx.commands.catchUpWithStream(assistantStream(assistantId));
  return findAssistant(ctx, assistantId);
}

export async function getAssistant(ctx: AppContext, idOrGraph: string): Promise<Assistant> {
  const found = await findAssistantConsistent(ctx, resolveAssistantId(ctx, idOrGraph));
  if (!found) throw notFound("Assistant not found");
  return found;
}

const loadAssistant = (ctx: AppContext, id: string) => () => ctx.readModels.assistants.load(id);

async function liveState(ctx: AppContext, idOrGraph: string): Promise<AssistantState> {
  const id = resolveAssistantId(ctx, idOrGraph);
  let s = ctx.readModels.assistants.load(id);
  if (!s || s.deleted) {
    await ctx.commands.catchUpWithStream(assistantStream(id));
    s = ctx.readModels.assistants.load(id);
  }
  if (!s || s.deleted) throw notFound("Assistant not found");
  return s;
}

export function assertKnownGraph(ctx: AppContext, graphId: string): void {
  if (!ctx.graphs.has(graphId)) {
    throw notFound(`Graph '${graphId}' not found. Expected one of: ${JSON.stringify(ctx.graphs.ids())}`);
  }
}

export async function createAssistant(ctx: AppContext, cmd: Omit<CreateAssistant, "assistant_id"> & { assistant_id?: string }): Promise<Assistant> {
  assertKnownGraph(ctx, cmd.graph_id);
  const assistantId = cmd.assistant_id ?? newTimeOrderedId();
  const now = ctx.now();
  const { state } = await ctx.commands.decide({
    stream: assistantStream(assistantId),
    load: loadAssistant(ctx, assistantId),
    decide: (s) => decideCreateAssistant(s, { ...cmd, assistant_id: assistantId }, now),
  });
  return state!.current;
}

export async function patchAssistant(ctx: AppContext, idOrGraph: string, cmd: PatchAssistant): Promise<Assistant> {
  if (cmd.graph_id !== undefined) assertKnownGraph(ctx, cmd.graph_id);
  const id = resolveAssistantId(ctx, idOrGraph);
  const now = ctx.now();
  const { state } = await ctx.commands.decide({ stream: assistantStream(id), load: loadAssistant(ctx, id), decide: (s) => decidePatchAssistant(s, cmd, now) });
  return state!.current;
}

export async function setLatestVersion(ctx: AppContext, idOrGraph: string, version: number): Promise<Assistant> {
  const id = resolveAssistantId(ctx, idOrGraph);
  const now = ctx.now();
  const { state } = await ctx.commands.decide({
    stream: assistantStream(id),
    load: loadAssistant(ctx, id),
    decide: (s) => decideSetLatestVersion(s, version, now),
  });
  return state!.current;
}

export async function deleteAssistant(ctx: AppContext, idOrGraph: string): Promise<string> {
  const id = resolveAssistantId(ctx, idOrGraph);
  const now = ctx.now();
  await ctx.commands.decide({ stream: assistantStream(id), load: loadAssistant(ctx, id), decide: (s) => decideDeleteAssistant(s, now) });
  return id;
}

export type AssistantQuery = AssistantFilter;

/** Assistants matching `q` that the custom-auth `filters` let the user see (applied in the SQL query). */
export function countAssistants(ctx: AppContext, q: AssistantQuery, filters?: AuthFilters): number {
  return ctx.readModels.assistants.count({ ...q, extra: authConditions(filters, "assistants.metadata") });
}

export function searchAssistants(
  ctx: AppContext,
  q: AssistantQuery & { sort_by?: AssistantSortField; sort_order?: SortOrder; limit: number; offset: number },
  filters?: AuthFilters,
): { page: Assistant[]; total: number } {
  return ctx.readModels.assistants.search({ ...q, extra: authConditions(filters, "assistants.metadata") });
}

export async function assistantVersions(
  ctx: AppContext,
  idOrGraph: string,
  q: { metadata?: JsonObject; limit: number; offset: number },
): Promise<AssistantVersion[]> {
  const s = await liveState(ctx, idOrGraph);
  return ctx.readModels.assistants.versions(s.current.assistant_id, q);
}

/**
 * The default assistant of every graph, appended once: the first event of its stream is written with
 * expected revision `no_stream`, so restarts and concurrent processes cannot duplicate it.
 */
export async function ensureDefaultAssistants(
  ctx: AppContext,
  defaults: { graph_id: string; config: JsonObject; context: JsonObject; description: string | null }[],
): Promise<void> {
  for (const d of defaults) {
    const assistantId = defaultAssistantIdFor(d.graph_id);
    const created = decideCreateAssistant(
      undefined,
      {
        assistant_id: assistantId,
        graph_id: d.graph_id,
        config: d.config,
        context: d.context,
        metadata: { created_by: "system" },
        name: d.graph_id,
        description: d.description,
        if_exists: "raise",
      },
      ctx.now(),
    );
    if (!created.ok) continue;
    // Another process (or an earlier start) created it: theirs stands.
    await ctx.commands.append({ stream: assistantStream(assistantId), events: created.events, expected: "no_stream", onConflict: "lose", waitFor: "fold" });
  }
}
