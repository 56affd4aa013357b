import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { canonicalJson, encodedSize, isJsonObject, type Json, type JsonObject, jsonEqual, setOwn } from '../../functions/core/json/json.js';

/* ------------------------------------------------------------------ helpers (local) */

const hasOwn = (object: object, key: string) => Object.hasOwn(object, key);

/** The same value with every object's keys inserted in reverse order (own properties kept own). */
function reversedKeys(value: Json): Json {
  if (Array.isArray(value)) return value.map(reversedKeys);
  if (!isJsonObject(value)) return value;
  const copy: JsonObject = {};
  for (const key of Object.keys(value).reverse()) setOwn(copy, key, reversedKeys(value[key] as Json));
  return copy;
}

const json = fc.jsonValue({ maxDepth: 4 }) as fc.Arbitrary<Json>;

/** A small universe of values, so that random pairs are often equal or nearly equal. */
const { small } = fc.letrec<{ small: Json }>((tie) => ({
  small: fc.oneof(
    { depthSize: 'small', withCrossShrink: true },
    fc.constantFrom<Json>(null, 0, 1, 'a', true),
    fc.array(tie('small'), { maxLength: 2 }),
    fc.dictionary(fc.constantFrom('a', 'b', '1'), tie('small'), { maxKeys: 2 }),
  ),
}));

/** Pairs of values: independent, equal up to key order, or drawn from the small universe. */
const pairs = fc.oneof(
  fc.tuple(json, json),
  json.map((value): [Json, Json] => [value, reversedKeys(value)]),
  fc.tuple(small, small),
);

/* ------------------------------------------------------------------ jsonEqual */

describe('jsonEqual: equality as API.md section 4 defines it', () => {
  it.each<[label: string, a: Json, b: Json, equal: boolean]>([
    ['objects whose keys come in another order', { a: 1, b: 2 }, { b: 2, a: 1 }, true],
    ['arrays in another order', [1, 2], [2, 1], false],
    ['arrays of different length', [1, [2]], [1, [2, 3]], false],
    ['[null] and []', [null], [], false],
    ['a null member and a missing key', { a: null }, {}, false],
    ['a missing key and a null member', {}, { a: null }, false],
    ['same key count, a null member under different names', { a: null, b: 1 }, { b: 1, c: null }, false],
    ['null and null', null, null, true],
    ['null and {}', null, {}, false],
    ['null and []', null, [], false],
    ['[] and {}', [], {}, false],
    ['{} and []', {}, [], false],
    ['{"0":"x"} and ["x"]', { '0': 'x' }, ['x'], false],
    ['1 and 1.0', 1, 1.0, true],
    ['0 and -0 (JSON cannot tell them apart)', 0, -0, true],
    ['1 and "1"', 1, '1', false],
    ['true and 1', true, 1, false],
    ['"" and 0', '', 0, false],
    ['false and null', false, null, false],
    ['0.1 + 0.2 and 0.3 (numbers compare exactly)', 0.1 + 0.2, 0.3, false],
    ['1e21 and 1000000000000000000000', 1e21, 1000000000000000000000, true],
    ['nested values with reordered keys', { a: { b: [1, { c: 2, d: 3 }] }, e: 'x' }, { e: 'x', a: { b: [1, { d: 3, c: 2 }] } }, true],
    ['nested values that differ deep down', { a: { b: [1, { c: 2 }] } }, { a: { b: [1, { c: 3 }] } }, false],
    ['a nested null and a nested missing key', { a: { b: null } }, { a: {} }, false],
    ['strings that differ only in case', 'Abc', 'abc', false],
    ['a key named like an Object method', { hasOwnProperty: 1 }, { hasOwnProperty: 1 }, true],
  ])('%s → %s', (_label, a, b, equal) => {
    expect(jsonEqual(a, b)).toBe(equal);
    expect(jsonEqual(b, a)).toBe(equal);
  });

  it('does not take an inherited name of the other side for an own key', () => {
    // Same key count; "toString" is only inherited by the second object.
    const a = JSON.parse('{"toString":null}') as Json;
    const b = JSON.parse('{"other":null}') as Json;

    expect(jsonEqual(a, b)).toBe(false);
    expect(jsonEqual(b, a)).toBe(false);
  });

  it('compares own "__proto__" members like any other key', () => {
    const polluted = JSON.parse('{"__proto__":{"x":1}}') as Json;

    expect(jsonEqual(polluted, JSON.parse('{"__proto__":{"x":1}}') as Json)).toBe(true);
    expect(jsonEqual(polluted, JSON.parse('{"__proto__":{"x":2}}') as Json)).toBe(false);
    expect(jsonEqual(polluted, {})).toBe(false);
    expect(jsonEqual({}, polluted)).toBe(false);
  });

  it('is reflexive, on the value itself and on a structured clone of it', () => {
    fc.assert(
      fc.property(json, (value) => {
        expect(jsonEqual(value, value)).toBe(true);
        expect(jsonEqual(value, structuredClone(value))).toBe(true);
        expect(jsonEqual(value, reversedKeys(value))).toBe(true);
      }),
    );
  });

  it('is symmetric', () => {
    fc.assert(
      fc.property(pairs, ([a, b]) => {
        expect(jsonEqual(a, b)).toBe(jsonEqual(b, a));
      }),
    );
  });

  it('agrees with comparing the canonical JSON of both sides', () => {
    fc.assert(
      fc.property(pairs, ([a, b]) => {
        expect(jsonEqual(a, b)).toBe(canonicalJson(a) === canonicalJson(b));
      }),
      { numRuns: 500 },
    );
  });

  it('tells a value apart from the same value with one member added', () => {
    fc.assert(
      fc.property(fc.dictionary(fc.string(), json), fc.string(), json, (object, key, extra) => {
        fc.pre(!hasOwn(object, key));
        const bigger: JsonObject = { ...object };
        setOwn(bigger, key, extra);
        expect(jsonEqual(object, bigger)).toBe(false);
        expect(jsonEqual(bigger, object)).toBe(false);
      }),
    );
  });
});

