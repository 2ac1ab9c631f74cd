/**
 * The body of a run request: one zod schema every edge builds its run from (REST's run routes,
 * the cron payload, A2A), and the type the application's RunsService takes, inferred from it.
 * Snake_case, as on the wire.
 */
import * as z from "zod";
import { JsonObjectSchema } from "../util/json.js";
import { DurabilitySchema, MultitaskStrategySchema, type Durability } from "./run-record.js";

/**
 * The stream modes a run may ask for (the runtime maps each to its SSE events). `protocol`: the
 * events of the thread streaming protocol (v2), which the protocol edge asks for; with it the
 * graph streams LangGraph's v3 events, so the v1 message modes (messages, messages-tuple, events)
 * are not produced beside it.
 */
export const STREAM_MODES = ["values", "updates", "messages", "messages-tuple", "events", "debug", "custom", "tasks", "checkpoints", "protocol"] as const;
export type StreamModeName = (typeof STREAM_MODES)[number];
export const StreamModeSchema = z.enum(STREAM_MODES);

/** `interrupt_before` / `interrupt_after`: every node, or the nodes named. */
export const NodeListSchema = z.union([z.literal("*"), z.array(z.string())]);

/** A LangChain RunnableConfig as clients send it: known keys typed, anything else kept. */
export const RunnableConfigSchema = z
  .object({
    tags: z.array(z.string()).optional(),
    recursion_limit: z.number().int().positive().optional(),
    configurable: JsonObjectSchema.optional(),
  })
  .catchall(z.unknown());

/** What a run on a thread is created with (POST /threads/{id}/runs and its /stream, /wait forms). */
export const RunRequestSchema = z.object({
  assistant_id: z.string().min(1),
  input: z.unknown().optional(),
  command: z.object({ resume: z.unknown().optional(), update: z.unknown().optional(), goto: z.unknown().optional() }).nullable().optional(),
  config: RunnableConfigSchema.optional(),
  context: JsonObjectSchema.optional(),
  metadata: JsonObjectSchema.optional(),
  stream_mode: z.union([StreamModeSchema, z.array(StreamModeSchema)]).optional(),
  stream_subgraphs: z.boolean().optional(),
  stream_resumable: z.boolean().optional(),
  interrupt_before: NodeListSchema.optional(),
  interrupt_after: NodeListSchema.optional(),
  multitask_strategy: MultitaskStrategySchema.optional(),
  if_not_exists: z.enum(["reject", "create"]).optional(),
  on_disconnect: z.enum(["cancel", "continue"]).optional(),
  after_seconds: z.number().min(0).optional(),
  checkpoint_id: z.string().optional(),
  checkpoint: z
    .object({ checkpoint_id: z.string().optional(), checkpoint_ns: z.string().optional(), checkpoint_map: JsonObjectSchema.nullable().optional() })
    .optional(),
  webhook: z.string().min(1).optional(),
  feedback_keys: z.array(z.string()).optional(),
  /** Deprecated form of `durability`: false = `exit`, true = `async`. */
  checkpoint_during: z.boolean().optional(),
  durability: DurabilitySchema.optional(),
  strict_resume: z.boolean().optional(),
  langsmith_tracer: JsonObjectSchema.optional(),
});

/** A run without a thread in the path (POST /runs…): its temporary thread is deleted or kept after it. */
export const StatelessRunRequestSchema = RunRequestSchema.extend({
  on_completion: z.enum(["delete", "keep"]).optional(),
});

/** Any run request, stateful or stateless: what RunsService.create takes. */
export type RunRequest = z.infer<typeof StatelessRunRequestSchema>;

/** The stream modes of `value` the server knows, in order (an unknown mode streams nothing). */
export function knownStreamModes(value: string | readonly string[]): StreamModeName[] {
  const modes = typeof value === "string" ? [value] : value;
  return modes.filter((m): m is StreamModeName => (STREAM_MODES as readonly string[]).includes(m));
}

/** The run's durability: `durability`, else what the deprecated `checkpoint_during` means, else none (LangGraph's default, `async`). */
export function durabilityOf(req: Pick<RunRequest, "durability" | "checkpoint_during">): Durability | undefined {
  if (req.durability !== undefined) return req.durability;
  if (req.checkpoint_during === undefined) return undefined;
  return req.checkpoint_during ? "async" : "exit";
}
