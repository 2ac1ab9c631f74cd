import { AppendTicket, WrongExpectedVersionError, type EventStore } from "../eventstore/types.js";
import type { ReadModels } from "../read-models/all.js";
import type { Decision } from "../domain/decision.js";
import { DomainError } from "../domain/errors.js";

const MAX_ATTEMPTS = 5;
/** How long a read waits for the local read models to show a position another process reported. */
export const CATCH_UP_TIMEOUT_MS = 5_000;

export interface CommandDeps {
  store: EventStore;
  readModels: ReadModels;
}

/**
 * Waits until the local read models show every event of `stream`: one strongly consistent read of
 * the stream's last position. What a reader does when its read model may lag behind another
 * process (a get that misses, an append that met a newer revision).
 */
export async function catchUpWithStream(deps: CommandDeps, stream: string): Promise<void> {
  const [last] = await deps.store.readStream(stream, { direction: "backwards", fromRevision: "end", maxCount: 1 });
  if (last && last.position > deps.readModels.runner.position) await deps.readModels.runner.waitForAtMost(last.position, CATCH_UP_TIMEOUT_MS);
}

/**
 * Read → decide → append with the expected revision the read model saw → wait until the read model
 * shows the append (read-your-writes). A concurrent writer makes the append fail with
 * WrongExpectedVersion; then the read model is brought up to date with that stream and the
 * decision is taken again.
 */
export async function execute<S extends { revision: bigint }, R extends Decision>(
  deps: CommandDeps,
  load: () => S | undefined,
  stream: string,
  decide: (state: S | undefined) => R,
  /**
   * Called as soon as the decision's append is issued, with the state it was decided on and the
   * append's ticket: an append that depends on the ticket (AppendOptions.after) is written only if
   * this one is, in the same commit on the embedded store. Called again for each retry's append.
   */
  issued?: (state: S | undefined, decision: R & { ok: true }, ticket: AppendTicket) => void,
  /**
   * The state the caller has just loaded, to decide the first attempt on instead of loading it again.
   * Safe even if it went stale meanwhile: the append expects its revision, and a conflict reloads.
   */
  loaded?: { state: S | undefined },
  /**
   * false: return once the append is committed, without waiting for the read models to show it. Only for a
   * caller whose answer comes from the log later (a /wait's result), never for one that answers with what
   * the read models show.
   */
  awaitShown = true,
): Promise<{ state: S | undefined; decision: R & { ok: true } }> {
  for (let attempt = 1; ; attempt++) {
    const state = attempt === 1 && loaded ? loaded.state : load();
    const decision = decide(state);
    if (!decision.ok) throw new DomainError(decision.kind, decision.detail);
    if (decision.events.length === 0) return { state, decision: decision as R & { ok: true } };
    try {
      const ticket = issued ? new AppendTicket() : undefined;
      const appending = deps.store.append(stream, decision.events, state ? state.revision : "no_stream", ticket && { ticket });
      if (ticket) issued!(state, decision as R & { ok: true }, ticket);
      const result = await appending;
      if (awaitShown) await deps.readModels.runner.waitFor(result.position);
      return withStateLoadedOnce(load, decision as R & { ok: true });
    } catch (error) {
      if (!(error instanceof WrongExpectedVersionError) || attempt >= MAX_ATTEMPTS) throw error;
      await catchUpWithStream(deps, stream);
    }
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
