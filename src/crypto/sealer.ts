import { envelopeIv, envelopeKeyId, isEnvelope, openEnvelope, parseEnvelope, sealEnvelope } from "./envelope.js";
import { KeyDestroyedError, UnreadableEnvelopeError, WrongMasterKeyError } from "./errors.js";
import { KeyVault, type DataKey } from "./key-vault.js";
import { LRUCache } from "lru-cache";
import type { MasterKeys } from "./master-keys.js";

export { KeyDestroyedError, UnreadableEnvelopeError, WrongMasterKeyError };

/**
 * Encryption at rest with crypto-shredding: every stream's values are sealed with data keys that belong to that stream
 * alone, or to the streams it is destroyed with (see shareKey), so destroying those keys makes the stream's values
 * unreadable wherever copies of them lie.
 */
export interface Sealer {
  /**
   * Encrypts `plaintext` (JSON text) for `stream` with a data key that belongs to that stream alone (or that it was
   * given to share, see shareKey): taken from the vault's pool of pre-created keys the first time this process seals
   * for the stream (a bounded LRU remembers stream -> key; on a miss a fresh pool key is taken, so a stream may have
   * several keys, never one shared with a stream it is not destroyed with). Synchronous. The stream name is the AES-GCM
   * additional data. Returns a compact ASCII envelope. `remember: false` when this process will not read the envelope
   * back soon (see VaultSealer.sealed).
   */
  seal(stream: string, plaintext: string, options?: { remember?: boolean }): string;
  /**
   * From now on, in this process, each of `streams` that has no key here yet seals with `owner`'s current key (one is
   * taken for `owner` if it has none): one key for streams that are destroyed together, such as a thread's own, its
   * checkpoints' and its runs'. The AAD stays each stream's own name, so an envelope still opens only in its stream.
   */
  shareKey(owner: string, streams: readonly string[]): void;
  /**
   * Decrypts an envelope sealed for `stream`: KeyDestroyedError when its key was destroyed (here, or by another process
   * sharing the vault more than `destructionCheckMs` ago), UnreadableEnvelopeError otherwise.
   */
  open(stream: string, envelope: string): string;
  /** True when `value` is a string in the envelope format (a look at its header, no crypto). */
  isEnvelope(value: unknown): value is string;
  /** The data key id an envelope names (UnreadableEnvelopeError when it is not an envelope). */
  keyIdOf(envelope: string): string;
  /** Destroys these data keys for good, durably; unknown ids are ignored. */
  destroy(keyIds: readonly string[]): void;
  /** Re-wraps every data key under the current master key; returns how many were re-wrapped. */
  rewrapAll(): number;
  close(): void;
}

const DEFAULT_POOL_SIZE = 256;
/** The largest block of keys one refill reserves by default: blocks grow while new streams come fast (see VaultSealer.refill). */
const MAX_BLOCK_SIZE = 1024;
/** Refills closer together than this grow the next block; slower ones go back to the pool size. */
const BUSY_REFILL_MS = 1_000;
/** Unwrapped data keys held in memory (32 bytes each). */
const KEY_CACHE_SIZE = 10_000;
/** Streams whose key this process remembers; a stream forgotten gets a fresh key when sealed for again. */
const STREAM_CACHE_SIZE = 10_000;
/** Characters of envelopes and their plaintexts remembered after sealing (see VaultSealer.sealed). */
const SEALED_CACHE_CHARS = 8 * 1024 * 1024;
/** How often, at most, a sealer asks the vault whether another process destroyed keys (see VaultSealer.catchUpWithDestructions). */
const DESTRUCTION_CHECK_MS = 10;

/** A value this process sealed, remembered so that reading it back (folds, tails, the run's own reads) needs no decryption. */
interface SealedValue {
  stream: string;
  keyId: string;
  envelope: string;
  plaintext: string;
}

export interface SealerOptions {
  vaultPath: string;
  masterKeys: MasterKeys;
  poolSize?: number;
  maxBlockSize?: number;
  /** Milliseconds between checks for keys other processes destroyed (default 10; 0 checks at every seal and open). */
  destructionCheckMs?: number;
}

