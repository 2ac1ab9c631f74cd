/**
 * `npm run replay -- --thread <id> [--at <position|time>] [--diff <position|time>] [--incarnation <n>]`:
 * the thread as it was at a point of the log (default: now), or the changes between `--diff` and
 * `--at`, as JSON, computed from the log with the same pure folds as GET /threads/{id}/replay. A
 * thread id created again after a deletion has several incarnations: the one in effect at the point
 * is shown, or the one `--incarnation` names.
 *
 * Where the log is: EVENTSTORE_URL (EventStoreDB, read directly), else DATA_DIR/events.sqlite opened
 * read-only. A running server holds that file's exclusive lock and keeps recent commits in a WAL
 * only it can read consistently, so a copy of the files could be torn: when the file is locked the
 * tool asks the server that holds it (AGENT_SERVER_URL, default http://HOST:PORT, with
 * LANGGRAPH_API_KEY), which answers from the same log with the same code. With LANGGRAPH_AES_KEY the
 * log is read through its key vault, as the server reads it.
 */
import path from "node:path";
import { parseArgs } from "node:util";
import { loadConfig } from "../config.js";
import { openStore } from "../eventstore/open.js";
import { openEncryption } from "../eventstore/encryption.js";
import { contentPolicy } from "../domain/content-fields.js";
import { StoreUnavailableError, type EventStore } from "../eventstore/types.js";
import { historyView, logPointParam, replayFromLog, threadEventsOr404, type ReplayJson } from "./audit.js";
import { DomainError, invalid, notFound } from "../domain/errors.js";

class UsageError extends Error {}

async function openRawLog(config: ReturnType<typeof loadConfig>): Promise<EventStore | "locked"> {
  if (config.eventstoreUrl) return openStore(config);
  const { openSqliteStoreReadOnly } = await import("../eventstore/sqlite.js");
  try {
    return openSqliteStoreReadOnly(path.join(config.dataDir, "events.sqlite"));
  } catch (error) {
    if (error instanceof StoreUnavailableError && /locked/.test(error.message)) return "locked";
    throw error;
  }
}

/** The log, opened through the key vault when a master key is set; the vault closes with the store. */
async function openLog(config: ReturnType<typeof loadConfig>): Promise<EventStore | "locked"> {
  const log = await openRawLog(config);
  // A locked log is read by the server that holds it, which has its own vault open.
  if (log === "locked") return log;
  let encryption;
  try {
    encryption = await openEncryption(config.encryption, contentPolicy);
  } catch (error) {
    await log.close();
    throw error;
  }
  if (!encryption) return log;
  const store = encryption.wrap(log);
  return {
    ...store,
    close: async () => {
      try {
        await store.close();
      } finally {
        encryption.close();
      }
    },
  };
}

async function askServer(config: ReturnType<typeof loadConfig>, threadId: string, at?: string, since?: string, incarnation?: number): Promise<ReplayJson> {
  const base = process.env.AGENT_SERVER_URL ?? `http://${config.host.includes(":") ? `[${config.host}]` : config.host}:${config.port}`;
  const query = new URLSearchParams();
  if (at !== undefined) query.set("at", at);
  if (since !== undefined) query.set("diff", since);
  if (incarnation !== undefined) query.set("incarnation", String(incarnation));
  const res = await fetch(`${base}/threads/${encodeURIComponent(threadId)}/replay?${query}`, { headers: config.apiKey ? { "x-api-key": config.apiKey } : {} });
  const body = (await res.json()) as ReplayJson & { detail?: string };
  if (!res.ok) {
    // The server's refusal becomes the same error the local replay would raise.
    const detail = body.detail ?? `HTTP ${res.status}`;
    throw res.status === 422 ? invalid(detail) : res.status === 404 ? notFound(detail) : new Error(detail);
  }
  return body;
}

/** What the tool prints: the state, or with --diff the changes only. */
function output(result: ReplayJson): unknown {
  if (!result.diff) return result;
  return { thread_id: result.thread_id, incarnation: result.incarnation, from: result.diff.from, to: result.at, changes: result.diff.changes };
}

async function main(): Promise<number> {
  const { values } = parseArgs({
    options: { thread: { type: "string" }, at: { type: "string" }, diff: { type: "string" }, incarnation: { type: "string" } },
    strict: true,
  });
  if (!values.thread) throw new UsageError("--thread <id> is required");
  const at = logPointParam("--at", values.at);
  const since = logPointParam("--diff", values.diff);
  if (values.incarnation !== undefined && !/^[1-9]\d{0,8}$/.test(values.incarnation))
    throw invalid(`--incarnation: expected a positive integer, got ${JSON.stringify(values.incarnation)}`);
  const incarnation = values.incarnation === undefined ? undefined : Number(values.incarnation);
  const config = loadConfig();
  const store = await openLog(config);
  let result: ReplayJson;
  if (store === "locked") {
    result = await askServer(config, values.thread, values.at, values.diff, incarnation);
  } else {
    try {
      const view = historyView(values.thread, await threadEventsOr404(store, values.thread), undefined, incarnation);
      if (view.incarnations.length === 0) throw notFound(`Thread with ID ${values.thread} has no incarnation ${incarnation}`);
      result = await replayFromLog(store, values.thread, at, since, view);
    } finally {
      await store.close();
    }
  }
  process.stdout.write(JSON.stringify(output(result), (_k, v: unknown) => (typeof v === "bigint" ? String(v) : v), 2) + "\n");
  return 0;
}

main().then(
  (code) => process.exit(code),
  (error: unknown) => {
    const message = error instanceof DomainError ? error.detail : error instanceof Error ? error.message : String(error);
    console.error(`replay: ${message}`);
    process.exit(
      error instanceof UsageError ||
        (error instanceof DomainError && error.kind === "invalid") ||
        (error as { code?: string }).code?.startsWith("ERR_PARSE_ARGS")
        ? 2
        : 1,
    );
  },
);
