import type { RecordedEvent } from "../src/eventstore/types.js";

/**
 * A read model as a pure fold. The runner keeps one entity per key; `evolve` gets the entity an
 * event belongs to (or undefined) and returns its next version (undefined removes it).
 * No I/O, no clock, no randomness: rebuilding from position 0 must give the same read model.
 */
export interface Projection<S> {
  readonly name: string;
  /** Stream-name prefixes this projection reads (e.g. "thread-"). */
  readonly streamPrefixes: readonly string[];
  /** Which entity an event belongs to; undefined = not of interest. */
  key(event: RecordedEvent): string | undefined;
  evolve(state: S | undefined, event: RecordedEvent): S | undefined;
}

// Projections are heterogeneous in their state type; the runner stores them side by side.
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export type AnyProjection = Projection<any>;

export function handles(projection: AnyProjection, streamId: string): boolean {
  return projection.streamPrefixes.some((p) => streamId.startsWith(p));
}

/** Folds events into the entity maps of the given projections, in place. */
export function applyEvent(projections: readonly AnyProjection[], models: Map<string, Map<string, unknown>>, event: RecordedEvent): void {
  for (const projection of projections) {
    if (!handles(projection, event.streamId)) continue;
    const key = projection.key(event);
    if (key === undefined) continue;
    let entities = models.get(projection.name);
    if (!entities) models.set(projection.name, (entities = new Map()));
    const next = projection.evolve(entities.get(key), event);
    if (next === undefined) entities.delete(key);
    else entities.set(key, next);
  }
}

/**
 * The read model of an aggregate that owns its stream (`<prefix><id>`): one entity per stream,
 * keyed by the id, folded with the aggregate's own evolve and the event's stream revision (kept
 * so the next command can append with it as the expected revision).
 */
export function aggregateProjection<S, E>(name: string, prefix: string, evolve: (state: S | undefined, event: E, revision: bigint) => S): Projection<S> {
  return {
    name,
    streamPrefixes: [prefix],
    key: (event) => event.streamId.slice(prefix.length),
    evolve: (state, event) => evolve(state, { type: event.type, data: event.data } as E, event.revision),
  };
}
