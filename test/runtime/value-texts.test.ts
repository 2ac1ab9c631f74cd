import t from "tap";
import { ValueTexts } from "../../src/runtime/value-texts.js";

t.test("texts are held by hash up to a bound, least recently used first out", async (t) => {
  const texts = new ValueTexts(10);
  texts.set("a", "aaaa");
  texts.set("b", "bbbb");
  t.equal(texts.get("a"), "aaaa", "a is now the most recently used");
  texts.set("c", "cccc"); // 12 > 10: b, the least recently used, goes
  t.equal(texts.get("b"), undefined);
  t.equal(texts.get("a"), "aaaa");
  t.equal(texts.get("c"), "cccc");
  t.equal(texts.heldChars, 8);
  texts.set("a", "aaaaaa"); // replaced: counted once
  t.equal(texts.heldChars, 10);
  texts.set("huge", "x".repeat(11));
  t.equal(texts.get("huge"), undefined, "a text over the bound alone is not held");
  t.equal(texts.size, 2, "and evicts nothing");
  texts.clear();
  t.equal(texts.size, 0);
  t.equal(texts.heldChars, 0);
});
