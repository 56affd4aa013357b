import { describe, expect, it } from 'vitest';
import { plainText, richText } from '../../inspector/src/rich-values.js';

/** How the inspector writes the client's tagged values (docs/api.md, "Rich values"). */
const shown = (value: unknown) => plainText(richText(value));

describe("the inspector's rich values", () => {
  it.each([
    [{ $as: 'Date', $v: '2026-01-02T00:00:00.000Z' }, 'Date 2026-01-02T00:00:00.000Z'],
    [{ $as: 'BigInt', $v: '-10' }, '-10n'],
    [{ $as: 'Number', $v: 'NaN' }, 'NaN'],
    [{ $as: 'undefined' }, 'undefined'],
    [{ $as: 'RegExp', $v: ['a+', 'gi'] }, '/a+/gi'],
    [{ $as: 'Set', $v: ['a', { $as: 'BigInt', $v: '1' }] }, 'Set(2) [\n  "a",\n  1n\n]'],
    [{ $as: 'Map', $v: [[{ $as: 'Date', $v: '2026-01-01T00:00:00.000Z' }, 1]] }, 'Map(1) {\n  Date 2026-01-01T00:00:00.000Z => 1\n}'],
    [{ $as: 'Uint8Array', $v: 'AQID' }, 'Uint8Array "AQID"'],
  ])('writes %j as %s', (value, text) => {
    expect(shown(value)).toBe(text);
  });

  it('unescapes `$` keys and leaves plain JSON as JSON.stringify writes it', () => {
    const plain = { a: [1, { b: null }], c: 'x', d: {}, e: [] };
    expect(shown(plain)).toBe(JSON.stringify(plain, null, 2));
    expect(shown({ $$ref: 1, $$$x: 2 })).toBe('{\n  "$ref": 1,\n  "$$x": 2\n}');
  });

  it('keeps a malformed or look-alike tag as JSON', () => {
    expect(shown({ $as: 'Map', $v: 'not pairs' })).toBe('{\n  "$as": "Map",\n  "$v": "not pairs"\n}');
    expect(shown({ $as: 'Date', $v: '2026', other: 1 })).toContain('"other": 1');
  });
});
