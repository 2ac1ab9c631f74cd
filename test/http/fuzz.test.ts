import t from "tap";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { repoRoot, startTestServer } from "../support/server.js";
import { sendRaw, type RawAnswer } from "../support/raw-http.js";
import { RECEIVE_TIMEOUTS } from "../../src/http/app.js";

/**
 * Malformed requests over raw sockets to a real server (a custom app mounted, so its body
 * reading is on the path too), from a fixed seed: each gets an HTTP answer, never a 5xx, within a
 * bound, and the server serves normal requests afterwards. Requests the client never finishes
 * (a body shorter than its Content-Length, a chunked body without its last chunk, headers without
 * their blank line, `Expect: 100-continue` and no body) are answered 408 by the receive timeouts;
 * here they are lowered on the live server, which node reads at each of its periodic checks.
 * A request that names a method this API has no use for, CONNECT, is answered 405 and closed.
 * The one documented close without an answer: a client that shuts its sending side (FIN) before
 * the answer is ready is taken to have gone, as node does (that is what a FIN nearly always
 * means, and it is what cancels a run on disconnect), so whether it is answered depends on timing.
 */

const SEED = 0x5eed_f022;
const COUNT = 320;
const CONCURRENCY = 40;
const HEADERS_MS = 1_000;
const REQUEST_MS = 2_000;
/** The longest a request may wait: the request timeout, two checks late, and slack for a loaded machine. */
const ANSWER_WITHIN_MS = REQUEST_MS + 2 * RECEIVE_TIMEOUTS.checkEveryMs + 4_000;

/** mulberry32: a small seeded generator, so every run sends the same requests. */
function generator(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let x = Math.imul(a ^ (a >>> 15), 1 | a);
    x = (x + Math.imul(x ^ (x >>> 7), 61 | x)) ^ x;
    return ((x ^ (x >>> 14)) >>> 0) / 4294967296;
  };
}

interface Fuzzed {
  label: string;
  bytes: Buffer;
  halfClose: boolean;
}

const UUID = "00000000-0000-4000-8000-000000000000";
const RUN = "00000000-0000-4000-8000-000000000001";
/** Well-formed requests the mutations start from: [method, target, JSON body or none]. */
const BASES: [string, string, unknown][] = [
  ["GET", "/ok", undefined],
  ["GET", "/info", undefined],
  ["POST", "/threads", {}],
  ["POST", "/threads/search", { limit: 2 }],
  ["POST", "/assistants/search", {}],
  ["GET", `/threads/${UUID}`, undefined],
  ["DELETE", `/threads/${UUID}`, undefined],
  ["GET", `/threads/${UUID}/runs/${RUN}/join`, undefined],
  ["POST", "/runs/wait", { assistant_id: "agent", input: { messages: [{ role: "user", content: "hi" }] } }],
  ["POST", `/threads/${UUID}/runs/wait`, { assistant_id: "agent" }],
  ["PUT", "/store/items", { namespace: ["a"], key: "k", value: { v: 1 } }],
  ["POST", "/custom/echo", { hello: "world" }],
  ["GET", "/custom/secret", undefined],
  ["GET", "/docs", undefined],
];

