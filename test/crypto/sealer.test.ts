import t, { type Test } from "tap";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import Database from "better-sqlite3";
import { parseMasterKeys, type MasterKeys } from "../../src/crypto/master-keys.js";
import { KeyDestroyedError, openSealer, UnreadableEnvelopeError, WrongMasterKeyError, type Sealer } from "../../src/crypto/sealer.js";

const KEY_A = "a".repeat(32);
const KEY_B = "b".repeat(16);
const masterKeys = (current: string, ...previous: string[]): MasterKeys =>
  parseMasterKeys({ LANGGRAPH_AES_KEY: current, LANGGRAPH_AES_PREVIOUS_KEYS: JSON.stringify(previous) })!;

function tempVault(t: Test): string {
  const dir = mkdtempSync(path.join(os.tmpdir(), "crypto-vault-"));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  return path.join(dir, "keys.db");
}

function sealerAt(t: Test, vaultPath: string, keys = masterKeys(KEY_A), poolSize?: number): Sealer {
  const sealer = openSealer({ vaultPath, masterKeys: keys, poolSize });
  t.teardown(() => sealer.close());
  return sealer;
}

function catchError(fn: () => unknown): Error {
  try {
    fn();
  } catch (err) {
    return err as Error;
  }
  throw new Error("expected an error");
}

t.test("round trip: what is sealed for a stream opens for it, as compact ASCII naming its key", async (t) => {
  const sealer = sealerAt(t, tempVault(t));
  const value = JSON.stringify({ text: "héllo ✓ \u0000 😀", n: [1, 2, 3] });
  const envelope = sealer.seal("thread-1", value);
  t.match(envelope, /^aes1:[A-Za-z0-9_-]{16}:[A-Za-z0-9_-]{16}:[A-Za-z0-9_-]{22}:[A-Za-z0-9_-]+$/);
  t.equal(JSON.parse(JSON.stringify(envelope)), envelope, "a JSON string carries it as is");
  t.equal(JSON.stringify(envelope), `"${envelope}"`, "with no escaping");
  t.equal(sealer.open("thread-1", envelope), value);
  t.ok(sealer.isEnvelope(envelope));
  t.equal(sealer.keyIdOf(envelope), envelope.split(":")[1]);
  t.notSame(sealer.seal("thread-1", value), envelope, "a fresh IV each time");
  t.equal(sealer.open("thread-1", sealer.seal("thread-1", "")), "");
  const big = JSON.stringify("x".repeat(1_000_000));
  t.equal(sealer.open("thread-1", sealer.seal("thread-1", big)), big);
});

t.test("what a sealer sealed lately opens from memory; another sealer (a restart) decrypts the same text", async (t) => {
  const vaultPath = tempVault(t);
  const writer = sealerAt(t, vaultPath);
  const value = JSON.stringify({ text: "remembered" });
  const envelope = writer.seal("thread-1", value);
  // Read back as a store hands it over: a copy of the text, not the string sealed.
  const copy = JSON.parse(JSON.stringify({ envelope })).envelope as string;
  t.equal(writer.open("thread-1", copy), value);
  t.type(
    catchError(() => writer.open("thread-2", copy)),
    UnreadableEnvelopeError,
    "a remembered value still opens only for its stream",
  );
  const flipped = copy.slice(0, -2) + (copy.at(-2) === "A" ? "B" : "A") + copy.at(-1);
  t.type(
    catchError(() => writer.open("thread-1", flipped)),
    UnreadableEnvelopeError,
    "and a changed copy with a remembered IV is decrypted, and refused",
  );
  const restarted = sealerAt(t, vaultPath);
  t.equal(restarted.open("thread-1", copy), value);
});

t.test("isEnvelope and keyIdOf: a look at the header", async (t) => {
  const sealer = sealerAt(t, tempVault(t));
  for (const value of [undefined, null, 42, {}, "", "aes1:", "hello", "aes1:short:x:y:z", JSON.stringify({ a: 1 })]) {
    t.notOk(sealer.isEnvelope(value), String(value));
  }
  t.type(
    catchError(() => sealer.keyIdOf("nope")),
    UnreadableEnvelopeError,
  );
  t.type(
    catchError(() => sealer.open("s", "nope")),
    UnreadableEnvelopeError,
  );
});

