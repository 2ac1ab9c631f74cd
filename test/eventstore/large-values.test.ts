import t from "tap";
import { LARGE_RUN_VALUE_BYTES, largeJsonText, surelyLarge } from "../../src/eventstore/large-values.js";

t.test("surelyLarge says large only when the JSON is over the limit, without making it", async (t) => {
  const half = "x".repeat(LARGE_RUN_VALUE_BYTES / 2);
  const cases: [string, unknown][] = [
    ["small", { messages: [{ type: "human", content: "hi" }] }],
    ["two halves in a list", { messages: [{ content: half }, { content: half + "y" }] }],
    ["long keys", Object.fromEntries(Array.from({ length: 3 }, (_, i) => [`${i}${half}`, 1]))],
    ["numbers only (a lower bound that says not sure)", Array.from({ length: 100_000 }, (_, i) => i)],
    ["just under", { s: "x".repeat(LARGE_RUN_VALUE_BYTES - 1) }],
  ];
  for (const [name, value] of cases) {
    const large = largeJsonText(value) !== undefined;
    if (surelyLarge(value)) t.ok(large, `${name}: surely large is large`);
    else t.comment(`${name}: not sure (large: ${large})`);
  }
  t.ok(surelyLarge(cases[1][1]), "strings in a list count");
  t.ok(surelyLarge(cases[2][1]), "keys count");
  t.notOk(surelyLarge(cases[0][1]));
  t.notOk(surelyLarge(cases[4][1]));
  t.notOk(surelyLarge(cases[3][1]), "numbers are not counted (their JSON may be large, then largeJsonText says so)");
  t.ok(largeJsonText(cases[3][1]) !== undefined, "which it does");
});
