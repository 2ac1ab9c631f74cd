import type { EventStore } from "../eventstore/types.js";
import type { ReadModels } from "../read-models/all.js";
import { CommandPipeline } from "../commands/pipeline.js";
import type { CompletionDeps } from "../runtime/run-completion.js";
import { resolveWebhookHeaders } from "../langgraph-config.js";
import type { AppContext } from "../app/context.js";
import { ensureDefaultAssistants } from "../app/assistants.js";
import { threadLifecycle, type ThreadLifecycle } from "../app/thread-lifecycle.js";
import { RunsService } from "../app/runs.js";
import { CronsService } from "../app/crons.js";
import { StoreService } from "../app/store.js";
import { isoNow } from "../util/time.js";
import type { Assembly } from "./assembly.js";
import type { Configuration } from "./configuration.js";
import type { GraphRuntimePart } from "./graph-runtime.js";

/** The application core every edge calls. */
export interface Services {
  ctx: AppContext;
  lifecycle: ThreadLifecycle;
  /** What ends a run, for RunsService and the run worker alike. */
  completion: CompletionDeps;
  runs: RunsService;
  crons: CronsService;
  storeService: StoreService;
  /** The webhooks' configured headers; undefined when `http.disable_webhooks` is set. */
  webhookHeaders: Record<string, string> | undefined;
}

/** The default assistants, then the services; they hold nothing to close (RunsService's streams close with HTTP). */
export async function startServices(
  { config, startup, clock }: Assembly,
  { langgraph, graphs, storeIndex }: Configuration,
  store: EventStore,
  readModels: ReadModels,
  { runtime }: GraphRuntimePart,
): Promise<Services> {
  const commands = new CommandPipeline(store, readModels.runner);
  const ctx: AppContext = { config, langgraph, store, commands, readModels, graphs, runtime: () => runtime.get(), now: isoNow };
  await ensureDefaultAssistants(ctx, graphs.defaultAssistants());
  startup.mark("default assistants");
  const lifecycle = threadLifecycle(ctx);
  const completion: CompletionDeps = {
    store,
    commands,
    readModels,
    now: ctx.now,
    deleteTemporaryThread: (id, runCreatedAt) => lifecycle.deleteTemporary(id, runCreatedAt),
    discardCheckpointsAfter: async (threadId: string, after: string | null, reason: string) =>
      void (await (await runtime.get()).checkpointer.discardAfter(threadId, after, reason)),
  };
  const runs = new RunsService(ctx, completion);
  const crons = new CronsService(ctx, runs, clock);
  // Resolved now: a header naming an unset variable stops start-up with one clear line.
  const webhookHeaders = langgraph.config.http.disable_webhooks ? undefined : resolveWebhookHeaders(langgraph.config.webhooks);
  lifecycle.onDelete((threadId) => runs.cancelThreadRuns(threadId));
  const storeTtl = langgraph.config.store?.ttl;
  const storeService = new StoreService({
    store,
    readModels,
    clock,
    index: storeIndex,
    refreshOnRead: storeTtl?.refresh_on_read,
    defaultTtl: storeTtl?.default_ttl,
  });
  return { ctx, lifecycle, completion, runs, crons, storeService, webhookHeaders };
}
