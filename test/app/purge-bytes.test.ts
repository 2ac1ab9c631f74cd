import t from "tap";
import { randomUUID } from "node:crypto";
import { mkdtemp, readdir, readFile, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { spawnServer, stopServer } from "../support/process.js";
import { callJson } from "../support/http.js";
import { Receiver, writeWebhookConfig } from "../support/webhooks.js";

/**
 * `DELETE /threads/{id}?purge=true` on the embedded store removes the bytes: no file of DATA_DIR
 * (event log, read models, their WALs) holds the purged thread's content any more, both while the
 * server runs on and after it stopped. A marker of a thread that was not purged is still found, so
 * the scan does look where the content lives. The purged thread's run has a webhook: its delivery
 * (which holds the run) goes too.
 */

/** A marker no other content contains: letters only, so JSON escaping leaves it as it is. */
function marker(name: string): string {
  return `${name}${randomUUID().replaceAll("-", "")}`;
}

/** Every regular file under `dir` (recursively) whose bytes contain `needle` (as UTF-8). */
async function filesContaining(dir: string, needle: string): Promise<string[]> {
  const bytes = Buffer.from(needle, "utf8");
  const found: string[] = [];
  for (const entry of await readdir(dir, { withFileTypes: true, recursive: true })) {
    if (!entry.isFile()) continue;
    const file = path.join(entry.parentPath, entry.name);
    if ((await readFile(file)).includes(bytes)) found.push(path.relative(dir, file));
  }
  return found.sort();
}

t.test("a purge leaves no byte of the thread's content in DATA_DIR, WALs included", async (t) => {
  const dataDir = await mkdtemp(path.join(os.tmpdir(), "purge-bytes-"));
  t.teardown(() => rm(dataDir, { recursive: true, force: true }));
  const receiver = await new Receiver().start();
  t.teardown(() => receiver.close());
  const config = await writeWebhookConfig({ webhooks: { url: { disable_private_ips: false, disable_loopback: false } } });
  t.teardown(() => rm(path.dirname(config), { recursive: true, force: true }));
  const proc = await spawnServer({ DATA_DIR: dataDir, LANGGRAPH_JSON: config });
  t.teardown(() => stopServer(proc));
  t.ok(proc.url, `the server started (stderr: ${proc.stderr})`);
  const url = proc.url!;

  const inMetadata = marker("purgedmetadata");
  const inInput = marker("purgedinput");
  const kept = marker("keptmetadata");

  const purged = await callJson<{ thread_id: string }>(`${url}/threads`, "POST", { metadata: { secret: inMetadata } });
  t.equal(purged.status, 200);
  const threadId = purged.body.thread_id;
  // A run with the marker in its input: the graph echoes it into the thread's state and the run's output.
  // The message is larger than a page (4 KiB), so its rows spill to overflow pages, which a rewrite frees.
  const run = await callJson(`${url}/threads/${threadId}/runs/wait`, "POST", {
    assistant_id: "agent",
    input: { messages: [{ role: "user", content: `${inInput} ${"filler ".repeat(3000)}` }] },
    metadata: { note: inMetadata },
    webhook: `${receiver.url}/hook`,
  });
  t.equal(run.status, 200, JSON.stringify(run.body));
  t.match((await receiver.nth(1)).body, inInput, "the webhook was delivered, with the run");
  t.match(JSON.stringify(run.body), inInput, "the run saw the input");
  // The metadata search index holds the marker too.
  const found = await callJson<unknown[]>(`${url}/threads/search`, "POST", { metadata: { secret: inMetadata } });
  t.equal(found.body.length, 1, "the thread is found by its metadata");

  const other = await callJson<{ thread_id: string }>(`${url}/threads`, "POST", { metadata: { secret: kept } });
  t.equal(other.status, 200);
  const otherRun = await callJson(`${url}/threads/${other.body.thread_id}/runs/wait`, "POST", {
    assistant_id: "agent",
    input: { messages: [{ role: "user", content: kept }] },
  });
  t.equal(otherRun.status, 200);

  const purge = await callJson(`${url}/threads/${threadId}?purge=true`, "DELETE");
  t.equal(purge.status, 204, JSON.stringify(purge.body));

  // While the server runs on: the purge has returned, so its bytes are gone already.
  t.same(await filesContaining(dataDir, inMetadata), [], "running: the metadata marker is in no file");
  t.same(await filesContaining(dataDir, inInput), [], "running: the input marker is in no file");
  t.not((await filesContaining(dataDir, kept)).length, 0, "running: the kept thread's marker is found");

  // The server still works after the purge, and keeps the rest.
  t.equal((await callJson(`${url}/threads/${threadId}`, "GET")).status, 404, "the purged thread is gone");
  t.equal((await callJson(`${url}/threads/${other.body.thread_id}`, "GET")).status, 200, "the other thread is kept");
  const events = await callJson<{ type: string }[]>(`${url}/threads/${threadId}/events?include_output=true&limit=1000`, "GET");
  t.equal(events.status, 200);
  t.ok(
    events.body.some((e) => e.type === "ThreadPurged"),
    "the record of the purge stays in the log",
  );
  const again = await callJson<unknown[]>(`${url}/threads/search`, "POST", { metadata: { secret: inMetadata } });
  t.same(again.body, [], "the metadata search no longer finds it");

  t.equal(await stopServer(proc), 0, "a clean stop");
  const files = await filesContaining(dataDir, "");
  t.ok(files.includes("events.sqlite") && files.includes("read-models.sqlite"), `the databases are where the scan looks: ${files.join(", ")}`);
  t.same(await filesContaining(dataDir, inMetadata), [], "stopped: the metadata marker is in no file");
  t.same(await filesContaining(dataDir, inInput), [], "stopped: the input marker is in no file");
  t.not((await filesContaining(dataDir, kept)).length, 0, "stopped: the kept thread's marker is found");
});
