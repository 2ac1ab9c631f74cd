import { AppendTicket, WrongExpectedVersionError, type AppendResult, type EventData, type EventStore, type ExpectedRevision } from "../eventstore/types.js";
import type { Decision } from "../domain/decision.js";
import { DomainError } from "../domain/errors.js";

/**
 * The command pipeline: the one module that appends to the event log (test/repo/architecture.test.ts
 * fails any other caller of `EventStore.append`). Every writer, the REST and A2A edges through
 * the application core, the run worker, crons, webhooks, the Store, says here, by name, what its
 * append expects of the stream, what a conflict with another writer means to it, and what it
 * waits for before it answers. docs/architecture.md describes the path.
 */

/** How long a read waits for the local read models to show a position another process reported. */
export const CATCH_UP_TIMEOUT_MS = 5_000;
const DEFAULT_ATTEMPTS = 5;

/** The read models' progress through the log: what "wait for the fold" waits on. */
export interface FoldProgress {
  readonly position: bigint;
  waitFor(position: bigint): Promise<void>;
  waitForAtMost(position: bigint, timeoutMs: number): Promise<unknown>;
}

/**
 * What an append waits for before it resolves:
 * - `commit`: the events are in the log;
 * - `fold`: and the local read models show them (read-your-writes for an answer read from them).
 * A caller that waits for nothing does not await the append and keeps its `ticket`.
 */
export type WaitFor = "commit" | "fold";

/** The next attempt after a conflict: events decided again on the stream as it is now. */
export interface Reconsidered {
  events: readonly EventData[];
  expected: ExpectedRevision;
}

/**
 * What a conflict (another writer appended first: WrongExpectedVersion) means to the writer:
 * - `throw`: the caller's business (the error propagates);
 * - `lose`: someone else did it, or changed the stream; the append resolves `undefined`;
 * - `reconsider`: decide again on the stream as it is now (`undefined`: nothing left to do), up to `attempts` times.
 */
export type ConflictPolicy = "throw" | "lose" | { reconsider: () => Promise<Reconsidered | undefined>; attempts?: number };

export interface AppendCommand {
  stream: string;
  events: readonly EventData[];
  /** The revision the decision was taken on (`no_stream`: the stream must not exist; `any`: last writer wins). */
  expected: ExpectedRevision;
  /** Default `commit`. */
  waitFor?: WaitFor;
  /** Default `throw`. */
  onConflict?: ConflictPolicy;
  /** Appends that must commit together with this one: it is written only if they all were (same commit on the embedded store). */
  after?: readonly AppendTicket[];
  /** Learns this append's outcome, for appends that depend on it (`after`). */
  ticket?: AppendTicket;
  /** Someone waits for this append (a run's end): commit it without waiting for the batch. */
  urgent?: boolean;
}

/** A decision on the read model's state: read → decide → append at the state's revision. */
export interface DecideCommand<S extends { revision: bigint }, D extends Decision> {
  stream: string;
  /** The state from the read model (`undefined`: the entity does not exist). */
  load: () => S | undefined;
  /** The state the caller has just loaded, to decide the first attempt on (a stale one is safe: the append expects its revision). */
  loaded?: { state: S | undefined };
  decide: (state: S | undefined) => D;
  /** Default `fold`: the caller answers with what the read models show. `commit` only for an answer read from the log later. */
  waitFor?: WaitFor;
  /** Conflicts bring the read model up to date with the stream and decide again, this many times in all. Default 5. */
  attempts?: number;
  /** Called as soon as the append is issued, with its ticket (appends that depend on it may follow at once); again for each retry. */
  issued?: (state: S | undefined, decision: D & { ok: true }, ticket: AppendTicket) => void;
}

export interface DecideOutcome<S, D> {
  /** The state after the append, read from the read model when first asked for. */
  readonly state: S | undefined;
  decision: D & { ok: true };
}

export class CommandPipeline {
  constructor(
    private readonly store: EventStore,
    /** Absent for a writer that never waits for the fold (the checkpointer, the run's stream writer). */
    private readonly folds?: FoldProgress,
  ) {}

  /** Appends with the policy the command names; `undefined` when the writer lost a conflict it accepts losing. */
  append(command: AppendCommand & { onConflict?: "throw" }): Promise<AppendResult>;
  append(command: AppendCommand): Promise<AppendResult | undefined>;
  append(command: AppendCommand): Promise<AppendResult | undefined> {
    const policy = command.onConflict ?? "throw";
    // The common append (a run's chunks, a checkpoint): the store's own promise, with no async frame around it.
    if (policy === "throw" && command.waitFor !== "fold") return this.appendOnce(command);
    return this.appendWithPolicy(command, policy);
  }

