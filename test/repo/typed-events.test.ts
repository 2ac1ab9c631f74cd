import t from "tap";
import path from "node:path";
import { readdirSync, readFileSync } from "node:fs";

/**
 * Typed events: an event's data is read through the catalogue's types (`isEvent(e, "RunEnded")`, see
 * src/domain/event-of.ts), never cast to a shape written at the call site (`e.data as { run_id: string }`),
 * which the schema could leave behind unnoticed. The casts left are of data that is not a catalogue
 * event's, each listed here with its reason.
 */

const root = path.resolve(import.meta.dirname, "../..");

/** A cast of some `.data`: what this check looks for, one line at a time. */
const DATA_CAST = /\.data as /;

interface Allowed {
  /** The file (relative to the repository, `/`-separated) the cast is in. */
  file: string | RegExp;
  /** Text of the line that holds it. */
  snippet: string;
  reason: string;
}

const ALLOWED: Allowed[] = [
  {
    file: "src/eventstore/types.ts",
    snippet: "(event.data as PurgedEventData | null)?.purged_type",
    reason: "a tombstone (EventPurged) is written by the SQLite adapter, not a catalogue event: `purgedTypeOf` is its one typed reader",
  },
  {
    file: "src/eventstore/large-values.ts",
    snippet: "event?.data as { event?: unknown; data?: unknown } | undefined",
    reason: "the event store layer sits below the catalogue; checks that the event a reference names is the RunOutput it names",
  },
  {
    file: "src/read-models/purged-content.ts",
    snippet: "purge.data as { thread_id?: unknown; run_ids?: unknown } | null",
    reason: "a ThreadPurged read as untrusted on purpose: a record the scan cannot read must hide nothing",
  },
  {
    file: "src/read-models/auth-filters.ts",
    snippet: "parsed.data as AuthFilters",
    reason: "a zod parse result (an auth handler's filters), not an event",
  },
  {
    file: "src/a2a/codec.ts",
    snippet: "data: p.data as Record<string, never>",
    reason: "an A2A data part of a message, not an event",
  },
  {
    file: "src/runtime/protocol-chunks.ts",
    snippet: "(record.data as { event?: unknown }).event",
    reason: "a protocol record's payload (a lifecycle record), not an event",
  },
  {
    file: "src/protocol/log-events.ts",
    snippet: "data.data as ProtocolRecord",
    reason: "a RunOutput chunk's payload, `unknown` in the catalogue (any chunk): a protocol-mode chunk's is a ProtocolRecord",
  },
  {
    file: "src/protocol/log-events.ts",
    snippet: "(record.data as { interrupt_id?: unknown }).interrupt_id",
    reason: "a protocol record's payload (input.requested), not an event",
  },
];

const matchesFile = (a: Allowed, file: string) => (typeof a.file === "string" ? a.file === file : a.file.test(file));

/** The `.data as` casts of `text` (the lines of file `file`) that no entry allows, and the entries that allowed one. */
function disallowedCasts(file: string, text: string, used: Set<Allowed>): string[] {
  const out: string[] = [];
  text.split("\n").forEach((line, i) => {
    if (!DATA_CAST.test(line)) return;
    const allowed = ALLOWED.find((a) => matchesFile(a, file) && line.includes(a.snippet));
    if (allowed) used.add(allowed);
    else out.push(`${file}:${i + 1}: ${line.trim()}`);
  });
  return out;
}

t.test("the check catches a cast of event data and lets typed reads through", async (t) => {
  const used = new Set<Allowed>();
  const sample = [
    'if (e.type === "RunEnqueued") ids.add((e.data as { run: { run_id: string } }).run.run_id);',
    "const ended = event.data as RunEnded;",
    'if (isEvent(e, "RunEnqueued")) ids.add(e.data.run.run_id);',
    "const d = event.data;",
    "const parsed = metadata as Record<string, unknown>;",
  ].join("\n");
  t.same(
    disallowedCasts("src/app/sample.ts", sample, used).map((l) => l.split(": ")[0]),
    ["src/app/sample.ts:1", "src/app/sample.ts:2"],
  );
  t.same(disallowedCasts("src/read-models/auth-filters.ts", "  if (parsed.success) return parsed.data as AuthFilters;", used), [], "an allowed cast passes");
  t.same(disallowedCasts("src/app/other.ts", "  if (parsed.success) return parsed.data as AuthFilters;", used).length, 1, "only in its own file");
});

t.test("no event data is cast outside the allowlist (use isEvent from src/domain/event-of.ts)", async (t) => {
  const files = ["src", "projections"].flatMap((dir) =>
    (readdirSync(path.join(root, dir), { recursive: true }) as string[])
      .filter((f) => f.endsWith(".ts"))
      .map((f) => path.join(dir, f).split(path.sep).join("/")),
  );
  t.ok(files.length > 150, `every source file was read (${files.length})`);
  const used = new Set<Allowed>();
  const found = files.flatMap((f) => disallowedCasts(f, readFileSync(path.join(root, f), "utf8"), used));
  t.same(found, [], "every `.data as` cast is of data that is not a catalogue event's, and is allowlisted with its reason");
  t.same(
    ALLOWED.filter((a) => !used.has(a)).map((a) => `${String(a.file)}: ${a.snippet}`),
    [],
    "every allowlist entry still names a cast (drop the ones that are gone)",
  );
});
