import { CodecError, decode, encode, encodePatch, mergeValues } from '@agentstate/client';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { hasMergedTaggedValue } from '../../packages/client/src/codec.js';

/** The codec alone: what values become on the wire, and back. */

const roundTrip = (value: unknown) => decode(JSON.parse(JSON.stringify(encode(value))));

describe('round trips', () => {
  it.each([
    ['a Date', new Date('2025-06-01T10:00:00.123Z')],
    ['an invalid Date', new Date(Number.NaN)],
    [
      'a Map with non-string keys',
      new Map<unknown, unknown>([
        [1, 'one'],
        [{ k: true }, [1, 2]],
        [new Date(0), null],
      ]),
    ],
    ['a Set', new Set(['a', 1, null, 2n])],
    ['a BigInt', 123456789012345678901234567890n],
    ['a negative BigInt', -42n],
    ['a RegExp', /a+(b|c)\/$/giu],
    ['an ArrayBuffer', new Uint8Array([0, 1, 2, 254, 255]).buffer],
    ['a Uint8Array', new Uint8Array([1, 2, 3, 250])],
    ['a Float64Array', new Float64Array([1.5, -0.25, Number.MAX_VALUE])],
    ['an Int16Array', new Int16Array([-1, 32767, -32768])],
    ['a BigInt64Array', new BigInt64Array([-1n, 2n ** 62n])],
    ['undefined inside arrays', [1, undefined, 'x', undefined]],
    ['special numbers', [Number.NaN, Number.POSITIVE_INFINITY, Number.NEGATIVE_INFINITY, -0]],
    ['plain JSON', { a: 1, b: [true, null, 'x'], c: { d: {} } }],
    ['nested rich values', { when: new Date(0), tags: new Set([new Map([['k', 1n]])]), raw: [new Uint8Array([1])] }],
    ['a null-prototype object', Object.assign(Object.create(null) as object, { a: 1 })],
  ])('%s', (_name, value) => {
    expect(roundTrip(value)).toEqual(value);
  });

  it('keeps the bytes of a DataView', () => {
    const view = roundTrip(new DataView(new Uint8Array([9, 8, 7]).buffer)) as DataView;
    expect(view).toBeInstanceOf(DataView);
    expect([view.getUint8(0), view.getUint8(1), view.getUint8(2)]).toEqual([9, 8, 7]);
  });

  it('keeps -0 distinct from 0', () => {
    expect(Object.is(roundTrip(-0), -0)).toBe(true);
    expect(Object.is(roundTrip(0), 0)).toBe(true);
  });

  it('leaves undefined object members out, as JSON does', () => {
    expect(encode({ a: undefined, b: 1 })).toEqual({ b: 1 });
  });

  it('encodes typed arrays from their own bytes, not the whole underlying buffer', () => {
    const buffer = new Uint8Array([1, 2, 3, 4, 5, 6]).buffer;
    expect(roundTrip(new Uint8Array(buffer, 2, 3))).toEqual(new Uint8Array([3, 4, 5]));
  });

  it('repeats a shared (not circular) object', () => {
    const shared = { n: 1 };
    expect(roundTrip({ a: shared, b: [shared] })).toEqual({ a: { n: 1 }, b: [{ n: 1 }] });
  });

  it('round-trips any plain JSON, whatever its keys (including $-prefixed ones)', () => {
    const key = fc.oneof(fc.string(), fc.constantFrom('$as', '$v', '$$as', '$', '$$', '__proto__', 'v'));
    const json = fc.letrec((tie) => ({
      value: fc.oneof(
        { depthSize: 'small' },
        fc.constant(null),
        fc.boolean(),
        fc.double({ noNaN: true, noDefaultInfinity: true }).filter((n) => !Object.is(n, -0)),
        fc.string(),
        tie('array'),
        tie('object'),
      ),
      array: fc.array(tie('value'), { maxLength: 4 }),
      object: fc.dictionary(key, tie('value'), { maxKeys: 4 }),
    })).value;
    fc.assert(
      fc.property(json, (value) => {
        expect(roundTrip(value)).toEqual(value);
      }),
      { numRuns: 300 },
    );
  });
});