t.test("the stream name is the AAD: an envelope moved to another stream does not open", async (t) => {
  const sealer = sealerAt(t, tempVault(t));
  const envelope = sealer.seal("thread-1", '"secret"');
  const err = catchError(() => sealer.open("thread-2", envelope));
  t.type(err, UnreadableEnvelopeError);
  t.match(err.message, /does not verify/);
});

t.test("a tampered ciphertext, tag or IV does not open", async (t) => {
  const sealer = sealerAt(t, tempVault(t));
  const envelope = sealer.seal("s", JSON.stringify({ a: "some value" }));
  const [v, kid, iv, tag, ct] = envelope.split(":");
  const flip = (s: string, i: number) => s.slice(0, i) + (s[i] === "A" ? "B" : "A") + s.slice(i + 1);
  const tampered = [
    [v, kid, iv, tag, flip(ct, 3)],
    [v, kid, iv, flip(tag, 5), ct],
    [v, kid, flip(iv, 0), tag, ct],
    [v, kid, iv, tag, ct.slice(0, -1)],
    [v, kid, iv, tag, ct + "AA"],
    [v, kid, iv, tag, ct + "!"],
  ].map((parts) => parts.join(":"));
  for (const bad of tampered)
    t.type(
      catchError(() => sealer.open("s", bad)),
      UnreadableEnvelopeError,
      bad,
    );
  // Another key id: an unknown key, or another stream's key: unreadable either way.
  const other = sealer.seal("other", "1");
  t.type(
    catchError(() => sealer.open("s", [v, sealer.keyIdOf(other), iv, tag, ct].join(":"))),
    UnreadableEnvelopeError,
  );
  const unknown = catchError(() => sealer.open("s", [v, "AAAAAAAAAAAAAAAA", iv, tag, ct].join(":")));
  t.type(unknown, UnreadableEnvelopeError);
  t.match(unknown.message, /not in the key vault/);
});

t.test("two streams never share a key: across two sealers on one vault file, interleaved, and after reopening", async (t) => {
  const vaultPath = tempVault(t);
  const owner = new Map<string, string>(); // key id -> stream
  const check = (stream: string, envelope: string, opener: Sealer) => {
    const kid = opener.keyIdOf(envelope);
    const before = owner.get(kid);
    if (before !== undefined && before !== stream) t.fail(`key ${kid} used for ${before} and ${stream}`);
    owner.set(kid, stream);
    t.equal(opener.open(stream, envelope), `"${stream}"`);
  };
  const one = openSealer({ vaultPath, masterKeys: masterKeys(KEY_A), poolSize: 8 });
  const two = openSealer({ vaultPath, masterKeys: masterKeys(KEY_A), poolSize: 8 });
  const sealed: [string, string][] = [];
  for (let i = 0; i < 60; i++) {
    // Interleaved, and each sealer also seals for streams the other one sealed for.
    const a = one.seal(`s${i}`, `"s${i}"`);
    const b = two.seal(`s${i}`, `"s${i}"`);
    const c = two.seal(`t${i}`, `"t${i}"`);
    sealed.push([`s${i}`, a], [`s${i}`, b], [`t${i}`, c]);
    check(`s${i}`, a, two);
    check(`s${i}`, b, one);
    check(`t${i}`, c, one);
  }
  t.equal(one.keyIdOf(one.seal("s1", '"s1"')), one.keyIdOf(sealed[3][1]), "a process keeps sealing a stream with its key");
  one.close();
  two.close();
  const again = sealerAt(t, vaultPath, masterKeys(KEY_A), 8);
  for (let i = 0; i < 60; i++) check(`u${i}`, again.seal(`u${i}`, `"u${i}"`), again);
  for (const [stream, envelope] of sealed) t.equal(again.open(stream, envelope), `"${stream}"`);
  t.equal(new Set(owner.values()).size, 180);
});

