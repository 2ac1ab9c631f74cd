import fs from "node:fs";
import path from "node:path";
import { StoreUnavailableError } from "./types.js";
import { tracePoint } from "../util/trace-points.js";

/**
 * fsyncs in flight at most. An fsync's completion reaches the event loop only when the loop comes
 * round to it (after a graph's turn, say), long after the disk was done: a commit made meanwhile
 * starts its own fsync instead of waiting for that callback. Each covers what was committed before
 * it started, whichever finishes first.
 */
const MAX_FSYNCS_IN_FLIGHT = 3;

/**
 * When committed events become durable (survive power loss) on the SQLite store.
 *
 * The connection runs with `synchronous = NORMAL`: a commit writes its WAL frames (so it survives a
 * process crash and is visible to every read at once) but does not fsync. Durability is this
 * class's job: after each commit it fsyncs the WAL file on libuv's thread pool (up to
 * MAX_FSYNCS_IN_FLIGHT at a time), each covering every commit made before it started (group commit
 * for the disk, off the event loop).
 * fsync flushes a file's dirty pages whichever descriptor wrote them, and SQLite's WAL recovery keeps
 * the longest prefix of valid commits, so after a power loss the log is a prefix of what was committed
 * that holds at least everything made durable here.
 *
 * Nothing leaves the process before it is durable: subscriptions (projections, SSE, webhooks) read only
 * up to `position`, and the HTTP edge awaits `whenDurable()` before each response. Appends inside a
 * run (claims, checkpoints, outputs) thus no longer wait for the disk one by one.
 */
export class WalDurability {
  private committed: bigint;
  private durable: bigint;
  /** fsyncs started and not yet reported, and what the latest one covers. */
  private inFlight = 0;
  private covered: bigint;
  private failure: Error | undefined;
  /** closeSync ran: it made everything durable itself, so an fsync still queued then reports nothing. */
  private closed = false;
  private waiters: { position: bigint; resolve: () => void; reject: (error: Error) => void }[] = [];
  /** Syncs that completed, and the seconds from each one's start to its report on the event loop. */
  private readonly done = { syncs: 0, seconds: 0 };

  private constructor(
    /** The WAL's descriptor; undefined when nothing needs an fsync (NORMAL, or read-only). */
    private fd: number | undefined,
    head: bigint,
    /** Called after `position` advanced (in order, on the event loop). */
    private readonly onDurable: (position: bigint) => void,
    private readonly onFailure: (error: Error) => void,
  ) {
    this.committed = head;
    this.durable = head;
    this.covered = head;
  }

  /** fsync after each commit (synchronous FULL): opens the WAL of `file` and syncs its directory once (the WAL's entry). */
  static fsyncing(file: string, head: bigint, onDurable: (position: bigint) => void, onFailure: (error: Error) => void): WalDurability {
    const wal = `${file}-wal`;
    // The WAL exists once the database has been written (the schema check at open writes); "a" creates an empty one otherwise, which SQLite reads as empty.
    const fd = fs.openSync(wal, "a");
    try {
      fs.fsyncSync(fd);
      syncDirectory(path.dirname(file));
    } catch (error) {
      fs.closeSync(fd);
      throw error;
    }
    return new WalDurability(fd, head, onDurable, onFailure);
  }

  /** Durable at commit: synchronous NORMAL (survives process crashes only), or a read-only store. */
  static atCommit(head: bigint, onDurable: (position: bigint) => void): WalDurability {
    return new WalDurability(undefined, head, onDurable, () => undefined);
  }

  /** Syncs completed so far, and their total seconds (start to the callback: what a waiting response waits). */
  get syncs(): { count: number; seconds: number } {
    return { count: this.done.syncs, seconds: this.done.seconds };
  }

  /** Everything at or before this position survives power loss. */
  get position(): bigint {
    return this.durable;
  }

  /** The last committed position (readable in this process). */
  get committedPosition(): bigint {
    return this.committed;
  }

  /** A commit up to `position` has returned: start (or queue) the fsync that makes it durable. */
  committedUpTo(position: bigint): void {
    if (position <= this.committed) return;
    this.committed = position;
    if (this.fd === undefined) {
      this.advance(position);
      return;
    }
    this.flush();
  }

  /** Resolves once everything committed so far is durable; undefined when it already is. */
  whenDurable(): Promise<void> | undefined {
    if (this.failure) return Promise.reject(this.failure);
    if (this.durable >= this.committed) return undefined;
    const position = this.committed;
    return new Promise((resolve, reject) => this.waiters.push({ position, resolve, reject }));
  }

  /** Makes everything committed durable now (at close), then releases the WAL. */
  closeSync(): void {
    const fd = this.fd;
    this.fd = undefined;
    this.closed = true;
    if (fd === undefined) return;
    try {
      if (!this.failure && this.committed > this.durable) {
        fs.fdatasyncSync(fd);
        this.advance(this.committed);
      }
    } finally {
      fs.closeSync(fd);
    }
  }

  private flush(): void {
    if (this.failure || this.fd === undefined) return;
    // Nothing new since the latest fsync started, or enough are running (the next completion starts another).
    if (this.committed <= this.covered || this.inFlight >= MAX_FSYNCS_IN_FLIGHT) return;
    this.inFlight++;
    const target = this.committed;
    this.covered = target;
    const started = process.hrtime.bigint();
    // fdatasync, as SQLite itself syncs on Linux: the WAL's data and its size, without the timestamps a plain fsync
    // also writes.
    tracePoint("log.sync.start");
    fs.fdatasync(this.fd, (error) => {
      tracePoint("log.sync.end");
      this.inFlight--;
      // One that ran after the close found its descriptor gone (EBADF): not a failure of the log.
      if (this.closed) return;
      if (error) return this.fail(error);
      this.done.syncs++;
      this.done.seconds += Number(process.hrtime.bigint() - started) / 1e9;
      this.advance(target);
      this.flush();
    });
  }

  private advance(position: bigint): void {
    if (position <= this.durable) return;
    this.durable = position;
    if (this.waiters.length > 0) {
      const still: typeof this.waiters = [];
      for (const w of this.waiters)
        if (w.position <= position) w.resolve();
        else still.push(w);
      this.waiters = still;
    }
    this.onDurable(position);
  }

  /** A failed fsync leaves the page cache in an unknown state (the kernel may have dropped the dirty pages): no later write is trusted. */
  private fail(error: Error): void {
    this.failure = new StoreUnavailableError(`fsync of the event log's WAL failed: ${error.message}`, { cause: error });
    for (const w of this.waiters) w.reject(this.failure);
    this.waiters = [];
    this.onFailure(this.failure);
  }
}

function syncDirectory(dir: string): void {
  const fd = fs.openSync(dir, "r");
  try {
    fs.fsyncSync(fd);
  } finally {
    fs.closeSync(fd);
  }
}