/* ------------------------------------------------------------------ canonicalJson */

describe('canonicalJson: one text for equal values', () => {
  it('sorts keys at every depth, inside arrays too', () => {
    const value: Json = { b: 1, a: { d: [{ z: 1, y: 2 }], c: null } };

    expect(canonicalJson(value)).toBe('{"a":{"c":null,"d":[{"y":2,"z":1}]},"b":1}');
  });

  it('sorts by UTF-16 code units (upper case before lower case)', () => {
    expect(canonicalJson({ b: 1, B: 2, a: 3, _: 4 })).toBe('{"B":2,"_":4,"a":3,"b":1}');
  });

  it('keeps array order', () => {
    expect(canonicalJson([3, 1, 2])).toBe('[3,1,2]');
  });

  it.each<[Json, string]>([
    [null, 'null'],
    [true, 'true'],
    [12.5, '12.5'],
    ['text', '"text"'],
    [[], '[]'],
    [{}, '{}'],
  ])('writes the scalar or empty value %j as %s', (value, text) => {
    expect(canonicalJson(value)).toBe(text);
  });

  it('writes integer-like keys in one order whatever order they were inserted in', () => {
    // The engine always enumerates integer-like keys first, in numeric order, so "canonical"
    // here is numeric order for them; what matters is that it does not depend on insertion.
    const first: JsonObject = {};
    for (const key of ['a', '10', '2']) setOwn(first, key, key);
    const second: JsonObject = {};
    for (const key of ['2', 'a', '10']) setOwn(second, key, key);

    expect(canonicalJson(first)).toBe(canonicalJson(second));
    expect(canonicalJson(first)).toBe('{"2":"2","10":"10","a":"a"}');
  });

  it('keeps an own "__proto__" key as data', () => {
    const value = JSON.parse('{"z":1,"__proto__":{"b":1,"a":2}}') as Json;

    expect(canonicalJson(value)).toBe('{"__proto__":{"a":2,"b":1},"z":1}');
  });

  it('does not modify its argument', () => {
    const value = { b: { d: 1, c: 2 }, a: 1 };
    canonicalJson(value);
    expect(Object.keys(value)).toEqual(['b', 'a']);
    expect(Object.keys(value.b)).toEqual(['d', 'c']);
  });

  it('does not depend on the order keys were inserted in', () => {
    fc.assert(
      fc.property(json, (value) => {
        expect(canonicalJson(reversedKeys(value))).toBe(canonicalJson(value));
      }),
    );
  });

  it('parses back to an equal value', () => {
    fc.assert(
      fc.property(json, (value) => {
        expect(jsonEqual(JSON.parse(canonicalJson(value)) as Json, value)).toBe(true);
      }),
    );
  });

  it('writes the keys of every object in sorted order (for keys that are not integer-like)', () => {
    const key = fc.string({ minLength: 1 }).filter((text) => !/^(0|[1-9][0-9]*)$/.test(text));
    const { tree } = fc.letrec<{ tree: Json }>((tie) => ({
      tree: fc.oneof(
        { depthSize: 'small' },
        fc.integer(),
        fc.dictionary(key, tie('tree'), { maxKeys: 5 }),
        fc.array(tie('tree'), { maxLength: 3 }),
      ),
    }));
    fc.assert(
      fc.property(tree, (value) => {
        // Re-read the text with a reviver; it sees each object's keys in text order.
        JSON.parse(canonicalJson(value), function (this: unknown, _key, item: unknown) {
          if (isJsonObject(item)) {
            const keys = Object.keys(item);
            expect(keys).toEqual([...keys].sort());
          }
          return item;
        });
      }),
    );
  });
});

