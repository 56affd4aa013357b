import { CodecError, type ValuePath } from './errors.js';
import type { Json, JsonObject } from './types.js';

/**
 * The codec: values beyond JSON travel through state as tagged JSON.
 *
 * A tagged value is an object with exactly the members `$as` (the type) and `$v` (its
 * payload, never a plain object):
 *
 * | value                          | tagged JSON                                          |
 * |--------------------------------|------------------------------------------------------|
 * | `new Date(0)`                  | `{"$as":"Date","$v":"1970-01-01T00:00:00.000Z"}`    |
 * | `10n`                          | `{"$as":"BigInt","$v":"10"}`                         |
 * | `NaN`, `Infinity`, `-0`        | `{"$as":"Number","$v":"NaN"}` (`"Infinity"`, `"-Infinity"`, `"-0"`) |
 * | `undefined` (in an array)      | `{"$as":"undefined"}`                                |
 * | `/a+/gi`                       | `{"$as":"RegExp","$v":["a+","gi"]}`                  |
 * | `new Map([[1, 'a']])`          | `{"$as":"Map","$v":[[1,"a"]]}`                       |
 * | `new Set(['a'])`               | `{"$as":"Set","$v":["a"]}`                           |
 * | `ArrayBuffer`, `DataView`      | `{"$as":"ArrayBuffer","$v":"<base64>"}`              |
 * | `Uint8Array`, `Float64Array`, … | `{"$as":"Float64Array","$v":"<base64, little-endian>"}` |
 *
 * Map keys and values, Set members and array items are encoded recursively. Plain objects
 * stay plain objects (so a merge patch merges them); `undefined` members of objects are left
 * out, as in JSON. Object keys beginning with `$` are the codec's: a user key that begins with
 * `$` is stored with one more `$` (`$as` → `$$as`, `$$x` → `$$$x`) and read back without it.
 *
 * Functions, symbols (as values or keys), class instances (any prototype other than
 * `Object.prototype` or `null`, other than the types above) and circular references throw a
 * `CodecError` naming where they are.
 */

export const TAG = '$as';
export const PAYLOAD = '$v';

const TYPED_ARRAYS = {
  Int8Array,
  Uint8Array,
  Uint8ClampedArray,
  Int16Array,
  Uint16Array,
  Int32Array,
  Uint32Array,
  Float32Array,
  Float64Array,
  BigInt64Array,
  BigUint64Array,
} as const;
type TypedArrayName = keyof typeof TYPED_ARRAYS;
type AnyTypedArray = InstanceType<(typeof TYPED_ARRAYS)[TypedArrayName]>;

const littleEndian = new Uint8Array(new Uint16Array([1]).buffer)[0] === 1;

/* ------------------------------------------------------------------ encode */

/** Encodes a value as JSON (tagged where JSON has no form for it). Throws `CodecError`. */
export function encode(value: unknown): Json {
  return encodeValue(value, [], new Set(), 'value');
}

/**
 * Encodes a merge patch (RFC 7396) for the state: like `encode`, except that `null` members
 * mean "delete" and every plain object also clears the codec's `$as`/`$v`, so a plain object
 * patched onto a stored tagged value replaces it instead of merging into it.
 */
export function encodePatch(patch: unknown): Json {
  return encodeValue(patch, [], new Set(), 'patch');
}

/**
 * True when the encoded patch puts a tagged value where it would merge into a stored plain
 * object: at the top or at an object member (items of arrays are replaced whole anyway).
 */
export function hasMergedTaggedValue(encodedPatch: Json): boolean {
  if (!isJsonObject(encodedPatch)) return false;
  if (isTagged(encodedPatch)) return true;
  for (const key of Object.keys(encodedPatch)) {
    const member = encodedPatch[key] as Json;
    if (isJsonObject(member) && hasMergedTaggedValue(member)) return true;
  }
  return false;
}

type Mode = 'value' | 'patch';

