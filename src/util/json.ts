/** JSON value helpers every layer shares (ground floor: imports nothing of the server). */
import * as z from "zod";

export type Json = null | boolean | number | string | Json[] | { [key: string]: Json };
export type JsonObject = Record<string, unknown>;

/** An object that is neither null nor an array: what JSON calls an object. */
export function isPlainObject(value: unknown): value is JsonObject {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/** Any JSON object, as a zod schema (event payloads, request bodies). */
export const JsonObjectSchema = z.record(z.string(), z.unknown());

/** Freezes a parsed JSON value and everything in it (JSON has no cycles). */
export function deepFreeze<T>(value: T): T {
  if (typeof value === "object" && value !== null) {
    Object.freeze(value);
    if (Array.isArray(value)) {
      for (const item of value) if (typeof item === "object" && item !== null) deepFreeze(item);
    } else {
      for (const key in value) {
        const item = (value as Record<string, unknown>)[key];
        if (typeof item === "object" && item !== null) deepFreeze(item);
      }
    }
  }
  return value;
}