t.test("destroy: the key's envelopes throw KeyDestroyedError, and its wrapped bytes are nowhere on disk", async (t) => {
  const vaultPath = tempVault(t);
  const sealer = openSealer({ vaultPath, masterKeys: masterKeys(KEY_A), poolSize: 16 });
  const doomed = sealer.seal("purged", JSON.stringify({ secret: "gone" }));
  const kept = sealer.seal("kept", JSON.stringify({ still: "here" }));
  const kid = sealer.keyIdOf(doomed);
  // Enough rows for several pages, so the doomed row has been checkpointed into the file and shares pages with others.
  for (let i = 0; i < 100; i++) sealer.seal(`filler-${i}`, "1");

  const reader = new Database(vaultPath, { readonly: true });
  const wrapped = reader.prepare<[string], { wrapped: Buffer }>("SELECT wrapped FROM data_keys WHERE key_id = ?").get(kid)!.wrapped;
  reader.close();
  t.equal(wrapped.length, 12 + 16 + 32);
  t.ok(
    onDisk(vaultPath).some((bytes) => bytes.includes(wrapped)),
    "the wrapped key is on disk before",
  );

  sealer.destroy([kid, "unknown-key-id00"]);
  const err = catchError(() => sealer.open("purged", doomed));
  t.type(err, KeyDestroyedError);
  t.equal((err as KeyDestroyedError).keyId, kid);
  t.equal(sealer.open("kept", kept), JSON.stringify({ still: "here" }));
  t.not(sealer.keyIdOf(sealer.seal("purged", "2")), kid, "the stream gets a fresh key");

  const files = onDisk(vaultPath);
  for (const [i, bytes] of files.entries()) {
    t.notOk(bytes.includes(wrapped), `the wrapped key is not in file ${i}`);
    t.notOk(bytes.includes(wrapped.subarray(28)), `nor its ciphertext part`);
  }
  sealer.destroy([kid]); // already destroyed: a no-op
  sealer.close();

  // Even with the master key, a new sealer (a new process) cannot recover it.
  const reopened = sealerAt(t, vaultPath);
  t.type(
    catchError(() => reopened.open("purged", doomed)),
    KeyDestroyedError,
  );
  t.equal(reopened.open("kept", kept), JSON.stringify({ still: "here" }));
  const tomb = new Database(vaultPath, { readonly: true });
  t.same(tomb.prepare("SELECT key_id, master_key_id, wrapped, destroyed FROM data_keys WHERE key_id = ?").get(kid), {
    key_id: kid,
    master_key_id: null,
    wrapped: null,
    destroyed: 1,
  });
  tomb.close();
});

t.test("shareKey: streams with no key yet seal with the owner's, each still for its own stream; destroying it reaches them all", async (t) => {
  const sealer = sealerAt(t, tempVault(t), masterKeys(KEY_A), 4);
  const own = sealer.keyIdOf(sealer.seal("checkpoints-1", "before"));
  sealer.shareKey("thread-1", ["checkpoints-1", "run-1"]);
  const ownerKey = sealer.keyIdOf(sealer.seal("thread-1", "owner"));
  const shared = sealer.seal("run-1", "shared");
  t.equal(sealer.keyIdOf(shared), ownerKey, "the owner was given a key, and the run seals with it");
  t.equal(sealer.keyIdOf(sealer.seal("checkpoints-1", "after")), own, "a stream keeps the key it had");
  t.type(
    catchError(() => sealer.open("thread-1", shared)),
    UnreadableEnvelopeError,
    "the run's envelope does not open as the owner's",
  );
  t.equal(sealer.open("run-1", shared), "shared");

  sealer.destroy([ownerKey]);
  t.type(
    catchError(() => sealer.open("run-1", shared)),
    KeyDestroyedError,
  );
  t.not(sealer.keyIdOf(sealer.seal("run-1", "fresh")), ownerKey, "a stream that shared a destroyed key gets a fresh one");
});

t.test("destroy by another sealer (another process on the vault): this one forgets the key at its next check", async (t) => {
  const vaultPath = tempVault(t);
  const one = openSealer({ vaultPath, masterKeys: masterKeys(KEY_A), poolSize: 4, destructionCheckMs: 0 });
  t.teardown(() => one.close());
  const two = sealerAt(t, vaultPath, masterKeys(KEY_A), 4);
  const first = one.seal("s", "1");
  const other = one.seal("kept", "2");
  t.equal(one.open("s", first), "1", "from what `one` sealed lately");
  t.equal(two.open("s", first), "1");
  two.destroy([one.keyIdOf(first)]);
  // The stream's name used again (a thread created again under a purged id) seals with a fresh key that opens.
  const again = one.seal("s", "3");
  t.not(one.keyIdOf(again), one.keyIdOf(first));
  t.equal(two.open("s", again), "3");
  t.type(
    catchError(() => two.open("s", first)),
    KeyDestroyedError,
  );
  t.type(
    catchError(() => one.open("s", first)),
    KeyDestroyedError,
    "neither its memory of the value nor its copy of the key opens it",
  );
  t.equal(one.open("kept", other), "2", "keys nobody destroyed still open");
  t.equal(one.keyIdOf(one.seal("kept", "4")), one.keyIdOf(other), "a stream whose key lives keeps it");
});

