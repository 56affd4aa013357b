import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  canonicalJson,
  compareJsonNumbers,
  decodeStoredJson,
  encodedSize,
  encodeStoredJson,
  isJsonNumber,
  isJsonObject,
  type Json,
  type JsonNumber,
  JsonTextError,
  jsonEqual,
  jsonValueEqual,
  MAX_JSON_DEPTH,
  parseJson,
  stringifyJson,
} from '../../functions/core/json/json.js';
import { mergePatch } from '../../functions/core/json/merge-patch.js';

/**
 * API.md section 1: values are stored verbatim — a number reads back digit for digit as it was
 * sent — and a JSON text with an object that has a key twice is refused, not silently cut.
 */

/* ------------------------------------------------------------------ generators */

/** Any number JSON's grammar allows, as text: signs, leading-zero rules, fractions, exponents. */
const numberText = fc
  .tuple(
    fc.boolean(),
    fc.oneof(fc.constant('0'), fc.stringMatching(/^[1-9][0-9]{0,30}$/)),
    fc.option(fc.stringMatching(/^[0-9]{1,25}$/), { nil: undefined }),
    fc.option(fc.tuple(fc.constantFrom('e', 'E'), fc.constantFrom('', '+', '-'), fc.stringMatching(/^[0-9]{1,4}$/)), {
      nil: undefined,
    }),
  )
  .map(([negative, integer, fraction, exponent]) => {
    return `${negative ? '-' : ''}${integer}${fraction === undefined ? '' : `.${fraction}`}${exponent ? exponent.join('') : ''}`;
  });

/** Compact JSON text (no whitespace) with unique keys and numbers written any way JSON allows. */
const { text: compactText } = fc.letrec<{ text: string }>((tie) => ({
  text: fc.oneof(
    { depthSize: 'small' },
    numberText,
    // Strings in the form JSON.stringify writes them: a string is kept as a value, not as text.
    fc.constantFrom('null', 'true', 'false', '"é"', '""', '"a\\"b"'),
    fc.array(tie('text'), { maxLength: 4 }).map((items) => `[${items.join(',')}]`),
    fc
      // Keys that are not integer-like: JavaScript objects list those first, whatever the text's order.
      .uniqueArray(
        fc.tuple(
          fc.string({ maxLength: 5 }).filter((key) => !/^(0|[1-9][0-9]*)$/.test(key)),
          tie('text'),
        ),
        {
          maxLength: 4,
          selector: ([key]) => key,
        },
      )
      .map((members) => `{${members.map(([key, value]) => `${JSON.stringify(key)}:${value}`).join(',')}}`),
  ),
}));

/* ------------------------------------------------------------------ parseJson / stringifyJson */

describe('parseJson and stringifyJson: every number reads back as it was written', () => {
  it.each([
    ['an integer past 2^53', '9007199254740993'],
    ['a 30-digit integer', '123456789012345678901234567890'],
    ['a number below the smallest double', '1e-400'],
    ['a number beyond the largest double', '1e400'],
    ['more digits than a double keeps', '0.1000000000000000055'],
    ['a trailing zero', '1.0'],
    ['negative zero', '-0'],
    ['an upper-case exponent', '1E3'],
    ['an explicit plus in the exponent', '2.5e+10'],
    ['a plain integer', '42'],
    ['a plain fraction', '0.5'],
    ['a double at full precision', '0.14285714285714285'],
  ])('keeps %s (%s)', (_label, text) => {
    // Act
    const value = parseJson(`{"n":${text},"list":[${text}]}`);

    // Assess
    expect(stringifyJson(value)).toBe(`{"n":${text},"list":[${text}]}`);
    expect(decodeStoredJson(encodeStoredJson(value))).toEqual(value);
    expect(stringifyJson(decodeStoredJson(encodeStoredJson(value)))).toBe(`{"n":${text},"list":[${text}]}`);
  });

  it('keeps numbers a double writes back alike as plain numbers, and only the others as JsonNumbers', () => {
    const value = parseJson('{"a":42,"b":0.5,"c":9007199254740993,"d":1.0}') as Record<string, Json>;

    expect(value.a).toBe(42);
    expect(value.b).toBe(0.5);
    expect(isJsonNumber(value.c)).toBe(true);
    expect((value.c as JsonNumber).value).toBe('9007199254740993');
    expect(isJsonNumber(value.d)).toBe(true);
  });

  it('writes any compact JSON text back exactly as it was', () => {
    fc.assert(
      fc.property(compactText, (text) => {
        expect(stringifyJson(parseJson(text))).toBe(text);
        expect(stringifyJson(decodeStoredJson(encodeStoredJson(parseJson(text))))).toBe(text);
      }),
      { numRuns: 500 },
    );
  });

  it('agrees with JSON.parse on texts whose numbers a double keeps', () => {
    fc.assert(
      fc.property(fc.jsonValue({ maxDepth: 4 }), (value) => {
        const text = JSON.stringify(value);
        expect(parseJson(text)).toEqual(JSON.parse(text));
      }),
    );
  });

  it('takes "__proto__" as an ordinary key, in both parsers', () => {
    for (const text of ['{"__proto__":{"x":1}}', '{"__proto__":{"x":1.0}}']) {
      const value = parseJson(text) as Record<string, Json>;
      expect(Object.getPrototypeOf(value)).toBe(Object.prototype);
      expect(Object.hasOwn(value, '__proto__')).toBe(true);
      expect(stringifyJson(value)).toBe(text);
    }
  });

  it('throws when JSON.stringify meets a JsonNumber, rather than writing it wrong', () => {
    const value = parseJson('{"n":1.0}');

    expect(() => JSON.stringify(value)).toThrow(/stringifyJson/);
    expect(stringifyJson(value)).toBe('{"n":1.0}');
  });

  it('marks stored text that holds a JsonNumber with one leading space, and only that text', () => {
    expect(encodeStoredJson(parseJson('{"n":1}'))).toBe('{"n":1}');
    expect(encodeStoredJson(parseJson('{"n":1.0}'))).toBe(' {"n":1.0}');
    // Text stored before numbers were kept verbatim reads as it always did.
    expect(decodeStoredJson('{"n":1}')).toEqual({ n: 1 });
  });
});

