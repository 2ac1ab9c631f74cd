/**
 * TEST DOUBLE of EventStoreDB. This is NOT EventStoreDB and must never be used outside tests.
 *
 * An in-process gRPC server on 127.0.0.1 (`esdb://127.0.0.1:<port>?tls=false`, or TLS with credentials, below)
 * that speaks exactly the part of the EventStoreDB gRPC protocol our adapter (src/eventstore/esdb.ts)
 * uses through the real `@eventstore/db-client` 6.x, over an in-memory log that can be kept in a file. It is
 * built on the gRPC service definitions shipped with the client package (`generated/*_grpc_pb.js`), so the
 * wire format is the real one. Implemented:
 *
 * - `ServerFeatures.GetSupportedMethods`: advertises only what is implemented below (the client uses it to
 *   choose between `Streams.BatchAppend` and `Streams.Append`).
 * - `Streams.Append` (client streaming) and `Streams.BatchAppend` (bidi; can be switched off with
 *   `{ batchAppend: false }`, then the client falls back to `Append`).
 *   0-based revisions; expected revision any / no_stream / stream_exists / exact revision; a conflict is
 *   reported as EventStoreDB does it (Append: `AppendResp.wrong_expected_version` with current and expected
 *   revision; BatchAppend: a `google.rpc.Status` whose details pack `event_store.client.WrongExpectedVersion`).
 *   Idempotent appends by event id, with EventStoreDB's two rules (see `tryIdempotent`): an append with an
 *   exact expected revision (or no_stream) that the stream already holds at that revision is recognised from
 *   the log itself, always; an append with expected any (or stream_exists) only while its event ids are in a
 *   bounded in-memory cache of recently written ids (`idempotencyWindow`), which every start, a restart on
 *   the same data file included, begins EMPTY: a retry of such an append after a restart is written again,
 *   as the real server writes it. BatchAppend honours the deadline each write carries.
 * - `Streams.Delete`, a SOFT delete as the real server does it: the stream's metadata (`$$<stream>`, a
 *   `$metadata` event) gets `$tb` = deleted, stream reads answer StreamNotFound, but the events stay in `$all`
 *   reads and `$all` subscriptions until a scavenge; a later append continues after the last revision (and
 *   moves `$tb` to it). `scavenge()` on the handle, or the real `Operations.StartScavenge` call, removes them
 *   from `$all` and from the data file.
 * - `Streams.Read`:
 *   - stream reads forwards/backwards from start/end/revision (inclusive), `StreamNotFound` for a missing stream;
 *   - `$all` reads forwards (from position, inclusive) / backwards (from position, exclusive, like EventStoreDB's
 *     post-positions), with or without a server-side filter;
 *   - catch-up subscriptions to a stream or to `$all` (optionally filtered on stream name or event type, by
 *     prefixes or regex), with EXCLUSIVE start positions, a `SubscriptionConfirmation` first, periodic
 *     `Checkpoint`s on filtered `$all` subscriptions, and a `CaughtUp` message when history has been sent
 *     (like servers >= 23.10; switch it off with `{ caughtUpMessages: false }` to behave like older servers).
 *
 * Positions mimic EventStoreDB's transaction-file positions: byte-offset-like, strictly increasing, not dense,
 * and `commit === prepare` for every event (what EventStoreDB reports for events written through gRPC).
 * Like a fresh EventStoreDB, the log starts with a few system events (`$`-prefixed streams and types).
 *
 * File-backed mode (`{ dataFile }`): every change is appended to the file and read back at start, so `stop()`
 * and a start on the same file (and `{ port }`, the same port: `restart()` does both) continue with the same
 * events, positions and revisions while clients keep their connection string.
 *
 * Faults, deterministic and driven from the handle (see `EsdbTestDouble`): clients connect through a TCP front
 * (`fault-front.ts`) that can cut every connection (calls in flight fail with UNAVAILABLE, as on a network blip)
 * or refuse connections until `heal()`; Streams calls can be answered NotLeader with a leader hint (status
 * NOT_FOUND, trailers `exception: not-leader`, `leader-endpoint-host`, `leader-endpoint-port`: what the client's
 * NotLeaderError reads before it reconnects to that node), held past the client's deadline, and appends can be
 * applied and then answered as failed (commit timeout, a dropped connection, or a crash: the double stops
 * listening until `restart()`): an ambiguous write.
 *
 * Gate (not a fault: a way to prove interleavings): `holdAppends(which)` holds the appends it picks, after they
 * reached the double and before they are applied, until the test releases (applies, in arrival order) or drops
 * them; `reached(n)` resolves once n are held. E.g. "both claims of two concurrent requests have reached the
 * log before either was applied" is awaited as an event instead of hoped for with timing.
 *
 * TLS and credentials: `{ tls }` serves TLS with a certificate from `generateTestCertificates()` (a CA generated
 * at test time); `{ credentials }` requires basic auth on every Streams call, answering a wrong password
 * UNAUTHENTICATED and an anonymous call PERMISSION_DENIED `access-denied`, as the server does (both are the
 * client's AccessDeniedError).
 *
 * Not implemented (the adapter does not use them): Gossip/cluster discovery (single-node connection strings
 * only), link resolution (`resolveLinks` is ignored: there are no links), hard deletes (tombstones), stream
 * metadata beyond what a soft delete writes (no `$maxAge`/`$maxCount`/ACLs), persistent subscriptions,
 * projections, user management, operations other than StartScavenge, deadlines of calls other than BatchAppend
 * (the gRPC deadline of unary calls is the client's own).
 *
 * Max append size: like EventStoreDB's default `MaxAppendSize`, an append whose events total more than 1 MiB
 * (data + metadata + 2 × type length per event, EventStoreDB's `Event.SizeOnDisk`) is refused whole, reported
 * as the server does: Append fails with INVALID_ARGUMENT and the trailers `exception:
 * maximum-append-size-exceeded`, `maximum-append-size`; BatchAppend answers a `google.rpc.Status` packing
 * `event_store.client.MaximumAppendSizeExceeded`. `maxAppendSize` changes the limit.
 */
import { createRequire } from "node:module";
import { randomUUID } from "node:crypto";
import { appendFileSync, existsSync, readFileSync, renameSync, writeFileSync } from "node:fs";
import * as grpc from "@grpc/grpc-js";
import type * as StreamsPb from "@eventstore/db-client/generated/streams_pb.js";
import type * as SharedPb from "@eventstore/db-client/generated/shared_pb.js";
import type * as StatusPb from "@eventstore/db-client/generated/status_pb.js";
import type * as ServerFeaturesPb from "@eventstore/db-client/generated/serverfeatures_pb.js";
import type * as OperationsPb from "@eventstore/db-client/generated/operations_pb.js";
import type { Any } from "google-protobuf/google/protobuf/any_pb.js";
import { FaultFront } from "./fault-front.js";
import type { Empty as GoogleEmpty } from "google-protobuf/google/protobuf/empty_pb.js";

// Load the generated code through the same module instances the client uses (the generated serializers
// check `instanceof` against their own classes).
/**
 * A test process that used gRPC over HTTP/2 (this double, the EventStoreDB client) may spin forever
 * at 100% CPU after its last test, inside Node's exit-time cleanup (FreeEnvironment → CleanupHandles
 * → uv_run, seen with perf after a double was stopped and restarted under load), so tap times the
 * file out although every test passed. That cleanup runs after the 'exit' event: exiting from the
 * last 'exit' listener skips it, keeping the exit code. (The server process is not affected: main.ts
 * ends with process.exit.) Added at the first 'beforeExit', after every listener tap registered.
 */
let exitArmed = false;
process.on("beforeExit", () => {
  if (exitArmed) return;
  exitArmed = true;
  process.on("exit", (code) => process.exit(code));
});

const requireHere = createRequire(import.meta.url);
const generatedDir = "@eventstore/db-client/generated";
const requireGenerated = createRequire(requireHere.resolve(`${generatedDir}/streams_pb.js`));
const streamsPb = requireGenerated("./streams_pb.js") as typeof StreamsPb;
const sharedPb = requireGenerated("./shared_pb.js") as typeof SharedPb;
const statusPb = requireGenerated("./status_pb.js") as typeof StatusPb;
const serverFeaturesPb = requireGenerated("./serverfeatures_pb.js") as typeof ServerFeaturesPb;
const operationsPb = requireGenerated("./operations_pb.js") as typeof OperationsPb;
const operationsGrpc = requireGenerated("./operations_grpc_pb.js") as { OperationsService: grpc.ServiceDefinition };
const streamsGrpc = requireGenerated("./streams_grpc_pb.js") as { StreamsService: grpc.ServiceDefinition };
const serverFeaturesGrpc = requireGenerated("./serverfeatures_grpc_pb.js") as {
  ServerFeaturesService: grpc.ServiceDefinition;
};
const googleEmptyPb = requireGenerated("google-protobuf/google/protobuf/empty_pb.js") as { Empty: new () => GoogleEmpty };
const googleAnyPb = requireGenerated("google-protobuf/google/protobuf/any_pb.js") as { Any: new () => Any };

