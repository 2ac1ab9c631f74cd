/**
 * The texts of the latest large checkpoint values, by content hash: a run reads back at its start the
 * values the thread's previous run wrote (on a long conversation, the whole message list), and each
 * read reassembled its chunks from the log, checked their hash and unescaped them again. A value is
 * content-addressed, so a held text can never be stale. Least recently used texts go first once
 * `maxChars` is exceeded.
 */
export class ValueTexts {
  private readonly texts = new Map<string, string>();
  private chars = 0;

  constructor(private readonly maxChars: number) {}

  /** The text whose hash is `sha256`, if held (it becomes the most recently used). */
  get(sha256: string): string | undefined {
    const text = this.texts.get(sha256);
    if (text !== undefined) {
      this.texts.delete(sha256);
      this.texts.set(sha256, text);
    }
    return text;
  }

  /** Holds `text` (whose hash is `sha256`) unless it alone is over the bound. */
  set(sha256: string, text: string): void {
    if (text.length > this.maxChars) return;
    const held = this.texts.get(sha256);
    if (held !== undefined) {
      this.texts.delete(sha256);
      this.chars -= held.length;
    }
    this.texts.set(sha256, text);
    this.chars += text.length;
    for (const [key, old] of this.texts) {
      if (this.chars <= this.maxChars) break;
      this.texts.delete(key);
      this.chars -= old.length;
    }
  }

  clear(): void {
    this.texts.clear();
    this.chars = 0;
  }

  get size(): number {
    return this.texts.size;
  }

  get heldChars(): number {
    return this.chars;
  }
}
