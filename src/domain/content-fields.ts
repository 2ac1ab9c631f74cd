import type { EventCatalogue } from "./events.js";
import { checkpointStream } from "./checkpoint-events.js";
import { runStream } from "./runs.js";
import { THREAD_STREAM_PREFIX } from "./threads.js";

/**
 * Which parts of each event's data are content (what a user wrote or a graph produced), and which stay
 * clear: ids, types, status, times, owners, and whatever an operator needs to see in the raw log. When the
 * log is encrypted, an event with content is stored as its clear part beside the sealed whole of its data.
 * Every fold reads events through the decrypting reader, so this decides what the files reveal, never
 * what a fold sees.
 */

/** A field of an event's data, as the keys from its top level down (keys may contain dots). */
export type FieldPath = readonly string[];

export interface ContentRule {
  /** Fields sealed whole. */
  readonly content: readonly FieldPath[];
  /** Metadata objects that stay clear but for the keys the operator names (LANGGRAPH_AES_JSON_KEYS). */
  readonly metadata?: readonly FieldPath[];
  /** The whole event stays clear when this top-level field holds one of these strings (data the server made itself). */
  readonly clearWhen?: { readonly field: string; readonly values: readonly string[] };
}

/** An event type with nothing to seal: stored unchanged, readable after its stream's keys are destroyed. */
export const CLEAR = "clear";

const RUN_RECORD = { content: [["run", "kwargs"]], metadata: [["run", "metadata"]] } as const;
const RUN_END = { content: [["values"], ["interrupts"], ["error"]] } as const;

/**
 * The decision for every type of the catalogue; the `satisfies` makes a new type a compile error until
 * it is decided here (and test/domain/content-fields.test.ts checks the catalogue at run time).
 */
export const EVENT_CONTENT = {
  // Assistants: config and context hold prompts and parameters; name and description are searched.
  AssistantCreated: { content: [["config"], ["context"]], metadata: [["metadata"]] },
  AssistantUpdated: { content: [["config"], ["context"]], metadata: [["metadata"]] },
  AssistantVersionRestored: CLEAR,
  AssistantDeleted: CLEAR,

  // Threads: their values and state; metadata is searched and filtered on, so only named keys go.
  ThreadCreated: { content: [["values"]], metadata: [["metadata"]] },
  ThreadUpdated: { content: [], metadata: [["metadata"]] },
  ThreadStateUpdated: { content: [["values"], ["interrupts"]] },
  ThreadDeleted: CLEAR,
  ThreadPurged: CLEAR,
  // A run's kwargs carry its input, command, config and context; its ids, status and strategy order the thread.
  RunEnqueued: { content: RUN_RECORD.content, metadata: [...RUN_RECORD.metadata, ["thread_metadata"]] },
  RunFinished: RUN_END,
  RunDeleted: CLEAR,

  // Checkpoints: the checkpoint, its metadata (LangGraph writes the step's writes there) and channel values.
  CheckpointSaved: { content: [["checkpoint"], ["metadata"], ["blobs"]] },
  PendingWritesSaved: { content: [["writes"]] },
  CheckpointsDeleted: CLEAR,
  CheckpointsCopied: CLEAR,
  CheckpointsDiscarded: CLEAR,
  CheckpointsSnapshot: CLEAR,
  // A slice of a large value's JSON text (its hash and place stay clear: chunk ids derive from them).
  LargeJsonChunk: { content: [["text"]] },

  RunClaimed: CLEAR,
  RunLeaseRenewed: CLEAR,
  // One stream chunk: its SSE event name stays clear, its data is the graph's output. The `metadata`
  // chunk is the server's own (the run id and attempt): a sealed value fewer per run.
  RunOutput: { content: [["data"]], clearWhen: { field: "event", values: ["metadata"] } },
  RunCancelRequested: CLEAR,
  RunEnded: RUN_END,

  // Store items: the value and the embeddings computed from it; namespace and key are searched.
  StoreItemPut: { content: [["value"], ["vectors"]] },
  StoreItemDeleted: CLEAR,
  StoreItemTtlRefreshed: CLEAR,
  StoreItemExpired: CLEAR,

  WebhookClaimed: CLEAR,
  WebhookAttempted: CLEAR,
  WebhookDelivered: CLEAR,
  WebhookFailed: CLEAR,

  // A cron's payload is the input, config and context of every run it starts.
  CronCreated: { content: [["payload"]], metadata: [["metadata"]] },
  CronUpdated: { content: [["payload"]], metadata: [["metadata"]] },
  CronFired: CLEAR,
  CronRunCreated: CLEAR,
  CronRunFailed: CLEAR,
  CronDeleted: CLEAR,

  // A push config holds the URL, token and credentials the notification is sent with.
  A2APushConfigSet: { content: [["config"]] },
  A2APushConfigDeleted: CLEAR,
  A2APushRunEndCaughtUp: {
    content: [
      ["ended", "values"],
      ["ended", "interrupts"],
      ["ended", "error"],
    ],
  },

  // A claim's fingerprint is a hash of the request's body: it would confirm a guess of what was asked.
  IdempotencyKeyClaimed: { content: [["request_hash"]] },
  IdempotentRunCreated: RUN_RECORD,
  IdempotencyKeyReleased: CLEAR,
} as const satisfies Record<keyof EventCatalogue, ContentRule | typeof CLEAR>;

