import * as z from "zod";
import { JsonObjectSchema } from "../util/json.js";

export const MultitaskStrategySchema = z.enum(["reject", "interrupt", "rollback", "enqueue"]);
export type MultitaskStrategy = z.infer<typeof MultitaskStrategySchema>;
/** LangGraph's `durability`: `sync` and `async` checkpoint every step, `exit` only when the run ends. */
export const DurabilitySchema = z.enum(["sync", "async", "exit"]);
export type Durability = z.infer<typeof DurabilitySchema>;
export const RunStatusSchema = z.enum(["pending", "running", "error", "success", "timeout", "interrupted"]);
export type RunStatus = z.infer<typeof RunStatusSchema>;

const Obj = JsonObjectSchema;

/** The run as the API shows it when it is created; `kwargs` carries everything the worker needs. */
export const RunRecordSchema = z.object({
  run_id: z.string(),
  thread_id: z.string(),
  assistant_id: z.string(),
  created_at: z.string(),
  updated_at: z.string(),
  status: RunStatusSchema,
  metadata: Obj,
  multitask_strategy: MultitaskStrategySchema,
  kwargs: z
    .object({
      input: z.unknown().optional(),
      command: z.unknown().optional(),
      config: Obj,
      context: Obj,
      stream_mode: z.array(z.string()),
      interrupt_before: z.union([z.literal("*"), z.array(z.string())]).optional(),
      interrupt_after: z.union([z.literal("*"), z.array(z.string())]).optional(),
      webhook: z.string().optional(),
      feedback_keys: z.array(z.string()).optional(),
      temporary: z.boolean(),
      subgraphs: z.boolean(),
      resumable: z.boolean(),
      on_disconnect: z.enum(["cancel", "continue"]).optional(),
      /** Earliest start (ISO) when `after_seconds` was given. */
      not_before: z.string().optional(),
      /** When the checkpointer writes: every step (`sync`, `async`) or only at the end (`exit`); absent = LangGraph's default. */
      durability: DurabilitySchema.optional(),
    })
    .passthrough(),
});
export type RunRecord = z.infer<typeof RunRecordSchema>;