/** Opens the vault at `vaultPath`; throws WrongMasterKeyError when it holds keys and no configured master key unwraps one. */
export function openSealer(options: SealerOptions): Sealer {
  const poolSize = options.poolSize ?? DEFAULT_POOL_SIZE;
  if (!Number.isInteger(poolSize) || poolSize < 1) throw new RangeError(`poolSize must be a positive integer, not ${poolSize}`);
  const maxBlockSize = Math.max(poolSize, options.maxBlockSize ?? MAX_BLOCK_SIZE);
  const checkMs = options.destructionCheckMs ?? DESTRUCTION_CHECK_MS;
  if (!(checkMs >= 0)) throw new RangeError(`destructionCheckMs must be 0 or more, not ${checkMs}`);
  return new VaultSealer(new KeyVault(options.vaultPath, options.masterKeys), poolSize, maxBlockSize, checkMs);
}

class VaultSealer implements Sealer {
  /** Keys this process reserved and has not handed out yet, with their bytes (it created them). */
  private pool: DataKey[] = [];
  /** Unwrapped data keys; a key forgotten or dropped is zeroed. */
  private readonly keys = new LRUCache<string, Buffer>({ max: KEY_CACHE_SIZE, dispose: (key) => key.fill(0) });
  /** The key each stream seals with, bytes and all (a copy of its own, zeroed when dropped): one lookup per seal. */
  private readonly streams = new LRUCache<string, DataKey>({ max: STREAM_CACHE_SIZE, dispose: (dataKey) => dataKey.key.fill(0) });
  /**
   * What this process sealed lately, by the envelope's IV (random, never reused): most values are read back
   * within moments of their writing. A hit must match the whole envelope and the stream, as a decryption would.
   */
  private readonly sealed = new LRUCache<string, SealedValue>({
    maxSize: SEALED_CACHE_CHARS,
    sizeCalculation: (value) => value.envelope.length + value.plaintext.length,
  });
  private refillScheduled = false;
  /** Keys the next refill reserves: the pool size, doubled while refills follow each other closely. */
  private blockSize: number;
  private lastRefillAt = -Infinity;
  private closed = false;
  /** The latest destruction in the vault whose keys this sealer forgot (see catchUpWithDestructions). */
  private destructionsSeen: number;
  private lastDestructionCheckAt = -Infinity;

  constructor(
    private readonly vault: KeyVault,
    private readonly poolSize: number,
    private readonly maxBlockSize: number,
    private readonly destructionCheckMs: number,
  ) {
    this.blockSize = poolSize;
    this.destructionsSeen = vault.lastDestroyed();
  }

  seal(stream: string, plaintext: string, options?: { remember?: boolean }): string {
    this.assertOpen();
    this.catchUpWithDestructions();
    const dataKey = this.keyOf(stream);
    const keyId = dataKey.id;
    const envelope = sealEnvelope(dataKey.key, keyId, stream, plaintext);
    if (options?.remember !== false) this.sealed.set(envelopeIv(envelope), { stream, keyId, envelope, plaintext });
    return envelope;
  }

  shareKey(owner: string, streams: readonly string[]): void {
    this.assertOpen();
    let shared: DataKey | undefined;
    for (const stream of streams) {
      if (this.streams.has(stream)) continue;
      shared ??= this.keyOf(owner);
      // Each entry holds bytes of its own: the cache zeroes an entry's key when it drops it.
      this.streams.set(stream, { id: shared.id, key: Buffer.from(shared.key) });
    }
  }

  /** The key `stream` seals with: the one this process gave it, or a fresh pool key. */
  private keyOf(stream: string): DataKey {
    let dataKey = this.streams.get(stream);
    if (dataKey === undefined) {
      dataKey = this.take();
      this.streams.set(stream, dataKey);
      this.keys.set(dataKey.id, Buffer.from(dataKey.key));
    }
    return dataKey;
  }

  open(stream: string, envelope: string): string {
    this.assertOpen();
    this.catchUpWithDestructions();
    const recent = isEnvelope(envelope) ? this.sealed.get(envelopeIv(envelope)) : undefined;
    if (recent !== undefined && recent.envelope === envelope && recent.stream === stream) return recent.plaintext;
    const parsed = parseEnvelope(envelope);
    if (parsed === undefined) throw new UnreadableEnvelopeError("not a sealed value: the envelope is malformed");
    const key = this.keys.get(parsed.keyId) ?? this.load(parsed.keyId);
    const plaintext = openEnvelope(key, parsed, stream);
    if (plaintext === undefined) {
      throw new UnreadableEnvelopeError(`the value sealed with data key ${parsed.keyId} does not verify: it was altered, or sealed for another stream`);
    }
    return plaintext;
  }

