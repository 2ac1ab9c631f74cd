/**
 * LangGraph's checkpoint objects ↔ the data of checkpoint events, through the saver's serializer:
 * the pure half of the event-sourced checkpointer (checkpointer.ts keeps the log, the cache and the
 * deferred writes). Plain JSON skips the serializer's text round trip (plainJsonCopy).
 */
import type { RunnableConfig } from "@langchain/core/runnables";
import {
  TASKS,
  WRITES_IDX_MAP,
  copyCheckpoint,
  maxChannelVersion,
  type ChannelVersions,
  type Checkpoint,
  type CheckpointMetadata,
  type CheckpointPendingWrite,
  type CheckpointTuple,
  type PendingWrite,
  type SerializerProtocol,
} from "@langchain/langgraph-checkpoint";
import type { ChannelBlob, CheckpointSaved, PendingWritesSaved, StoredCheckpointJson } from "../domain/checkpoint-events.js";

/**
 * A serialized value with its bytes at hand (large values already read back): `[type, text, "utf8"]`
 * (the bytes are the text's UTF-8) or `[type, base64]`.
 */
export type InlineValue = [type: string, base64: string] | [type: string, text: string, encoding: "utf8"];

/** Fatal: bytes that are not UTF-8 stay base64. BOM kept: decoding must give back the very bytes. */
const utf8 = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true });

/**
 * A stored checkpoint as a read finds it, its values still serialized: what `CheckpointCodec.tuple`
 * turns into LangGraph's CheckpointTuple.
 */
export interface EncodedTuple {
  threadId: string;
  checkpointNs: string;
  checkpointId: string;
  parentId: string | null;
  /** The checkpoint without `channel_values`, as the serializer's JSON. */
  checkpoint: StoredCheckpointJson;
  metadata: Record<string, unknown>;
  /** The values of the checkpoint's channel versions that have one. */
  values: [channel: string, value: InlineValue][];
  pendingWrites: [taskId: string, channel: string, value: InlineValue][];
  /** Format v < 4 only: the parent's TASKS writes, the pending sends that version kept there. */
  pendingSends?: InlineValue[];
}

/**
 * A run's configurable key (set by the run executor unless the run's durability is "sync"): puts and
 * pending writes return once their append is issued, not committed. LangGraph chains a run's puts
 * one after the other; without waiting for each commit, a run's checkpoints go into the log in one
 * group commit instead of one commit each. The run's end depends on them (the saver's
 * `writesInFlight`) or waits for them (`flush`), and every read of the thread waits for them first.
 */
export const DEFER_CHECKPOINT_WRITES = "__agent_server_defer_checkpoint_writes";

/** Whether a put or a pending write with this config may return before its append commits. */
export function defersWrites(config: RunnableConfig): boolean {
  return config.configurable?.[DEFER_CHECKPOINT_WRITES] === true;
}

/** The thread a write is for; the message names the action when the config has none. */
export function requireThreadId(config: RunnableConfig, action: string): string {
  const threadId = config.configurable?.thread_id;
  if (threadId === undefined || threadId === null || threadId === "") {
    throw new Error(`Failed to ${action}. The passed RunnableConfig is missing a required "thread_id" field in its "configurable" property.`);
  }
  return String(threadId);
}

/** Configurable keys that address a checkpoint rather than describe the run. */
const NOT_METADATA = new Set(["checkpoint_ns", "checkpoint_id", "run_id", "thread_id"]);

/**
 * What a checkpoint's metadata records, as the official JS server's saver does: the run's
 * configurable values (not the internal `__` ones nor checkpoint addressing) ⊕ the run config's
 * `metadata` (the run's metadata, its id) ⊕ what LangGraph wrote (source, step, parents).
 */
export function checkpointMetadata(config: RunnableConfig, metadata: CheckpointMetadata): CheckpointMetadata {
  const configurable = Object.entries(config.configurable ?? {}).filter(([key]) => !key.startsWith("__") && !NOT_METADATA.has(key));
  return { ...Object.fromEntries(configurable), ...(config.metadata ?? {}), ...metadata } as CheckpointMetadata;
}

