import { compareNumber, LosslessNumber, parse as losslessParse, stringify as losslessStringify } from 'lossless-json';

/**
 * JSON values as agentstate keeps them: verbatim (API.md section 1). A number reads back
 * digit for digit as it was sent. Most numbers are plain JavaScript numbers, because a
 * double writes back as the very text it was parsed from (`42`, `0.5`, `1700000000000`). The
 * others — `9007199254740993`, `1e-400`, `0.1000000000000000055`, `1.0`, `-0`, `1E3` — would
 * come back changed, so they are kept as their text, in a `JsonNumber`.
 *
 * Read and write JSON text through this module only: `parseJson` for text from outside,
 * `stringifyJson` for text going out, `encodeStoredJson` / `decodeStoredJson` for what the
 * table keeps. `JSON.stringify` of a value holding a `JsonNumber` throws rather than writing
 * it wrong.
 */

/**
 * A JSON number kept as the text it was sent as, because no double reads back as that text.
 * It is lossless-json's `LosslessNumber` (`value` is the text; `valueOf()` the nearest number,
 * or a bigint for a large integer).
 */
export class JsonNumber extends LosslessNumber {
  /** Only `stringifyJson` may serialize a JsonNumber; plain `JSON.stringify` would write it wrong. */
  toJSON(): null {
    if (!stringifying) throw new TypeError('a JsonNumber must be written with stringifyJson, not JSON.stringify');
    sawJsonNumber = true;
    return null;
  }
}

/** A JSON value: what `parseJson` produces, and what is stored and answered verbatim. */
export type Json = null | boolean | number | string | JsonNumber | Json[] | { [key: string]: Json };
export type JsonObject = { [key: string]: Json };

/** A number of a JSON value: a double that writes back as its text, or the text itself. */
export type JsonNumeric = number | JsonNumber;

export function isJsonNumber(value: unknown): value is JsonNumber {
  return value instanceof LosslessNumber;
}

export function isJsonObject(value: unknown): value is JsonObject {
  return typeof value === 'object' && value !== null && !Array.isArray(value) && !(value instanceof LosslessNumber);
}

/** A number's JSON text: `String(n)` of a double (whose `-0` is `0`, as JSON.stringify writes it). */
function numberText(value: JsonNumeric): string {
  return typeof value === 'number' ? String(value) : value.value;
}

/**
 * Orders two numbers by value, exactly (no rounding to doubles): -1, 0 or 1. `1.0` and `1`
 * are equal here, `9007199254740993` is larger than `9007199254740992`. For filters and
 * RFC 6902 `test`, which compare values; `jsonEqual` compares what is stored.
 */
export function compareJsonNumbers(a: JsonNumeric, b: JsonNumeric): -1 | 0 | 1 {
  if (typeof a === 'number' && typeof b === 'number') return a < b ? -1 : a > b ? 1 : 0;
  return compareNumber(numberText(a), numberText(b)) as -1 | 0 | 1;
}

/**
 * Defines an own, enumerable property. Plain assignment would run the `__proto__` setter
 * and turn a client's key into a prototype change; state is stored verbatim instead.
 */
export function setOwn(target: JsonObject, key: string, value: Json): void {
  Object.defineProperty(target, key, { value, enumerable: true, writable: true, configurable: true });
}

const hasOwn = (object: object, key: string) => Object.hasOwn(object, key);

function deepEqual(a: Json, b: Json, numbersEqual: (a: JsonNumeric, b: JsonNumeric) => boolean): boolean {
  if (a === b) return true;
  const aNumber = typeof a === 'number' || isJsonNumber(a);
  const bNumber = typeof b === 'number' || isJsonNumber(b);
  if (aNumber || bNumber) return aNumber && bNumber && numbersEqual(a as JsonNumeric, b as JsonNumeric);
  if (typeof a !== 'object' || typeof b !== 'object' || a === null || b === null) return false;
  if (Array.isArray(a) || Array.isArray(b)) {
    if (!Array.isArray(a) || !Array.isArray(b) || a.length !== b.length) return false;
    return a.every((item, index) => deepEqual(item, b[index] as Json, numbersEqual));
  }
  const keys = Object.keys(a);
  if (keys.length !== Object.keys(b).length) return false;
  return keys.every((key) => hasOwn(b, key) && deepEqual(a[key] as Json, b[key] as Json, numbersEqual));
}

const sameText = (a: JsonNumeric, b: JsonNumeric) => numberText(a) === numberText(b);
const sameValue = (a: JsonNumeric, b: JsonNumeric) => compareJsonNumbers(a, b) === 0;

/**
 * JSON equality as API.md section 4 defines it: object key order is ignored, arrays are
 * ordered, `null` differs from a missing key — and numbers are equal when they are written
 * alike, because values are stored verbatim: `1.0` and `1` read back differently, so a
 * write of one over the other changes the state. (`jsonValueEqual` compares numbers by value.)
 */
export function jsonEqual(a: Json, b: Json): boolean {
  return deepEqual(a, b, sameText);
}

/** `jsonEqual`, but numbers compare by value (`1.0` equals `1`): RFC 6902 `test`, filters. */
export function jsonValueEqual(a: Json, b: Json): boolean {
  return deepEqual(a, b, sameValue);
}

// ---- JSON text -------------------------------------------------------------------------------

/** Set while `stringifyJson` runs (it is synchronous): a JsonNumber's `toJSON` may then run. */
let stringifying = false;
let sawJsonNumber = false;

/**
 * The JSON text of `value`, every number as it was sent. The native serializer writes it when
 * the value holds no JsonNumber (the common case, at native speed); otherwise lossless-json
 * writes it again with the numbers' own text.
 */
