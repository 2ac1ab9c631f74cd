import t from "tap";
import fc from "fast-check";
import {
  assertWithinRequestLimits,
  findLimitViolation,
  InputLimitError,
  LOG_LIMITS,
  REQUEST_LIMITS,
  type JsonLimits,
  type LimitViolation,
} from "../../src/util/json-limits.js";

const nestArrays = (depth: number, leaf: unknown = 1): unknown => {
  let value: unknown = leaf;
  for (let i = 0; i < depth; i++) value = [value];
  return value;
};

/** Depth by the definition the limits use, computed by recursion (fine for the small values fast-check makes). */
const depthOf = (value: unknown): number => (typeof value !== "object" || value === null ? 0 : 1 + Math.max(0, ...Object.values(value as object).map(depthOf)));

t.test("depth: a value at the limit passes, one level more is refused with its path", async (t) => {
  t.equal(findLimitViolation(nestArrays(REQUEST_LIMITS.maxDepth), REQUEST_LIMITS), undefined);
  const v = findLimitViolation({ input: { x: nestArrays(REQUEST_LIMITS.maxDepth - 1) } }, REQUEST_LIMITS, "body");
  t.match(v, { rule: "depth", limit: REQUEST_LIMITS.maxDepth });
  t.equal(v?.path, "body.input.x[0][0]…[0][0][0][0]", "the path names the field, with the middle of a deep path elided");
  t.equal(findLimitViolation({ input: { x: nestArrays(REQUEST_LIMITS.maxDepth - 2) } }, REQUEST_LIMITS), undefined);
});

t.test("depth: values far deeper than any stack are measured without recursion", async (t) => {
  const deep = JSON.parse("[".repeat(200_000) + "]".repeat(200_000)) as unknown;
  t.match(findLimitViolation(deep, LOG_LIMITS), { rule: "depth", limit: LOG_LIMITS.maxDepth });
  let objects: unknown = 1;
  for (let i = 0; i < 100_000; i++) objects = { a: objects };
  t.throws(() => assertWithinRequestLimits(objects, "body"), InputLimitError);
});

t.test("keys: an object with more keys than the limit is refused, as many keys spread over objects pass", async (t) => {
  const many = (n: number) => Object.fromEntries(Array.from({ length: n }, (_, i) => [`k${i}`, i]));
  t.equal(findLimitViolation({ metadata: many(REQUEST_LIMITS.maxKeys) }, REQUEST_LIMITS), undefined);
  t.match(findLimitViolation({ metadata: many(REQUEST_LIMITS.maxKeys + 1) }, REQUEST_LIMITS, "body"), { rule: "keys", path: "body.metadata" });
  t.equal(findLimitViolation([many(REQUEST_LIMITS.maxKeys), many(REQUEST_LIMITS.maxKeys)], REQUEST_LIMITS), undefined);
  t.equal(findLimitViolation({ metadata: many(REQUEST_LIMITS.maxKeys + 1) }, LOG_LIMITS), undefined, "the log does not limit keys");
});

t.test("primitives and null are within every limit", async (t) => {
  for (const v of [null, 1, "x", true, undefined]) t.equal(findLimitViolation(v, REQUEST_LIMITS), undefined);
});

t.test("property: a value is refused exactly when its depth exceeds the limit", async () => {
  const limits = { maxDepth: 4, maxKeys: Infinity };
  fc.assert(
    fc.property(fc.jsonValue({ maxDepth: 7 }), (value) => {
      const refused = findLimitViolation(value, limits) !== undefined;
      return refused === depthOf(value) > limits.maxDepth;
    }),
    { numRuns: 2000 },
  );
});

t.test("the log accepts what a request may carry, wrapped in the levels an event adds", async (t) => {
  t.ok(LOG_LIMITS.maxDepth >= REQUEST_LIMITS.maxDepth * 2, "room for a graph to wrap its input");
  t.ok(LOG_LIMITS.maxDepth < 1000, "under SQLite's JSON1 depth limit");
  const request = nestArrays(REQUEST_LIMITS.maxDepth);
  const asEvent = { kwargs: { input: { messages: [{ content: [{ x: request }] }] } } };
  t.equal(findLimitViolation(asEvent, LOG_LIMITS), undefined);
});

t.test("the walk that allocates nothing per node answers as the walk that names the place", async (t) => {
  // The oracle: every node on a stack with its parent, own keys only (findLimitViolation's rule, spelt out).
  const reference = (value: unknown, limits: JsonLimits): LimitViolation | undefined => {
    type Node = { value: object; depth: number; path: string };
    if (typeof value !== "object" || value === null) return undefined;
    const stack: Node[] = [{ value, depth: 1, path: "" }];
    while (stack.length > 0) {
      const node = stack.pop()!;
      const path = node.path === "" ? "(root)" : node.path;
      if (node.depth > limits.maxDepth) return { path, rule: "depth", limit: limits.maxDepth };
      const entries: [string | number, unknown][] = Array.isArray(node.value) ? node.value.map((v, i) => [i, v]) : Object.entries(node.value);
      if (!Array.isArray(node.value) && entries.length > limits.maxKeys) return { path, rule: "keys", limit: limits.maxKeys };
      for (const [key, item] of entries) {
        if (typeof item !== "object" || item === null) continue;
        const step = typeof key === "number" ? `[${key}]` : node.path === "" ? key : `.${key}`;
        stack.push({ value: item, depth: node.depth + 1, path: node.path + step });
      }
    }
    return undefined;
  };
  fc.assert(
    fc.property(
      fc.jsonValue({ maxDepth: 5 }),
      fc.integer({ min: 1, max: 5 }),
      fc.oneof(fc.integer({ min: 0, max: 4 }), fc.constant(Infinity)),
      (value, maxDepth, maxKeys) => {
        const limits = { maxDepth, maxKeys };
        t.same(findLimitViolation(value, limits), reference(value, limits));
      },
    ),
    { numRuns: 300 },
  );
  // Keys a value inherits are not its own: for-in sees them, the answer does not count them.
  const inherits = Object.create({ a: 1, b: 2, c: { deep: { deeper: {} } } }) as Record<string, unknown>;
  inherits.own = 1;
  t.equal(findLimitViolation({ x: inherits }, { maxDepth: 2, maxKeys: 1 }), undefined, "inherited keys count for nothing");
  t.same(findLimitViolation({ x: { y: {} } }, { maxDepth: 2, maxKeys: 5 }), { path: "x.y", rule: "depth", limit: 2 });
});