export class CheckpointCodec {
  constructor(
    private readonly serde: SerializerProtocol,
    /** Record the run's configurable values and config metadata in each checkpoint's metadata (see checkpointMetadata). */
    private readonly metadataFromConfig: boolean,
  ) {}

  /** A put's event: only the channels in `newVersions` get a blob (null for a channel left empty). */
  async checkpointSaved(config: RunnableConfig, checkpoint: Checkpoint, metadata: CheckpointMetadata, newVersions: ChannelVersions): Promise<CheckpointSaved> {
    const threadId = requireThreadId(config, "put checkpoint");
    const parentId: string | undefined = config.configurable?.checkpoint_id;
    const { channel_values: values, ...withoutValues } = copyCheckpoint(checkpoint);
    const storedMetadata = this.metadataFromConfig ? checkpointMetadata(config, metadata) : metadata;
    const blobs: ChannelBlob[] = [];
    for (const [channel, version] of Object.entries(newVersions)) {
      const present = Object.prototype.hasOwnProperty.call(values, channel) && values[channel] !== undefined;
      blobs.push({ channel, version, value: present ? await this.dump(values[channel]) : null });
    }
    return {
      thread_id: threadId,
      checkpoint_ns: config.configurable?.checkpoint_ns ?? "",
      checkpoint_id: checkpoint.id,
      parent_checkpoint_id: parentId ? parentId : null,
      checkpoint: (plainJsonCopy(withoutValues, 0) ?? (await this.dumpJson(withoutValues))) as StoredCheckpointJson,
      metadata: (plainJsonCopy(storedMetadata, 0) ?? (await this.dumpJson(storedMetadata))) as Record<string, unknown>,
      blobs,
    };
  }

  /** A putWrites' event; special channels get their fixed index (WRITES_IDX_MAP), the others their position. */
  async pendingWritesSaved(config: RunnableConfig, writes: PendingWrite[], taskId: string, taskPath?: string): Promise<PendingWritesSaved> {
    const threadId = requireThreadId(config, "put writes");
    const checkpointId: string | undefined = config.configurable?.checkpoint_id;
    if (!checkpointId) {
      throw new Error('Failed to put writes. The passed RunnableConfig is missing a required "checkpoint_id" field in its "configurable" property.');
    }
    return {
      thread_id: threadId,
      checkpoint_ns: config.configurable?.checkpoint_ns ?? "",
      checkpoint_id: checkpointId,
      task_id: taskId,
      task_path: taskPath ?? "",
      writes: await this.dumpWrites(writes),
    };
  }

  /** The writes in order, each serialized (one after the other: no promise per write beyond the serializer's). */
  private async dumpWrites(writes: PendingWrite[]): Promise<PendingWritesSaved["writes"]> {
    const out: PendingWritesSaved["writes"] = [];
    for (let idx = 0; idx < writes.length; idx++) {
      const [channel, value] = writes[idx];
      out.push({ idx: Object.hasOwn(WRITES_IDX_MAP, channel) ? WRITES_IDX_MAP[channel] : idx, channel, value: await this.dump(value) });
    }
    return out;
  }

  /** The tuple LangGraph reads; `nextVersion` names a first channel version (the saver's getNextVersion). */
  async tuple(encoded: EncodedTuple, nextVersion: () => number | string): Promise<CheckpointTuple> {
    const { threadId, checkpointNs, checkpointId, parentId } = encoded;
    const stored = (await this.loadJson(encoded.checkpoint)) as Omit<Checkpoint, "channel_values">;
    const channelValues: Record<string, unknown> = {};
    for (const [channel, value] of encoded.values) channelValues[channel] = await this.load(value);
    const checkpoint: Checkpoint = { ...stored, channel_values: channelValues };
    if (encoded.pendingSends) {
      // Checkpoints before format v4 kept pending sends in the parent's TASKS writes (as MemorySaver migrates them).
      checkpoint.channel_values[TASKS] = await Promise.all(encoded.pendingSends.map((v) => this.load(v)));
      const versions = Object.values(checkpoint.channel_versions);
      checkpoint.channel_versions[TASKS] = versions.length > 0 ? maxChannelVersion(...versions) : nextVersion();
    }
    const tuple: CheckpointTuple = {
      config: { configurable: { thread_id: threadId, checkpoint_ns: checkpointNs, checkpoint_id: checkpointId } },
      checkpoint,
      metadata: (await this.loadJson(encoded.metadata)) as CheckpointMetadata,
      pendingWrites: await Promise.all(
        encoded.pendingWrites.map(async ([task, channel, value]): Promise<CheckpointPendingWrite> => [task, channel, await this.load(value)]),
      ),
    };
    if (parentId !== null) {
      tuple.parentConfig = { configurable: { thread_id: threadId, checkpoint_ns: checkpointNs, checkpoint_id: parentId } };
    }
    return tuple;
  }

