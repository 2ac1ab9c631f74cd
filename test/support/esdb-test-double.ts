/**
 * TEST DOUBLE of EventStoreDB. This is NOT EventStoreDB and must never be used outside tests.
 *
 * An in-process gRPC server on 127.0.0.1 (ephemeral port, insecure: `esdb://127.0.0.1:<port>?tls=false`)
 * that speaks exactly the part of the EventStoreDB gRPC protocol our adapter (src/eventstore/esdb.ts)
 * uses through the real `@eventstore/db-client` 6.x, over an in-memory log. It is built on the gRPC
 * service definitions shipped with the client package (`generated/*_grpc_pb.js`), so the wire format is
 * the real one. Implemented:
 *
 * - `ServerFeatures.GetSupportedMethods`: advertises only what is implemented below (the client uses it to
 *   choose between `Streams.BatchAppend` and `Streams.Append`).
 * - `Streams.Append` (client streaming) and `Streams.BatchAppend` (bidi; can be switched off with
 *   `{ batchAppend: false }`, then the client falls back to `Append`).
 *   0-based revisions; expected revision any / no_stream / stream_exists / exact revision; a conflict is
 *   reported as EventStoreDB does it (Append: `AppendResp.wrong_expected_version` with current and expected
 *   revision; BatchAppend: a `google.rpc.Status` whose details pack `event_store.client.WrongExpectedVersion`).
 *   Idempotent appends by event id (see `tryIdempotent`).
 * - `Streams.Delete` (a soft delete, as if a scavenge followed at once): the stream's events disappear from
 *   stream reads, `$all` and subscriptions; a later append continues after its last revision.
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
 * Not implemented (the adapter does not use them): Gossip/cluster discovery (single-node connection strings
 * only), link resolution (`resolveLinks` is ignored: there are no links), hard deletes (tombstones), stream metadata
 * semantics, persistent subscriptions, projections, users, operations, authentication (insecure mode accepts
 * everything), deadlines.
 *
 * Max append size: like EventStoreDB's default `MaxAppendSize`, an append whose events total more than 1 MiB
 * (data + metadata + 2 × type length per event, EventStoreDB's `Event.SizeOnDisk`) is refused whole, reported
 * as the server does: Append fails with INVALID_ARGUMENT and the trailers `exception:
 * maximum-append-size-exceeded`, `maximum-append-size`; BatchAppend answers a `google.rpc.Status` packing
 * `event_store.client.MaximumAppendSizeExceeded`. `maxAppendSize` changes the limit.
 */
import { createRequire } from "node:module";
import { randomUUID } from "node:crypto";
import * as grpc from "@grpc/grpc-js";
import type * as StreamsPb from "@eventstore/db-client/generated/streams_pb.js";
import type * as SharedPb from "@eventstore/db-client/generated/shared_pb.js";
import type * as StatusPb from "@eventstore/db-client/generated/status_pb.js";
import type * as ServerFeaturesPb from "@eventstore/db-client/generated/serverfeatures_pb.js";
import type { Any } from "google-protobuf/google/protobuf/any_pb.js";
import type { Empty as GoogleEmpty } from "google-protobuf/google/protobuf/empty_pb.js";

// Load the generated code through the same module instances the client uses (the generated serializers
// check `instanceof` against their own classes).
const requireHere = createRequire(import.meta.url);
const generatedDir = "@eventstore/db-client/generated";
const requireGenerated = createRequire(requireHere.resolve(`${generatedDir}/streams_pb.js`));
const streamsPb = requireGenerated("./streams_pb.js") as typeof StreamsPb;
const sharedPb = requireGenerated("./shared_pb.js") as typeof SharedPb;
const statusPb = requireGenerated("./status_pb.js") as typeof StatusPb;
const serverFeaturesPb = requireGenerated("./serverfeatures_pb.js") as typeof ServerFeaturesPb;
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
}

export interface EsdbTestDouble {
  connectionString: string;
  close(): Promise<void>;
}

// ---------------------------------------------------------------------------------------------------------
// The in-memory log

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
  /** Removed by a (soft) delete of its stream: no read returns it any more. */
  deleted?: boolean;
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

