import { describe, expect, it } from 'vitest';
import { type JsonObject, parseJson } from '../../functions/core/json/json.js';
import { namespaceRoots, readablePrefixes, withinRoots } from '../../functions/core/memory/memory.js';
import { decideOnFields, indexedFields, matchesMemoryFilter, parseFilter } from '../../functions/core/memory/memory-filter.js';

describe('comparisons over verbatim numbers', () => {
  const value = (text: string) => parseJson(text) as JsonObject;

  it.each([
    ['{"n": 9007199254740993}', '{"n": {"$gt": 9007199254740992}}', true],
    ['{"n": 9007199254740992}', '{"n": {"$gt": 9007199254740992}}', false],
    ['{"n": 0.1000000000000000055}', '{"n": {"$gt": 0.1}}', true],
    ['{"n": 1e-400}', '{"n": {"$gt": 0}}', true],
    ['{"n": -1e-400}', '{"n": {"$lt": 0}}', true],
    ['{"n": 1e400}', '{"n": {"$gte": 9.99e399}}', true],
    ['{"n": 1.0}', '{"n": 1}', true],
    ['{"n": 12.50}', '{"n": {"$in": [12.5]}}', true],
    ['{"n": 123456789012345678901234567890}', '{"n": {"$lt": 123456789012345678901234567891}}', true],
    ['{"n": "10"}', '{"n": {"$gt": 9}}', false],
  ])('%s against %s: %s', (item, filter, expected) => {
    expect(matchesMemoryFilter(parseFilter(parseJson(filter)), value(item))).toBe(expected);
  });

  it('indexes a verbatim number and decides on it without the value', () => {
    const { fields, partial } = indexedFields(value('{"n": 9007199254740993}'));

    expect(partial).toBe(false);
    expect(decideOnFields(parseFilter(parseJson('{"n": {"$gt": 9007199254740992}}')), fields, partial)).toBe(true);
  });
});

describe('decideOnFields', () => {
  it('decides on the indexed fields, and says unknown only for a field the index may have left out', () => {
    const value = { kind: 'book', text: 'x'.repeat(200), tags: ['a'] };
    const { fields, partial } = indexedFields(value);

    expect(fields).toEqual({ kind: 'book' });
    expect(partial).toBe(true);
    expect(decideOnFields(parseFilter({ kind: 'game' }), fields, partial)).toBe(false);
    expect(decideOnFields(parseFilter({ kind: 'book' }), fields, partial)).toBe(true);
    expect(decideOnFields(parseFilter({ tags: ['a'] }), fields, partial)).toBe('unknown');
    expect(decideOnFields(parseFilter({ colour: 'red' }), { kind: 'book' }, false)).toBe(false);
  });

  it('keeps the index entry small however many fields a value has', () => {
    const value = Object.fromEntries(Array.from({ length: 200 }, (_, index) => [`field${index}`, index]));
    const { fields, partial } = indexedFields(value);

    expect(Buffer.byteLength(JSON.stringify(fields))).toBeLessThanOrEqual(512);
    expect(partial).toBe(true);
  });

  it('keeps a __proto__ field as a field', () => {
    const value = JSON.parse('{"__proto__": "x", "a": 1}');
    const { fields } = indexedFields(value);

    expect(Object.keys(fields)).toEqual(['__proto__', 'a']);
    expect(matchesMemoryFilter(parseFilter(JSON.parse('{"__proto__": "x"}')), value)).toBe(true);
  });
});

describe('the limited-key rule', () => {
  const roots = namespaceRoots(['a1', 'a2']);

  it('admits agents/<its agent> and shared, and nothing else', () => {
    expect(withinRoots(['agents', 'a1', 'notes'], roots)).toBe(true);
    expect(withinRoots(['shared'], roots)).toBe(true);
    expect(withinRoots(['agents', 'a10'], roots)).toBe(false);
    expect(withinRoots(['agents'], roots)).toBe(false);
    expect(withinRoots(['sharedx'], roots)).toBe(false);
    expect(withinRoots(['users', 'a1'], namespaceRoots(null))).toBe(true);
  });

  it('narrows a wide prefix to the roots under it', () => {
    expect(readablePrefixes([], roots)).toEqual([['agents', 'a1'], ['agents', 'a2'], ['shared']]);
    expect(readablePrefixes(['agents'], roots)).toEqual([
      ['agents', 'a1'],
      ['agents', 'a2'],
    ]);
    expect(readablePrefixes(['agents', 'a1', 'x'], roots)).toEqual([['agents', 'a1', 'x']]);
    expect(readablePrefixes(['users'], roots)).toEqual([]);
  });
});
