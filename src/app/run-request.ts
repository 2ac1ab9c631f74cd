import type { MultitaskStrategy } from "../domain/run-record.js";
import type { JsonObject } from "../domain/json.js";

/** A run request as the routes validated it (snake_case, as on the wire). */
export interface RunRequest {
  assistant_id: string;
  input?: unknown;
  command?: { resume?: unknown; update?: unknown; goto?: unknown } | null;
  config?: JsonObject;
  context?: JsonObject;
  metadata?: JsonObject;
  stream_mode?: string | string[];
  stream_subgraphs?: boolean;
  stream_resumable?: boolean;
  interrupt_before?: "*" | string[];
  interrupt_after?: "*" | string[];
  multitask_strategy?: MultitaskStrategy;
  if_not_exists?: "reject" | "create";
  on_completion?: "delete" | "keep";
  on_disconnect?: "cancel" | "continue";
  after_seconds?: number;
  checkpoint_id?: string;
  checkpoint?: { checkpoint_id?: string; checkpoint_ns?: string; checkpoint_map?: JsonObject | null };
  webhook?: string;
  feedback_keys?: string[];
}