type ReadReq = StreamsPb.ReadReq;
type ReadResp = StreamsPb.ReadResp;
type AppendReq = StreamsPb.AppendReq;
type AppendResp = StreamsPb.AppendResp;
type BatchAppendReq = StreamsPb.BatchAppendReq;
type BatchAppendResp = StreamsPb.BatchAppendResp;

export interface EsdbTestDoubleOptions {
  /** Advertise and serve Streams.BatchAppend (what servers >= 21.10 do). Default true. */
  batchAppend?: boolean;
  /** Send a CaughtUp message when a subscription has delivered its history (servers >= 23.10). Default true. */
  caughtUpMessages?: boolean;
  /** Bytes one append may hold (EventStoreDB's `MaxAppendSize`). Default 1,048,576. */
  maxAppendSize?: number;
  /**
   * Called before each append is applied; an error it throws fails that append (as UNAVAILABLE, like a
   * connection lost mid-write) and nothing of it is written. For tests of crashes between appends.
   */
  beforeAppend?: (stream: string, events: number) => void;
  /**
   * How many recently written event ids the double remembers for the idempotency of appends with expected
   * any / stream_exists (EventStoreDB's committed-events cache, bounded by memory there). Default 100,000;
   * forgotten at every start.
   */
  idempotencyWindow?: number;
  /**
   * File-backed mode: the log is kept in this file (one JSON line per change) and read back at start, so
   * a stop and a start on the same file continue with the same events, positions and revisions.
   */
  dataFile?: string;
  /** Port to listen on (default: a free one); a restarted double takes its predecessor's port. */
  port?: number;
  /** Serve TLS with this certificate (see `generateTestCertificates`); the connection string names the CA file. */
  tls?: { cert: string; key: string; caFile: string };
  /**
   * Require these basic-auth credentials on every Streams call, as a secure EventStoreDB does (`admin:changeit`):
   * an anonymous call is answered PERMISSION_DENIED `access-denied`, a wrong password UNAUTHENTICATED. Use it
   * with `tls`: gRPC sends credentials on secure channels only, so over `tls=false` every call is anonymous.
   */
  credentials?: { username: string; password: string };
}

export interface EsdbTestDoubleStats {
  /** TCP connections accepted, and how many of them a fault cut. */
  connections: number;
  cutConnections: number;
  /** Calls answered NotLeader, held by a delay, appends applied but answered as failed, calls refused for credentials. */
  notLeaderAnswers: number;
  delayedCalls: number;
  ambiguousAppends: number;
  deniedCalls: number;
  /** Appends answered from events already written (by event id), since this start. */
  idempotentAppends: number;
}

/** The appends `holdAppends` holds. */
export interface AppendGate {
  /** The appends held so far, in arrival order (stream and event types). */
  readonly held: readonly { stream: string; types: string[] }[];
  /** Resolves once `count` appends are held (at once: none is applied before release()). */
  reached(count: number): Promise<void>;
  /**
   * Stops holding and applies the held appends in arrival order, each answered as usual (a conflict as a
   * conflict) to a client that is still there (through Append, `batchAppend: false`, the append of a client
   * that went away meanwhile is not applied). Returns how many were held.
   */
  release(): number;
  /**
   * Stops holding and discards the held appends without applying them (a client still there gets UNAVAILABLE,
   * as when the connection was lost before the write: it may retry). For a writer that died while its write
   * was on the way. Returns how many were discarded.
   */
  drop(): number;
}

/** How an append applied by `failAppendsAfterApplying` is answered. */
export type AmbiguousAnswer = "timeout" | "drop" | "crash";

export interface EsdbTestDouble {
  /** `esdb://127.0.0.1:<port>?tls=false`; with TLS and credentials `esdb://admin:changeit@127.0.0.1:<port>?tls=true&tlsCAFile=…`. */
  connectionString: string;
  port: number;
  /** Stops serving: every connection is dropped, the port is released. The log stays in `dataFile`, if any. */
  close(): Promise<void>;
  /** The same as close(). */
  stop(): Promise<void>;
  /** Stops and starts again on the same port and data file (file-backed mode only); the old handle is dead. */
  restart(overrides?: Partial<EsdbTestDoubleOptions>): Promise<EsdbTestDouble>;

  // Faults. Each holds until heal() (cutConnections is a one-off), and is deterministic.
  /** Drops every open connection now, as a network blip does: calls in flight fail with UNAVAILABLE. Returns how many. */
  cutConnections(): number;
  /** Stops listening (connection attempts are refused) and drops every open connection, until heal(). */
  refuseConnections(): Promise<void>;
  /**
   * Answers every Streams call with NotLeader and this leader hint (default: itself), as a follower
   * answers a call that requires the leader: status NOT_FOUND with the trailers `exception: not-leader`,
   * `leader-endpoint-host`, `leader-endpoint-port` (what the client's NotLeaderError reads; its next
   * call goes to the hinted node).
   */
  answerNotLeader(leader?: { host: string; port: number }): void;
  /** Holds every new call this long before serving it (past the client's deadline: it gets DEADLINE_EXCEEDED). */
  delayResponses(ms: number): void;
  /**
   * Applies the next `count` appends (of those `which` picks, given the stream and the event types; default
   * all), then answers each as failed: "timeout" as EventStoreDB reports a commit timeout (the client's
   * DeadlineExceededError: may or may not have been written), "drop" by cutting the connections before the
   * answer goes out, "crash" as a server that dies once the write is durable: every connection is cut and
   * connections are refused until `restart()` (or `heal()`). Either way the events ARE in the log.
   */
  failAppendsAfterApplying(count?: number, how?: AmbiguousAnswer, which?: (stream: string, types: string[]) => boolean): void;
  /**
   * Holds every append `which` picks (given the stream and the event types) once it has reached the double,
   * before it is checked or applied, until the returned gate is released or dropped (one gate at a time).
   * Other appends go on meanwhile, on the same connection too.
   */
  holdAppends(which: (stream: string, types: string[]) => boolean): AppendGate;
  /** Ends every fault: listens again, answers as the leader, without delay; releases the calls a delay holds (and a gate's appends). */
  heal(): Promise<void>;
  /** Removes soft-deleted events from `$all` (and from the data file); returns how many went. */
  scavenge(): number;
  readonly stats: EsdbTestDoubleStats;
}

function resolvable(): { promise: Promise<void>; resolve: () => void } {
  let resolve!: () => void;
  const promise = new Promise<void>((r) => (resolve = r));
  return { promise, resolve };
}

// ---------------------------------------------------------------------------------------------------------
// The log (in memory, optionally kept in a file)

interface StoredEvent {
  streamName: string;
  revision: bigint;
  id: string;
  type: string;
  contentType: string;
  data: Uint8Array;
  customMetadata: Uint8Array;
  /** 100-ns ticks since the Unix epoch, as EventStoreDB sends `created`. */
  createdTicks: bigint;
  /** Transaction-file position: commit === prepare === this. */
  position: bigint;
  /** Below its stream's truncate-before after a soft delete: stream reads skip it, `$all` still has it. */
  deleted?: boolean;
  /** Removed by a scavenge: no longer in `$all`, its data is gone; only its revision slot is left. */
  scavenged?: boolean;
}

interface StreamState {
  events: StoredEvent[];
  revisionById: Map<string, number>;
}

interface ProposedEvent {
  id: string;
  type: string;
  contentType: string;
  data: Uint8Array;
  customMetadata: Uint8Array;
}

type Expected = { kind: "any" } | { kind: "no_stream" } | { kind: "stream_exists" } | { kind: "revision"; revision: bigint };

type WriteResult = { ok: true; currentRevision: bigint; position: bigint } | { ok: false; current: bigint | "no_stream"; expected: Expected };

class InvalidRequest extends Error {}

/** What EventStoreDB counts of an event against MaxAppendSize (`Event.SizeOnDisk`). */
function sizeOnDisk(e: ProposedEvent): number {
  return e.data.length + e.customMetadata.length + 2 * e.type.length;
}

/** EventStoreDB's `$tb` of a soft-deleted stream (`EventNumber.DeletedStream`, long.MaxValue). */
const DELETED_STREAM_TB = 9223372036854775807n;

/** One line of the data file (JSON): a write, a soft delete, or (after a scavenge) a stream's emptied slots. */
type FileRecord =
  | {
      op: "write";
      stream: string;
      events: { id: string; type: string; contentType: string; data: string; metadata: string; created: string; position: string; revision: string }[];
    }
  | { op: "delete"; stream: string }
  | { op: "scavenged"; stream: string; count: number }
  | { op: "next"; position: string };

