import { describe, expect, it } from 'vitest';
import { type Json, parseJson, stringifyJson } from '../../functions/core/json/json.js';
import { applyJsonPatch, parseJsonPatch } from '../../functions/core/json/json-patch.js';
import { AgentStateError } from '../../functions/core/kernel/errors.js';

const patch = (document: Json, operations: Json) => applyJsonPatch(document, parseJsonPatch(operations));

function failure(run: () => unknown): AgentStateError {
  try {
    run();
  } catch (error) {
    if (error instanceof AgentStateError) return error;
    throw error;
  }
  throw new Error('expected a failure');
}

/** RFC 6902 appendix A, example by example. */
describe('JSON Patch: the examples of RFC 6902 appendix A', () => {
  it.each([
    ['A.1 adding an object member', { foo: 'bar' }, [{ op: 'add', path: '/baz', value: 'qux' }], { baz: 'qux', foo: 'bar' }],
    ['A.2 adding an array element', { foo: ['bar', 'baz'] }, [{ op: 'add', path: '/foo/1', value: 'qux' }], { foo: ['bar', 'qux', 'baz'] }],
    ['A.3 removing an object member', { baz: 'qux', foo: 'bar' }, [{ op: 'remove', path: '/baz' }], { foo: 'bar' }],
    ['A.4 removing an array element', { foo: ['bar', 'qux', 'baz'] }, [{ op: 'remove', path: '/foo/1' }], { foo: ['bar', 'baz'] }],
    ['A.5 replacing a value', { baz: 'qux', foo: 'bar' }, [{ op: 'replace', path: '/baz', value: 'boo' }], { baz: 'boo', foo: 'bar' }],
    [
      'A.6 moving a value',
      { foo: { bar: 'baz', waldo: 'fred' }, qux: { corge: 'grault' } },
      [{ op: 'move', from: '/foo/waldo', path: '/qux/thud' }],
      { foo: { bar: 'baz' }, qux: { corge: 'grault', thud: 'fred' } },
    ],
    [
      'A.7 moving an array element',
      { foo: ['all', 'grass', 'cows', 'eat'] },
      [{ op: 'move', from: '/foo/1', path: '/foo/3' }],
      { foo: ['all', 'cows', 'eat', 'grass'] },
    ],
    [
      'A.8 testing a value: success',
      { baz: 'qux', foo: ['a', 2, 'c'] },
      [
        { op: 'test', path: '/baz', value: 'qux' },
        { op: 'test', path: '/foo/1', value: 2 },
      ],
      { baz: 'qux', foo: ['a', 2, 'c'] },
    ],
    [
      'A.10 adding a nested member object',
      { foo: 'bar' },
      [{ op: 'add', path: '/child', value: { grandchild: {} } }],
      { foo: 'bar', child: { grandchild: {} } },
    ],
    [
      'A.11 ignoring unrecognized elements',
      { foo: 'bar' },
      [{ op: 'add', path: '/baz', value: 'qux', xyz: 123 }],
      { foo: 'bar', baz: 'qux' },
    ],
    ['A.14 ~ escape ordering', { '/': 9, '~1': 10 }, [{ op: 'test', path: '/~01', value: 10 }], { '/': 9, '~1': 10 }],
    [
      'A.16 adding an array value',
      { foo: ['bar'] },
      [{ op: 'add', path: '/foo/-', value: ['abc', 'def'] }],
      { foo: ['bar', ['abc', 'def']] },
    ],
  ] as const)('%s', (_name, document, operations, expected) => {
    expect(patch(document as unknown as Json, operations as unknown as Json)).toEqual(expected);
  });

  it('A.9 testing a value: error', () => {
    const error = failure(() => patch({ baz: 'qux' }, [{ op: 'test', path: '/baz', value: 'bar' }]));
    expect(error).toMatchObject({ code: 'patch_conflict', status: 409, extras: { operation: 0, pointer: '/baz' } });
  });

  it('A.12 adding to a nonexistent target', () => {
    const error = failure(() => patch({ foo: 'bar' }, [{ op: 'add', path: '/baz/bat', value: 'qux' }]));
    expect(error).toMatchObject({ code: 'patch_conflict', extras: { operation: 0 } });
  });

  it('A.13 an operation given twice keeps the last member, as the parser of the body decides', () => {
    // The body parser refuses duplicate keys outright (400 invalid_json, API.md section 1), so
    // an operation object here never has two `op` members.
    expect(parseJsonPatch([{ op: 'add', path: '/baz', value: 'qux' }])).toHaveLength(1);
  });

  it('A.15 comparing strings and numbers', () => {
    const error = failure(() => patch({ '/': 9, '~1': 10 }, [{ op: 'test', path: '/~01', value: '10' }]));
    expect(error.code).toBe('patch_conflict');
  });
});

