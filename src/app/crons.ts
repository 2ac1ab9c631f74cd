import type { AppContext } from "./context.js";
import { findAssistantConsistent, resolveAssistantId } from "./assistants.js";
import { threadStateConsistent } from "./threads.js";
import { assertWebhookAllowed } from "./webhooks.js";
import type { RunsService } from "./runs.js";
import { SYSTEM_CALLER, authorize, type Caller } from "./auth/caller.js";
import { threadVisible } from "./auth/guards.js";
import { assistantHidden } from "./visible-assistants.js";
import { knownStreamModes, type RunRequest } from "../domain/run-request.js";
import { invalid, notFound } from "../domain/errors.js";
import { checkSchedule } from "../domain/cron-schedule.js";
import {
  CronPayloadSchema,
  cronStream,
  isoOf,
  decideDeleteCron,
  decideUpdateCron,
  publicCron,
  type CronFields,
  type CronPayload,
  type CronState,
  tickRunKey,
} from "../domain/crons.js";
import type { CronFilter, CronSortField } from "../read-models/crons.js";
import type { SortOrder } from "../read-models/statements.js";
import type { JsonObject } from "../domain/json.js";
import { filterMatches, type AuthFilters } from "../read-models/auth-filters.js";
import { newTimeOrderedId } from "../util/new-id.js";
import { filtersOnSealedMetadata } from "./sealed-metadata.js";

export interface CronCreateRequest extends CronPayload {
  assistant_id: string;
  schedule: string;
  timezone?: string;
  end_time?: string | null;
  enabled?: boolean;
  on_run_completed?: "delete" | "keep";
  metadata?: JsonObject;
}

export type CronPatchRequest = Partial<Omit<CronCreateRequest, "assistant_id">>;

/** The payload fields of a request (the rest of it is the cron's own), those given only. */
function payloadOf(req: Partial<CronPayload>): CronPayload {
  return CronPayloadSchema.parse(Object.fromEntries(Object.entries(req).filter(([, v]) => v !== undefined)));
}

function checkScheduleOrThrow(schedule: string, timezone: string): void {
  const check = checkSchedule(schedule, timezone);
  if (!check.ok) throw invalid(check.detail);
}

/** ISO timestamp or null, validated (422 naming end_time). */
function endTimeOf(value: string | null | undefined): string | null | undefined {
  if (value === undefined || value === null) return value;
  const ms = Date.parse(value);
  if (Number.isNaN(ms)) throw invalid(`end_time: '${value}' is not an ISO 8601 date-time`);
  return isoOf(ms);
}

/** The run request one tick of a cron creates. */
export function runRequestOf(cron: CronState): RunRequest {
  const { stream_mode, ...payload } = cron.payload;
  const req: RunRequest = { ...payload, assistant_id: cron.assistant_id };
  if (stream_mode !== undefined) req.stream_mode = knownStreamModes(stream_mode);
  if (cron.thread_id === null) req.on_completion = cron.on_run_completed ?? "delete";
  return req;
}

/**
 * Appends a cron's deletion (CronDeleted), decided against its read model: the one command behind DELETE /crons/{id}
 * and a purge's removal of a live cron (src/app/cron-purge.ts). A 404 when it is not there (deleted meanwhile).
 */
export async function appendCronDeletion(ctx: AppContext, id: string, now: string): Promise<void> {
  await ctx.commands.decide({ stream: cronStream(id), load: () => ctx.readModels.crons.get(id), decide: (s) => decideDeleteCron(s, now) });
}

/** Application service of crons: create, search, count, patch, delete (the scheduler fires them). */
export class CronsService {
  /** Timestamps come from the scheduler's clock, so that ticks and creation times share one time line. */
  private readonly now: () => string;

  constructor(
    private readonly ctx: AppContext,
    private readonly runs: RunsService,
    clock?: { now(): number },
  ) {
    this.now = clock ? () => isoOf(clock.now()) : ctx.now;
  }

  private load = (id: string) => () => this.ctx.readModels.crons.get(id);

  /** `crons:create`: the handler may add metadata (stored on the cron) or refuse; a thread it may not see is a 404. */
  async create(caller: Caller, threadId: string | null, body: CronCreateRequest): Promise<Record<string, unknown>> {
    const ctx = this.ctx;
    const { value, filters } = await authorize(caller, "crons", "create", { ...body, thread_id: threadId ?? undefined, metadata: body.metadata ?? {} });
    if (threadId !== null && !(await threadVisible(ctx, threadId, filters))) throw notFound(`Thread with ID ${threadId} not found`);
    const req: CronCreateRequest = { ...body, metadata: value.metadata ?? {} };
    const timezone = req.timezone ?? "UTC";
    checkScheduleOrThrow(req.schedule, timezone);
    const endTime = endTimeOf(req.end_time) ?? null;
    assertWebhookAllowed(ctx, req.webhook);
    const assistantId = resolveAssistantId(ctx, req.assistant_id);
    // `assistants:read`, as a run of it checks: every tick runs the assistant with its config, on a
    // thread the creator reads. One the creator may not read is answered as an unknown one.
    const hidden = await assistantHidden(ctx, caller, req.assistant_id);
    if (hidden || !(await findAssistantConsistent(ctx, assistantId))) throw notFound(`No assistant found for "${req.assistant_id}".`);
    if (threadId !== null && !(await threadStateConsistent(ctx, threadId))) throw notFound(`Thread with ID ${threadId} not found`);
    const cronId = newTimeOrderedId();
    const fields: CronFields = {
      assistant_id: assistantId,
      thread_id: threadId === null ? null : threadId,
      schedule: req.schedule.trim(),
      timezone,
      end_time: endTime,
      enabled: req.enabled ?? true,
      on_run_completed: threadId === null ? (req.on_run_completed ?? "delete") : null,
      metadata: req.metadata ?? {},
      user_id: null,
      payload: payloadOf(req),
    };
    const { state } = await ctx.commands.decide({
      stream: cronStream(cronId),
      load: this.load(cronId),
      decide: () => ({ ok: true as const, events: [{ type: "CronCreated", data: { ...fields, cron_id: cronId, created_at: this.now() } }] }),
    });
    return publicCron(state!);
  }

