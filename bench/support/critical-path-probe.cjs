/**
 * Times a sequential `runs/wait` point by point (the critical-path benchmark's probe). Preloaded in the
 * server (`node --require bench/support/critical-path-probe.cjs`, with CRITICAL_PATH_PROBE=1), it listens to
 * the server's trace points (src/util/trace-points.ts, a diagnostics channel) and to each HTTP request: a
 * request to `…/runs/wait` starts a record (time 0 = the request's arrival on the server), every point
 * published until the next request is added to it with its time, and the response's `finish` closes it.
 * Only meaningful when the waits come one after another. SIGUSR2 prints `critical-path {json}` on stdout:
 * the median time of each point (the k-th occurrence of a name in a record counts as its own point) over
 * the records, and drops them.
 */
"use strict";
const http = require("node:http");
const { subscribe } = require("node:diagnostics_channel");

const CHANNEL = "agent-server:critical-path";

/** Median time of each point over the records ([name, ms] pairs each); ordered by that time. */
function medianTimeline(records) {
  const times = new Map();
  for (const record of records) {
    const seen = new Map();
    for (const [name, ms] of record) {
      const k = seen.get(name) ?? 0;
      seen.set(name, k + 1);
      const key = k === 0 ? name : `${name}#${k + 1}`;
      if (!times.has(key)) times.set(key, []);
      times.get(key).push(ms);
    }
  }
  const rows = [];
  for (const [point, values] of times) {
    values.sort((a, b) => a - b);
    const mid = values.length >> 1;
    const median = values.length % 2 ? values[mid] : (values[mid - 1] + values[mid]) / 2;
    rows.push({ point, median_ms: Math.round(median * 1000) / 1000, n: values.length });
  }
  return rows.sort((a, b) => a.median_ms - b.median_ms);
}

function listen() {
  const nowMs = () => Number(process.hrtime.bigint()) / 1e6;
  let current;
  let records = [];
  subscribe(CHANNEL, (name) => {
    if (current) current.record.push([name, nowMs() - current.t0]);
  });
  const emit = http.Server.prototype.emit;
  http.Server.prototype.emit = function (event, req, res) {
    if (event === "request") {
      if (req.url.endsWith("/runs/wait")) {
        const entry = { t0: nowMs(), record: [["request", 0]] };
        current = entry;
        records.push(entry.record);
        res.on("finish", () => entry.record.push(["response.finish", nowMs() - entry.t0]));
      } else current = undefined;
    }
    return emit.apply(this, arguments);
  };
  process.on("SIGUSR2", () => {
    const done = records;
    records = [];
    current = undefined;
    process.stdout.write(`critical-path ${JSON.stringify({ waits: done.length, timeline: medianTimeline(done) })}\n`);
  });
}

if (process.env.CRITICAL_PATH_PROBE === "1") listen();

module.exports = { medianTimeline, CHANNEL };