function fuzzCases(random: () => number): Fuzzed[] {
  const pick = <T>(items: readonly T[]): T => items[Math.floor(random() * items.length)];
  const cases: Fuzzed[] = [];
  for (let i = 0; i < COUNT; i++) {
    const [method0, target0, json] = pick(BASES);
    let method = method0;
    let target = target0;
    let body = json === undefined ? "" : JSON.stringify(json);
    let headers: [string, string][] = [
      ["Host", "127.0.0.1"],
      ["Connection", pick(["close", "keep-alive"])],
    ];
    if (json !== undefined) headers.push(["Content-Type", "application/json"]);
    let framing: "length" | "chunked" | "none" = json === undefined ? "none" : "length";
    let lengthDelta = 0;
    let cut: number | undefined;
    let chunkedEnd = true;
    let headersEnd = true;
    let version = "HTTP/1.1";
    /** Header lines that are not well formed (no colon, a bad name, a folded line). */
    const rawLines: string[] = [];
    const mutations: string[] = [];
    const count = 1 + Math.floor(random() * 2);
    for (let m = 0; m < count; m++) {
      const mutation = pick([
        "short-body",
        "long-body",
        "chunked",
        "chunked-unfinished",
        "content-type",
        "no-content-type",
        "get-with-body",
        "invalid-utf8",
        "invalid-json",
        "deep-json",
        "huge-header",
        "slow-loris",
        "expect-continue",
        "expect-other",
        "bad-content-length",
        "two-content-lengths",
        "te-and-cl",
        "bad-method",
        "bad-version",
        "odd-target",
        "no-host",
        "two-hosts",
        "bad-host",
        "header-no-colon",
        "pipelined",
        "flip-byte",
        "cut",
        "connect",
        "half-close",
      ] as const);
      mutations.push(mutation);
      switch (mutation) {
        case "short-body":
          framing = "length";
          body ||= "{}";
          lengthDelta = 1 + Math.floor(random() * 50);
          break;
        case "long-body":
          framing = "length";
          body = `${body || "{}"}${"x".repeat(1 + Math.floor(random() * 20))}`;
          lengthDelta = -Math.min(body.length - 1, 1 + Math.floor(random() * 20));
          break;
        case "chunked":
          framing = "chunked";
          body ||= "{}";
          break;
        case "chunked-unfinished":
          framing = "chunked";
          body ||= "{}";
          chunkedEnd = false;
          break;
        case "content-type":
          headers = headers.filter(([n]) => n !== "Content-Type");
          headers.push([
            "Content-Type",
            pick([
              "application/xml",
              "text/plain",
              "multipart/form-data",
              "application/x-www-form-urlencoded",
              "application/json; charset=latin1",
              "",
              "application/json, text/html",
            ]),
          ]);
          break;
        case "no-content-type":
          headers = headers.filter(([n]) => n !== "Content-Type");
          break;
        case "get-with-body":
          method = "GET";
          body ||= '{"a":1}';
          framing = "length";
          break;
        case "invalid-utf8":
          body = `{"a":"\xff\xfe\xc0"}`;
          framing = framing === "none" ? "length" : framing;
          break;
        case "invalid-json":
          body = pick(['{"a":', "[1,2", "nul", '{"a":1}}', "\u0000", '{"__proto__":{"x":1}}', '{"constructor":{"prototype":{}}}']);
          framing = framing === "none" ? "length" : framing;
          break;
        case "deep-json":
          body = `${"[".repeat(5000)}${"]".repeat(5000)}`;
          framing = framing === "none" ? "length" : framing;
          break;
        case "huge-header":
          headers.push(["X-Huge", "h".repeat(20_000 + Math.floor(random() * 60_000))]);
          break;
        case "slow-loris":
          headersEnd = false;
          break;
        case "expect-continue":
          headers.push(["Expect", "100-continue"]);
          if (random() < 0.5) {
            body ||= "{}";
            framing = "length";
            cut = 0;
          }
          break;
        case "expect-other":
          headers.push(["Expect", "something-else"]);
          break;
        case "bad-content-length":
          headers.push(["Content-Length", pick(["abc", "-1", "1e3", " 5", "99999999999999999999"])]);
          framing = "none";
          break;
        case "two-content-lengths":
          headers.push(["Content-Length", "1"], ["Content-Length", "2"]);
          framing = "none";
          break;
        case "te-and-cl":
          headers.push(["Transfer-Encoding", pick(["chunked", "gzip", "chunked, gzip", "identity"])], ["Content-Length", "2"]);
          framing = "none";
          break;
        case "bad-method":
          method = pick(["FOO", "GETT", "get", "PRI", "TRACE", "PROPFIND", "M-SEARCH"]);
          break;
        case "bad-version":
          version = pick(["HTTP/2.0", "HTTP/1.2", "HTTP/0.9", "HTTPS/1.1", "", "HTTP/1.1 extra"]);
          break;
        case "odd-target":
          target = pick([
            "/docs/../custom/secret",
            "/%2e%2e/x",
            "*",
            "http://127.0.0.1/ok",
            "/a\\b",
            "/ok#x",
            "/ok?x=/../y",
            "//ok",
            "/ok;a",
            "/%",
            "/%FF",
            "/threads/%00",
            `/threads/${"a".repeat(3000)}`,
            "/ok?" + "q".repeat(9000),
            "/ú",
            "/ok\t",
          ]);
          break;
        case "no-host":
          headers = headers.filter(([n]) => n !== "Host");
          break;
        case "two-hosts":
          headers.push(["Host", "other"]);
          break;
        case "bad-host":
          headers = headers.filter(([n]) => n !== "Host");
          headers.push(["Host", pick(["x/custom/secret?", "a@b", "[::1", "x:99999999", "x y", ""])]);
          break;
        case "header-no-colon":
          rawLines.push(pick(["Bogus", "Bad Name: 1", "X-\u0001: 1", " folded"]));
          break;
        case "pipelined":
          break;
        case "flip-byte":
          cut = -1;
          break;
        case "cut":
          cut = Math.floor(random() * 200);
          break;
        case "connect":
          method = "CONNECT";
          target = "127.0.0.1:443";
          break;
        case "half-close":
          break;
      }
    }
    const lines = [`${method} ${target} ${version}`.trimEnd(), ...headers.map(([name, value]) => `${name}: ${value}`), ...rawLines];
    let payload = body;
    if (framing === "length") lines.push(`Content-Length: ${Buffer.byteLength(body, "latin1") + lengthDelta}`);
    if (framing === "chunked") {
      lines.push("Transfer-Encoding: chunked");
      payload = `${Buffer.byteLength(body, "latin1").toString(16)}\r\n${body}\r\n${chunkedEnd ? "0\r\n\r\n" : ""}`;
    }
    let text = `${lines.join("\r\n")}\r\n${headersEnd ? `\r\n${payload}` : ""}`;
    if (mutations.includes("pipelined") && headersEnd) text += "GET /ok HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";
    let bytes = Buffer.from(text, "latin1");
    if (cut === -1) {
      const at = Math.floor(random() * bytes.length);
      bytes = Buffer.from(bytes);
      bytes[at] = Math.floor(random() * 256);
    } else if (cut !== undefined && cut > 0 && cut < bytes.length) {
      bytes = bytes.subarray(0, cut);
    } else if (cut === 0) {
      // Expect: 100-continue, then the body never sent.
      bytes = Buffer.from(text.slice(0, text.length - payload.length), "latin1");
    }
    cases.push({ label: `#${i} ${method0} ${target0} [${mutations.join(", ")}]`, bytes, halfClose: mutations.includes("half-close") });
  }
  return cases;
}

