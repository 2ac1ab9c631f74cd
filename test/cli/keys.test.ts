import { execFile } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import t from "tap";
import { openSealer, WrongMasterKeyError } from "../../src/crypto/sealer.js";
import { parseMasterKeys } from "../../src/crypto/master-keys.js";
import { repoRoot } from "../support/server.js";

/**
 * `agent-server keys rotate` (src/cli/keys.ts), spawned as the command: data keys sealed under
 * key A are wrapped again under key B, after which B alone opens what A sealed.
 */

const run = promisify(execFile);
const A = "A".repeat(32);
const B = "B".repeat(32);
const CLI = path.join(repoRoot, "src", "cli.ts");
/** tsx by its URL: the command runs from a folder without a langgraph.json or node_modules. */
const TSX = import.meta.resolve("tsx");

async function cli(args: string[], env: Record<string, string>): Promise<{ code: number; stdout: string; stderr: string }> {
  const base = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith("LANGGRAPH_") && k !== "DATA_DIR")) as Record<string, string>;
  try {
    const { stdout, stderr } = await run(process.execPath, ["--import", TSX, CLI, ...args], { cwd: os.tmpdir(), env: { ...base, ...env } });
    return { code: 0, stdout, stderr };
  } catch (error) {
    const e = error as { code: number; stdout: string; stderr: string };
    return { code: e.code, stdout: e.stdout, stderr: e.stderr };
  }
}

t.test("keys rotate: sealed with A, rotated to B, opened with B alone", async (t) => {
  const dataDir = await mkdtemp(path.join(os.tmpdir(), "keys-rotate-"));
  t.teardown(() => rm(dataDir, { recursive: true, force: true }));
  const vaultPath = path.join(dataDir, "keys.sqlite");

  const sealerA = openSealer({ vaultPath, masterKeys: parseMasterKeys({ LANGGRAPH_AES_KEY: A })!, poolSize: 2 });
  const envelope = sealerA.seal("thread-1", '{"secret":"kept"}');
  sealerA.close();
  t.throws(
    () => openSealer({ vaultPath, masterKeys: parseMasterKeys({ LANGGRAPH_AES_KEY: B })! }),
    WrongMasterKeyError,
    "before: B alone does not open the vault",
  );

  const rotated = await cli(["keys", "rotate"], { DATA_DIR: dataDir, LANGGRAPH_AES_KEY: B, LANGGRAPH_AES_PREVIOUS_KEYS: JSON.stringify([A]) });
  t.equal(rotated.code, 0, rotated.stderr);
  t.match(rotated.stdout, /re-wrapped [1-9]\d* data keys? of .*keys\.sqlite/);
  t.match(rotated.stdout, /previous keys \(LANGGRAPH_AES_PREVIOUS_KEYS\) may now be dropped/);

  const sealerB = openSealer({ vaultPath, masterKeys: parseMasterKeys({ LANGGRAPH_AES_KEY: B })! });
  t.teardown(() => sealerB.close());
  t.equal(sealerB.open("thread-1", envelope), '{"secret":"kept"}', "after: B alone opens what A sealed");

  const again = await cli(["keys", "rotate"], { LANGGRAPH_KEY_VAULT: vaultPath, LANGGRAPH_AES_KEY: B });
  t.equal(again.code, 0, again.stderr);
  t.match(again.stdout, /re-wrapped 0 data keys/, "a second rotation has nothing left to do");
});

t.test("keys rotate refuses with one line", async (t) => {
  const noKey = await cli(["keys", "rotate"], { DATA_DIR: os.tmpdir() });
  t.equal(noKey.code, 1);
  t.equal(noKey.stderr.trim().split("\n").length, 1, noKey.stderr);
  t.match(noKey.stderr, /LANGGRAPH_AES_KEY is not set/);

  const noVault = await cli(["keys", "rotate"], { LANGGRAPH_KEY_VAULT: path.join(os.tmpdir(), "no-such-dir-keys", "keys.sqlite"), LANGGRAPH_AES_KEY: B });
  t.equal(noVault.code, 1);
  t.match(noVault.stderr, /no key vault at/);

  const usage = await cli(["keys", "spin"], {});
  t.equal(usage.code, 2);
  t.match(usage.stderr, /keys rotate/);
});
