import t from "tap";
import {
  decideDelete,
  decideExpire,
  decidePut,
  decideRefresh,
  evolveStoreItem,
  namespaceError,
  namespacePath,
  parseValueFilter,
  storeItemStream,
  textsAtPath,
  textsToEmbed,
  type StoreEvent,
  type StoreItemState,
} from "../../src/domain/store.js";

/** The Store's pure rules: stream names, the fold, decisions under a given time, filters, index texts. */

const T0 = Date.parse("2030-01-01T00:00:00Z");
const fold = (events: { type: string; data: unknown }[]) =>
  events.reduce<StoreItemState | undefined>((s, e, i) => evolveStoreItem(s, e as StoreEvent, BigInt(i)), undefined);

t.test("one stream per item, independent of how labels split", async (t) => {
  t.equal(storeItemStream(["a", "b"], "k"), storeItemStream(["a", "b"], "k"));
  t.not(storeItemStream(["a", "b"], "k"), storeItemStream(["ab"], "k"));
  t.not(storeItemStream(["a"], "bk"), storeItemStream(["ab"], "k"));
  t.match(storeItemStream(["a"], "k"), /^store-[0-9a-f]{32}$/);
  t.equal(namespacePath(["a", "b"]), "a.b.");
  t.equal(namespacePath([]), "");
});

t.test("put, overwrite, refresh, expire, delete", async (t) => {
  const put1 = decidePut({ namespace: ["n"], key: "k", value: { v: 1 }, ttl_minutes: 1 }, T0, { run_id: "r1" });
  t.match(put1[0].data, { at: "2030-01-01T00:00:00.000+00:00", expires_at: T0 + 60_000, ttl_minutes: 1, run_id: "r1" });
  let s = fold(put1);
  t.match(s, { value: { v: 1 }, created_at: "2030-01-01T00:00:00.000+00:00", expires_at: T0 + 60_000, revision: 0n });

  const put2 = decidePut({ namespace: ["n"], key: "k", value: { v: 2 }, ttl_minutes: 1 }, T0 + 30_000);
  s = fold([...put1, ...put2]);
  t.equal(s?.created_at, "2030-01-01T00:00:00.000+00:00", "overwrite keeps created_at");
  t.equal(s?.updated_at, "2030-01-01T00:00:30.000+00:00");

  t.same(decideRefresh(s, T0 + 30_000), [], "already current");
  const refresh = decideRefresh(s, T0 + 50_000);
  t.match(refresh[0], { type: "StoreItemTtlRefreshed", data: { expires_at: T0 + 110_000 } });
  t.same(decideExpire(s, T0 + 89_999), [], "not due yet");
  const expire = decideExpire(s, T0 + 90_000);
  t.equal(expire[0].type, "StoreItemExpired");
  t.equal(fold([...put1, ...put2, ...expire]), undefined);
  t.ok(fold([...put1, ...put2, ...refresh, ...expire]), "an expiry decided before a refresh does not remove the item");

  const late = decidePut({ namespace: ["n"], key: "k", value: { v: 3 }, ttl_minutes: null }, T0 + 200_000);
  t.equal(fold([...put1, ...late])?.created_at, "2030-01-01T00:03:20.000+00:00", "a put over an expired, unswept item makes a new one");
  t.equal(fold([...put1, ...late])?.expires_at, null);

  t.same(decideDelete(undefined, T0), [], "nothing to delete");
  t.same(decideDelete(s, T0 + 100_000), [], "an expired item is already gone");
  t.match(decideDelete(s, T0 + 1, { run_id: "r2" })[0], { type: "StoreItemDeleted", data: { namespace: ["n"], key: "k", run_id: "r2" } });
  t.equal(fold([...put1, ...decideDelete(s, T0 + 1)]), undefined);
  t.same(decideRefresh(fold(decidePut({ namespace: ["n"], key: "k", value: {}, ttl_minutes: null }, T0)), T0 + 5), [], "no TTL, nothing to refresh");
});

t.test("namespace rules (official messages)", async (t) => {
  t.equal(namespaceError(["a", "b"]), undefined);
  t.equal(namespaceError([]), "Namespace is required");
  t.equal(namespaceError([], { allowEmpty: true }), undefined);
  t.equal(namespaceError(["a.b"]), "Namespace labels cannot be empty or contain periods. Received: a.b");
  t.equal(namespaceError(["a", ""]), "Namespace labels cannot be empty or contain periods. Received: a.");
});

t.test("search filters", async (t) => {
  t.same(parseValueFilter({ a: 1, b: { $gt: 2, $lte: 5 }, c: { x: 1 }, d: [1] }), [
    { field: "a", op: "$eq", value: 1 },
    { field: "b", op: "$gt", value: 2 },
    { field: "b", op: "$lte", value: 5 },
    { field: "c", op: "contains", value: { x: 1 } },
    { field: "d", op: "contains", value: [1] },
  ]);
  t.throws(() => parseValueFilter({ a: { $in: [1] } }), /filter\.a: unsupported operator \$in/);
  t.throws(() => parseValueFilter({ a: { $gt: null } }), /filter\.a\.\$gt: expected a number or a string/);
  t.throws(() => parseValueFilter({ 'a"': 1 }), /cannot contain/);
});

t.test("texts to embed", async (t) => {
  const value = { title: "T", n: 3, tags: ["x", "y"], doc: { parts: [{ text: "p0" }, { text: "p1" }] } };
  t.same(textsAtPath(value, "$"), [JSON.stringify(value)]);
  t.same(textsAtPath(value, "title"), ["T"]);
  t.same(textsAtPath(value, "n"), ["3"]);
  t.same(textsAtPath(value, "tags[*]"), ["x", "y"]);
  t.same(textsAtPath(value, "tags[-1]"), ["y"]);
  t.same(textsAtPath(value, "doc.parts[*].text"), ["p0", "p1"]);
  t.same(textsAtPath(value, "doc.parts[1].text"), ["p1"]);
  t.same(textsAtPath(value, "missing.x"), []);
  t.same(textsToEmbed(value, ["title", "tags[*]"]), [
    { field: "title", text: "T" },
    { field: "tags[*].0", text: "x" },
    { field: "tags[*].1", text: "y" },
  ]);
});