  /**
   * The serializer's bytes as their UTF-8 text when they are UTF-8 (JSON always is): a quarter smaller
   * in the log than base64, cheaper to make and to read back, and readable by an auditor.
   */
  private dump(value: unknown): Promise<InlineValue> {
    // A then on the serializer's promise, not an async function awaiting it: one promise fewer per value.
    return this.serde.dumpsTyped(value).then(([type, bytes]): InlineValue => {
      let text: string;
      try {
        text = utf8.decode(bytes);
      } catch {
        return [type, Buffer.from(bytes).toString("base64")];
      }
      return [type, text, "utf8"];
    });
  }

  private load(value: InlineValue): Promise<unknown> {
    const [type, payload] = value;
    if (value[2] !== "utf8") return this.serde.loadsTyped(type, new Uint8Array(Buffer.from(payload, "base64")));
    // JSON is handed over as text (the serializer would decode the bytes to text again); other types get their bytes.
    return this.serde.loadsTyped(type, type === "json" ? payload : new Uint8Array(Buffer.from(payload, "utf8")));
  }

  /**
   * The serializer's JSON form of a value, as a JSON value (readable in the log, exact round trip).
   * Callers first try plainJsonCopy: plain JSON is its own JSON form, a copy without the serializer's
   * text round trip or a promise (a checkpoint's versions and most metadata are plain).
   */
  private async dumpJson(value: unknown): Promise<unknown> {
    const [type, bytes] = await this.serde.dumpsTyped(value);
    if (type !== "json") {
      throw new Error(`EventSourcedCheckpointSaver needs a serializer that writes checkpoints and metadata as "json" (got "${type}")`);
    }
    return JSON.parse(Buffer.from(bytes).toString("utf8"));
  }

  private loadJson(value: unknown): Promise<unknown> {
    return this.serde.loadsTyped("json", JSON.stringify(value));
  }
}

/** Nesting beyond this takes the serializer's path (which also copes with cycles). */
const PLAIN_DEPTH = 32;

/**
 * A copy of `value` when it is plain JSON (plain objects and arrays of strings, finite numbers,
 * booleans and null): what the serializer would write for it, parsed back. Undefined for anything
 * else (undefined, class instances, Dates, non-finite numbers, very deep nesting), which the
 * serializer encodes in its own way.
 */
export function plainJsonCopy(value: unknown, depth: number): unknown {
  switch (typeof value) {
    case "string":
    case "boolean":
      return value;
    case "number":
      return Number.isFinite(value) ? value : undefined;
    case "object": {
      if (value === null) return null;
      if (depth >= PLAIN_DEPTH) return undefined;
      if (Array.isArray(value)) {
        const out: unknown[] = new Array(value.length);
        for (let i = 0; i < value.length; i++) {
          const item = plainJsonCopy(value[i], depth + 1);
          if (item === undefined) return undefined;
          out[i] = item;
        }
        return out;
      }
      const proto = Object.getPrototypeOf(value);
      if (proto !== Object.prototype && proto !== null) return undefined;
      const out: Record<string, unknown> = {};
      for (const key of Object.keys(value)) {
        const item = plainJsonCopy((value as Record<string, unknown>)[key], depth + 1);
        if (item === undefined) return undefined;
        // An own `__proto__` key (JSON.parse makes one) stays a key, as in the serializer's output.
        if (key === "__proto__") Object.defineProperty(out, key, { value: item, enumerable: true, writable: true, configurable: true });
        else out[key] = item;
      }
      return out;
    }
    default:
      return undefined;
  }
}