/** The default of `idempotencyWindow`. */
const DEFAULT_IDEMPOTENCY_WINDOW = 100_000;

class Log {
  all: StoredEvent[] = [];
  readonly streams = new Map<string, StreamState>();
  private nextPosition = 0n;
  private wake: () => void = () => undefined;
  private changeSignal = this.newSignal();
  /**
   * Ids of the events written since this start, oldest first, at most `window` of them: EventStoreDB's
   * cache of committed event ids (`IndexWriter._committedEvents`), the only thing its idempotency of
   * appends with expected any / stream_exists looks at. In memory only: not read back from the file.
   */
  private readonly recentIds = new Map<string, { stream: string; index: number }>();
  /** Appends answered from events already written (by event id). */
  idempotentWrites = 0;

  /** `file`: where every change is appended (one JSON line each), read back by the next start. */
  constructor(
    private readonly file?: string,
    private readonly window = DEFAULT_IDEMPOTENCY_WINDOW,
  ) {
    if (file && existsSync(file)) {
      for (const line of readFileSync(file, "utf8").split("\n")) if (line) this.load(JSON.parse(line) as FileRecord);
    }
  }

  /** Whether the log holds nothing yet (a fresh server: system events are seeded). */
  get isNew(): boolean {
    return this.nextPosition === 0n;
  }

  private newSignal(): Promise<void> {
    return new Promise<void>((resolve) => {
      this.wake = resolve;
    });
  }

  /** A promise settled by the next append (take it before checking for new events: no lost wake-ups). */
  get changed(): Promise<void> {
    return this.changeSignal;
  }

  wakeAll(): void {
    const wake = this.wake;
    this.changeSignal = this.newSignal();
    wake();
  }

  currentRevision(streamName: string): bigint | "no_stream" {
    const s = this.streams.get(streamName);
    return s && s.events.length > 0 ? BigInt(s.events.length - 1) : "no_stream";
  }

  private stream(streamName: string): StreamState {
    let stream = this.streams.get(streamName);
    if (!stream) {
      stream = { events: [], revisionById: new Map() };
      this.streams.set(streamName, stream);
    }
    return stream;
  }

  private persist(record: FileRecord): void {
    if (this.file) appendFileSync(this.file, `${JSON.stringify(record)}\n`);
  }

  write(streamName: string, expected: Expected, events: ProposedEvent[]): WriteResult {
    const idempotent = this.tryIdempotent(streamName, expected, events);
    if (idempotent) {
      if (idempotent.ok) this.idempotentWrites++;
      return idempotent;
    }

    const current = this.currentRevision(streamName);
    const ok =
      expected.kind === "any" ||
      (expected.kind === "no_stream" && current === "no_stream") ||
      (expected.kind === "stream_exists" && current !== "no_stream") ||
      (expected.kind === "revision" && current === expected.revision);
    if (!ok) return { ok: false, current, expected };

    if (events.length === 0) {
      // EventStoreDB: an empty write checks the expected version and writes nothing (no position).
      return { ok: true, currentRevision: current === "no_stream" ? -1n : current, position: -1n };
    }

    const stream = this.stream(streamName);
    // A soft-deleted stream written again: EventStoreDB moves its truncate-before to the first new event.
    const undeletes = stream.events.length > 0 && stream.events[stream.events.length - 1].deleted === true;
    const createdTicks = BigInt(Date.now()) * 10_000n;
    const written: StoredEvent[] = [];
    for (const e of events) {
      const stored: StoredEvent = {
        streamName,
        revision: BigInt(stream.events.length),
        id: e.id,
        type: e.type,
        contentType: e.contentType,
        data: e.data,
        customMetadata: e.customMetadata,
        createdTicks,
        position: this.nextPosition,
      };
      this.nextPosition += recordSize(stored);
      stream.revisionById.set(e.id, stream.events.length);
      this.remember(e.id, streamName, stream.events.length);
      stream.events.push(stored);
      this.all.push(stored);
      written.push(stored);
    }
    this.persist({ op: "write", stream: streamName, events: written.map(toFile) });
    const last = written[written.length - 1];
    if (undeletes) this.writeMetadata(streamName, written[0].revision);
    this.wakeAll();
    return { ok: true, currentRevision: last.revision, position: last.position };
  }

  /**
   * A soft delete as EventStoreDB does it: the stream's metadata gets `$tb` = deleted, so stream reads
   * find nothing (StreamNotFound) while every event stays in `$all` (and in `$all` subscriptions) until a
   * scavenge. Returns the position of the metadata event.
   */
  softDelete(streamName: string): bigint {
    for (const e of this.streams.get(streamName)?.events ?? []) e.deleted = true;
    this.persist({ op: "delete", stream: streamName });
    return this.writeMetadata(streamName, DELETED_STREAM_TB);
  }

  /** Writes the stream's metadata (`$$<stream>`, type `$metadata`), as the server does on a delete. */
  private writeMetadata(streamName: string, truncateBefore: bigint): bigint {
    const result = this.write(`$$${streamName}`, { kind: "any" }, [
      {
        id: randomUUID(),
        type: "$metadata",
        contentType: "application/json",
        data: textEncoder.encode(`{"$tb":${truncateBefore}}`),
        customMetadata: new Uint8Array(),
      },
    ]);
    return result.ok ? result.position : -1n;
  }

  /**
   * Removes every soft-deleted event from `$all` and forgets its data, as a scavenge does; revisions are
   * kept (a later append continues after them). In file-backed mode the file is rewritten without them,
   * so their bytes are gone from disk too. Returns how many events went.
   */
  scavenge(): number {
    let removed = 0;
    for (const stream of this.streams.values()) {
      for (const e of stream.events) {
        if (!e.deleted || e.scavenged) continue;
        e.scavenged = true;
        e.data = new Uint8Array();
        e.customMetadata = new Uint8Array();
        stream.revisionById.delete(e.id);
        removed++;
      }
    }
    if (removed === 0) return 0;
    this.all = this.all.filter((e) => !e.scavenged);
    if (this.file) this.rewriteFile();
    return removed;
  }

  private rewriteFile(): void {
    const lines: string[] = [];
    for (const [name, stream] of this.streams) {
      const count = stream.events.filter((e) => e.scavenged).length;
      if (count > 0) lines.push(JSON.stringify({ op: "scavenged", stream: name, count } satisfies FileRecord));
    }
    for (const e of this.all) {
      lines.push(JSON.stringify({ op: "write", stream: e.streamName, events: [toFile(e)] } satisfies FileRecord));
      const stream = this.streams.get(e.streamName)!;
      // A deleted prefix that survives (nothing scavenged it yet) is marked again after its last event.
      if (e.deleted && stream.events[stream.events.length - 1] === e) lines.push(JSON.stringify({ op: "delete", stream: e.streamName } satisfies FileRecord));
    }
    lines.push(JSON.stringify({ op: "next", position: this.nextPosition.toString() } satisfies FileRecord));
    const temporary = `${this.file!}.scavenge`;
    writeFileSync(temporary, `${lines.join("\n")}\n`);
    renameSync(temporary, this.file!);
  }

  private load(record: FileRecord): void {
    if (record.op === "write") {
      const stream = this.stream(record.stream);
      for (const f of record.events) {
        const stored: StoredEvent = {
          streamName: record.stream,
          revision: BigInt(f.revision),
          id: f.id,
          type: f.type,
          contentType: f.contentType,
          data: Buffer.from(f.data, "base64"),
          customMetadata: Buffer.from(f.metadata, "base64"),
          createdTicks: BigInt(f.created),
          position: BigInt(f.position),
        };
        stream.revisionById.set(stored.id, stream.events.length);
        stream.events.push(stored);
        this.all.push(stored);
        const next = stored.position + recordSize(stored);
        if (next > this.nextPosition) this.nextPosition = next;
      }
    } else if (record.op === "delete") {
      for (const e of this.streams.get(record.stream)?.events ?? []) e.deleted = true;
    } else if (record.op === "scavenged") {
      const stream = this.stream(record.stream);
      for (let i = 0; i < record.count; i++) {
        stream.events.push({
          streamName: record.stream,
          revision: BigInt(stream.events.length),
          id: "",
          type: "",
          contentType: "",
          data: new Uint8Array(),
          customMetadata: new Uint8Array(),
          createdTicks: 0n,
          position: -1n,
          deleted: true,
          scavenged: true,
        });
      }
    } else if (BigInt(record.position) > this.nextPosition) {
      this.nextPosition = BigInt(record.position);
    }
  }

