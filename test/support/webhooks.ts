import http from "node:http";
import { mkdtemp, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import type { AddressInfo } from "node:net";
import { TEST_GRAPHS } from "./server.js";
import type { EventStore, RecordedEvent } from "../../src/eventstore/types.js";
import { webhookStream } from "../../src/domain/webhooks.js";

export interface Received {
  method: string;
  url: string;
  headers: http.IncomingHttpHeaders;
  body: string;
}

/**
 * A webhook receiver on 127.0.0.1: records every request, answers with the next scripted status
 * (then 200), and lets a test await the next request.
 */
export class Receiver {
  readonly requests: Received[] = [];
  private waiters: ((r: Received) => void)[] = [];
  /** Scripted answers: status and headers, used in order. */
  readonly script: { status: number; headers?: Record<string, string> }[] = [];
  private server: http.Server | undefined;
  port = 0;

  async start(port = 0): Promise<this> {
    this.server = http.createServer((req, res) => {
      let body = "";
      req
        .setEncoding("utf8")
        .on("data", (c: string) => (body += c))
        .on("end", () => {
          const r: Received = { method: req.method ?? "", url: req.url ?? "", headers: req.headers, body };
          this.requests.push(r);
          const answer = this.script.shift() ?? { status: 200 };
          res.writeHead(answer.status, answer.headers).end("ok");
          const waiters = this.waiters.splice(0);
          for (const w of waiters) w(r);
        });
    });
    await new Promise<void>((resolve) => this.server!.listen(port, "127.0.0.1", resolve));
    this.port = (this.server.address() as AddressInfo).port;
    return this;
  }

  get url(): string {
    return `http://127.0.0.1:${this.port}`;
  }

  /** Resolves with the `n`-th request (1-based) once it arrived. */
  nth(n: number): Promise<Received> {
    if (this.requests.length >= n) return Promise.resolve(this.requests[n - 1]);
    return new Promise((resolve) => {
      const check = () => {
        if (this.requests.length >= n) resolve(this.requests[n - 1]);
        else this.waiters.push(check);
      };
      this.waiters.push(check);
    });
  }

  async close(): Promise<void> {
    if (!this.server) return;
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server!.close(() => resolve()));
    this.server = undefined;
  }
}

const graphsDir = path.dirname(TEST_GRAPHS);

/** Writes a langgraph.json with the test graphs and the given webhooks / http sections; returns its path. */
export async function writeWebhookConfig(sections: { webhooks?: unknown; http?: unknown }): Promise<string> {
  const dir = await mkdtemp(path.join(os.tmpdir(), "webhook-config-"));
  const file = path.join(dir, "langgraph.json");
  const graphs = {
    agent: path.join(graphsDir, "agent.ts:graph"),
    error: path.join(graphsDir, "error.ts:graph"),
    delay: path.join(graphsDir, "delay.ts:graph"),
  };
  await writeFile(file, JSON.stringify({ graphs, env: {}, ...sections }));
  return file;
}

/** Resolves with the delivery's final event (WebhookDelivered or WebhookFailed) from the log. */
export async function deliveryEnd(store: EventStore, runId: string): Promise<RecordedEvent> {
  const sub = store.subscribeToStream(webhookStream(runId));
  try {
    for await (const item of sub) {
      if (item.kind === "event" && (item.event.type === "WebhookDelivered" || item.event.type === "WebhookFailed")) return item.event;
    }
  } finally {
    await sub.close();
  }
  throw new Error("subscription ended");
}
