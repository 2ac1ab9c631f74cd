/**
 * Gates for the `delay` test graph (test/graphs/delay.ts): a run given `gate: gates.path(name)` in
 * its input stays in its node until the test calls `gates.open(name)`. Chaos tests hold runs in
 * flight across a fault this way instead of guessing how long the machine needs to reach it.
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import type { Test } from "tap";

export interface Gates {
  /** The file a run waits for. */
  path(name: string): string;
  /** Lets every run waiting on `name` go on. */
  open(name: string): void;
}

export function gates(t: Test): Gates {
  const dir = mkdtempSync(path.join(os.tmpdir(), "agent-server-gates-"));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const file = (name: string) => path.join(dir, name);
  return {
    path: file,
    open: (name) => writeFileSync(file(name), ""),
  };
}
