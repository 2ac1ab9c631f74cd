import t from "tap";
import { execFile } from "node:child_process";
import { rm } from "node:fs/promises";
import { startTestServer, repoRoot, TEST_GRAPHS } from "../support/server.js";

/** `npm run replay` on a real data directory: next to a running server (it holds the lock), then alone. */

function replayCli(env: Record<string, string>, args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      ["--import", "tsx", "src/app/replay-cli.ts", ...args],
      { cwd: repoRoot, env: { ...process.env, LANGGRAPH_JSON: TEST_GRAPHS, ...env } },
      (error, stdout, stderr) => resolve({ code: error ? ((error as { code?: number }).code ?? 1) : 0, stdout, stderr }),
    );
  });
}

t.test("replay CLI", async (t) => {
  const srv = await startTestServer();
  t.teardown(() => rm(srv.dataDir, { recursive: true, force: true }));
  const thread = await srv.client.threads.create({ metadata: { who: "cli" } });
  await srv.client.runs.wait(thread.thread_id, "agent", { input: { messages: [{ role: "user", content: "hello" }] } });
  const events = (await (await fetch(`${srv.url}/threads/${thread.thread_id}/events?limit=1000`)).json()) as { position: string; type: string }[];
  const enqueued = events.find((e) => e.type === "RunEnqueued")!.position;
  const fromApi = await (await fetch(`${srv.url}/threads/${thread.thread_id}/replay?at=${enqueued}`)).json();
  const env = { DATA_DIR: srv.dataDir, HOST: "127.0.0.1", PORT: String(srv.server.port) };

  // The server holds the event store's exclusive lock: the CLI asks it over HTTP.
  const running = await replayCli(env, ["--thread", thread.thread_id, "--at", enqueued]);
  t.equal(running.code, 0, running.stderr);
  t.same(JSON.parse(running.stdout), fromApi, "next to a running server: the server's answer");

  await srv.server.close();
  // Alone: the file is opened read-only and folded by the CLI itself.
  const alone = await replayCli(env, ["--thread", thread.thread_id, "--at", enqueued]);
  t.equal(alone.code, 0, alone.stderr);
  t.same(JSON.parse(alone.stdout), fromApi, "on the data directory alone: the same state");
  const latest = JSON.parse((await replayCli(env, ["--thread", thread.thread_id])).stdout) as {
    thread: { status: string; values: { messages: { content: string }[] } };
    runs: { status: string }[];
  };
  t.equal(latest.thread.status, "idle");
  t.same(
    latest.thread.values.messages.map((m) => m.content),
    ["hello", "You said: hello"],
  );
  t.same(
    latest.runs.map((r) => r.status),
    ["success"],
  );

  const diff = await replayCli(env, ["--thread", thread.thread_id, "--diff", enqueued]);
  t.equal(diff.code, 0, diff.stderr);
  const changes = JSON.parse(diff.stdout) as { from: { position: string }; changes: { path: string[]; value?: unknown; oldValue?: unknown }[] };
  t.equal(changes.from.position, enqueued);
  t.ok(
    changes.changes.some((c) => c.path.join(".") === "thread.status" && c.oldValue === "busy" && c.value === "idle"),
    "the diff shows busy → idle",
  );

  const bad = await replayCli(env, ["--thread", thread.thread_id, "--at", "not-a-time"]);
  t.equal(bad.code, 2);
  t.match(bad.stderr, /--at: expected a log position/);
  const unknown = await replayCli(env, ["--thread", "00000000-0000-4000-8000-000000000000"]);
  t.equal(unknown.code, 1);
  t.match(unknown.stderr, /not found/);
  const missing = await replayCli(env, []);
  t.equal(missing.code, 2);
  t.match(missing.stderr, /--thread/);
});