  /** The cron, or 404 when it is unknown or custom auth's filters hide it. */
  async get(id: string, filters?: AuthFilters): Promise<CronState> {
    let s = this.ctx.readModels.crons.get(id);
    if (!s) {
      await this.ctx.commands.catchUpWithStream(cronStream(id));
      s = this.ctx.readModels.crons.get(id);
    }
    if (!s || (filters && !filterMatches(s.metadata, filters))) throw notFound("Cron not found");
    return s;
  }

  async patch(caller: Caller, cronId: string, body: CronPatchRequest): Promise<Record<string, unknown>> {
    const { value, filters } = await authorize(caller, "crons", "update", { ...body, cron_id: cronId });
    const { cron_id: _id, ...req } = value;
    const current = await this.get(cronId, filters);
    const schedule = req.schedule?.trim() ?? current.schedule;
    const timezone = req.timezone ?? current.timezone;
    if (req.schedule !== undefined || req.timezone !== undefined) checkScheduleOrThrow(schedule, timezone);
    assertWebhookAllowed(this.ctx, req.webhook);
    const changes: Partial<CronFields> = {};
    if (req.schedule !== undefined) changes.schedule = schedule;
    if (req.timezone !== undefined) changes.timezone = timezone;
    if (req.end_time !== undefined) changes.end_time = endTimeOf(req.end_time) ?? null;
    if (req.enabled !== undefined) changes.enabled = req.enabled;
    if (req.on_run_completed !== undefined && current.thread_id === null) changes.on_run_completed = req.on_run_completed;
    if (req.metadata !== undefined) changes.metadata = req.metadata;
    const payload = payloadOf(req);
    delete payload.metadata;
    if (Object.keys(payload).length) changes.payload = { ...current.payload, ...payload };
    const id = current.cron_id;
    const { state } = await this.ctx.commands.decide({ stream: cronStream(id), load: this.load(id), decide: (s) => decideUpdateCron(s, changes, this.now()) });
    return publicCron(state!);
  }

  async delete(caller: Caller, cronId: string): Promise<void> {
    const { filters } = await authorize(caller, "crons", "delete", { cron_id: cronId });
    const id = (await this.get(cronId, filters)).cron_id;
    await appendCronDeletion(this.ctx, id, this.now());
  }

  async search(
    caller: Caller,
    asked: CronFilter & { sort_by?: CronSortField; sort_order?: SortOrder; limit: number; offset: number },
  ): Promise<{ page: Record<string, unknown>[]; total: number }> {
    const { filters } = await authorize(caller, "crons", "search", { ...asked });
    if (filtersOnSealedMetadata(this.ctx, asked.metadata)) return { page: [], total: 0 };
    const q = { ...asked, auth: filters };
    const { page, total } = this.ctx.readModels.crons.search({
      ...this.normalise(q),
      sort_by: q.sort_by ?? "created_at",
      sort_order: q.sort_order ?? "desc",
      limit: q.limit,
      offset: q.offset,
    });
    return { page: page.map(publicCron), total };
  }

  async count(caller: Caller, asked: CronFilter): Promise<number> {
    const { filters } = await authorize(caller, "crons", "search", { ...asked });
    if (filtersOnSealedMetadata(this.ctx, asked.metadata)) return 0;
    return this.ctx.readModels.crons.count(this.normalise({ ...asked, auth: filters }));
  }

  /**
   * The scheduler's hook: one tick's run through the normal pipeline. Keyed by the tick, so that
   * its claimer and a process completing a tick its claimer left unrecorded make one run.
   */
  async startRun(cron: CronState, tickMs: number): Promise<{ run_id: string; thread_id: string }> {
    // A tick is the server acting on a cron authorized at its creation, its assistant included
    // (`assistants:read` for the creator); a cron's assistant never changes (a patch cannot name another).
    const authorized = await this.runs.authorize(SYSTEM_CALLER, cron.thread_id, runRequestOf(cron));
    const run = await this.runs.create(authorized, {}, { idempotencyKey: tickRunKey(cron.cron_id, tickMs) });
    return { run_id: run.run_id, thread_id: run.thread_id };
  }

  /** Ids in lower case; an assistant may be named by its graph id. */
  private normalise(q: CronFilter): CronFilter {
    const out: CronFilter = {};
    if (q.assistant_id !== undefined) out.assistant_id = resolveAssistantId(this.ctx, q.assistant_id);
    if (q.thread_id !== undefined) out.thread_id = q.thread_id;
    if (q.enabled !== undefined) out.enabled = q.enabled;
    if (q.metadata !== undefined) out.metadata = q.metadata;
    if (q.auth !== undefined) out.auth = q.auth;
    return out;
  }
}