describe('the wire format', () => {
  it('tags values beyond JSON as {"$as": type, "$v": payload}', () => {
    expect(
      encode({
        date: new Date(0),
        big: 10n,
        nan: Number.NaN,
        items: [undefined],
        re: /x/g,
        map: new Map([[1, 'a']]),
        set: new Set(['a']),
        bytes: new Uint8Array([255, 0, 1]),
        f64: new Float64Array([1]),
      }),
    ).toEqual({
      date: { $as: 'Date', $v: '1970-01-01T00:00:00.000Z' },
      big: { $as: 'BigInt', $v: '10' },
      nan: { $as: 'Number', $v: 'NaN' },
      items: [{ $as: 'undefined' }],
      re: { $as: 'RegExp', $v: ['x', 'g'] },
      map: { $as: 'Map', $v: [[1, 'a']] },
      set: { $as: 'Set', $v: ['a'] },
      bytes: { $as: 'Uint8Array', $v: '/wAB' },
      // Little-endian IEEE 754 1.0.
      f64: { $as: 'Float64Array', $v: 'AAAAAAAA8D8=' },
    });
  });

  it('escapes user keys that begin with $, so a user object is never taken for a tag', () => {
    // Prepare: an object that looks exactly like a tagged Date.
    const lookalike = { $as: 'Date', $v: 'not a date', $$x: 1 };

    // Act
    const wire = encode(lookalike);

    // Assess
    expect(wire).toEqual({ $$as: 'Date', $$v: 'not a date', $$$x: 1 });
    expect(decode(wire)).toEqual(lookalike);
  });

  it('reads plain JSON written by others as is, $-keys that are not tags included', () => {
    expect(decode({ a: [1, { b: null }], $other: 1 })).toEqual({ a: [1, { b: null }], $other: 1 });
  });

  it('turns a patch into a merge patch that clears tags where it puts plain objects', () => {
    expect(encodePatch({ a: { b: 1, c: null }, d: null, e: undefined, f: [new Date(0)] })).toEqual({
      a: { b: 1, c: null, $as: null, $v: null },
      d: null,
      f: [{ $as: 'Date', $v: '1970-01-01T00:00:00.000Z' }],
      $as: null,
      $v: null,
    });
  });

  it('knows when a tagged value in a patch could merge into a stored object', () => {
    expect(hasMergedTaggedValue(encodePatch({ a: 1, b: { c: [new Date(0)] } }))).toBe(false);
    expect(hasMergedTaggedValue(encodePatch({ a: { b: new Date(0) } }))).toBe(true);
    expect(hasMergedTaggedValue(encodePatch({ m: new Map() }))).toBe(true);
  });
});

describe('merge patch on decoded values', () => {
  it('merges plain objects, deletes on null, and replaces rich values whole', () => {
    const target = { a: { b: 1, c: 2 }, when: new Date(0), tags: new Set([1]), keep: true };
    expect(mergeValues(target, { a: { c: null, d: 3 }, when: { day: 1 }, tags: new Set([2]), keep: undefined })).toEqual({
      a: { b: 1, d: 3 },
      when: { day: 1 },
      tags: new Set([2]),
      keep: true,
    });
    expect(mergeValues({ a: 1 }, [1])).toEqual([1]);
    expect(mergeValues(new Map(), { a: { b: null } })).toEqual({ a: {} });
  });
});

describe('rejections, before anything is sent', () => {
  class Point {
    constructor(readonly x: number) {}
  }
  const circular: Record<string, unknown> = { a: 1 };
  circular.self = { back: circular };

  it.each([
    ['a function', { a: { f: () => 1 } }, 'a function', '$.a.f'],
    ['a class instance', { list: [new Point(1)] }, 'an instance of Point', '$.list[0]'],
    ['a symbol value', { s: Symbol('x') }, 'a symbol', '$.s'],
    ['a symbol key', { [Symbol('k')]: 1 }, 'symbol keys', '$'],
    ['a circular reference', circular, 'a circular reference', '$.self.back'],
    ['an Error', { e: new Error('x') }, 'an instance of Error', '$.e'],
    ['a Promise', { p: Promise.resolve() }, 'an instance of Promise', '$.p'],
    ['a function inside a Map', new Map([['k', () => 1]]), 'a function', '$[0]'],
  ])('%s', (_name, value, reason, where) => {
    // Act
    let thrown: unknown;
    try {
      encode(value);
    } catch (error) {
      thrown = error;
    }

    // Assess
    expect(thrown).toBeInstanceOf(CodecError);
    const error = thrown as CodecError;
    expect(error.code).toBe('codec_error');
    expect(error.message).toContain(reason);
    expect(error.message).toContain(`at ${where}`);
  });

  it('refuses malformed tags when reading', () => {
    expect(() => decode({ $as: 'BigInt', $v: 'x1' })).toThrow(CodecError);
    expect(() => decode({ $as: 'Nope', $v: 1 })).toThrow(/unknown tagged type "Nope"/);
    expect(() => decode({ list: [{ $as: 'Float64Array', $v: 'AAA=' }] })).toThrow(/at \$\.list\[0\]/);
  });
});