  isEnvelope(value: unknown): value is string {
    return isEnvelope(value);
  }

  keyIdOf(envelope: string): string {
    const keyId = envelopeKeyId(envelope);
    if (keyId === undefined) throw new UnreadableEnvelopeError("not a sealed value: the envelope is malformed");
    return keyId;
  }

  destroy(keyIds: readonly string[]): void {
    this.assertOpen();
    if (keyIds.length === 0) return;
    this.vault.destroy(keyIds);
    this.forget(keyIds);
  }

  /**
   * Forgets the keys other processes sharing the vault destroyed since the last check, at most every
   * `destructionCheckMs`: so that a value of a purged stream does not open from this process's caches, and a stream
   * created again under a purged name (a thread id used again) does not seal with its destroyed key, whichever
   * process purged it. One indexed read of the vault per check.
   */
  private catchUpWithDestructions(): void {
    const now = performance.now();
    if (now - this.lastDestructionCheckAt < this.destructionCheckMs) return;
    this.lastDestructionCheckAt = now;
    const latest = this.vault.lastDestroyed();
    if (latest === this.destructionsSeen) return;
    this.forget(this.vault.destroyedSince(this.destructionsSeen));
    this.destructionsSeen = latest;
  }

  /** Drops destroyed keys from every cache: their bytes, what was sealed with them, the streams that sealed with them, the pool. */
  private forget(keyIds: readonly string[]): void {
    if (keyIds.length === 0) return;
    const doomed = new Set(keyIds);
    for (const id of doomed) this.keys.delete(id);
    // Collected first: a cache is not changed while it is iterated.
    const forgotten = [...this.sealed.entries()].filter(([, value]) => doomed.has(value.keyId)).map(([iv]) => iv);
    for (const iv of forgotten) this.sealed.delete(iv);
    const streams = [...this.streams.entries()].filter(([, key]) => doomed.has(key.id)).map(([stream]) => stream);
    for (const stream of streams) this.streams.delete(stream);
    for (const k of this.pool) if (doomed.has(k.id)) k.key.fill(0);
    this.pool = this.pool.filter((k) => !doomed.has(k.id));
  }

  rewrapAll(): number {
    this.assertOpen();
    return this.vault.rewrapAll();
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    for (const k of this.pool) k.key.fill(0);
    this.pool = [];
    this.keys.clear();
    this.streams.clear();
    this.sealed.clear();
    this.vault.close();
  }

  private load(keyId: string): Buffer {
    const found = this.vault.lookup(keyId);
    switch (found.state) {
      case "live":
        this.keys.set(keyId, found.key);
        return found.key;
      case "destroyed":
        throw new KeyDestroyedError(keyId);
      case "unknown":
        throw new UnreadableEnvelopeError(`data key ${keyId} is not in the key vault at ${this.vault.path}`);
      case "locked":
        throw new UnreadableEnvelopeError(
          `data key ${keyId} is wrapped by master key ${found.masterKeyId}, which is not configured: list it in LANGGRAPH_AES_PREVIOUS_KEYS`,
        );
    }
  }

  /** A pool key, never handed out before; refilled ahead of need so that sealing seldom waits for an fsync. */
  private take(): DataKey {
    if (this.pool.length === 0) this.refill();
    const taken = this.pool.pop() as DataKey;
    if (this.pool.length < this.blockSize / 4) this.scheduleRefill();
    return taken;
  }

  /**
   * Reserves a block of keys in one transaction and one fsync. Under a stream of new threads the blocks grow, so the
   * fsync is shared by more keys; when new streams are rare they stay small, since keys reserved and never handed out
   * are left unused in the vault when the process ends.
   */
  private refill(): void {
    const now = performance.now();
    this.blockSize = now - this.lastRefillAt < BUSY_REFILL_MS ? Math.min(this.blockSize * 2, this.maxBlockSize) : this.poolSize;
    this.lastRefillAt = now;
    this.pool.push(...this.vault.createBlock(this.blockSize));
  }

  private scheduleRefill(): void {
    if (this.refillScheduled) return;
    this.refillScheduled = true;
    setImmediate(() => {
      this.refillScheduled = false;
      if (this.closed || this.pool.length >= this.blockSize / 4) return;
      try {
        this.refill();
      } catch {
        // Left to the synchronous refill when the pool runs dry, which reports its error to a caller.
      }
    });
  }

  private assertOpen(): void {
    if (this.closed) throw new Error("the sealer is closed");
  }
}