describe('JSON Patch: all or nothing, in order, nothing modified', () => {
  it('applies operations in order, each on the result of the one before', () => {
    const result = patch({ items: [] }, [
      { op: 'add', path: '/items/-', value: 1 },
      { op: 'add', path: '/items/-', value: 2 },
      { op: 'copy', from: '/items/0', path: '/first' },
      { op: 'move', from: '/items/1', path: '/items/0' },
      { op: 'replace', path: '', value: { whole: true } },
      { op: 'add', path: '/whole2', value: null },
    ]);
    expect(result).toEqual({ whole: true, whole2: null });
  });

  it('leaves the document untouched when a later operation fails, and names that operation', () => {
    const document = { a: { b: [1, 2] } };
    const before = structuredClone(document);

    const error = failure(() =>
      patch(document, [
        { op: 'add', path: '/a/b/-', value: 3 },
        { op: 'remove', path: '/a/c' },
      ]),
    );

    expect(error).toMatchObject({ code: 'patch_conflict', extras: { operation: 1, pointer: '/a/c' } });
    expect(document).toEqual(before);
  });

  it('shares what it does not change', () => {
    const big = { keep: { deep: [1, 2, 3] }, log: ['x'] };
    const result = patch(big, [{ op: 'add', path: '/log/-', value: 'y' }]) as typeof big;
    expect(result.keep).toBe(big.keep);
    expect(result.log).toEqual(['x', 'y']);
    expect(big.log).toEqual(['x']);
  });

  it.each([
    ['an index past the end', { a: [1] }, [{ op: 'add', path: '/a/2', value: 0 }]],
    ['a leading zero is not an index', { a: [1, 2] }, [{ op: 'replace', path: '/a/01', value: 0 }]],
    ['"-" names no element to replace', { a: [1] }, [{ op: 'replace', path: '/a/-', value: 0 }]],
    ['a member of a string', { a: 'text' }, [{ op: 'add', path: '/a/b', value: 0 }]],
    ['removing a missing member', { a: 1 }, [{ op: 'remove', path: '/b' }]],
    ['moving from nowhere', { a: 1 }, [{ op: 'move', from: '/b', path: '/c' }]],
    ['moving to where it already is, but it is not there', { a: 1 }, [{ op: 'move', from: '/b', path: '/b' }]],
    ['copying from past the end', { a: [1] }, [{ op: 'copy', from: '/a/1', path: '/b' }]],
    ['an own member only, never the prototype', {}, [{ op: 'test', path: '/constructor', value: null }]],
  ] as const)('conflicts on %s (409)', (_name, document, operations) => {
    expect(failure(() => patch(document as unknown as Json, operations as unknown as Json)).code).toBe('patch_conflict');
  });

  it.each([
    ['a body that is not an array', { op: 'add', path: '/a', value: 1 }],
    ['an operation that is not an object', ['add']],
    ['an unknown op', [{ op: 'merge', path: '/a', value: 1 }]],
    ['a path that is not a pointer', [{ op: 'add', path: 'a', value: 1 }]],
    ['a path that is not a string', [{ op: 'remove', path: 1 }]],
    ['a missing value (null is a value; absent is not)', [{ op: 'add', path: '/a' }]],
    ['a move without from', [{ op: 'move', path: '/a' }]],
    ['a bad escape', [{ op: 'remove', path: '/a~2b' }]],
    ['a value moved into itself', [{ op: 'move', from: '/a', path: '/a/b' }]],
  ] as const)('refuses %s as malformed (400), before applying anything', (_name, operations) => {
    expect(failure(() => parseJsonPatch(operations as unknown as Json)).code).toBe('invalid_request');
  });

  it('unescapes ~1 then ~0, so "~01" is the member "~1"', () => {
    expect(
      patch({ 'a/b': 1, '~': 2, '~1': 3 }, [
        { op: 'remove', path: '/a~1b' },
        { op: 'remove', path: '/~0' },
        { op: 'replace', path: '/~01', value: 4 },
      ]),
    ).toEqual({ '~1': 4 });
  });

  it('keeps numbers verbatim and tests them by value', () => {
    const document = parseJson('{"n":9007199254740993,"x":1.0}');

    const result = applyJsonPatch(
      document,
      parseJsonPatch(parseJson('[{"op":"test","path":"/x","value":1},{"op":"add","path":"/m","value":1e-400}]')),
    );

    expect(stringifyJson(result)).toBe('{"n":9007199254740993,"x":1.0,"m":1e-400}');
  });

  it('adds a member named __proto__ as a member', () => {
    const result = patch({}, parseJson('[{"op":"add","path":"/__proto__","value":{"polluted":true}}]')) as Record<string, unknown>;
    expect(Object.keys(result)).toEqual(['__proto__']);
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
  });
});