  /** Adds a written event's id to the recent ones, forgetting the oldest beyond the window. */
  private remember(id: string, stream: string, index: number): void {
    this.recentIds.delete(id);
    this.recentIds.set(id, { stream, index });
    if (this.recentIds.size > this.window) this.recentIds.delete(this.recentIds.keys().next().value as string);
  }

  /**
   * EventStoreDB's idempotency (`IndexWriter.CheckCommit`), which has two rules:
   * - expected any / stream_exists: only the cache of recently written event ids counts. Every id found
   *   there, in this stream: the write succeeds without writing anything; the first id not found: an
   *   ordinary write (duplicates, if the events were written before the cache forgot them or before a
   *   restart); a later one not found: refused as a wrong expected version ("corrupted idempotency").
   * - an exact expected revision (or no_stream, -1) behind the stream's end: the events at the revisions
   *   after it are looked up in the stream itself (durable, so across restarts too). The same ids in the
   *   same order: the write succeeds without writing anything; only a prefix: "corrupted idempotency".
   */
  private tryIdempotent(streamName: string, expected: Expected, events: ProposedEvent[]): WriteResult | undefined {
    if (events.length === 0) return undefined;
    const stream = this.streams.get(streamName);
    if (stream === undefined) return undefined;
    const corrupted = (): WriteResult => ({ ok: false, current: this.currentRevision(streamName), expected });
    if (expected.kind === "any" || expected.kind === "stream_exists") {
      let last: StoredEvent | undefined;
      for (const [i, e] of events.entries()) {
        const recent = this.recentIds.get(e.id);
        const stored = recent?.stream === streamName ? stream.events[recent.index] : undefined;
        if (stored?.id !== e.id || stored.scavenged) return i === 0 ? undefined : corrupted();
        last = stored;
      }
      return { ok: true, currentRevision: last!.revision, position: last!.position };
    }
    const first = stream.revisionById.get(events[0].id);
    if (first === undefined) return undefined;
    const expectedMatches = (expected.kind === "no_stream" && first === 0) || (expected.kind === "revision" && expected.revision === BigInt(first - 1));
    if (!expectedMatches) return undefined; // the ordinary expected-version check decides
    if (!events.every((e, i) => stream.events[first + i]?.id === e.id)) return corrupted();
    const last = stream.events[first + events.length - 1];
    return { ok: true, currentRevision: last.revision, position: last.position };
  }

  /** Index in `all` of the first event whose position is >= p. */
  lowerBound(p: bigint): number {
    let lo = 0;
    let hi = this.all.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (this.all[mid].position < p) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  }

  /** Index in `all` of the first event whose position is > p. */
  upperBound(p: bigint): number {
    let lo = 0;
    let hi = this.all.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (this.all[mid].position <= p) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  }
}

/** How far an event moves the transaction-file position: by a record size, so positions are not dense. */
function recordSize(e: StoredEvent): bigint {
  return BigInt(64 + e.streamName.length + e.type.length + e.data.length + e.customMetadata.length + 16);
}

function toFile(e: StoredEvent): Extract<FileRecord, { op: "write" }>["events"][number] {
  return {
    id: e.id,
    type: e.type,
    contentType: e.contentType,
    data: Buffer.from(e.data).toString("base64"),
    metadata: Buffer.from(e.customMetadata).toString("base64"),
    created: e.createdTicks.toString(),
    position: e.position.toString(),
    revision: e.revision.toString(),
  };
}

// ---------------------------------------------------------------------------------------------------------
// Protocol helpers

const textDecoder = new TextDecoder();
const textEncoder = new TextEncoder();
const UUID_RE = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

function streamNameOf(identifier: SharedPb.StreamIdentifier | undefined): string {
  if (!identifier) throw new InvalidRequest("missing stream identifier");
  return textDecoder.decode(identifier.getStreamName_asU8());
}

function streamIdentifier(name: string): SharedPb.StreamIdentifier {
  const id = new sharedPb.StreamIdentifier();
  id.setStreamName(textEncoder.encode(name));
  return id;
}