function encodeValue(value: unknown, path: (string | number)[], ancestors: Set<object>, mode: Mode): Json {
  switch (typeof value) {
    case 'string':
    case 'boolean':
      return value;
    case 'number':
      if (Number.isFinite(value) && !Object.is(value, -0)) return value;
      return tagged('Number', Object.is(value, -0) ? '-0' : String(value));
    case 'bigint':
      return tagged('BigInt', value.toString());
    case 'undefined':
      return { [TAG]: 'undefined' };
    case 'function':
      throw new CodecError(`a function (${value.name || 'anonymous'}) cannot be stored`, path);
    case 'symbol':
      throw new CodecError(`a symbol (${value.toString()}) cannot be stored`, path);
  }
  if (value === null) return null;
  const object = value as object;
  if (ancestors.has(object)) throw new CodecError('a circular reference cannot be stored', path);
  ancestors.add(object);
  try {
    return encodeObject(object, path, ancestors, mode);
  } finally {
    ancestors.delete(object);
  }
}

function encodeObject(object: object, path: (string | number)[], ancestors: Set<object>, mode: Mode): Json {
  if (Array.isArray(object)) {
    // Items are never merged by a merge patch, so they are plain values even in a patch.
    const items: Json[] = [];
    for (let index = 0; index < object.length; index++) {
      path.push(index);
      items.push(encodeValue(object[index], path, ancestors, 'value'));
      path.pop();
    }
    return items;
  }
  if (isPlainObject(object)) {
    if (Object.getOwnPropertySymbols(object).some((symbol) => Object.prototype.propertyIsEnumerable.call(object, symbol))) {
      throw new CodecError('an object with symbol keys cannot be stored', path);
    }
    const result: JsonObject = {};
    for (const key of Object.keys(object)) {
      const member = (object as Record<string, unknown>)[key];
      if (member === undefined) continue;
      path.push(key);
      // In a patch, `null` deletes the member; in a value it is null. Both encode as null.
      const encoded = encodeValue(member, path, ancestors, mode);
      path.pop();
      setOwn(result, escapeKey(key), encoded);
    }
    if (mode === 'patch') {
      setOwn(result, TAG, null);
      setOwn(result, PAYLOAD, null);
    }
    return result;
  }
  if (object instanceof Date) return tagged('Date', Number.isNaN(object.getTime()) ? 'Invalid Date' : object.toISOString());
  if (object instanceof RegExp) return tagged('RegExp', [object.source, object.flags]);
  if (object instanceof Map) {
    const entries: Json[] = [];
    let index = 0;
    for (const [key, member] of object) {
      path.push(index++);
      entries.push([encodeValue(key, path, ancestors, 'value'), encodeValue(member, path, ancestors, 'value')]);
      path.pop();
    }
    return tagged('Map', entries);
  }
  if (object instanceof Set) {
    const members: Json[] = [];
    let index = 0;
    for (const member of object) {
      path.push(index++);
      members.push(encodeValue(member, path, ancestors, 'value'));
      path.pop();
    }
    return tagged('Set', members);
  }
  if (object instanceof ArrayBuffer) return tagged('ArrayBuffer', toBase64(new Uint8Array(object)));
  if (object instanceof DataView) return tagged('DataView', toBase64(new Uint8Array(object.buffer, object.byteOffset, object.byteLength)));
  const typedName = typedArrayName(object);
  if (typedName) return tagged(typedName, toBase64(littleEndianBytes(object as AnyTypedArray)));
  const kind = object.constructor?.name;
  throw new CodecError(
    `${kind ? `an instance of ${kind}` : 'an object with a custom prototype'} cannot be stored (only plain objects, arrays, Date, Map, Set, RegExp, BigInt, ArrayBuffer and typed arrays)`,
    path,
  );
}

function tagged(type: string, payload: Json): JsonObject {
  return { [TAG]: type, [PAYLOAD]: payload };
}

/** `$as` → `$$as`: user keys beginning with `$` get one more. */
function escapeKey(key: string): string {
  return key.startsWith('$') ? `$${key}` : key;
}

/* ------------------------------------------------------------------ decode */

/** Decodes what `encode` produced (and any plain JSON). Throws `CodecError` on a malformed tag. */
export function decode<T = unknown>(json: Json): T {
  return decodeValue(json, []) as T;
}