/** The sealed part of an event: each field's path and value. */
export type ContentPart = [FieldPath, unknown][];

export interface SplitData {
  /** The data without its content (a fresh object; the input is not changed). */
  clear: Record<string, unknown>;
  content: ContentPart;
}

type JsonRecord = Record<string, unknown>;
const isRecord = (value: unknown): value is JsonRecord => typeof value === "object" && value !== null && !Array.isArray(value);

/** The content-bearing types' rules, looked up once per sealed event. */
const CONTENT_RULES: ReadonlyMap<string, ContentRule> = new Map(
  Object.entries(EVENT_CONTENT).flatMap(([type, rule]): [string, ContentRule][] => (rule === CLEAR ? [] : [[type, rule]])),
);

/** The rule of an event type; undefined for a clear type or one outside the catalogue. */
export function contentRuleOf(type: string): ContentRule | undefined {
  return CONTENT_RULES.get(type);
}

function valueAt(data: unknown, path: FieldPath): unknown {
  let at = data;
  for (const key of path) {
    if (!isRecord(at) || !Object.hasOwn(at, key)) return undefined;
    at = at[key];
  }
  return at;
}

function withValue(data: JsonRecord, path: FieldPath, value: unknown): JsonRecord {
  const [key, ...rest] = path;
  if (key === undefined) return data;
  const inner = data[key];
  return { ...data, [key]: rest.length === 0 ? value : withValue(isRecord(inner) ? inner : {}, rest, value) };
}

/** The content fields `data` holds, with their values, by the rule of its type; undefined when it holds none. */
function contentOf(type: string, data: unknown, jsonKeys: readonly string[]): { data: JsonRecord; content: ContentPart } | undefined {
  const rule = contentRuleOf(type);
  if (!rule || !isRecord(data)) return undefined;
  const clearWhen = rule.clearWhen;
  if (clearWhen && clearWhen.values.some((value) => data[clearWhen.field] === value)) return undefined;
  let paths: readonly FieldPath[] = rule.content;
  if (jsonKeys.length > 0 && rule.metadata) {
    const named: FieldPath[] = [...paths];
    for (const metadata of rule.metadata) {
      const object = valueAt(data, metadata);
      if (isRecord(object)) for (const key of jsonKeys) if (Object.hasOwn(object, key)) named.push([...metadata, key]);
    }
    paths = named;
  }
  const content: ContentPart = [];
  for (const path of paths) {
    const value = valueAt(data, path);
    if (value !== undefined) content.push([path, value]);
  }
  return content.length > 0 ? { data, content } : undefined;
}