function parseUuid(uuid: SharedPb.UUID | undefined): string {
  if (!uuid) throw new InvalidRequest("missing event id");
  let text: string;
  if (uuid.hasStructured()) {
    const s = uuid.getStructured()!;
    const msb = BigInt.asUintN(64, BigInt(s.getMostSignificantBits()));
    const lsb = BigInt.asUintN(64, BigInt(s.getLeastSignificantBits()));
    const hex = ((msb << 64n) | lsb).toString(16).padStart(32, "0");
    text = `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
  } else {
    text = uuid.getString();
  }
  if (!UUID_RE.test(text)) throw new InvalidRequest(`invalid UUID "${text}"`);
  return text.toLowerCase();
}

function makeUuid(id: string, structured: boolean): SharedPb.UUID {
  const uuid = new sharedPb.UUID();
  if (!structured) {
    uuid.setString(id);
    return uuid;
  }
  const hex = BigInt(`0x${id.replace(/-/g, "")}`);
  const s = new sharedPb.UUID.Structured();
  s.setMostSignificantBits(BigInt.asIntN(64, hex >> 64n).toString());
  s.setLeastSignificantBits(BigInt.asIntN(64, hex & 0xffff_ffff_ffff_ffffn).toString());
  uuid.setStructured(s);
  return uuid;
}

function proposedEvent(message: StreamsPb.AppendReq.ProposedMessage | StreamsPb.BatchAppendReq.ProposedMessage): ProposedEvent {
  const metadata = message.getMetadataMap();
  const type = metadata.get("type");
  if (type === undefined) throw new InvalidRequest("required metadata property missing: type");
  const contentType = metadata.get("content-type");
  if (contentType === undefined) throw new InvalidRequest("required metadata property missing: content-type");
  return {
    id: parseUuid(message.getId()),
    type,
    contentType,
    data: message.getData_asU8(),
    customMetadata: message.getCustomMetadata_asU8(),
  };
}

function invalidArgument(message: string): Partial<grpc.StatusObject> {
  return { code: grpc.status.INVALID_ARGUMENT, details: message };
}

function recordedEvent(e: StoredEvent, structuredUuid: boolean): StreamsPb.ReadResp.ReadEvent.RecordedEvent {
  const r = new streamsPb.ReadResp.ReadEvent.RecordedEvent();
  r.setId(makeUuid(e.id, structuredUuid));
  r.setStreamIdentifier(streamIdentifier(e.streamName));
  r.setStreamRevision(e.revision.toString());
  r.setCommitPosition(e.position.toString());
  r.setPreparePosition(e.position.toString());
  const metadata = r.getMetadataMap();
  metadata.set("type", e.type);
  metadata.set("content-type", e.contentType);
  metadata.set("created", e.createdTicks.toString());
  r.setData(e.data);
  r.setCustomMetadata(e.customMetadata);
  return r;
}

function eventResponse(e: StoredEvent, structuredUuid: boolean): ReadResp {
  const readEvent = new streamsPb.ReadResp.ReadEvent();
  readEvent.setEvent(recordedEvent(e, structuredUuid));
  readEvent.setCommitPosition(e.position.toString());
  const resp = new streamsPb.ReadResp();
  resp.setEvent(readEvent);
  return resp;
}

interface Filter {
  on: "stream" | "type";
  regex?: RegExp;
  prefixes: string[];
  /** Checkpoint every `window * multiplier` considered events (EventStoreDB's checkpoint interval). */
  checkpointEvery: number;
}

function parseFilter(options: StreamsPb.ReadReq.Options): Filter | undefined {
  if (!options.hasFilter()) return undefined;
  const f = options.getFilter()!;
  let expr: StreamsPb.ReadReq.Options.FilterOptions.Expression | undefined;
  let on: Filter["on"];
  if (f.hasStreamIdentifier()) {
    expr = f.getStreamIdentifier();
    on = "stream";
  } else if (f.hasEventType()) {
    expr = f.getEventType();
    on = "type";
  } else {
    throw new InvalidRequest("filter without stream identifier or event type");
  }
  const regexText = expr?.getRegex() ?? "";
  const window = f.hasMax() ? f.getMax() : 32;
  const multiplier = f.getCheckpointintervalmultiplier() || 1;
  return {
    on,
    regex: regexText ? new RegExp(regexText) : undefined,
    prefixes: expr?.getPrefixList() ?? [],
    checkpointEvery: Math.max(1, window * multiplier),
  };
}

function filterAllows(filter: Filter | undefined, e: StoredEvent): boolean {
  if (!filter) return true;
  const value = filter.on === "stream" ? e.streamName : e.type;
  if (filter.regex) return filter.regex.test(value);
  return filter.prefixes.some((p) => value.startsWith(p));
}

// ---------------------------------------------------------------------------------------------------------
// Server

export async function startEsdbTestDouble(options: EsdbTestDoubleOptions = {}): Promise<EsdbTestDouble> {
  const batchAppendEnabled = options.batchAppend ?? true;
  const caughtUpMessages = options.caughtUpMessages ?? true;
  const maxAppendSize = options.maxAppendSize ?? 1_048_576;
  const tooLarge = (events: ProposedEvent[]) => events.reduce((sum, e) => sum + sizeOnDisk(e), 0) > maxAppendSize;
  /** The injected failure of an append, if any (see `beforeAppend`). */
  const injectedFailure = (streamName: string, events: ProposedEvent[]): string | undefined => {
    try {
      options.beforeAppend?.(streamName, events.length);
      return undefined;
    } catch (err) {
      return err instanceof Error ? err.message : String(err);
    }
  };
  // A new log on every start: what it remembers of recent writes (their ids, for idempotency) starts empty.
  const log = new Log(options.dataFile, options.idempotencyWindow);
  let closing = false;

  // A fresh EventStoreDB is not empty: it holds system events. Seed a few so that the adapter's
  // exclusion of system streams/types is exercised from the first read.
  if (log.isNew) {
    const systemEvent = (type: string, data: unknown): ProposedEvent => ({
      id: randomUUID(),
      type,
      contentType: "application/json",
      data: textEncoder.encode(JSON.stringify(data)),
      customMetadata: new Uint8Array(),
    });
    log.write("$$$scavenges", { kind: "any" }, [systemEvent("$metadata", { $maxAge: 2592000 })]);
    log.write("$users", { kind: "any" }, [systemEvent("$User", { loginName: "admin" })]);
    log.write("$settings", { kind: "any" }, [systemEvent("$settings", { $userStreamAcl: {} })]);
  }

  // ------------------------------------------------------------------------------------------- faults
  const stats: EsdbTestDoubleStats = {
    connections: 0,
    cutConnections: 0,
    notLeaderAnswers: 0,
    delayedCalls: 0,
    ambiguousAppends: 0,
    deniedCalls: 0,
    idempotentAppends: 0,
  };
  let notLeaderHint: { host: string; port: number } | undefined;
  let delayMs = 0;
  type Which = (stream: string, types: string[]) => boolean;
  let ambiguous: { left: number; how: AmbiguousAnswer; which?: Which } = { left: 0, how: "timeout" };
  /** Set by a "crash" answer: the front stops listening (close() waits for it). */
  let crashed: Promise<void> | undefined;
  /** Settled by heal() and close(): releases the calls a delay holds. */
  let released = resolvable();
  /** The gate of `holdAppends`, while it holds. */
  interface HeldAppend {
    stream: string;
    types: string[];
    apply(): void;
    discard(): void;
  }
  interface Gate {
    which: Which;
    held: HeldAppend[];
    waiters: { count: number; resolve: () => void }[];
  }
  let gate: Gate | undefined;
  /** Holds the append when the gate picks it (true: `apply` or `discard` runs later), else false. */
  const holdAtGate = (stream: string, types: string[], apply: () => void, discard: () => void): boolean => {
    if (!gate || !gate.which(stream, types)) return false;
    gate.held.push({ stream, types, apply, discard });
    const count = gate.held.length;
    gate.waiters = gate.waiters.filter((w) => (w.count <= count ? (w.resolve(), false) : true));
    return true;
  };
  /** Ends the gate: its held appends are applied (in arrival order) or discarded. */
  const openGate = (how: "apply" | "discard"): number => {
    const ending = gate;
    gate = undefined;
    if (!ending) return 0;
    for (const h of ending.held) {
      try {
        if (how === "apply") h.apply();
        else h.discard();
      } catch {
        // the call went away meanwhile: nothing to answer
      }
    }
    return ending.held.length;
  };
  const expectedAuthorization = options.credentials
    ? `Basic ${Buffer.from(`${options.credentials.username}:${options.credentials.password}`).toString("base64")}`
    : undefined;
  let front: FaultFront | undefined;

  const trailers = (entries: Record<string, string>): grpc.Metadata => {
    const metadata = new grpc.Metadata();
    for (const [key, value] of Object.entries(entries)) metadata.set(key, value);
    return metadata;
  };

  /** Why a Streams call is refused before being served, as EventStoreDB answers it; undefined to serve it. */
  const refusal = (call: { metadata: grpc.Metadata }): Partial<grpc.StatusObject> | undefined => {
    if (expectedAuthorization !== undefined) {
      const given = call.metadata.get("authorization")[0];
      if (given === undefined) {
        // Anonymous: no access to user streams nor `$all`.
        stats.deniedCalls++;
        return { code: grpc.status.PERMISSION_DENIED, details: "Access denied", metadata: trailers({ exception: "access-denied" }) };
      }
      if (given !== expectedAuthorization) {
        stats.deniedCalls++;
        return { code: grpc.status.UNAUTHENTICATED, details: "Bad username or password" };
      }
    }
    if (notLeaderHint) {
      // What a follower answers a call that requires the leader (the client follows the hint).
      stats.notLeaderAnswers++;
      return {
        code: grpc.status.NOT_FOUND,
        details: "Leader info available",
        metadata: trailers({ exception: "not-leader", "leader-endpoint-host": notLeaderHint.host, "leader-endpoint-port": String(notLeaderHint.port) }),
      };
    }
    return undefined;
  };

  /**
   * Holds a call while responses are delayed: "serve" once the delay has passed (or heal()), "gone" when
   * the client gave up meanwhile (a gRPC deadline cancels the call), "deadline" when the request's own
   * deadline passed first (BatchAppend carries one in its options: the server answers Timeout).
   */
  const held = async (call: { cancelled: boolean }, deadline?: number): Promise<"serve" | "gone" | "deadline"> => {
    if (delayMs <= 0) return "serve";
    stats.delayedCalls++;
    const until = Date.now() + delayMs;
    // The request's deadline comes before the delay ends: the wait ends at it.
    const deadlineFirst = deadline !== undefined && deadline < until;
    const wait = deadlineFirst ? Math.max(0, deadline - Date.now()) : delayMs;
    let timer: NodeJS.Timeout | undefined;
    // Which ended the wait, the timer or heal(): a timer may fire a millisecond before Date.now() reaches the
    // deadline it was set for, so the clock is not asked again.
    const ended = await Promise.race([
      new Promise<"timer">((resolve) => (timer = setTimeout(() => resolve("timer"), wait))),
      released.promise.then(() => "healed" as const),
    ]);
    clearTimeout(timer);
    if (call.cancelled || closing) return "gone";
    return ended === "timer" && deadlineFirst ? "deadline" : "serve";
  };

  /**
   * Whether this applied append is to be answered as a failure (an ambiguous write); counts it down. A
   * "crash" cuts every connection and stops listening here; the caller sends no answer, as for "drop".
   */
  const takeAmbiguous = (streamName: string, events: ProposedEvent[]): AmbiguousAnswer | undefined => {
    if (ambiguous.left <= 0) return undefined;
    if (
      ambiguous.which &&
      !ambiguous.which(
        streamName,
        events.map((e) => e.type),
      )
    )
      return undefined;
    ambiguous.left--;
    stats.ambiguousAppends++;
    if (ambiguous.how === "crash") crashed ??= front?.refuse();
    return ambiguous.how;
  };

  const server = new grpc.Server();

  server.addService(serverFeaturesGrpc.ServerFeaturesService, {
    getSupportedMethods(
      _call: grpc.ServerUnaryCall<SharedPb.Empty, ServerFeaturesPb.SupportedMethods>,
      callback: grpc.sendUnaryData<ServerFeaturesPb.SupportedMethods>,
    ) {
      const methods = new serverFeaturesPb.SupportedMethods();
      methods.setEventStoreServerVersion("24.10.0-test-double");
      const add = (serviceName: string, methodName: string, features: string[] = []) => {
        const m = new serverFeaturesPb.SupportedMethod();
        m.setServiceName(serviceName);
        m.setMethodName(methodName);
        m.setFeaturesList(features);
        methods.addMethods(m);
      };
      add("event_store.client.streams.streams", "read", ["position", "events"]);
      add("event_store.client.streams.streams", "append");
      if (batchAppendEnabled) add("event_store.client.streams.streams", "batchappend");
      add("event_store.client.streams.streams", "delete");
      add("event_store.client.operations.operations", "startscavenge");
      add("event_store.client.server_features.serverfeatures", "getsupportedmethods");
      callback(null, methods);
    },
  });

  server.addService(operationsGrpc.OperationsService, {
    startScavenge(
      call: grpc.ServerUnaryCall<OperationsPb.StartScavengeReq, OperationsPb.ScavengeResp>,
      callback: grpc.sendUnaryData<OperationsPb.ScavengeResp>,
    ) {
      const refused = refusal(call);
      if (refused) return callback(refused);
      // EventStoreDB starts the scavenge in the background and answers Started; this one is done by then.
      log.scavenge();
      const resp = new operationsPb.ScavengeResp();
      resp.setScavengeId(randomUUID());
      resp.setScavengeResult(operationsPb.ScavengeResp.ScavengeResult.STARTED);
      callback(null, resp);
    },
  });

  const expectedFrom = (o: StreamsPb.AppendReq.Options | StreamsPb.BatchAppendReq.Options, revisionCase: "revision" | "streamPosition"): Expected => {
    if (o.hasAny()) return { kind: "any" };
    if (o.hasNoStream()) return { kind: "no_stream" };
    if (o.hasStreamExists()) return { kind: "stream_exists" };
    if (revisionCase === "revision" && "hasRevision" in o && o.hasRevision()) return { kind: "revision", revision: BigInt(o.getRevision()) };
    if (revisionCase === "streamPosition" && "hasStreamPosition" in o && o.hasStreamPosition())
      return { kind: "revision", revision: BigInt(o.getStreamPosition()) };
    throw new InvalidRequest("missing expected stream revision");
  };

  const handlers: grpc.UntypedServiceImplementation = {
    delete(call: grpc.ServerUnaryCall<StreamsPb.DeleteReq, StreamsPb.DeleteResp>, callback: grpc.sendUnaryData<StreamsPb.DeleteResp>) {
      const refused = refusal(call);
      if (refused) return callback(refused);
      void held(call).then((outcome) => {
        if (outcome !== "serve") return;
        try {
          const streamName = streamNameOf(call.request.getOptions()?.getStreamIdentifier());
          const position = log.softDelete(streamName);
          const resp = new streamsPb.DeleteResp();
          const pos = new streamsPb.DeleteResp.Position();
          pos.setCommitPosition(position.toString());
          pos.setPreparePosition(position.toString());
          resp.setPosition(pos);
          callback(null, resp);
        } catch (err) {
          callback(invalidArgument(err instanceof Error ? err.message : String(err)));
        }
      });
    },
    append(call: grpc.ServerReadableStream<AppendReq, AppendResp>, callback: grpc.sendUnaryData<AppendResp>) {
      let header: StreamsPb.AppendReq.Options | undefined;
      const proposed: ProposedEvent[] = [];
      let failed = false;
      const fail = (err: unknown) => {
        if (failed) return;
        failed = true;
        callback(invalidArgument(err instanceof Error ? err.message : String(err)));
      };
      call.on("data", (req: AppendReq) => {
        if (failed) return;
        try {
          if (req.hasOptions()) {
            if (header) throw new InvalidRequest("options sent twice");
            header = req.getOptions();
          } else if (req.hasProposedMessage()) {
            if (!header) throw new InvalidRequest("proposed message before options");
            proposed.push(proposedEvent(req.getProposedMessage()!));
          }
        } catch (err) {
          fail(err);
        }
      });
      call.on("error", () => {
        failed = true;
      });
      call.on("end", () => {
        if (failed) return;
        const refused = refusal(call);
        if (refused) {
          failed = true;
          return callback(refused);
        }
        void held(call).then((outcome) => {
          if (outcome !== "serve" || failed) return;
          const proceed = () => {
            if (failed || closing) return;
            try {
              answerAppend();
            } catch (err) {
              fail(err);
            }
          };
          const discard = () => {
            if (failed || closing) return;
            failed = true;
            callback({ code: grpc.status.UNAVAILABLE, details: "Connection lost before the write" });
          };
          let stream: string | undefined;
          try {
            stream = gate && header ? streamNameOf(header.getStreamIdentifier()) : undefined;
          } catch {
            stream = undefined; // answerAppend reports it
          }
          if (
            stream === undefined ||
            !holdAtGate(
              stream,
              proposed.map((e) => e.type),
              proceed,
              discard,
            )
          )
            proceed();
        });
      });
      const answerAppend = () => {
        if (!header) throw new InvalidRequest("append without options");
        const streamName = streamNameOf(header.getStreamIdentifier());
        const expected = expectedFrom(header, "revision");
        if (tooLarge(proposed)) {
          failed = true;
          callback({
            code: grpc.status.INVALID_ARGUMENT,
            details: `Maximum Append Size of ${maxAppendSize} Exceeded.`,
            metadata: trailers({ exception: "maximum-append-size-exceeded", "maximum-append-size": String(maxAppendSize) }),
          });
          return;
        }
        const injected = injectedFailure(streamName, proposed);
        if (injected !== undefined) {
          failed = true;
          callback({ code: grpc.status.UNAVAILABLE, details: injected });
          return;
        }
        const result = log.write(streamName, expected, proposed);
        const resp = new streamsPb.AppendResp();
        if (result.ok) {
          const ambiguousHow = takeAmbiguous(streamName, proposed);
          if (ambiguousHow === "crash") return; // applied; the server went down before answering
          if (ambiguousHow === "drop") return void front?.cutAll(); // applied; the answer is lost with the connection
          if (ambiguousHow === "timeout") {
            // EventStoreDB's commit timeout: "the write may or may not have been applied".
            failed = true;
            callback({ code: grpc.status.DEADLINE_EXCEEDED, details: "Operation timed out" });
            return;
          }
          const success = new streamsPb.AppendResp.Success();
          if (result.currentRevision < 0n) success.setNoStream(new sharedPb.Empty());
          else success.setCurrentRevision(result.currentRevision.toString());
          if (result.position < 0n) success.setNoPosition(new sharedPb.Empty());
          else {
            const pos = new streamsPb.AppendResp.Position();
            pos.setCommitPosition(result.position.toString());
            pos.setPreparePosition(result.position.toString());
            success.setPosition(pos);
          }
          resp.setSuccess(success);
        } else {
          const wev = new streamsPb.AppendResp.WrongExpectedVersion();
          if (result.current === "no_stream") {
            wev.setCurrentNoStream(new sharedPb.Empty());
            wev.setNoStream2060(new sharedPb.Empty());
          } else {
            wev.setCurrentRevision(result.current.toString());
            wev.setCurrentRevision2060(Number(result.current));
          }
          const e = result.expected;
          if (e.kind === "revision") {
            wev.setExpectedRevision(e.revision.toString());
            wev.setExpectedRevision2060(Number(e.revision));
          } else if (e.kind === "no_stream") {
            wev.setExpectedNoStream(new sharedPb.Empty());
          } else if (e.kind === "stream_exists") {
            wev.setExpectedStreamExists(new sharedPb.Empty());
            wev.setStreamExists2060(new sharedPb.Empty());
          } else {
            wev.setExpectedAny(new sharedPb.Empty());
            wev.setAny2060(new sharedPb.Empty());
          }
          resp.setWrongExpectedVersion(wev);
        }
        callback(null, resp);
      };
    },

    batchAppend(call: grpc.ServerDuplexStream<BatchAppendReq, BatchAppendResp>) {
      const refused = refusal(call);
      if (refused) {
        call.emit("error", refused);
        return;
      }
      const pending = new Map<string, { streamName: string; expected: Expected; events: ProposedEvent[] }>();
      /** Requests are answered in order, each after the delay (if any) has passed. */
      let queue = Promise.resolve();
      const errorStatus = (code: grpc.status, message: string, typeName: string, detail: Uint8Array): StatusPb.Status => {
        const details = new googleAnyPb.Any();
        details.pack(detail, typeName);
        const status = new statusPb.Status();
        status.setCode(code as number as StatusPb.Status.AsObject["code"]);
        status.setMessage(message);
        status.setDetails(details);
        return status;
      };
      const answer = (req: BatchAppendReq): BatchAppendResp | undefined => {
        const resp = new streamsPb.BatchAppendResp();
        resp.setCorrelationId(req.getCorrelationId());
        let streamName: string | undefined;
        try {
          const correlationId = parseUuid(req.getCorrelationId());
          if (req.hasOptions()) {
            const o = req.getOptions()!;
            streamName = streamNameOf(o.getStreamIdentifier());
            pending.set(correlationId, { streamName, expected: expectedFrom(o, "streamPosition"), events: [] });
          }
          const write = pending.get(correlationId);
          if (!write) return undefined; // like the server: chunks of an unknown (timed-out) write are dropped
          streamName = write.streamName;
          for (const m of req.getProposedMessagesList()) write.events.push(proposedEvent(m));
          if (!req.getIsFinal()) return undefined;
          pending.delete(correlationId);
          resp.setStreamIdentifier(streamIdentifier(write.streamName));
          if (tooLarge(write.events)) {
            const exceeded = new sharedPb.MaximumAppendSizeExceeded();
            exceeded.setMaxappendsize(maxAppendSize);
            resp.setError(
              errorStatus(
                grpc.status.INVALID_ARGUMENT,
                `Maximum Append Size of ${maxAppendSize} Exceeded.`,
                "event_store.client.MaximumAppendSizeExceeded",
                exceeded.serializeBinary(),
              ),
            );
            return resp;
          }
          const injected = injectedFailure(write.streamName, write.events);
          if (injected !== undefined) {
            // The client can only decode packed details: an `Unknown` one becomes its UnknownError.
            resp.setError(errorStatus(grpc.status.UNAVAILABLE, injected, "event_store.client.Unknown", new sharedPb.Unknown().serializeBinary()));
            return resp;
          }
          const result = log.write(write.streamName, write.expected, write.events);
          if (result.ok) {
            const ambiguousHow = takeAmbiguous(write.streamName, write.events);
            if (ambiguousHow === "crash") return undefined; // applied; the server went down before answering
            if (ambiguousHow === "drop") {
              front?.cutAll(); // applied; the answer is lost with the connection
              return undefined;
            }
            if (ambiguousHow === "timeout") {
              // EventStoreDB's commit timeout: "the write may or may not have been applied" (the client's DeadlineExceededError).
              resp.setError(
                errorStatus(grpc.status.DEADLINE_EXCEEDED, "Operation timed out", "event_store.client.Timeout", new sharedPb.Timeout().serializeBinary()),
              );
              return resp;
            }
            const success = new streamsPb.BatchAppendResp.Success();
            if (result.currentRevision < 0n) success.setNoStream(new googleEmptyPb.Empty());
            else success.setCurrentRevision(result.currentRevision.toString());
            if (result.position < 0n) success.setNoPosition(new googleEmptyPb.Empty());
            else {
              const pos = new sharedPb.AllStreamPosition();
              pos.setCommitPosition(result.position.toString());
              pos.setPreparePosition(result.position.toString());
              success.setPosition(pos);
            }
            resp.setSuccess(success);
          } else {
            const wev = new sharedPb.WrongExpectedVersion();
            if (result.current === "no_stream") wev.setCurrentNoStream(new googleEmptyPb.Empty());
            else wev.setCurrentStreamRevision(result.current.toString());
            const e = result.expected;
            if (e.kind === "revision") wev.setExpectedStreamPosition(e.revision.toString());
            else if (e.kind === "no_stream") wev.setExpectedNoStream(new googleEmptyPb.Empty());
            else if (e.kind === "stream_exists") wev.setExpectedStreamExists(new googleEmptyPb.Empty());
            else wev.setExpectedAny(new googleEmptyPb.Empty());
            resp.setError(
              errorStatus(grpc.status.FAILED_PRECONDITION, "WrongExpectedVersion", "event_store.client.WrongExpectedVersion", wev.serializeBinary()),
            );
          }
        } catch (err) {
          const badRequest = new sharedPb.BadRequest();
          const message = err instanceof Error ? err.message : String(err);
          badRequest.setMessage(message);
          resp.setError(errorStatus(grpc.status.INVALID_ARGUMENT, message, "event_store.client.BadRequest", badRequest.serializeBinary()));
          resp.setStreamIdentifier(streamIdentifier(streamName ?? ""));
        }
        return resp;
      };
      /** Each write's deadline (ms since the epoch), from the options of its first request. */
      const deadlines = new Map<string, number>();
      /** The stream and event types of the write that `req` (its final request) completes; undefined when malformed (answer() says why). */
      const writeOf = (req: BatchAppendReq): { stream: string; types: string[] } | undefined => {
        try {
          const write = pending.get(parseUuid(req.getCorrelationId()));
          const stream = req.hasOptions() ? streamNameOf(req.getOptions()!.getStreamIdentifier()) : write?.streamName;
          if (stream === undefined) return undefined;
          const types = [...(req.hasOptions() ? [] : (write?.events ?? [])), ...req.getProposedMessagesList().map(proposedEvent)].map((e) => e.type);
          return { stream, types };
        } catch {
          return undefined;
        }
      };
      /** A write the gate drops: forgotten unapplied, answered as a lost connection (the client may retry). */
      const discardWrite = (req: BatchAppendReq) => {
        const correlationId = parseUuid(req.getCorrelationId());
        const streamName = req.hasOptions() ? streamNameOf(req.getOptions()!.getStreamIdentifier()) : (pending.get(correlationId)?.streamName ?? "");
        pending.delete(correlationId);
        const resp = new streamsPb.BatchAppendResp();
        resp.setCorrelationId(req.getCorrelationId());
        resp.setStreamIdentifier(streamIdentifier(streamName));
        resp.setError(
          errorStatus(grpc.status.UNAVAILABLE, "Connection lost before the write", "event_store.client.Unknown", new sharedPb.Unknown().serializeBinary()),
        );
        if (!call.cancelled && !closing) call.write(resp);
      };
      call.on("data", (req: BatchAppendReq) => {
        queue = queue.then(async () => {
          const correlation = Buffer.from(req.getCorrelationId()?.serializeBinary() ?? []).toString("hex");
          const stated = req.hasOptions() && req.getOptions()!.hasDeadline() ? req.getOptions()!.getDeadline()!.toDate().getTime() : undefined;
          if (stated !== undefined) deadlines.set(correlation, stated);
          const outcome = await held(call, deadlines.get(correlation));
          if (outcome === "gone") return;
          if (outcome === "deadline") {
            if (!req.getIsFinal()) return; // answered once, for the final request of the write
            deadlines.delete(correlation);
            const resp = new streamsPb.BatchAppendResp();
            resp.setCorrelationId(req.getCorrelationId());
            resp.setStreamIdentifier(streamIdentifier(""));
            resp.setError(
              errorStatus(grpc.status.DEADLINE_EXCEEDED, "Operation timed out", "event_store.client.Timeout", new sharedPb.Timeout().serializeBinary()),
            );
            if (!call.cancelled && !closing) call.write(resp);
            return;
          }
          if (req.getIsFinal()) deadlines.delete(correlation);
          const reply = () => {
            const resp = answer(req);
            if (resp && !call.cancelled && !closing) call.write(resp);
          };
          const gated = gate && req.getIsFinal() ? writeOf(req) : undefined;
          if (gated && holdAtGate(gated.stream, gated.types, reply, () => discardWrite(req))) return; // answered at release() or drop()
          reply();
        });
      });
      call.on("end", () => void queue.then(() => call.end()));
      call.on("error", () => undefined);
    },

    read(call: grpc.ServerWritableStream<ReadReq, ReadResp>) {
      const refused = refusal(call);
      if (refused) {
        call.emit("error", refused);
        return;
      }
      held(call)
        .then((outcome) => (outcome === "serve" ? serveRead(call) : undefined))
        .catch((err: unknown) => {
          if (call.cancelled || closing) return;
          call.emit("error", invalidArgument(err instanceof Error ? err.message : String(err)));
        });
    },
  };
  // Unregistered methods answer UNIMPLEMENTED, as a server without them would.
  if (!batchAppendEnabled) delete handlers.batchAppend;
  server.addService(streamsGrpc.StreamsService, handlers);

  /** Settles when the call is cancelled by the client, or finished, or the double is closing. */
  const closeSignals = new Set<() => void>();
  const cancellation = (call: grpc.ServerWritableStream<ReadReq, ReadResp>): Promise<void> =>
    new Promise<void>((resolve) => {
      const done = () => {
        closeSignals.delete(done);
        resolve();
      };
      if (call.cancelled || closing) return done();
      closeSignals.add(done);
      call.once("cancelled", done);
      call.once("close", done);
      call.once("finish", done);
    });

  /** Writes with backpressure; false when the call went away. */
  const send = async (call: grpc.ServerWritableStream<ReadReq, ReadResp>, resp: ReadResp, cancelled: Promise<void>): Promise<boolean> => {
    if (call.cancelled || closing) return false;
    if (!call.write(resp)) {
      const drained = new Promise<boolean>((resolve) => call.once("drain", () => resolve(true)));
      const ok = await Promise.race([drained, cancelled.then(() => false)]);
      if (!ok) return false;
    }
    return !call.cancelled && !closing;
  };

  async function serveRead(call: grpc.ServerWritableStream<ReadReq, ReadResp>): Promise<void> {
    const options = call.request.getOptions();
    if (!options) throw new InvalidRequest("read without options");
    const structuredUuid = options.getUuidOption()?.hasStructured() ?? false;
    const backwards = options.getReadDirection() === streamsPb.ReadReq.Options.ReadDirection.BACKWARDS;
    const filter = parseFilter(options);
    const cancelled = cancellation(call);

    if (options.hasSubscription()) {
      if (backwards) throw new InvalidRequest("subscriptions only go forwards");
      await serveSubscription(call, options, filter, structuredUuid, cancelled);
      return;
    }

    const count = BigInt(options.getCount() || "0");
    const events: StoredEvent[] = [];
    if (options.hasStream()) {
      if (filter) throw new InvalidRequest("stream reads take no filter");
      const s = options.getStream()!;
      const streamName = streamNameOf(s.getStreamIdentifier());
      const stream = log.streams.get(streamName);
      // A soft-deleted stream reads as not found (its truncate-before is past its last event).
      if (!stream || stream.events.every((e) => e.deleted)) {
        const resp = new streamsPb.ReadResp();
        const notFound = new streamsPb.ReadResp.StreamNotFound();
        notFound.setStreamIdentifier(streamIdentifier(streamName));
        resp.setStreamNotFound(notFound);
        await send(call, resp, cancelled);
        call.end();
        return;
      }
      const last = stream.events.length - 1;
      if (!backwards) {
        const from = s.hasRevision() ? BigInt(s.getRevision()) : s.hasEnd() ? BigInt(last + 1) : 0n;
        for (let i = from; i <= BigInt(last) && BigInt(events.length) < count; i++)
          if (!stream.events[Number(i)].deleted) events.push(stream.events[Number(i)]);
      } else {
        const from = s.hasRevision() ? BigInt(s.getRevision()) : s.hasStart() ? 0n : BigInt(last);
        const top = from > BigInt(last) ? BigInt(last) : from;
        for (let i = top; i >= 0n && BigInt(events.length) < count; i--) if (!stream.events[Number(i)].deleted) events.push(stream.events[Number(i)]);
      }
    } else if (options.hasAll()) {
      // `$all` holds soft-deleted events too, until a scavenge removes them.
      const a = options.getAll()!;
      if (!backwards) {
        let i = a.hasPosition() ? log.lowerBound(BigInt(a.getPosition()!.getCommitPosition())) : a.hasEnd() ? log.all.length : 0;
        for (; i < log.all.length && BigInt(events.length) < count; i++) {
          if (filterAllows(filter, log.all[i])) events.push(log.all[i]);
        }
      } else {
        // Backwards from a position returns the events before it (EventStoreDB post-position semantics).
        let i = a.hasPosition() ? log.lowerBound(BigInt(a.getPosition()!.getCommitPosition())) - 1 : a.hasStart() ? -1 : log.all.length - 1;
        for (; i >= 0 && BigInt(events.length) < count; i--) {
          if (filterAllows(filter, log.all[i])) events.push(log.all[i]);
        }
      }
    } else {
      throw new InvalidRequest("read of neither a stream nor $all");
    }
    for (const e of events) {
      if (!(await send(call, eventResponse(e, structuredUuid), cancelled))) return;
    }
    call.end();
  }

  async function serveSubscription(
    call: grpc.ServerWritableStream<ReadReq, ReadResp>,
    options: StreamsPb.ReadReq.Options,
    filter: Filter | undefined,
    structuredUuid: boolean,
    cancelled: Promise<void>,
  ): Promise<void> {
    const confirmation = new streamsPb.ReadResp.SubscriptionConfirmation();
    confirmation.setSubscriptionId(randomUUID());
    const confirm = new streamsPb.ReadResp();
    confirm.setConfirmation(confirmation);

    // The source: the next event after the cursor, of either one stream (by revision) or the whole log
    // (by position: a scavenge may remove events from `$all` under a live subscription). Starts are EXCLUSIVE.
    let next: () => StoredEvent | undefined;
    if (options.hasStream()) {
      if (filter) throw new InvalidRequest("stream subscriptions take no filter");
      const s = options.getStream()!;
      const streamName = streamNameOf(s.getStreamIdentifier());
      const events = () => log.streams.get(streamName)?.events ?? [];
      let cursor = s.hasRevision() ? Number(BigInt(s.getRevision()) + 1n) : s.hasEnd() ? events().length : 0;
      next = () => {
        const e = events()[cursor];
        if (e) cursor++;
        return e;
      };
    } else if (options.hasAll()) {
      const a = options.getAll()!;
      let after = a.hasPosition()
        ? BigInt(a.getPosition()!.getCommitPosition())
        : a.hasEnd() && log.all.length > 0
          ? log.all[log.all.length - 1].position
          : -1n;
      next = () => {
        const e = log.all[log.upperBound(after)];
        if (e) after = e.position;
        return e;
      };
    } else {
      throw new InvalidRequest("subscription to neither a stream nor $all");
    }
    if (!(await send(call, confirm, cancelled))) return;

    let caughtUpSent = false;
    let considered = 0;
    let isCancelled = false;
    void cancelled.then(() => {
      isCancelled = true;
    });
    while (!isCancelled && !closing && !call.cancelled) {
      // Take the change signal before looking: an append in between cannot be missed.
      let changed = log.changed;
      for (let e = next(); e !== undefined; e = next()) {
        // A stream subscription skips what a soft delete truncated; `$all` still has it until a scavenge.
        if (!(options.hasStream() && e.deleted) && filterAllows(filter, e)) {
          if (!(await send(call, eventResponse(e, structuredUuid), cancelled))) return;
        }
        if (filter && ++considered % filter.checkpointEvery === 0) {
          const checkpoint = new streamsPb.ReadResp.Checkpoint();
          checkpoint.setCommitPosition(e.position.toString());
          checkpoint.setPreparePosition(e.position.toString());
          const resp = new streamsPb.ReadResp();
          resp.setCheckpoint(checkpoint);
          if (!(await send(call, resp, cancelled))) return;
        }
        changed = log.changed;
      }
      if (!caughtUpSent && caughtUpMessages) {
        caughtUpSent = true;
        const resp = new streamsPb.ReadResp();
        resp.setCaughtUp(new streamsPb.ReadResp.CaughtUp());
        if (!(await send(call, resp, cancelled))) return;
        continue;
      }
      await Promise.race([changed, cancelled]);
    }
  }

  const tls = options.tls;
  const backendPort = await new Promise<number>((resolve, reject) => {
    const credentials = tls
      ? grpc.ServerCredentials.createSsl(null, [{ cert_chain: Buffer.from(tls.cert), private_key: Buffer.from(tls.key) }], false)
      : grpc.ServerCredentials.createInsecure();
    server.bindAsync("127.0.0.1:0", credentials, (err, boundPort) => (err ? reject(err) : resolve(boundPort)));
  });
  front = await FaultFront.open(backendPort, options.port ?? 0);
  const openFront = front;
  const port = front.port;
  const userInfo = options.credentials ? `${encodeURIComponent(options.credentials.username)}:${encodeURIComponent(options.credentials.password)}@` : "";
  const query = tls ? `tls=true&tlsCAFile=${encodeURIComponent(tls.caFile)}` : "tls=false";

  const close = async () => {
    if (closing) return;
    closing = true;
    openGate("discard");
    released.resolve();
    for (const resolve of [...closeSignals]) resolve();
    log.wakeAll();
    await openFront.close();
    if (crashed) await crashed;
    server.forceShutdown();
  };
  const handle: EsdbTestDouble = {
    connectionString: `esdb://${userInfo}127.0.0.1:${port}?${query}`,
    port,
    close,
    stop: close,
    async restart(overrides = {}) {
      if (!options.dataFile) throw new Error("restart needs a file-backed double (dataFile)");
      await close();
      return startEsdbTestDouble({ ...options, ...overrides, port });
    },
    cutConnections() {
      return openFront.cutAll();
    },
    refuseConnections() {
      return openFront.refuse();
    },
    answerNotLeader(leader = { host: "127.0.0.1", port }) {
      notLeaderHint = leader;
    },
    delayResponses(ms: number) {
      delayMs = ms;
    },
    failAppendsAfterApplying(count = 1, how: AmbiguousAnswer = "timeout", which?: Which) {
      ambiguous = { left: count, how, which };
    },
    holdAppends(which) {
      if (gate) throw new Error("holdAppends: a gate is already holding (release() or drop() it first)");
      const current: Gate = { which, held: [], waiters: [] };
      gate = current;
      return {
        get held() {
          return current.held.map(({ stream, types }) => ({ stream, types }));
        },
        reached(count: number) {
          if (current.held.length >= count) return Promise.resolve();
          return new Promise<void>((resolve) => current.waiters.push({ count, resolve }));
        },
        release: () => (gate === current ? openGate("apply") : 0),
        drop: () => (gate === current ? openGate("discard") : 0),
      };
    },
    async heal() {
      openGate("apply");
      notLeaderHint = undefined;
      delayMs = 0;
      ambiguous = { left: 0, how: "timeout" };
      released.resolve();
      released = resolvable();
      if (crashed) await crashed;
      crashed = undefined;
      await openFront.accept();
    },
    scavenge() {
      return log.scavenge();
    },
    get stats() {
      return { ...stats, connections: openFront.accepted, cutConnections: openFront.cut, idempotentAppends: log.idempotentWrites };
    },
  };
  return handle;
}