t.test("a vault of schema version 1 is migrated: its keys and tombstones read as before, and destructions are numbered", async (t) => {
  const vaultPath = tempVault(t);
  const first = sealerAt(t, vaultPath);
  const live = first.seal("live", "1");
  const gone = first.seal("gone", "2");
  first.destroy([first.keyIdOf(gone)]);
  first.close();
  // Back to version 1 as an older server left it: no destruction numbers.
  const db = new Database(vaultPath);
  db.exec("DROP INDEX data_keys_destroyed_seq; ALTER TABLE data_keys DROP COLUMN destroyed_seq; PRAGMA user_version = 1");
  db.close();
  const one = openSealer({ vaultPath, masterKeys: masterKeys(KEY_A), destructionCheckMs: 0 });
  t.teardown(() => one.close());
  const two = sealerAt(t, vaultPath);
  t.equal(one.open("live", live), "1");
  t.type(
    catchError(() => one.open("gone", gone)),
    KeyDestroyedError,
  );
  two.destroy([one.keyIdOf(live)]);
  t.type(
    catchError(() => one.open("live", live)),
    KeyDestroyedError,
  );
  const check = new Database(vaultPath, { readonly: true });
  t.teardown(() => check.close());
  t.equal(check.pragma("user_version", { simple: true }), 2);
  t.same(
    check.prepare("SELECT destroyed_seq FROM data_keys WHERE destroyed = 1 ORDER BY destroyed_seq").pluck().all(),
    [null, 1],
    "the tombstone from before has no number; the new one is the first",
  );
});

t.test("a stream's key stays whole while the cache of opened keys turns over", async (t) => {
  const vaultPath = tempVault(t);
  const one = sealerAt(t, vaultPath, masterKeys(KEY_A), 64);
  const other = sealerAt(t, vaultPath, masterKeys(KEY_A), 1024);
  const before = one.seal("kept", "before");
  // More keys than the cache of opened keys holds (10,000) pass through `one`, none of them its streams'.
  const envelopes = Array.from({ length: 10_050 }, (_, i) => other.seal(`other-${i}`, String(i)));
  envelopes.forEach((envelope, i) => one.open(`other-${i}`, envelope));
  const after = one.seal("kept", "after");
  t.equal(one.keyIdOf(after), one.keyIdOf(before), "the stream still seals with its key");
  const fresh = sealerAt(t, vaultPath, masterKeys(KEY_A));
  t.equal(fresh.open("kept", after), "after", "and with its real bytes: a restart opens what it sealed");
  t.equal(fresh.open("kept", before), "before");
});

t.test("a wrong master key at open: WrongMasterKeyError with one clear line; a fresh vault adopts any key", async (t) => {
  const vaultPath = tempVault(t);
  const a = openSealer({ vaultPath, masterKeys: masterKeys(KEY_B) });
  a.close();
  // Opened but never sealed for: nothing to protect, the vault adopts whichever key comes.
  const b = openSealer({ vaultPath, masterKeys: masterKeys(KEY_A) });
  b.seal("s", "1");
  b.close();
  const err = catchError(() => openSealer({ vaultPath, masterKeys: masterKeys(KEY_B) }));
  t.type(err, WrongMasterKeyError);
  t.equal(
    err.message,
    `LANGGRAPH_AES_KEY does not open the key vault at ${vaultPath}: it was written with key ${masterKeys(KEY_A).current.id}; set that key, or list it in LANGGRAPH_AES_PREVIOUS_KEYS`,
  );
  // A master key whose id matches but whose bytes differ cannot exist short of a sha256 collision; a forged row
  // claiming the configured id yet not unwrapping is refused too.
  const db = new Database(vaultPath);
  db.prepare("UPDATE data_keys SET master_key_id = ?").run(masterKeys(KEY_B).current.id);
  db.close();
  t.type(
    catchError(() => openSealer({ vaultPath, masterKeys: masterKeys(KEY_B) })),
    WrongMasterKeyError,
  );
});

