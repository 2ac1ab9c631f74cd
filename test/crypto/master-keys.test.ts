import t from "tap";
import { createHash } from "node:crypto";
import { MasterKeyConfigError, parseMasterKeys } from "../../src/crypto/master-keys.js";

const key = (n: number, fill = "k") => fill.repeat(n);

t.test("unset or empty LANGGRAPH_AES_KEY: no master keys (encryption off)", async (t) => {
  t.equal(parseMasterKeys({}), undefined);
  t.equal(parseMasterKeys({ LANGGRAPH_AES_KEY: "" }), undefined);
});

t.test("16, 24 and 32 UTF-8 bytes are AES-128/192/256 keys, named by the first 16 hex chars of their sha256", async (t) => {
  for (const n of [16, 24, 32]) {
    const keys = parseMasterKeys({ LANGGRAPH_AES_KEY: key(n) });
    t.ok(keys);
    t.equal(keys!.current.key.length, n);
    t.equal(keys!.current.id, createHash("sha256").update(key(n)).digest("hex").slice(0, 16));
    t.same(keys!.all, [keys!.current]);
  }
  // Bytes, not characters: 8 two-byte characters are a 16-byte key.
  t.equal(parseMasterKeys({ LANGGRAPH_AES_KEY: "é".repeat(8) })!.current.key.length, 16);
});

t.test("15 or 33 bytes: MasterKeyConfigError naming LANGGRAPH_AES_KEY, on one line, without the key", async (t) => {
  for (const n of [15, 33, 7]) {
    const secret = key(n, "Q");
    const err = catchError(() => parseMasterKeys({ LANGGRAPH_AES_KEY: secret }));
    t.type(err, MasterKeyConfigError);
    t.match(err.message, /^LANGGRAPH_AES_KEY must be 16, 24 or 32 bytes/);
    t.match(err.message, `it is ${n} byte`);
    t.notOk(err.message.includes(secret), "the key is not in the message");
    t.notOk(err.message.includes("\n"));
  }
});

t.test("LANGGRAPH_AES_PREVIOUS_KEYS: older keys after the current one, duplicates dropped", async (t) => {
  const keys = parseMasterKeys({
    LANGGRAPH_AES_KEY: key(32, "b"),
    LANGGRAPH_AES_PREVIOUS_KEYS: JSON.stringify([key(16, "a"), key(32, "b"), key(24, "c")]),
  })!;
  t.same(
    keys.all.map((k) => k.key.toString()),
    [key(32, "b"), key(16, "a"), key(24, "c")],
  );
  t.equal(keys.all[0], keys.current);
  t.same(parseMasterKeys({ LANGGRAPH_AES_KEY: key(16), LANGGRAPH_AES_PREVIOUS_KEYS: "" })!.all.length, 1);
  t.same(parseMasterKeys({ LANGGRAPH_AES_KEY: key(16), LANGGRAPH_AES_PREVIOUS_KEYS: "[]" })!.all.length, 1);
});

t.test("bad LANGGRAPH_AES_PREVIOUS_KEYS: an error naming it (and never quoting it)", async (t) => {
  for (const bad of ["[not json", `"${key(16)}"`, `[1]`, `{"a":"${key(16)}"}`]) {
    const err = catchError(() => parseMasterKeys({ LANGGRAPH_AES_KEY: key(16), LANGGRAPH_AES_PREVIOUS_KEYS: bad }));
    t.type(err, MasterKeyConfigError, bad);
    t.match(err.message, /^LANGGRAPH_AES_PREVIOUS_KEYS /);
    t.notOk(err.message.includes(key(16)));
  }
  const short = catchError(() => parseMasterKeys({ LANGGRAPH_AES_KEY: key(16), LANGGRAPH_AES_PREVIOUS_KEYS: JSON.stringify([key(16), key(20)]) }));
  t.type(short, MasterKeyConfigError);
  t.match(short.message, /^LANGGRAPH_AES_PREVIOUS_KEYS\[1\] must be 16, 24 or 32 bytes/);
});

t.test("previous keys without a current key is a configuration error, not encryption silently off", async (t) => {
  const err = catchError(() => parseMasterKeys({ LANGGRAPH_AES_PREVIOUS_KEYS: JSON.stringify([key(16)]) }));
  t.type(err, MasterKeyConfigError);
  t.match(err.message, /LANGGRAPH_AES_PREVIOUS_KEYS is set but LANGGRAPH_AES_KEY is not/);
});

function catchError(fn: () => unknown): Error {
  try {
    fn();
  } catch (err) {
    return err as Error;
  }
  throw new Error("expected an error");
}