/** A copy of `data` without these content fields, copying only the objects on their way (the input may be frozen). */
function withoutContent(data: JsonRecord, content: ContentPart): JsonRecord {
  return withoutPaths(
    data,
    content.map(([path]) => path),
  );
}

/**
 * A copy of `data` without the fields at `paths`, built key by key: an object a `delete` has shrunk is left in V8's
 * slow dictionary mode, which every later read and serialisation of it pays for.
 */
function withoutPaths(data: JsonRecord, paths: readonly FieldPath[]): JsonRecord {
  const copy: JsonRecord = {};
  for (const key of Object.keys(data)) {
    let dropped = false;
    let below: FieldPath[] | undefined;
    for (const path of paths) {
      if (path[0] !== key) continue;
      if (path.length === 1) dropped = true;
      else (below ??= []).push(path.slice(1));
    }
    if (dropped) continue;
    const value = data[key];
    const kept = below !== undefined && isRecord(value) ? withoutPaths(value, below) : value;
    // An own "__proto__" (JSON.parse makes one) is a field like any other; assigned, it would set the prototype.
    if (key === "__proto__") Object.defineProperty(copy, key, { value: kept, enumerable: true, writable: true, configurable: true });
    else copy[key] = kept;
  }
  return copy;
}

/**
 * What of an event's data stays in clear in the log: the data without its content fields (a fresh
 * object; the input is not changed). Undefined when nothing is to be sealed (a clear type, data that
 * is not an object, or no content field present).
 */
export function clearPartOf(type: string, data: unknown, jsonKeys: readonly string[]): Record<string, unknown> | undefined {
  const found = contentOf(type, data, jsonKeys);
  return found && withoutContent(found.data, found.content);
}

/**
 * Splits an event's data into what stays clear and its content, the parts the log's envelopes held
 * before they held the whole data (see joinContent); undefined when nothing is to be sealed.
 */
export function splitContent(type: string, data: unknown, jsonKeys: readonly string[]): SplitData | undefined {
  const found = contentOf(type, data, jsonKeys);
  return found && { clear: withoutContent(found.data, found.content), content: found.content };
}

/** The original data from its clear part and the content parts an earlier envelope held (key order may differ). */
export function joinContent(clear: Record<string, unknown>, content: ContentPart): Record<string, unknown> {
  let data = clear;
  for (const [path, value] of content) data = withValue(data, path, value);
  return data;
}

/**
 * The streams a thread's purge destroys with the thread's own, named from one of its events: its checkpoints, and the
 * run an enqueue starts. They seal with the thread's data key, so a thread has one key, not one per stream.
 */
export function streamsSharingThreadKey(stream: string, type: string, data: unknown): string[] {
  if (!stream.startsWith(THREAD_STREAM_PREFIX)) return [];
  const sharers = [checkpointStream(stream.slice(THREAD_STREAM_PREFIX.length))];
  const run = type === "RunEnqueued" && isRecord(data) ? data.run : undefined;
  if (isRecord(run) && typeof run.run_id === "string") sharers.push(runStream(run.run_id));
  return sharers;
}

/** What the encrypting store leaves in clear, how it reads earlier envelopes, and which streams share a key (src/eventstore/encrypting.ts). */
export function contentPolicy(jsonKeys: readonly string[]): {
  clearPart(type: string, data: unknown): Record<string, unknown> | undefined;
  join(clear: Record<string, unknown>, content: unknown): Record<string, unknown>;
  keySharers(stream: string, type: string, data: unknown): readonly string[];
} {
  return {
    clearPart: (type, data) => clearPartOf(type, data, jsonKeys),
    join: (clear, content) => joinContent(clear, content as ContentPart),
    keySharers: streamsSharingThreadKey,
  };
}