describe('parseJson refuses what it cannot keep as sent', () => {
  it.each([
    ['a key twice with different values', '{"a":1,"a":2}'],
    ['a key twice with the same value', '{"a":1,"a":1}'],
    ['a key twice deep down', '{"x":[{"b":true,"c":0,"b":true}]}'],
    ['a key twice, once escaped', '{"é":1,"\\u00e9":1}'],
    ['a key twice in a text with verbatim numbers', '{"a":1.0,"a":1.0}'],
  ])('refuses %s', (_label, text) => {
    expect(() => parseJson(text)).toThrow(JsonTextError);
  });

  it('names the key when the values differ', () => {
    expect(() => parseJson('{"a":1,"a":2}')).toThrow(/'a'/);
  });

  it.each([
    ['invalid syntax', '{"a":'],
    ['a trailing comma', '[1,]'],
    ['NaN', '{"a":NaN}'],
    ['a leading zero', '[01]'],
    ['a byte order mark', '\ufeff{}'],
  ])('refuses %s as JSON text', (_label, text) => {
    expect(() => parseJson(text)).toThrow(JsonTextError);
  });

  it('takes a value exactly MAX_JSON_DEPTH deep and refuses one level more', () => {
    const deep = (depth: number) => `${'['.repeat(depth)}1.0${']'.repeat(depth)}`;

    expect(() => parseJson(deep(MAX_JSON_DEPTH))).not.toThrow();
    expect(() => parseJson(deep(MAX_JSON_DEPTH + 1))).toThrow(/nesting deeper/);
  });

  it('does not take strings that look like keys or numbers for them', () => {
    const value = parseJson('{"a":"\\"b\\":1","c":["1.0",": 2"]}');

    expect(value).toEqual({ a: '"b":1', c: ['1.0', ': 2'] });
  });
});

/* ------------------------------------------------------------------ equality and order */

describe('equality and order of numbers', () => {
  it('jsonEqual compares numbers as written: what reads back', () => {
    const [one, oneDotZero] = [parseJson('1'), parseJson('1.0')];

    expect(jsonEqual(one, oneDotZero)).toBe(false);
    expect(jsonEqual(parseJson('[1.0]'), parseJson('[1.0]'))).toBe(true);
    expect(jsonEqual(parseJson('-0'), 0)).toBe(false);
    expect(jsonEqual(parseJson('9007199254740993'), 9007199254740992)).toBe(false);
  });

  it('jsonValueEqual compares numbers by value', () => {
    expect(jsonValueEqual(parseJson('{"a":1.0}'), { a: 1 })).toBe(true);
    expect(jsonValueEqual(parseJson('1e2'), 100)).toBe(true);
    expect(jsonValueEqual(parseJson('9007199254740993'), 9007199254740992)).toBe(false);
    expect(jsonValueEqual(parseJson('-0'), 0)).toBe(true);
  });

  it.each([
    ['9007199254740993', '9007199254740992', 1],
    ['1e-400', '0', 1],
    ['-1e-400', '0', -1],
    ['1.0', '1', 0],
    ['0.1000000000000000055', '0.1', 1],
    ['1e400', '1e399', 1],
    ['-2', '-10', 1],
  ])('compareJsonNumbers(%s, %s) is %i', (a, b, order) => {
    expect(compareJsonNumbers(parseJson(a) as JsonNumber, parseJson(b) as JsonNumber)).toBe(order);
    expect(compareJsonNumbers(parseJson(b) as JsonNumber, parseJson(a) as JsonNumber)).toBe(order === 0 ? 0 : -order);
  });

  it('a JsonNumber is a number, not an object: merge patch replaces it and canonical JSON writes it', () => {
    const stored = parseJson('{"n":9007199254740993,"o":{"x":1}}');

    expect(isJsonObject((stored as Record<string, Json>).n)).toBe(false);
    expect(stringifyJson(mergePatch(stored, parseJson('{"n":{"y":1e-400}}')))).toBe('{"n":{"y":1e-400},"o":{"x":1}}');
    expect(stringifyJson(mergePatch(parseJson('{"n":1.0}'), { m: 1 }))).toBe('{"n":1.0,"m":1}');
    expect(canonicalJson(parseJson('{"b":1.0,"a":1E3}'))).toBe('{"a":1E3,"b":1.0}');
    expect(encodedSize(parseJson('[1.000]'))).toBe(7);
  });
});
