/**
 * The input limits of the trust boundary (pure, ground floor): how deep a JSON value may nest and how
 * many keys one object may hold. Every edge checks a request's parsed JSON against REQUEST_LIMITS
 * before the application core sees it, and the event store refuses event data beyond LOG_LIMITS, so
 * nothing reaches the append-only log that a fold, SQLite's JSON functions or JSON.stringify cannot
 * read back.
 *
 * Why these numbers:
 * - SQLite's JSON1 functions refuse documents nested deeper than 1,000 levels, and V8's
 *   JSON.stringify and structuredClone overflow the stack somewhere past a few thousand (less when
 *   called deep in a stack). A read model that searches metadata and a fold that copies a run's
 *   input must never meet such a value.
 * - A request may nest 100 levels: messages, tool-call arguments and JSON schemas nest far less.
 *   Events wrap a request's values in a few levels of their own (a run's kwargs, a checkpoint's
 *   channel values), so the log accepts twice that, which leaves a graph room to build on its
 *   input and stays five times under SQLite's limit.
 * - One object may hold 10,000 keys: far beyond any metadata or state a client sends, and small
 *   enough that a fold over it stays quick.
 * The walk is iterative, so a value of any depth is measured without recursion.
 */

export interface JsonLimits {
  /** Nesting depth of objects and arrays; a top-level object or array is depth 1. */
  maxDepth: number;
  /** Keys of one object (Infinity: not limited). */
  maxKeys: number;
}

export const REQUEST_LIMITS: Readonly<JsonLimits> = Object.freeze({ maxDepth: 100, maxKeys: 10_000 });
export const LOG_LIMITS: Readonly<JsonLimits> = Object.freeze({ maxDepth: 200, maxKeys: Infinity });

export interface LimitViolation {
  /** Where the value breaks the limit: `input.x[0][0]`, relative to the name the caller gave. */
  path: string;
  rule: "depth" | "keys";
  limit: number;
}

/** A node still to visit: its value, its depth, and how it was reached (for the path of a violation). */
interface Frame {
  value: object;
  depth: number;
  parent: Frame | undefined;
  key: string | number | undefined;
}

/**
 * The first place where `value` breaks `limits`, or undefined when it keeps them.
 *
 * Every event the log takes is walked here, so the walk that finds nothing allocates nothing per node: values
 * and depths on two stacks, keys read with for-in. Only when it meets a break does the walk that names the
 * place (`locateViolation`) run, and its answer is the one given (for-in also sees inherited keys, so the
 * first walk may suspect a value that keeps the limits; the second, by own keys, clears it).
 */
export function findLimitViolation(value: unknown, limits: Readonly<JsonLimits>, root = ""): LimitViolation | undefined {
  if (typeof value !== "object" || value === null) return undefined;
  const values: object[] = [value];
  const depths: number[] = [1];
  while (values.length > 0) {
    const node = values.pop()!;
    const depth = depths.pop()!;
    if (depth > limits.maxDepth) return locateViolation(value, limits, root);
    if (Array.isArray(node)) {
      for (let i = 0; i < node.length; i++) {
        const item: unknown = node[i];
        if (typeof item === "object" && item !== null) {
          values.push(item);
          depths.push(depth + 1);
        }
      }
      continue;
    }
    let keys = 0;
    const record = node as Record<string, unknown>;
    for (const key in record) {
      if (++keys > limits.maxKeys) return locateViolation(value, limits, root);
      const item = record[key];
      if (typeof item === "object" && item !== null) {
        values.push(item);
        depths.push(depth + 1);
      }
    }
  }
  return undefined;
}

/** findLimitViolation's answer, walking own keys with a frame per node so that the place can be named. */
function locateViolation(value: object, limits: Readonly<JsonLimits>, root: string): LimitViolation | undefined {
  const stack: Frame[] = [{ value, depth: 1, parent: undefined, key: undefined }];
  while (stack.length > 0) {
    const frame = stack.pop()!;
    if (frame.depth > limits.maxDepth) return { path: pathOf(root, frame), rule: "depth", limit: limits.maxDepth };
    if (Array.isArray(frame.value)) {
      const items = frame.value as unknown[];
      for (let i = 0; i < items.length; i++) {
        const item = items[i];
        if (typeof item === "object" && item !== null) stack.push({ value: item, depth: frame.depth + 1, parent: frame, key: i });
      }
      continue;
    }
    const keys = Object.keys(frame.value);
    if (keys.length > limits.maxKeys) return { path: pathOf(root, frame), rule: "keys", limit: limits.maxKeys };
    const record = frame.value as Record<string, unknown>;
    for (const key of keys) {
      const item = record[key];
      if (typeof item === "object" && item !== null) stack.push({ value: item, depth: frame.depth + 1, parent: frame, key });
    }
  }
  return undefined;
}

/** How many path segments a message names before it elides the middle of a very deep path. */
const PATH_SEGMENTS_SHOWN = 8;

function pathOf(root: string, frame: Frame): string {
  const keys: (string | number)[] = [];
  for (let f: Frame | undefined = frame; f?.key !== undefined; f = f.parent) keys.push(f.key);
  keys.reverse();
  // null stands for the elided middle of a very deep path.
  const shown = keys.length > PATH_SEGMENTS_SHOWN ? [...keys.slice(0, PATH_SEGMENTS_SHOWN / 2), null, ...keys.slice(-PATH_SEGMENTS_SHOWN / 2)] : keys;
  let path = root;
  for (const key of shown) {
    if (key === null) path += "…";
    else if (typeof key === "number") path += `[${key}]`;
    else path += path === "" ? key : `.${key}`;
  }
  return path === "" ? "(root)" : path;
}

/** The sentence a refusal carries: which field, which limit. */
export function describeViolation(v: LimitViolation): string {
  return v.rule === "depth"
    ? `${v.path}: nested deeper than ${v.limit} levels (at most ${v.limit} levels of objects and arrays are accepted)`
    : `${v.path}: an object with more than ${v.limit} keys (at most ${v.limit} keys per object are accepted)`;
}

/** A request value beyond REQUEST_LIMITS: each edge answers it in its own form (HTTP 422, JSON-RPC -32602, an error frame). */
export class InputLimitError extends Error {
  override name = "InputLimitError";
  constructor(readonly violation: LimitViolation) {
    super(describeViolation(violation));
  }
}

/** Throws InputLimitError when `value` (a parsed request, named `root` in the message) breaks REQUEST_LIMITS. */
export function assertWithinRequestLimits(value: unknown, root = ""): void {
  const violation = findLimitViolation(value, REQUEST_LIMITS, root);
  if (violation) throw new InputLimitError(violation);
}
