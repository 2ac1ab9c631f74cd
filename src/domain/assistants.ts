import * as z from "zod";
import type { EventsOf } from "./event-types.js";
import type { Decision } from "./decision.js";
import type { JsonObject } from "./json.js";

/** Assistant streams: `assistant-{assistant_id}`. */
export const ASSISTANT_STREAM_PREFIX = "assistant-";
export const assistantStream = (assistantId: string) => `${ASSISTANT_STREAM_PREFIX}${assistantId}`;

const Obj = z.record(z.string(), z.unknown());

const AssistantFields = {
  graph_id: z.string(),
  config: Obj,
  context: Obj,
  metadata: Obj,
  name: z.string(),
  description: z.string().nullable(),
};

export const assistantEventSchemas = {
  AssistantCreated: z.object({ assistant_id: z.uuid(), ...AssistantFields, created_at: z.string() }),
  /** A PATCH: always a new version holding the whole resulting configuration. */
  AssistantUpdated: z.object({ ...AssistantFields, version: z.number().int().positive(), updated_at: z.string() }),
  AssistantVersionRestored: z.object({ version: z.number().int().positive(), updated_at: z.string() }),
  AssistantDeleted: z.object({ deleted_at: z.string() }),
} satisfies Record<string, z.ZodType>;

export type AssistantEvent = EventsOf<typeof assistantEventSchemas>;

export interface AssistantVersion {
  assistant_id: string;
  graph_id: string;
  config: JsonObject;
  context: JsonObject;
  metadata: JsonObject;
  name: string;
  description: string | null;
  version: number;
  created_at: string;
}

export interface Assistant extends AssistantVersion {
  updated_at: string;
}

/** What the read model keeps per assistant stream; a deleted one stays as a tombstone with its revision. */
export interface AssistantState {
  revision: bigint;
  deleted: boolean;
  current: Assistant;
  versions: AssistantVersion[];
}

/** Pure fold of one assistant stream. */
export function evolveAssistant(state: AssistantState | undefined, event: AssistantEvent, revision: bigint): AssistantState {
  switch (event.type) {
    case "AssistantCreated": {
      const d = event.data;
      const first: AssistantVersion = {
        assistant_id: d.assistant_id,
        graph_id: d.graph_id,
        config: d.config,
        context: d.context,
        metadata: d.metadata,
        name: d.name,
        description: d.description,
        version: 1,
        created_at: d.created_at,
      };
      return { revision, deleted: false, current: { ...first, updated_at: d.created_at }, versions: [first] };
    }
    case "AssistantUpdated": {
      const s = mustExist(state);
      const d = event.data;
      const version: AssistantVersion = {
        assistant_id: s.current.assistant_id,
        graph_id: d.graph_id,
        config: d.config,
        context: d.context,
        metadata: d.metadata,
        name: d.name,
        description: d.description,
        version: d.version,
        created_at: d.updated_at,
      };
      return {
        revision,
        deleted: false,
        versions: [...s.versions, version],
        current: { ...version, created_at: s.current.created_at, updated_at: d.updated_at },
      };
    }
    case "AssistantVersionRestored": {
      const s = mustExist(state);
      const v = s.versions.find((x) => x.version === event.data.version);
      if (!v) return { ...s, revision };
      return { ...s, revision, current: { ...v, created_at: s.current.created_at, updated_at: event.data.updated_at } };
    }
    case "AssistantDeleted":
      return { ...mustExist(state), revision, deleted: true };
  }
}

function mustExist(state: AssistantState | undefined): AssistantState {
  if (!state) throw new Error("assistant event before AssistantCreated");
  return state;
}

// ---- commands: pure decisions, given the current state and the clock reading ----

const live = (s: AssistantState | undefined) => (s && !s.deleted ? s : undefined);

export type CreateAssistant = Omit<AssistantVersion, "version" | "created_at"> & { if_exists: "raise" | "do_nothing" };

/** `undefined` events with ok=true means "nothing to do" (do_nothing on an existing assistant). */
export function decideCreateAssistant(state: AssistantState | undefined, cmd: CreateAssistant, now: string): Decision {
  if (live(state)) {
    return cmd.if_exists === "do_nothing" ? { ok: true, events: [] } : { ok: false, kind: "conflict", detail: "Assistant already exists" };
  }
  const { if_exists: _ignored, ...fields } = cmd;
  return { ok: true, events: [{ type: "AssistantCreated", data: { ...fields, created_at: now } }] };
}

export interface PatchAssistant {
  graph_id?: string;
  config?: JsonObject;
  context?: JsonObject;
  metadata?: JsonObject;
  name?: string;
  description?: string | null;
}

export function decidePatchAssistant(state: AssistantState | undefined, cmd: PatchAssistant, now: string): Decision {
  const s = live(state);
  if (!s) return { ok: false, kind: "not_found", detail: "Assistant not found" };
  const c = s.current;
  const version = Math.max(...s.versions.map((v) => v.version)) + 1;
  return {
    ok: true,
    events: [
      {
        type: "AssistantUpdated",
        data: {
          graph_id: cmd.graph_id ?? c.graph_id,
          config: cmd.config ?? c.config,
          context: cmd.context ?? c.context,
          metadata: { ...c.metadata, ...(cmd.metadata ?? {}) },
          name: cmd.name ?? c.name,
          description: cmd.description === undefined ? c.description : cmd.description,
          version,
          updated_at: now,
        },
      },
    ],
  };
}

export function decideSetLatestVersion(state: AssistantState | undefined, version: number, now: string): Decision {
  const s = live(state);
  if (!s) return { ok: false, kind: "not_found", detail: "Assistant not found" };
  if (!s.versions.some((v) => v.version === version)) return { ok: false, kind: "not_found", detail: "Assistant version not found" };
  return { ok: true, events: [{ type: "AssistantVersionRestored", data: { version, updated_at: now } }] };
}

export function decideDeleteAssistant(state: AssistantState | undefined, now: string): Decision {
  if (!live(state)) return { ok: false, kind: "not_found", detail: "Assistant not found" };
  return { ok: true, events: [{ type: "AssistantDeleted", data: { deleted_at: now } }] };
}