  /** One attempt of `command` (with these events and expected revision, after a conflict): rejects, never throws. */
  private appendOnce(command: AppendCommand, events = command.events, expected = command.expected): Promise<AppendResult> {
    try {
      return this.store.append(command.stream, events as EventData[], expected, {
        urgent: command.urgent,
        ticket: command.ticket,
        after: command.after,
      });
    } catch (error) {
      return Promise.reject(error);
    }
  }

  private async appendWithPolicy(command: AppendCommand, policy: ConflictPolicy): Promise<AppendResult | undefined> {
    let events = command.events;
    let expected = command.expected;
    for (let attempt = 1; ; attempt++) {
      try {
        const result = await this.appendOnce(command, events, expected);
        if (command.waitFor === "fold") await this.foldsOf().waitFor(result.position);
        return result;
      } catch (error) {
        if (!(error instanceof WrongExpectedVersionError) || policy === "throw") throw error;
        // A conflict of an append this one depended on (`after`) is theirs, not this append's to settle.
        if (command.after?.some((t) => t.error === error)) throw error;
        if (policy === "lose") return undefined;
        if (attempt >= (policy.attempts ?? DEFAULT_ATTEMPTS)) throw error;
        const next = await policy.reconsider();
        if (!next) return undefined;
        ({ events, expected } = next);
      }
    }
  }

  /**
   * Read → decide → append with the expected revision the read model saw → wait as asked. A
   * refusal throws its DomainError (the API's answer). A concurrent writer makes the append fail
   * with WrongExpectedVersion; then the read model is brought up to date with that stream and the
   * decision is taken again.
   */
  async decide<S extends { revision: bigint }, D extends Decision>(command: DecideCommand<S, D>): Promise<DecideOutcome<S, D>> {
    const attempts = command.attempts ?? DEFAULT_ATTEMPTS;
    for (let attempt = 1; ; attempt++) {
      const state = attempt === 1 && command.loaded ? command.loaded.state : command.load();
      const decision = command.decide(state);
      if (!decision.ok) throw new DomainError(decision.kind, decision.detail);
      const accepted = decision as D & { ok: true };
      if (decision.events.length === 0) return { state, decision: accepted };
      try {
        const ticket = command.issued ? new AppendTicket() : undefined;
        const appending = this.append({
          stream: command.stream,
          events: decision.events,
          expected: state ? state.revision : "no_stream",
          waitFor: command.waitFor ?? "fold",
          ticket,
        });
        if (ticket) command.issued!(state, accepted, ticket);
        await appending;
        return withStateLoadedOnce(command.load, accepted);
      } catch (error) {
        if (!(error instanceof WrongExpectedVersionError) || attempt >= attempts) throw error;
        await this.catchUpWithStream(command.stream);
      }
    }
  }

  /**
   * Waits until the local read models show every event of `stream`: one strongly consistent read of
   * the stream's last position. What a reader does when its read model may lag behind another
   * process (a get that misses, an append that met a newer revision).
   */
  async catchUpWithStream(stream: string): Promise<void> {
    const [last] = await this.store.readStream(stream, { direction: "backwards", fromRevision: "end", maxCount: 1 });
    const folds = this.foldsOf();
    if (last && last.position > folds.position) await folds.waitForAtMost(last.position, CATCH_UP_TIMEOUT_MS);
  }

  private foldsOf(): FoldProgress {
    if (!this.folds) throw new Error("this command pipeline has no read models to wait for");
    return this.folds;
  }
}

/**
 * The command's outcome, its `state` read from the read model when first asked for, then kept: a
 * caller that wants only the decision (a run's enqueue) does not pay a read-model load. Callers read
 * it as they resume from the await, before a read-model batch can be applied (those run in a later
 * turn of the event loop), so it is the state the append left.
 */
function withStateLoadedOnce<S, D>(load: () => S | undefined, decision: D): { readonly state: S | undefined; decision: D } {
  let loaded = false;
  let state: S | undefined;
  return {
    get state() {
      if (!loaded) {
        state = load();
        loaded = true;
      }
      return state;
    },
    decision,
  };
}