type WriteResult =
  | { ok: true; currentRevision: bigint; position: bigint }
  | { ok: false; current: bigint | "no_stream"; expected: Expected };

class InvalidRequest extends Error {}

/** What EventStoreDB counts of an event against MaxAppendSize (`Event.SizeOnDisk`). */
function sizeOnDisk(e: ProposedEvent): number {
  return e.data.length + e.customMetadata.length + 2 * e.type.length;
}

class Log {
  readonly all: StoredEvent[] = [];
  readonly streams = new Map<string, StreamState>();
  private nextPosition = 0n;
  private wake: () => void = () => undefined;
  private changeSignal = this.newSignal();

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

  write(streamName: string, expected: Expected, events: ProposedEvent[]): WriteResult {
    const idempotent = this.tryIdempotent(streamName, expected, events);
    if (idempotent) return idempotent;

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

    let stream = this.streams.get(streamName);
    if (!stream) {
      stream = { events: [], revisionById: new Map() };
      this.streams.set(streamName, stream);
    }
    const createdTicks = BigInt(Date.now()) * 10_000n;
    let last: StoredEvent | undefined;
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
      // Advance like a transaction file: by a record size, so positions are not dense.
      this.nextPosition += BigInt(
        64 + streamName.length + e.type.length + e.data.length + e.customMetadata.length + 16,
      );
      stream.revisionById.set(e.id, stream.events.length);
      stream.events.push(stored);
      this.all.push(stored);
      last = stored;
    }
    this.wakeAll();
    return { ok: true, currentRevision: last!.revision, position: last!.position };
  }

  /**
   * EventStoreDB idempotency (simplified): if the first event id is already in the stream, the events that
   * follow it carry the same ids in the same order, and the expected revision is the one the original write
   * was made against (or any/stream_exists), the write succeeds without writing anything. A partial match is
   * refused as a wrong expected version, as EventStoreDB does for "corrupted idempotency".
   */
  private tryIdempotent(streamName: string, expected: Expected, events: ProposedEvent[]): WriteResult | undefined {
    if (events.length === 0) return undefined;
    const stream = this.streams.get(streamName);
    const first = stream?.revisionById.get(events[0].id);
    if (stream === undefined || first === undefined) return undefined;
    const expectedMatches =
      expected.kind === "any" ||
      expected.kind === "stream_exists" ||
      (expected.kind === "no_stream" && first === 0) ||
      (expected.kind === "revision" && expected.revision === BigInt(first - 1));
    if (!expectedMatches) return undefined; // the ordinary expected-version check decides
    const allMatch = events.every((e, i) => stream.events[first + i]?.id === e.id);
    if (!allMatch) return { ok: false, current: this.currentRevision(streamName), expected };
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
  const log = new Log();
  let closing = false;

  // A fresh EventStoreDB is not empty: it holds system events. Seed a few so that the adapter's
  // exclusion of system streams/types is exercised from the first read.
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
      add("event_store.client.server_features.serverfeatures", "getsupportedmethods");
      callback(null, methods);
    },
  });

  const expectedFrom = (
    o: StreamsPb.AppendReq.Options | StreamsPb.BatchAppendReq.Options,
    revisionCase: "revision" | "streamPosition",
  ): Expected => {
    if (o.hasAny()) return { kind: "any" };
    if (o.hasNoStream()) return { kind: "no_stream" };
    if (o.hasStreamExists()) return { kind: "stream_exists" };
    if (revisionCase === "revision" && "hasRevision" in o && o.hasRevision())
      return { kind: "revision", revision: BigInt(o.getRevision()) };
    if (revisionCase === "streamPosition" && "hasStreamPosition" in o && o.hasStreamPosition())
      return { kind: "revision", revision: BigInt(o.getStreamPosition()) };
    throw new InvalidRequest("missing expected stream revision");
  };

  const handlers: grpc.UntypedServiceImplementation = {
    delete(call: grpc.ServerUnaryCall<StreamsPb.DeleteReq, StreamsPb.DeleteResp>, callback: grpc.sendUnaryData<StreamsPb.DeleteResp>) {
      const options = call.request.getOptions();
      const streamName = streamNameOf(options?.getStreamIdentifier());
      for (const e of log.streams.get(streamName)?.events ?? []) e.deleted = true;
      const resp = new streamsPb.DeleteResp();
      resp.setNoPosition(new sharedPb.Empty());
      callback(null, resp);
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
        try {
          if (!header) throw new InvalidRequest("append without options");
          const streamName = streamNameOf(header.getStreamIdentifier());
          const expected = expectedFrom(header, "revision");
          if (tooLarge(proposed)) {
            const metadata = new grpc.Metadata();
            metadata.set("exception", "maximum-append-size-exceeded");
            metadata.set("maximum-append-size", String(maxAppendSize));
            failed = true;
            callback({ code: grpc.status.INVALID_ARGUMENT, details: `Maximum Append Size of ${maxAppendSize} Exceeded.`, metadata });
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
        } catch (err) {
          fail(err);
        }
      });
    },

    batchAppend(call: grpc.ServerDuplexStream<BatchAppendReq, BatchAppendResp>) {
      const pending = new Map<string, { streamName: string; expected: Expected; events: ProposedEvent[] }>();
      call.on("data", (req: BatchAppendReq) => {
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
          if (!write) return; // like the server: chunks of an unknown (timed-out) write are dropped
          streamName = write.streamName;
          for (const m of req.getProposedMessagesList()) write.events.push(proposedEvent(m));
          if (!req.getIsFinal()) return;
          pending.delete(correlationId);
          resp.setStreamIdentifier(streamIdentifier(write.streamName));
          if (tooLarge(write.events)) {
            const exceeded = new sharedPb.MaximumAppendSizeExceeded();
            exceeded.setMaxappendsize(maxAppendSize);
            const details = new googleAnyPb.Any();
            details.pack(exceeded.serializeBinary(), "event_store.client.MaximumAppendSizeExceeded");
            const status = new statusPb.Status();
            status.setCode(grpc.status.INVALID_ARGUMENT as number as StatusPb.Status.AsObject["code"]);
            status.setMessage(`Maximum Append Size of ${maxAppendSize} Exceeded.`);
            status.setDetails(details);
            resp.setError(status);
            call.write(resp);
            return;
          }
          const injected = injectedFailure(write.streamName, write.events);
          if (injected !== undefined) {
            // The client can only decode packed details: an `Unknown` one becomes its UnknownError.
            const details = new googleAnyPb.Any();
            details.pack(new sharedPb.Unknown().serializeBinary(), "event_store.client.Unknown");
            const status = new statusPb.Status();
            status.setCode(grpc.status.UNAVAILABLE as number as StatusPb.Status.AsObject["code"]);
            status.setMessage(injected);
            status.setDetails(details);
            resp.setError(status);
            call.write(resp);
            return;
          }
          const result = log.write(write.streamName, write.expected, write.events);
          if (result.ok) {
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
            const details = new googleAnyPb.Any();
            details.pack(wev.serializeBinary(), "event_store.client.WrongExpectedVersion");
            const status = new statusPb.Status();
            status.setCode(grpc.status.FAILED_PRECONDITION as number as StatusPb.Status.AsObject["code"]);
            status.setMessage("WrongExpectedVersion");
            status.setDetails(details);
            resp.setError(status);
          }
        } catch (err) {
          const badRequest = new sharedPb.BadRequest();
          badRequest.setMessage(err instanceof Error ? err.message : String(err));
          const details = new googleAnyPb.Any();
          details.pack(badRequest.serializeBinary(), "event_store.client.BadRequest");
          const status = new statusPb.Status();
          status.setCode(grpc.status.INVALID_ARGUMENT as number as StatusPb.Status.AsObject["code"]);
          status.setMessage(err instanceof Error ? err.message : String(err));
          status.setDetails(details);
          resp.setError(status);
          if (streamName !== undefined) resp.setStreamIdentifier(streamIdentifier(streamName));
          else resp.setStreamIdentifier(streamIdentifier(""));
        }
        call.write(resp);
      });
      call.on("end", () => call.end());
      call.on("error", () => undefined);
    },

    read(call: grpc.ServerWritableStream<ReadReq, ReadResp>) {
      serveRead(call).catch((err: unknown) => {
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
  const send = async (
    call: grpc.ServerWritableStream<ReadReq, ReadResp>,
    resp: ReadResp,
    cancelled: Promise<void>,
  ): Promise<boolean> => {
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
        for (let i = from; i <= BigInt(last) && BigInt(events.length) < count; i++) if (!stream.events[Number(i)].deleted) events.push(stream.events[Number(i)]);
      } else {
        const from = s.hasRevision() ? BigInt(s.getRevision()) : s.hasStart() ? 0n : BigInt(last);
        const top = from > BigInt(last) ? BigInt(last) : from;
        for (let i = top; i >= 0n && BigInt(events.length) < count; i--) if (!stream.events[Number(i)].deleted) events.push(stream.events[Number(i)]);
      }
    } else if (options.hasAll()) {
      const a = options.getAll()!;
      if (!backwards) {
        let i = a.hasPosition()
          ? log.lowerBound(BigInt(a.getPosition()!.getCommitPosition()))
          : a.hasEnd()
            ? log.all.length
            : 0;
        for (; i < log.all.length && BigInt(events.length) < count; i++) {
          if (!log.all[i].deleted && filterAllows(filter, log.all[i])) events.push(log.all[i]);
        }
      } else {
        // Backwards from a position returns the events before it (EventStoreDB post-position semantics).
        let i = a.hasPosition()
          ? log.lowerBound(BigInt(a.getPosition()!.getCommitPosition())) - 1
          : a.hasStart()
            ? -1
            : log.all.length - 1;
        for (; i >= 0 && BigInt(events.length) < count; i--) {
          if (!log.all[i].deleted && filterAllows(filter, log.all[i])) events.push(log.all[i]);
        }
      }
    } else {
      throw new InvalidRequest("read of neither a stream nor $all");
    }
    for (const e of events) {
      if (e.deleted) continue;
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

    // The source: a cursor over either one stream's events or the whole log. Starts are EXCLUSIVE.
    let source: () => StoredEvent[];
    let cursor: number;
    if (options.hasStream()) {
      if (filter) throw new InvalidRequest("stream subscriptions take no filter");
      const s = options.getStream()!;
      const streamName = streamNameOf(s.getStreamIdentifier());
      source = () => log.streams.get(streamName)?.events ?? [];
      cursor = s.hasRevision() ? Number(BigInt(s.getRevision()) + 1n) : s.hasEnd() ? source().length : 0;
    } else if (options.hasAll()) {
      const a = options.getAll()!;
      source = () => log.all;
      cursor = a.hasPosition()
        ? log.upperBound(BigInt(a.getPosition()!.getCommitPosition()))
        : a.hasEnd()
          ? log.all.length
          : 0;
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
      const events = source();
      while (cursor < events.length) {
        const e = events[cursor++];
        if (!e.deleted && filterAllows(filter, e)) {
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
      }
      if (!caughtUpSent && caughtUpMessages) {
        caughtUpSent = true;
        const resp = new streamsPb.ReadResp();
        resp.setCaughtUp(new streamsPb.ReadResp.CaughtUp());
        if (!(await send(call, resp, cancelled))) return;
      }
      // Take the change signal before the last look: an append in between cannot be missed.
      const changed = log.changed;
      if (cursor < source().length) continue;
      await Promise.race([changed, cancelled]);
    }
  }

  const port = await new Promise<number>((resolve, reject) => {
    server.bindAsync("127.0.0.1:0", grpc.ServerCredentials.createInsecure(), (err, boundPort) =>
      err ? reject(err) : resolve(boundPort),
    );
  });

  return {
    connectionString: `esdb://127.0.0.1:${port}?tls=false`,
    async close() {
      if (closing) return;
      closing = true;
      for (const resolve of [...closeSignals]) resolve();
      log.wakeAll();
      server.forceShutdown();
    },
  };
}