export function stringifyJson(value: unknown, replacer?: (key: string, value: unknown) => unknown): string {
  return writeJson(value, replacer).text;
}

/** The JSON text of `value`, and whether it holds a JsonNumber. */
function writeJson(value: unknown, replacer?: (key: string, value: unknown) => unknown): { text: string; verbatim: boolean } {
  stringifying = true;
  sawJsonNumber = false;
  let text: string;
  try {
    text = JSON.stringify(value, replacer);
  } finally {
    stringifying = false;
  }
  if (!sawJsonNumber) return { text, verbatim: false };
  return { text: losslessStringify(value, replacer) as string, verbatim: true };
}

/** Why a JSON text from outside cannot be taken: bad syntax, a duplicate key, or too deep. */
export class JsonTextError extends Error {
  override name = 'JsonTextError';
}

/** Deepest nesting a stored JSON value may have; deeper would overflow recursive code. */
export const MAX_JSON_DEPTH = 2000;

/**
 * Strings (to skip them, and to tell keys by the colon after them) and number tokens of a
 * valid JSON text. Only run on text `JSON.parse` accepted, where every `"` outside a string
 * opens one, so a match never starts inside a string.
 */
const TOKENS = /"[^"\\]*(?:\\.[^"\\]*)*"(\s*:)?|-?\d[\d.eE+-]*/g;
/** Integers a double holds exactly and writes back alike (not `-0`, no leading zeros). */
const SHORT_INTEGER = /^(?:0|-?[1-9]\d{0,14})$/;

function parsedNumber(text: string): number | JsonNumber {
  if (SHORT_INTEGER.test(text)) return Number(text);
  const number = Number(text);
  return String(number) === text ? number : new JsonNumber(text);
}

/**
 * Parses JSON text from outside (a request body, a worker's answer) verbatim, or throws a
 * `JsonTextError`: invalid syntax, an object with a duplicate key (`{"a":1,"a":2}` would
 * otherwise silently keep one), nesting deeper than `MAX_JSON_DEPTH`. Numbers that a double
 * would change become JsonNumbers; `"__proto__"` is an ordinary key.
 *
 * The native parser reads the text first. One scan over it then counts the keys and checks
 * each number; only a text with a number a double would change is read again, by
 * lossless-json, so the common case costs little more than `JSON.parse`.
 */
export function parseJson(text: string): Json {
  let value: Json;
  try {
    value = JSON.parse(text) as Json;
  } catch (error) {
    throw new JsonTextError((error as Error).message);
  }
  const shape = shapeOf(value);
  if (shape.tooDeep) throw new JsonTextError(`nesting deeper than ${MAX_JSON_DEPTH} levels`);

  let keysInText = 0;
  let exact = true;
  TOKENS.lastIndex = 0;
  for (let match = TOKENS.exec(text); match !== null; match = TOKENS.exec(text)) {
    const token = match[0];
    if (token.charCodeAt(0) === 0x22) {
      if (match[1] !== undefined) keysInText++;
    } else if (exact && parsedNumber(token) instanceof JsonNumber) {
      exact = false;
    }
  }
  if (keysInText !== shape.keys) {
    // Name the key when lossless-json can (its duplicates with unequal values).
    try {
      losslessParse(text);
    } catch (error) {
      throw new JsonTextError((error as Error).message);
    }
    throw new JsonTextError('an object has the same key twice');
  }
  if (exact) return value;
  return losslessParse(text, undefined, parsedNumber) as Json;
}

/** How many object members a parsed value has, and whether it nests too deep. Iterative. */
function shapeOf(value: Json): { keys: number; tooDeep: boolean } {
  let keys = 0;
  const stack: Array<{ value: Json; depth: number }> = [{ value, depth: 0 }];
  while (stack.length > 0) {
    const { value: current, depth } = stack.pop() as { value: Json; depth: number };
    if (typeof current !== 'object' || current === null) continue;
    if (depth >= MAX_JSON_DEPTH) return { keys, tooDeep: true };
    if (Array.isArray(current)) {
      for (const item of current) stack.push({ value: item, depth: depth + 1 });
    } else if (isJsonObject(current)) {
      for (const key of Object.keys(current)) {
        keys++;
        stack.push({ value: current[key] as Json, depth: depth + 1 });
      }
    }
  }
  return { keys, tooDeep: false };
}

/**
 * The text the table keeps for a JSON value. A value holding a JsonNumber is written with one
 * leading space — still the same JSON — which tells `decodeStoredJson` to read it losslessly;
 * every other text (and everything stored before numbers were kept verbatim) reads natively.
 */
export function encodeStoredJson(value: unknown): string {
  const { text, verbatim } = writeJson(value);
  return verbatim ? ` ${text}` : text;
}

/** A value from the table, as `encodeStoredJson` wrote it. */
export function decodeStoredJson(text: string): Json {
  if (text.charCodeAt(0) !== 0x20) return JSON.parse(text) as Json;
  return losslessParse(text, undefined, parsedNumber) as Json;
}

/** A copy with every object's keys in sorted order (JsonNumbers kept as they are). */
function sortedKeys(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(sortedKeys);
  if (!isJsonObject(value)) return value;
  const sorted: JsonObject = {};
  for (const key of Object.keys(value).sort()) setOwn(sorted, key, sortedKeys(value[key]) as Json);
  return sorted;
}

/** JSON with object keys sorted, so that equal values always serialize to the same text. */
export function canonicalJson(value: unknown): string {
  return stringifyJson(sortedKeys(value));
}

/** Size in bytes of the UTF-8 JSON encoding of `value`, the measure of every size limit. */
export function encodedSize(value: unknown): number {
  return Buffer.byteLength(stringifyJson(value), 'utf8');
}
