/** A JSON value as `JSON.parse` produces it. */
export type Json = null | boolean | number | string | Json[] | { [key: string]: Json };
export type JsonObject = { [key: string]: Json };

export function isJsonObject(value: unknown): value is JsonObject {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/**
 * Defines an own, enumerable property. Plain assignment would run the `__proto__` setter
 * and turn a client's key into a prototype change; state is stored verbatim instead.
 */
export function setOwn(target: JsonObject, key: string, value: Json): void {
  Object.defineProperty(target, key, { value, enumerable: true, writable: true, configurable: true });
}

const hasOwn = (object: object, key: string) => Object.hasOwn(object, key);

/**
 * JSON equality as API.md section 4 defines it: object key order is ignored, arrays are
 * ordered, and `null` differs from a missing key.
 */
export function jsonEqual(a: Json, b: Json): boolean {
  if (a === b) return true;
  if (typeof a !== 'object' || typeof b !== 'object' || a === null || b === null) return false;
  if (Array.isArray(a) || Array.isArray(b)) {
    if (!Array.isArray(a) || !Array.isArray(b) || a.length !== b.length) return false;
    return a.every((item, index) => jsonEqual(item, b[index] as Json));
  }
  const keys = Object.keys(a);
  if (keys.length !== Object.keys(b).length) return false;
  return keys.every((key) => hasOwn(b, key) && jsonEqual(a[key] as Json, b[key] as Json));
}

/** JSON with object keys sorted, so that equal values always serialize to the same text. */
export function canonicalJson(value: unknown): string {
  return JSON.stringify(value, (_key, item: unknown) => {
    if (!isJsonObject(item)) return item;
    const sorted: JsonObject = {};
    for (const key of Object.keys(item).sort()) setOwn(sorted, key, item[key] as Json);
    return sorted;
  });
}

/** Size in bytes of the UTF-8 JSON encoding of `value`, the measure of the state limit. */
export function encodedSize(value: Json): number {
  return Buffer.byteLength(JSON.stringify(value), 'utf8');
}

/** Deepest nesting a stored JSON value may have; deeper would overflow recursive code. */
export const MAX_JSON_DEPTH = 2000;

/**
 * Why a parsed body cannot be stored as it was sent, or null when it can: nesting deeper
 * than `MAX_JSON_DEPTH`, or a number JSON.parse turned into ±Infinity (beyond a double's
 * range), which JSON.stringify would silently write as null. Iterative, so any depth is safe.
 */
export function unstorableJson(value: unknown): string | null {
  const stack: Array<{ value: unknown; depth: number }> = [{ value, depth: 0 }];
  while (stack.length > 0) {
    const { value: current, depth } = stack.pop() as { value: unknown; depth: number };
    if (typeof current === 'number' && !Number.isFinite(current)) return 'a number is beyond the range of a double';
    if (typeof current !== 'object' || current === null) continue;
    if (depth >= MAX_JSON_DEPTH) return `nesting deeper than ${MAX_JSON_DEPTH} levels`;
    for (const child of Object.values(current)) stack.push({ value: child, depth: depth + 1 });
  }
  return null;
}