function decodeValue(json: Json, path: (string | number)[]): unknown {
  if (json === null || typeof json !== 'object') return json;
  if (Array.isArray(json)) {
    return json.map((item, index) => {
      path.push(index);
      const decoded = decodeValue(item, path);
      path.pop();
      return decoded;
    });
  }
  if (isTagged(json)) return decodeTagged(json, path);
  const result: Record<string, unknown> = {};
  for (const key of Object.keys(json)) {
    path.push(key);
    const member = decodeValue(json[key] as Json, path);
    path.pop();
    // `$$x` → `$x`. Single-`$` keys are the codec's; written by someone else, they are kept.
    setOwn(result, key.startsWith('$$') ? key.slice(1) : key, member);
  }
  return result;
}

function decodeTagged(json: JsonObject, path: (string | number)[]): unknown {
  const type = json[TAG] as string;
  const payload = json[PAYLOAD];
  const bad = (expected: string): never => {
    throw new CodecError(`a tagged ${type} needs ${expected} as "${PAYLOAD}"`, path);
  };
  switch (type) {
    case 'undefined':
      return undefined;
    case 'Number':
      if (payload === 'NaN') return Number.NaN;
      if (payload === 'Infinity') return Number.POSITIVE_INFINITY;
      if (payload === '-Infinity') return Number.NEGATIVE_INFINITY;
      if (payload === '-0') return -0;
      return bad('"NaN", "Infinity", "-Infinity" or "-0"');
    case 'BigInt':
      if (typeof payload !== 'string' || !/^-?\d+$/.test(payload)) return bad('a decimal string');
      return BigInt(payload);
    case 'Date':
      if (typeof payload !== 'string') return bad('an ISO 8601 string');
      return new Date(payload === 'Invalid Date' ? Number.NaN : payload);
    case 'RegExp': {
      if (!Array.isArray(payload) || typeof payload[0] !== 'string' || typeof payload[1] !== 'string') return bad('[source, flags]');
      try {
        return new RegExp(payload[0], payload[1]);
      } catch {
        return bad('a valid [source, flags]');
      }
    }
    case 'Map': {
      if (!Array.isArray(payload)) return bad('an array of [key, value] pairs');
      const map = new Map<unknown, unknown>();
      payload.forEach((entry, index) => {
        if (!Array.isArray(entry) || entry.length !== 2) bad('an array of [key, value] pairs');
        path.push(index);
        map.set(decodeValue((entry as Json[])[0] as Json, path), decodeValue((entry as Json[])[1] as Json, path));
        path.pop();
      });
      return map;
    }
    case 'Set': {
      if (!Array.isArray(payload)) return bad('an array');
      const set = new Set<unknown>();
      payload.forEach((member, index) => {
        path.push(index);
        set.add(decodeValue(member, path));
        path.pop();
      });
      return set;
    }
    case 'ArrayBuffer': {
      if (typeof payload !== 'string') return bad('a base64 string');
      return fromBase64(payload, path).buffer;
    }
    case 'DataView': {
      if (typeof payload !== 'string') return bad('a base64 string');
      return new DataView(fromBase64(payload, path).buffer);
    }
    default: {
      if (type in TYPED_ARRAYS) {
        if (typeof payload !== 'string') return bad('a base64 string');
        return typedArrayFrom(type as TypedArrayName, fromBase64(payload, path), path);
      }
      throw new CodecError(`unknown tagged type "${type}"`, path);
    }
  }
}

/** An object that is exactly `{"$as": <string>}` or `{"$as": <string>, "$v": <json>}`. */
function isTagged(json: JsonObject): boolean {
  if (typeof json[TAG] !== 'string') return false;
  for (const key of Object.keys(json)) if (key !== TAG && key !== PAYLOAD) return false;
  return true;
}

/* ------------------------------------------------------------------ merge patch on values */

/**
 * RFC 7396 on decoded values: plain objects merge recursively, `null` deletes a member,
 * `undefined` leaves it alone, and anything else (arrays, Dates, Maps, …) replaces whole.
 */
