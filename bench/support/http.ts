/** JSON over HTTP with undici keep-alive connections, and a fixed-concurrency job pool. */
import { Pool } from "undici";

export interface JsonClient {
  /** POSTs a JSON body; throws unless the answer is 200. Resolves with the parsed body. */
  post<T = unknown>(path: string, body: unknown): Promise<T>;
  close(): Promise<void>;
}

export function jsonClient(url: string, connections: number): JsonClient {
  const pool = new Pool(url, { connections, pipelining: 1, keepAliveTimeout: 30_000 });
  return {
    async post<T>(path: string, body: unknown): Promise<T> {
      const res = await pool.request({ path, method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) });
      const text = await res.body.text();
      if (res.statusCode !== 200) throw new Error(`POST ${path}: HTTP ${res.statusCode} ${text.slice(0, 500)}`);
      return JSON.parse(text) as T;
    },
    close: () => pool.close(),
  };
}

/** Runs job(0..n-1) with `concurrency` workers; resolves with the elapsed milliseconds. */
export async function runPool(n: number, concurrency: number, job: (i: number) => Promise<void>): Promise<number> {
  const t0 = performance.now();
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(concurrency, n) }, async () => {
      while (next < n) await job(next++);
    }),
  );
  return performance.now() - t0;
}

/** The input every benchmark gives the example graph `agent` (it answers "You said: hello"). */
export const AGENT_INPUT = { messages: [{ role: "user", content: "hello" }] };

export interface AgentJobs {
  /** POST /threads: the new thread's id. */
  newThread(): Promise<string>;
  /** POST /threads/{id}/runs/wait on `agent`; throws unless the reply is the graph's answer. */
  wait(threadId: string): Promise<void>;
  /** One job: a new thread, then a wait on it. */
  job(): Promise<void>;
  /** `n` waits one after another, each on a thread made outside its timing: their latencies (ms). */
  sequential(n: number): Promise<number[]>;
}

/** The job the server benchmarks measure, on the example graph `agent`, through `client`. */
export function agentJobs(client: JsonClient): AgentJobs {
  const newThread = async () => (await client.post<{ thread_id: string }>("/threads", {})).thread_id;
  const wait = async (threadId: string) => {
    const out = await client.post<{ messages?: { content?: unknown }[] }>(`/threads/${threadId}/runs/wait`, { assistant_id: "agent", input: AGENT_INPUT });
    if (out.messages?.at(-1)?.content !== "You said: hello") throw new Error(`unexpected result ${JSON.stringify(out)}`);
  };
  return {
    newThread,
    wait,
    job: async () => wait(await newThread()),
    async sequential(n) {
      const latencies: number[] = [];
      for (let i = 0; i < n; i++) {
        const threadId = await newThread();
        const t0 = performance.now();
        await wait(threadId);
        latencies.push(performance.now() - t0);
      }
      return latencies;
    },
  };
}