/* ------------------------------------------------------------------ encodedSize */

describe('encodedSize: UTF-8 bytes of the JSON text', () => {
  it.each<[label: string, value: Json, bytes: number]>([
    ['null', null, 4],
    ['an empty object', {}, 2],
    ['an ASCII string (quotes count)', 'abc', 5],
    ['"é" (two bytes in UTF-8)', 'é', 4],
    ['"€" (three bytes in UTF-8)', '€', 5],
    ['an emoji (four bytes, two UTF-16 units)', '😀', 6],
    ['an object with a non-ASCII value', { a: 'é' }, 10],
    ['a non-ASCII key', { clé: 1 }, 10],
    ['a newline (escaped as two characters)', '\n', 4],
    ['a quote (escaped as two characters)', '"', 4],
    ['a lone surrogate (escaped as \\udXXX)', '\ud800', 8],
    ['a number', 12345, 5],
    ['an array', [1, 'é', null], 13],
  ])('counts %s as %i bytes', (_label, value, bytes) => {
    expect(encodedSize(value)).toBe(bytes);
  });

  it('equals the TextEncoder length of the JSON text, never less than its UTF-16 length', () => {
    fc.assert(
      fc.property(json, (value) => {
        const text = JSON.stringify(value);
        expect(encodedSize(value)).toBe(new TextEncoder().encode(text).length);
        expect(encodedSize(value)).toBeGreaterThanOrEqual(text.length);
      }),
    );
  });
});

/* ------------------------------------------------------------------ setOwn / isJsonObject */

describe('setOwn: own data properties, "__proto__" included', () => {
  it('stores "__proto__" as an own, enumerable, writable, configurable key and keeps the prototype', () => {
    // Prepare
    const target: JsonObject = {};

    // Act
    setOwn(target, '__proto__', { polluted: true });

    // Assess
    expect(Object.getPrototypeOf(target)).toBe(Object.prototype);
    expect(Object.getOwnPropertyDescriptor(target, '__proto__')).toEqual({
      value: { polluted: true },
      enumerable: true,
      writable: true,
      configurable: true,
    });
    expect(Object.keys(target)).toEqual(['__proto__']);
    expect(JSON.stringify(target)).toBe('{"__proto__":{"polluted":true}}');
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
  });

  it('overwrites an existing member in place, keeping its position', () => {
    const target: JsonObject = { a: 1, b: 2 };

    setOwn(target, 'a', 3);

    expect(JSON.stringify(target)).toBe('{"a":3,"b":2}');
  });

  it('shadows an inherited name with an own member', () => {
    const target: JsonObject = {};

    setOwn(target, 'constructor', 'mine');

    expect(hasOwn(target, 'constructor')).toBe(true);
    expect(target.constructor).toBe('mine');
    expect({}.constructor).toBe(Object);
  });
});

describe('isJsonObject', () => {
  it.each<[unknown, boolean]>([
    [{}, true],
    [{ a: 1 }, true],
    [[], false],
    [null, false],
    ['{}', false],
    [0, false],
    [undefined, false],
  ])('%j → %s', (value, expected) => {
    expect(isJsonObject(value)).toBe(expected);
  });
});
