import { LRUCache } from "lru-cache";

/**
 * The texts of the latest large checkpoint values, by content hash: a run reads back at its start the
 * values the thread's previous run wrote (on a long conversation, the whole message list), and each
 * read reassembled its chunks from the log, checked their hash and unescaped them again. A value is
 * content-addressed, so a held text can never be stale. Least recently used texts go first once
 * `maxChars` is exceeded; a text longer than that alone is not held.
 */
export class ValueTexts {
  private readonly texts: LRUCache<string, string>;

  constructor(maxChars: number) {
    this.texts = new LRUCache<string, string>({ maxSize: maxChars, sizeCalculation: (text) => Math.max(1, text.length) });
  }

  /** The text whose hash is `sha256`, if held (it becomes the most recently used). */
  get(sha256: string): string | undefined {
    return this.texts.get(sha256);
  }

  /** Holds `text` (whose hash is `sha256`) unless it alone is over the bound. */
  set(sha256: string, text: string): void {
    this.texts.set(sha256, text);
  }

  clear(): void {
    this.texts.clear();
  }

  get size(): number {
    return this.texts.size;
  }

  get heldChars(): number {
    return this.texts.calculatedSize;
  }
}
