import { AppendTicket } from "../eventstore/types.js";

/**
 * Writes a caller did not wait for, by key (a thread): readers of the key wait for them (`drain`),
 * and the owner of the work that issued them learns whether they all succeeded (`flush`), or gets
 * the tickets of their appends to make its own next append depend on them (`tickets`). A failure
 * is kept until a flush (or `tickets`) reports it, so none is lost because nobody was waiting at the time.
 */
export class DeferredAppends {
  readonly #inFlight = new Map<string, Set<Promise<void>>>();
  /** The tickets of the appends of the writes in flight (a write passes its ticket to its append). */
  readonly #tickets = new Map<string, Set<AppendTicket>>();
  readonly #failures = new Map<string, unknown>();

  /**
   * Starts `write` and tracks it under `key`: at once (synchronously), or with `afterPrevious` only
   * once the key's latest write so far has settled (for stores whose appends in flight may commit
   * in either order). `write` gets the ticket to give its append (see AppendOptions.ticket).
   */
  add(key: string, write: (ticket: AppendTicket) => Promise<unknown>, afterPrevious = false): void {
    let set = this.#inFlight.get(key);
    if (!set) this.#inFlight.set(key, (set = new Set()));
    let tickets = this.#tickets.get(key);
    if (!tickets) this.#tickets.set(key, (tickets = new Set()));
    const ticket = new AppendTicket();
    tickets.add(ticket);
    // A set iterates in insertion order: its last member is the key's latest write still in flight.
    const previous = afterPrevious ? [...set].at(-1) : undefined;
    const work = previous ? previous.then(() => write(ticket)) : write(ticket);
    // Its handlers run after `set.add` below (never synchronously), so each can untrack it: one promise per write, not three.
    const untrack = () => {
      set.delete(tracked);
      tickets.delete(ticket);
      if (set.size === 0 && this.#inFlight.get(key) === set) this.#inFlight.delete(key);
      if (tickets.size === 0 && this.#tickets.get(key) === tickets) this.#tickets.delete(key);
    };
    const tracked: Promise<void> = work.then(untrack, (error: unknown) => {
      if (!this.#failures.has(key)) this.#failures.set(key, error);
      untrack();
    });
    set.add(tracked);
  }

  /** Resolves once every write under `key` issued so far has settled (successfully or not). */
  async drain(key: string): Promise<void> {
    for (let set = this.#inFlight.get(key); set && set.size > 0; set = this.#inFlight.get(key)) await Promise.all([...set]);
  }

  /** Drains `key`, then throws the first failure among its writes since the last flush (and forgets it). */
  async flush(key: string): Promise<void> {
    await this.drain(key);
    this.#throwFailure(key);
  }

  /**
   * Without waiting: the tickets of the appends of `key`'s writes still in flight, for an append
   * that must be written only if they are (AppendOptions.after). Throws (and forgets) a failure
   * already known, as flush does.
   */
  tickets(key: string): AppendTicket[] {
    this.#throwFailure(key);
    return [...(this.#tickets.get(key) ?? [])];
  }

  #throwFailure(key: string): void {
    if (!this.#failures.has(key)) return;
    const failure = this.#failures.get(key);
    this.#failures.delete(key);
    throw failure;
  }
}
