import { WrongExpectedVersionError, type EventStore } from "../eventstore/types.js";
import type { ProjectionRunner } from "../projections/runner.js";
import type { Projection } from "../../projections/projection.js";
import type { Decision } from "../domain/decision.js";
import { HttpError } from "../http/errors.js";

const MAX_ATTEMPTS = 5;

/**
 * Read → decide → append with the expected revision the read model saw → wait until the read model
 * shows the append (read-your-writes). A concurrent writer makes the append fail with
 * WrongExpectedVersion; then the read model is brought up to date and the decision is taken again.
 */
export async function execute<S extends { revision: bigint }, R extends Decision>(
  deps: { store: EventStore; runner: ProjectionRunner },
  projection: Projection<S>,
  key: string,
  stream: string,
  decide: (state: S | undefined) => R,
): Promise<{ state: S | undefined; decision: R & { ok: true } }> {
  for (let attempt = 1; ; attempt++) {
    const state = deps.runner.get(projection, key);
    const decision = decide(state);
    if (!decision.ok) throw new HttpError(decision.status, decision.detail);
    if (decision.events.length === 0) return { state, decision: decision as R & { ok: true } };
    try {
      const result = await deps.store.append(stream, decision.events, state ? state.revision : "no_stream");
      await deps.runner.waitFor(result.position);
      return { state: deps.runner.get(projection, key), decision: decision as R & { ok: true } };
    } catch (error) {
      if (!(error instanceof WrongExpectedVersionError) || attempt >= MAX_ATTEMPTS) throw error;
      await deps.runner.waitFor(await deps.store.headPosition());
    }
  }
}