t.test("rotation: sealed under A opens with current=B, previous=[A]; after rewrapAll, opens with A dropped", async (t) => {
  const vaultPath = tempVault(t);
  const underA = openSealer({ vaultPath, masterKeys: masterKeys(KEY_A), poolSize: 8 });
  const old = underA.seal("s", '"old"');
  underA.close();

  const rotating = openSealer({ vaultPath, masterKeys: masterKeys(KEY_B, KEY_A), poolSize: 8 });
  t.equal(rotating.open("s", old), '"old"');
  const fresh = rotating.seal("t", '"new"');
  rotating.close();

  // Dropping A before re-wrapping: the vault opens (B unwraps the newer keys) but A's keys cannot be read.
  const tooEarly = openSealer({ vaultPath, masterKeys: masterKeys(KEY_B) });
  const locked = catchError(() => tooEarly.open("s", old));
  t.type(locked, UnreadableEnvelopeError);
  t.match(locked.message, `master key ${masterKeys(KEY_A).current.id}, which is not configured`);
  t.equal(tooEarly.open("t", fresh), '"new"');
  tooEarly.close();

  const rewrapping = openSealer({ vaultPath, masterKeys: masterKeys(KEY_B, KEY_A) });
  t.equal(rewrapping.rewrapAll(), 8, "every key of A's block, handed out or not");
  t.equal(rewrapping.rewrapAll(), 0);
  rewrapping.close();

  const db = new Database(vaultPath, { readonly: true });
  t.same(db.prepare("SELECT DISTINCT master_key_id AS id FROM data_keys").all(), [{ id: masterKeys(KEY_B).current.id }]);
  db.close();

  const onlyB = sealerAt(t, vaultPath, masterKeys(KEY_B));
  t.equal(onlyB.open("s", old), '"old"');
  t.equal(onlyB.open("t", fresh), '"new"');
  t.type(
    catchError(() => openSealer({ vaultPath, masterKeys: masterKeys(KEY_A) })),
    WrongMasterKeyError,
  );
});

t.test("the pool: 1,000 new streams take keys made in a handful of transactions, never repeated; blocks grow under load", async (t) => {
  const vaultPath = tempVault(t);
  const sealer = sealerAt(t, vaultPath);
  const ids = new Set<string>();
  for (let i = 0; i < 1000; i++) ids.add(sealer.keyIdOf(sealer.seal(`stream-${i}`, "{}")));
  t.equal(ids.size, 1000, "1,000 streams, 1,000 keys");
  const db = new Database(vaultPath, { readonly: true });
  const count = () => db.prepare<[], { rows: number; blocks: number }>("SELECT count(*) AS rows, count(DISTINCT block) AS blocks FROM data_keys").get()!;
  // Sealing in one event-loop turn: each block is made when the pool runs dry, in one transaction; refills in quick
  // succession double the block: 256, then 512, then 1,024 keys.
  t.same(count(), { rows: 1792, blocks: 3 });
  const blockOf = db.prepare<[string], { block: string }>("SELECT block FROM data_keys WHERE key_id = ?");
  t.equal(new Set([...ids].map((id) => blockOf.get(id)!.block)).size, 3);

  // Under a quarter of the last block left (256 of 1,024), the next seal schedules a refill for after this turn: no seal then waits for one.
  for (let i = 0; i < 792 - 255; i++) sealer.seal(`more-${i}`, "{}");
  t.same(count(), { rows: 1792, blocks: 3 });
  await new Promise((resolve) => setImmediate(resolve));
  t.same(count(), { rows: 1792 + 1024, blocks: 4 }, "blocks grow no further than 1,024 keys");
  db.close();
});

t.test("a closed sealer refuses work, and a refill scheduled before close does nothing", async (t) => {
  const vaultPath = tempVault(t);
  const sealer = openSealer({ vaultPath, masterKeys: masterKeys(KEY_A), poolSize: 4 });
  sealer.seal("s", "1"); // pool: 3 left, a refill scheduled
  sealer.seal("t", "1");
  sealer.seal("u", "1");
  sealer.close();
  sealer.close();
  await new Promise((resolve) => setImmediate(resolve));
  t.throws(() => sealer.seal("s", "1"), /closed/);
  const db = new Database(vaultPath, { readonly: true });
  t.equal(db.prepare("SELECT count(*) AS n FROM data_keys").pluck().get(), 4);
  db.close();
});

/** The bytes of the vault file and of its WAL (when there is one). */
function onDisk(vaultPath: string): Buffer[] {
  return [vaultPath, `${vaultPath}-wal`].flatMap((file) => {
    try {
      return [readFileSync(file)];
    } catch {
      return [];
    }
  });
}
