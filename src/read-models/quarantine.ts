/**
 * Quarantine: what a subscriber of the log could not handle and skipped. A stored event that a fold
 * throws on (data nested too deeply to serialise, a payload an older version wrote, an event written
 * around the server's checks) must not stop the read models, and so every write and every start; nor
 * may one bad run, delivery or cron stop the worker, the webhooks or the scheduler. Each such event
 * (or entity) is recorded here with where it is in the log and why, logged once, and skipped.
 *
 * The records live in the read-model database (an indexed table, however many there are): they are
 * rebuilt with the read models, so once the code that threw is fixed, `npm run rebuild` folds the log
 * again and what now folds leaves the quarantine. `/ok` reports the counts, `/metrics` exports them,
 * `GET /audit/quarantine` lists the records.
 */
import type Database from "better-sqlite3";
import { InvalidEventError, StoreUnavailableError, type RecordedEvent } from "../eventstore/types.js";
import { isoNow } from "../util/time.js";

/** What was skipped: one event (with its position), or an entity a subscriber gave up on (its stream alone). */
export interface QuarantineSubject {
  streamId: string;
  position?: bigint;
  revision?: bigint;
  type?: string;
}

export interface QuarantineEntry {
  /** Who could not handle it: `read-models`, `run-worker`, `webhooks`, `crons`, … */
  subscriber: string;
  /** The event's global position; undefined for an entity (e.g. a run the worker cannot start). */
  position: bigint | undefined;
  stream: string;
  revision: bigint | undefined;
  type: string | undefined;
  error: string;
  quarantined_at: string;
}

/** The counts `/ok` and `/metrics` report. */
export interface QuarantineSummary {
  entries: number;
  by_subscriber: Record<string, number>;
}

/** An error message is kept to this length: enough to recognise it, never a copy of the payload. */
const MAX_ERROR_CHARS = 500;

const DDL = [
  `CREATE TABLE IF NOT EXISTS quarantine (
     subscriber TEXT NOT NULL,
     position INTEGER,
     stream TEXT NOT NULL,
     revision INTEGER,
     type TEXT,
     error TEXT NOT NULL,
     quarantined_at TEXT NOT NULL
   )`,
  // One record per subscriber and event (or entity): a failure met again is not recorded twice.
  "CREATE UNIQUE INDEX IF NOT EXISTS quarantine_key ON quarantine (subscriber, stream, ifnull(position, -1))",
];

type Row = {
  subscriber: string;
  position: bigint | null;
  stream: string;
  revision: bigint | null;
  type: string | null;
  error: string;
  quarantined_at: string;
  seq: bigint;
};

export class Quarantine {
  private readonly insert: Database.Statement;
  private readonly hasStream: Database.Statement;
  private readonly streamsOf: Database.Statement;
  private readonly countBy: Database.Statement;
  private readonly page: Database.Statement;

  constructor(
    db: Database.Database,
    /** Where a new record is told (one line each); the server's standard error by default. */
    private readonly log: (message: string) => void = (m) => console.error(m),
  ) {
    for (const statement of DDL) db.exec(statement);
    this.insert = db.prepare(
      "INSERT OR IGNORE INTO quarantine (subscriber, position, stream, revision, type, error, quarantined_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
    );
    this.hasStream = db.prepare("SELECT 1 FROM quarantine WHERE subscriber = ? AND stream = ? LIMIT 1").pluck();
    this.streamsOf = db.prepare("SELECT DISTINCT stream FROM quarantine WHERE subscriber = ? AND stream >= ? AND stream < ?").pluck();
    this.countBy = db.prepare("SELECT subscriber, count(*) AS n FROM quarantine GROUP BY subscriber").raw();
    this.page = db
      .prepare(
        `SELECT rowid AS seq, subscriber, position, stream, revision, type, error, quarantined_at FROM quarantine
      WHERE rowid < ? ORDER BY rowid DESC LIMIT ?`,
      )
      .safeIntegers(true);
  }

  /**
   * Records that `subscriber` skipped `subject` because of `error`, and logs it the first time.
   * Throws when the database cannot take the record (e.g. the disk is full): inside the read models'
   * transaction that failure is the database's, not the event's, and stops the fold as before.
   */
  record(subscriber: string, subject: QuarantineSubject, error: unknown): boolean {
    const message = describeError(error);
    const added =
      this.insert.run(subscriber, subject.position ?? null, subject.streamId, subject.revision ?? null, subject.type ?? null, message, isoNow()).changes > 0;
    if (added) this.log(`quarantined by ${subscriber}: ${describeSubject(subject)}: ${message} (skipped; GET /audit/quarantine lists it)`);
    return added;
  }