t.test("malformed requests each get an answer in time; the server keeps serving", async (t) => {
  const dir = await mkdtemp(path.join(os.tmpdir(), "agent-server-fuzz-"));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  await writeFile(
    path.join(dir, "langgraph.json"),
    JSON.stringify({
      graphs: { agent: path.join(repoRoot, "test", "graphs", "agent.ts") + ":graph" },
      http: { app: path.join(repoRoot, "test", "graphs", "secret-app.ts") + ":app" },
    }),
  );
  const srv = await startTestServer({ env: { LANGGRAPH_JSON: path.join(dir, "langgraph.json") } });
  t.teardown(() => srv.close());
  const server = srv.server.http.server;
  t.equal(server.headersTimeout, RECEIVE_TIMEOUTS.headersMs, "the server's own receive timeouts are set");
  t.equal(server.requestTimeout, RECEIVE_TIMEOUTS.requestMs);
  server.headersTimeout = HEADERS_MS;
  server.requestTimeout = REQUEST_MS;

  const cases = fuzzCases(generator(SEED));
  const fuzzStarted = Date.now();
  const failures: string[] = [];
  const statuses = new Map<number | "closed", number>();
  let next = 0;
  const worker = async () => {
    while (next < cases.length) {
      const c = cases[next++];
      const started = Date.now();
      let answer: RawAnswer | undefined;
      try {
        answer = await sendRaw(srv.url, c.bytes, ANSWER_WITHIN_MS, { headOnly: true, halfClose: c.halfClose });
      } catch (error) {
        failures.push(`${c.label}: ${(error as Error).message}`);
        continue;
      }
      const status = answer?.status ?? "closed";
      statuses.set(status, (statuses.get(status) ?? 0) + 1);
      if (answer === undefined) {
        if (!c.halfClose) failures.push(`${c.label}: closed without an answer after ${Date.now() - started} ms`);
      } else if (answer.status >= 500) failures.push(`${c.label}: ${answer.status} ${answer.body.slice(0, 200)}`);
    }
  };
  await Promise.all(Array.from({ length: CONCURRENCY }, worker));
  t.same(failures, [], "every request answered, none with a 5xx");
  t.comment(`${cases.length} requests in ${Date.now() - fuzzStarted} ms; statuses: ${JSON.stringify(Object.fromEntries([...statuses].sort()))}`);
  t.ok((statuses.get(408) ?? 0) > 0, "some requests were only answered by the receive timeout");
  t.ok(
    [...statuses.keys()].some((s) => typeof s === "number" && s < 300),
    "some mutations were harmless and answered normally",
  );

  server.headersTimeout = RECEIVE_TIMEOUTS.headersMs;
  server.requestTimeout = RECEIVE_TIMEOUTS.requestMs;
  const ok = await fetch(`${srv.url}/ok`);
  t.equal(ok.status, 200, "the server still serves");
  const thread = await srv.client.threads.create({ metadata: { after: "fuzz" } });
  t.equal((await srv.client.threads.get(thread.thread_id)).metadata?.after, "fuzz");
});
