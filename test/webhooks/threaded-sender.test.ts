import http from "node:http";
import type { AddressInfo } from "node:net";
import t from "tap";
import { WebhookUrlPolicySchema } from "../../src/langgraph-config.js";
import { threadedSender } from "../../src/webhooks/threaded-sender.js";
import { Receiver } from "../support/webhooks.js";

/**
 * The webhook sender's own thread: real POSTs to receivers on 127.0.0.1, the URL policy applied
 * in that thread's socket lookup, aborts crossing the thread boundary, and a thread started again
 * after it was closed.
 */

const policy = (over: Record<string, unknown> = {}) => WebhookUrlPolicySchema.parse(over);
const open = policy({ disable_private_ips: false, disable_loopback: false });

t.test("sends from its thread: body, headers, status and Retry-After come back", async (t) => {
  const receiver = await new Receiver().start();
  t.teardown(() => receiver.close());
  const sender = threadedSender({ connectTimeoutMs: 2_000, totalTimeoutMs: 5_000, policy: open });
  t.teardown(() => sender.close());

  const ok = await sender.send(`${receiver.url}/hook?token=a%2Fb`, '{"run_id":"r1"}', { "content-type": "application/json", "x-webhook-id": "d1" });
  t.same(ok, { statusCode: 200 });
  t.equal(receiver.requests.length, 1);
  t.match(receiver.requests[0], {
    method: "POST",
    url: "/hook?token=a%2Fb",
    body: '{"run_id":"r1"}',
    headers: { "content-type": "application/json", "x-webhook-id": "d1" },
  });

  receiver.script.push({ status: 503, headers: { "retry-after": "7" } });
  t.same(await sender.send(`${receiver.url}/hook`, "{}", {}), { statusCode: 503, retryAfter: "7" }, "the status and Retry-After, for the retry policy");

  const sends = await Promise.all(Array.from({ length: 20 }, (_, i) => sender.send(`${receiver.url}/many`, JSON.stringify({ i }), {})));
  t.same(sends, Array(20).fill({ statusCode: 200 }), "concurrent sends each get their own answer");
  t.same(
    receiver.requests
      .filter((r) => r.url === "/many")
      .map((r) => JSON.parse(r.body).i)
      .sort((a, b) => a - b),
    [...Array(20).keys()],
  );
});

t.test("the policy holds in the thread's socket lookup; a closed port is an error, not a throw", async (t) => {
  const receiver = await new Receiver().start();
  t.teardown(() => receiver.close());
  const strict = threadedSender({ connectTimeoutMs: 2_000, totalTimeoutMs: 5_000, policy: policy() });
  t.teardown(() => strict.close());
  const blocked = await strict.send(`http://localhost:${receiver.port}/x`, "{}", {});
  t.match(blocked, { error: /^Webhook host blocked: localhost resolves to (127\.0\.0\.1|::1)/, final: true });
  t.equal(receiver.requests.length, 0, "nothing reached the receiver");

  const idle = http.createServer();
  await new Promise<void>((resolve) => idle.listen(0, "127.0.0.1", resolve));
  const port = (idle.address() as AddressInfo).port;
  await new Promise<void>((resolve) => idle.close(() => resolve()));
  const sender = threadedSender({ connectTimeoutMs: 2_000, totalTimeoutMs: 5_000, policy: open });
  t.teardown(() => sender.close());
  t.match(await sender.send(`http://127.0.0.1:${port}/x`, "{}", {}), { error: /ECONNREFUSED/ });
});

t.test("an abort reaches the thread; closing stops it, and the next send starts it again", async (t) => {
  let arrived!: () => void;
  const reached = new Promise<void>((resolve) => (arrived = resolve));
  const hanging = http.createServer(() => arrived()); // never answers
  await new Promise<void>((resolve) => hanging.listen(0, "127.0.0.1", resolve));
  t.teardown(() => {
    hanging.closeAllConnections();
    hanging.close();
  });
  const url = `http://127.0.0.1:${(hanging.address() as AddressInfo).port}/slow`;
  const sender = threadedSender({ connectTimeoutMs: 2_000, totalTimeoutMs: 60_000, policy: open });
  t.teardown(() => sender.close());

  const controller = new AbortController();
  const pending = sender.send(url, "{}", {}, controller.signal);
  await reached;
  controller.abort(new Error("server shutting down"));
  t.match(await pending, { error: /server shutting down|abort/i }, "settled by the abort, long before the 60 s timeout");

  const already = new AbortController();
  already.abort(new Error("gone before it started"));
  t.match(await sender.send(url, "{}", {}, already.signal), { error: /gone before it started|abort/i }, "an aborted signal settles at once");

  await sender.close();
  const receiver = await new Receiver().start();
  t.teardown(() => receiver.close());
  t.same(await sender.send(`${receiver.url}/again`, "{}", {}), { statusCode: 200 }, "a new thread after close");
  t.equal(receiver.requests[0]?.url, "/again");

  const closing = sender.close();
  const during = sender.send(`${receiver.url}/during-close`, "{}", {});
  await closing;
  t.same(await during, { statusCode: 200 }, "a send made while the old thread exits is answered by the new one");
});