export function mergeValues(target: unknown, patch: unknown): unknown {
  if (!isPlainObject(patch)) return patch;
  const result: Record<string, unknown> = {};
  if (isPlainObject(target)) for (const key of Object.keys(target)) setOwn(result, key, (target as Record<string, unknown>)[key]);
  for (const key of Object.keys(patch)) {
    const member = (patch as Record<string, unknown>)[key];
    if (member === undefined) continue;
    if (member === null) delete result[key];
    else setOwn(result, key, mergeValues(Object.hasOwn(result, key) ? result[key] : undefined, member));
  }
  return result;
}

/* ------------------------------------------------------------------ helpers */

/** An object whose prototype is `Object.prototype` (of any realm) or `null`. */
export function isPlainObject(value: unknown): value is Record<string, unknown> {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) return false;
  const prototype = Object.getPrototypeOf(value) as object | null;
  if (prototype === null || prototype === Object.prototype) return true;
  // Another realm's Object.prototype (a vm context, an iframe).
  return Object.getPrototypeOf(prototype) === null && (prototype as { constructor?: { name?: string } }).constructor?.name === 'Object';
}

function isJsonObject(value: Json): value is JsonObject {
  return value !== null && typeof value === 'object' && !Array.isArray(value);
}

/** Sets an own member, also `__proto__`, without touching the prototype. */
function setOwn(target: Record<string, unknown>, key: string, value: unknown): void {
  Object.defineProperty(target, key, { value, enumerable: true, writable: true, configurable: true });
}

function typedArrayName(value: object): TypedArrayName | undefined {
  if (!ArrayBuffer.isView(value) || value instanceof DataView) return undefined;
  for (const name of Object.keys(TYPED_ARRAYS) as TypedArrayName[]) if (value instanceof TYPED_ARRAYS[name]) return name;
  return undefined;
}

function littleEndianBytes(array: AnyTypedArray): Uint8Array {
  const bytes = new Uint8Array(array.buffer, array.byteOffset, array.byteLength).slice();
  if (!littleEndian && array.BYTES_PER_ELEMENT > 1) reverseEach(bytes, array.BYTES_PER_ELEMENT);
  return bytes;
}

function typedArrayFrom(name: TypedArrayName, bytes: Uint8Array, path: ValuePath): AnyTypedArray {
  const Constructor = TYPED_ARRAYS[name];
  if (bytes.byteLength % Constructor.BYTES_PER_ELEMENT !== 0) {
    throw new CodecError(`a tagged ${name} needs a whole number of ${Constructor.BYTES_PER_ELEMENT}-byte elements`, path);
  }
  if (!littleEndian && Constructor.BYTES_PER_ELEMENT > 1) reverseEach(bytes, Constructor.BYTES_PER_ELEMENT);
  return new Constructor(bytes.buffer as ArrayBuffer, bytes.byteOffset, bytes.byteLength / Constructor.BYTES_PER_ELEMENT);
}

function reverseEach(bytes: Uint8Array, width: number): void {
  for (let start = 0; start < bytes.length; start += width) bytes.subarray(start, start + width).reverse();
}

const BASE64 = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/';

/** Standard base64 with padding; no Buffer, so it runs in browsers too. */
function toBase64(bytes: Uint8Array): string {
  let out = '';
  for (let i = 0; i < bytes.length; i += 3) {
    const a = bytes[i] as number;
    const b = bytes[i + 1];
    const c = bytes[i + 2];
    out += BASE64[a >> 2];
    out += BASE64[((a & 3) << 4) | ((b ?? 0) >> 4)];
    out += b === undefined ? '=' : BASE64[((b & 15) << 2) | ((c ?? 0) >> 6)];
    out += c === undefined ? '=' : BASE64[c & 63];
  }
  return out;
}

function fromBase64(text: string, path: ValuePath): Uint8Array {
  if (!/^[A-Za-z0-9+/]*={0,2}$/.test(text) || text.length % 4 !== 0) throw new CodecError('malformed base64', path);
  const clean = text.replace(/=+$/, '');
  const bytes = new Uint8Array(Math.floor((clean.length * 3) / 4));
  let bits = 0;
  let value = 0;
  let index = 0;
  for (const char of clean) {
    value = (value << 6) | BASE64.indexOf(char);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      bytes[index++] = (value >> bits) & 0xff;
    }
  }
  return bytes;
}