  /** `record`, for callers that must go on whatever happens (a listener, a background task): a failed record is only logged. */
  tryRecord(subscriber: string, subject: QuarantineSubject, error: unknown): void {
    try {
      this.record(subscriber, subject, error);
    } catch (failure) {
      this.log(`${subscriber} skipped ${describeSubject(subject)} (${describeError(error)}); it could not be recorded: ${describeError(failure)}`);
    }
  }

  /** Whether `subscriber` quarantined anything of `stream` (an entity it gave up on). */
  has(subscriber: string, stream: string): boolean {
    return this.hasStream.get(subscriber, stream) !== undefined;
  }

  /** The streams of `subscriber`'s records that start with `prefix` (few: only what was given up on). */
  streams(subscriber: string, prefix: string): string[] {
    return this.streamsOf.all(subscriber, prefix, `${prefix}\uffff`) as string[];
  }

  summary(): QuarantineSummary {
    const by_subscriber: Record<string, number> = {};
    let entries = 0;
    for (const [subscriber, n] of this.countBy.all() as [string, number][]) {
      by_subscriber[subscriber] = n;
      entries += n;
    }
    return { entries, by_subscriber };
  }

  /** The records, newest first; `before`: the `cursor` of the last record of the previous page. */
  list(options: { limit: number; before?: bigint }): { entries: QuarantineEntry[]; cursor: bigint | undefined } {
    const rows = this.page.all(options.before ?? 2n ** 63n - 1n, options.limit) as Row[];
    const entries = rows.map((r) => ({
      subscriber: r.subscriber,
      position: r.position ?? undefined,
      stream: r.stream,
      revision: r.revision ?? undefined,
      type: r.type ?? undefined,
      error: r.error,
      quarantined_at: r.quarantined_at,
    }));
    return { entries, cursor: rows.length === options.limit ? rows[rows.length - 1].seq : undefined };
  }
}

/**
 * Whether a failure that handling one event (or entity) met is that event's own, so skipping it is
 * right: the same handling would fail the same way again. Not when the log is unreachable, nor when
 * the read-model database itself fails (full disk, I/O, locked, closed): those are the process's,
 * and skipping events over them would lose good data.
 */
export function isEventFault(error: unknown): boolean {
  if (error instanceof StoreUnavailableError) return false;
  const code = (error as { code?: unknown } | null)?.code;
  if (typeof code === "string" && code.startsWith("SQLITE_")) return !DATABASE_FAULTS.some((prefix) => code.startsWith(prefix));
  // better-sqlite3's answer to a statement on a closed database (a shutdown under way).
  if (error instanceof TypeError && /database connection is not open/.test(error.message)) return false;
  return true;
}

const DATABASE_FAULTS = [
  "SQLITE_FULL",
  "SQLITE_IOERR",
  "SQLITE_BUSY",
  "SQLITE_LOCKED",
  "SQLITE_NOMEM",
  "SQLITE_READONLY",
  "SQLITE_CORRUPT",
  "SQLITE_CANTOPEN",
  "SQLITE_NOTADB",
  "SQLITE_PERM",
  "SQLITE_PROTOCOL",
  "SQLITE_INTERRUPT",
  "SQLITE_ABORT",
  "SQLITE_AUTH",
  "SQLITE_NOLFS",
];

/**
 * Whether a failure of the worker, the webhooks or the scheduler on one run, delivery or cron comes
 * from what the log holds for it (a type or range error of the code that reads it, a schema's
 * refusal, an unreadable event) rather than from the moment (the log unreachable, a conflict): only
 * then is giving up on it right, where trying again later is not.
 */
export function isPoison(error: unknown): boolean {
  if (error instanceof InvalidEventError) return true;
  if (error instanceof TypeError || error instanceof RangeError || error instanceof SyntaxError) return isEventFault(error);
  return (error as { name?: unknown } | null)?.name === "ZodError";
}

/**
 * What a fold of one stream on demand (a run's stream to decide a command) throws when an event of
 * it cannot be folded: an error naming that event, for that one entity.
 */
export function unfoldable(event: RecordedEvent, error: unknown): InvalidEventError {
  if (error instanceof InvalidEventError) return error;
  return new InvalidEventError(event.streamId, event.revision, event.type, `cannot be folded: ${describeError(error)}`, event.position);
}

/** One line, bounded: the error's class (when not a plain Error) and message. */
export function describeError(error: unknown): string {
  const text = error instanceof Error ? (error.name && error.name !== "Error" ? `${error.name}: ${error.message}` : error.message) : String(error);
  const line = text.replace(/\s+/g, " ").trim();
  return line.length > MAX_ERROR_CHARS ? `${line.slice(0, MAX_ERROR_CHARS - 1)}…` : line;
}

function describeSubject(s: QuarantineSubject): string {
  if (s.position === undefined) return `stream ${s.streamId}`;
  return `${s.type ?? "event"} at position ${s.position} (stream ${s.streamId}${s.revision === undefined ? "" : `, revision ${s.revision}`})`;
}
