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
