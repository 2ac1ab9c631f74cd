/**
 * EventStoreDB was renamed KurrentDB; its newer clients take `kurrentdb://` (and `kurrent://`, `kdb://`,
 * each also `+discover`) beside the old `esdb://`. The client we use (@eventstore/db-client 6.x) knows
 * only `esdb://` and `esdb+discover://`: every scheme is accepted here and handed over as its esdb twin.
 */
const SCHEME = /^(esdb|kurrentdb|kurrent|kdb)(\+discover)?:\/\//i;

/** The same connection string with the scheme the client parses (`esdb://` or `esdb+discover://`). */
export function toEsdbClientConnectionString(text: string): string {
  return text.trim().replace(SCHEME, (_all, _name: string, discover: string | undefined) => (discover ? "esdb+discover://" : "esdb://"));
}
