import fc from 'fast-check';
import { afterEach, describe, expect, it } from 'vitest';
import { type Json, type JsonObject, jsonEqual } from '../../functions/core/json/json.js';
import { mergePatch, mergePatchBetween } from '../../functions/core/json/merge-patch.js';

/* ------------------------------------------------------------------ helpers (local) */

const isObject = (value: unknown): value is JsonObject => typeof value === 'object' && value !== null && !Array.isArray(value);

const hasOwn = (object: object, key: string) => Object.hasOwn(object, key);

/** Freezes a JSON value at every depth, so that any write to it throws in strict mode. */
function deepFreeze<T extends Json>(value: T): T {
  if (typeof value === 'object' && value !== null) {
    for (const child of Object.values(value)) deepFreeze(child);
    Object.freeze(value);
  }
  return value;
}

/** Defines an own property (so `__proto__` stays an ordinary key) on a fresh object. */
function ownObject(entries: Array<[string, Json]>): JsonObject {
  const object: JsonObject = {};
  for (const [key, value] of entries) {
    Object.defineProperty(object, key, { value, enumerable: true, writable: true, configurable: true });
  }
  return object;
}

/** Removes every object member whose value is null, at every depth (arrays are kept verbatim). */
function withoutNullMembers(value: Json): Json {
  if (Array.isArray(value)) return value.map(withoutNullMembers);
  if (!isObject(value)) return value;
  return ownObject(
    Object.keys(value)
      .filter((key) => value[key] !== null)
      .map((key) => [key, withoutNullMembers(value[key] as Json)]),
  );
}

/** True when every member the patch sets is present, with that value, in the result. */
function containsPatch(result: Json, patch: Json): boolean {
  if (!isObject(patch)) return JSON.stringify(result) === JSON.stringify(patch);
  if (!isObject(result)) return false;
  return Object.keys(patch).every((key) => hasOwn(result, key) && containsPatch(result[key] as Json, patch[key] as Json));
}

/**
 * The merge patch that turns `source` into `target` (valid when `target` has no null object
 * members, which a merge patch cannot express).
 */
function diff(source: Json, target: Json): Json {
  if (!isObject(source) || !isObject(target)) return target;
  const patch: Array<[string, Json]> = [];
  for (const key of Object.keys(source)) {
    if (!hasOwn(target, key)) patch.push([key, null]);
  }
  for (const key of Object.keys(target)) {
    const before = hasOwn(source, key) ? (source[key] as Json) : undefined;
    const after = target[key] as Json;
    if (before !== undefined && JSON.stringify(before) === JSON.stringify(after) && !isObject(after)) continue;
    patch.push([key, before === undefined ? after : diff(before, after)]);
  }
  return ownObject(patch);
}

const json = fc.jsonValue({ maxDepth: 4 }) as fc.Arbitrary<Json>;
const nonObject = json.filter((value) => !isObject(value));

/* ------------------------------------------------------------------ RFC 7396 Appendix A */

describe('mergePatch: the fifteen examples of RFC 7396 Appendix A', () => {
  // The table exactly as the RFC prints it: ORIGINAL, PATCH, RESULT.
  const appendixA: Array<[original: string, patch: string, result: string]> = [
    ['{"a":"b"}', '{"a":"c"}', '{"a":"c"}'],
    ['{"a":"b"}', '{"b":"c"}', '{"a":"b","b":"c"}'],
    ['{"a":"b"}', '{"a":null}', '{}'],
    ['{"a":"b","b":"c"}', '{"a":null}', '{"b":"c"}'],
    ['{"a":["b"]}', '{"a":"c"}', '{"a":"c"}'],
    ['{"a":"c"}', '{"a":["b"]}', '{"a":["b"]}'],
    ['{"a":{"b":"c"}}', '{"a":{"b":"d","c":null}}', '{"a":{"b":"d"}}'],
    ['{"a":[{"b":"c"}]}', '{"a":[1]}', '{"a":[1]}'],
    ['["a","b"]', '["c","d"]', '["c","d"]'],
    ['{"a":"b"}', '["c"]', '["c"]'],
    ['{"a":"foo"}', 'null', 'null'],
    ['{"a":"foo"}', '"bar"', '"bar"'],
    ['{"e":null}', '{"a":1}', '{"e":null,"a":1}'],
    ['[1,2]', '{"a":"b","c":null}', '{"a":"b"}'],
    ['{}', '{"a":{"bb":{"ccc":null}}}', '{"a":{"bb":{}}}'],
  ];

  it('lists all fifteen examples', () => {
    expect(appendixA).toHaveLength(15);
  });

  it.each(appendixA)('%s merged with %s gives %s', (original, patch, result) => {
    // Prepare
    const target = deepFreeze(JSON.parse(original) as Json);
    const mergePatchDocument = deepFreeze(JSON.parse(patch) as Json);

    // Act
    const merged = mergePatch(target, mergePatchDocument);

    // Assess: the same value, and the same text (key order of the RFC included)
    expect(merged).toStrictEqual(JSON.parse(result));
    expect(JSON.stringify(merged)).toBe(result);
  });
});

/* ------------------------------------------------------------------ further examples */

describe('mergePatch: objects merge, everything else replaces', () => {
  it('keeps a member of the target that the patch does not mention, at every depth', () => {
    const target = deepFreeze({ profile: { name: 'Ada', tags: ['x'] }, count: 1 });
    const patch = deepFreeze({ profile: { city: 'London' } });

    expect(mergePatch(target, patch)).toEqual({ profile: { name: 'Ada', tags: ['x'], city: 'London' }, count: 1 });
  });

  it('ignores a null member that removes a key the target never had', () => {
    expect(mergePatch({ a: 1 }, { missing: null })).toEqual({ a: 1 });
  });

  it('stores a non-null falsy value (0, false, "") rather than treating it as removal', () => {
    expect(mergePatch({ a: 1, b: true, c: 'x' }, { a: 0, b: false, c: '' })).toEqual({ a: 0, b: false, c: '' });
  });

  it('keeps nulls that sit inside an array of the patch (arrays replace whole)', () => {
    expect(mergePatch({ a: [1] }, { a: [null, { b: null }] })).toEqual({ a: [null, { b: null }] });
  });

  it('merges a nested object patch into a scalar member as if the member were {}', () => {
    expect(mergePatch({ a: 5 }, { a: { b: 1, c: null } })).toEqual({ a: { b: 1 } });
  });

  it('returns an empty object patch applied to an object as an equal copy, not the target itself', () => {
    const target = { a: { b: 1 } };
    const merged = mergePatch(target, {});
    expect(merged).toEqual(target);
    expect(merged).not.toBe(target);
  });

  it.each<[string, Json]>([
    ['a number', 42],
    ['a string', 'text'],
    ['true', true],
    ['false', false],
    ['null', null],
    ['an array', [1, 2]],
  ])('turns a target that is %s into {} when the patch is {}', (_label, target) => {
    expect(mergePatch(target, {})).toEqual({});
  });
});

/* ------------------------------------------------------------------ properties */

describe('mergePatch: properties over arbitrary JSON', () => {
  it('is idempotent: applying the same patch twice equals applying it once', () => {
    fc.assert(
      fc.property(json, json, (target, patch) => {
        const once = mergePatch(target, patch);
        expect(mergePatch(once, patch)).toEqual(once);
      }),
    );
  });

  it('lands every member of a patch without nulls in the result', () => {
    fc.assert(
      fc.property(json, json.map(withoutNullMembers), (target, patch) => {
        expect(containsPatch(mergePatch(target, patch), patch)).toBe(true);
      }),
    );
  });

  it('treats any non-object target exactly like {}', () => {
    fc.assert(
      fc.property(nonObject, json, (target, patch) => {
        expect(mergePatch(target, patch)).toEqual(mergePatch({}, patch));
      }),
    );
  });

  it('returns any non-object patch itself, whatever the target', () => {
    fc.assert(
      fc.property(json, nonObject, (target, patch) => {
        expect(mergePatch(target, patch)).toBe(patch);
      }),
    );
  });

  it('gives an object whenever the patch is an object', () => {
    fc.assert(
      fc.property(json, fc.dictionary(fc.string(), json), (target, patch) => {
        expect(isObject(mergePatch(target, patch))).toBe(true);
      }),
    );
  });

  it('never modifies its arguments (both deep-frozen; any write would throw)', () => {
    fc.assert(
      fc.property(json, json, (target, patch) => {
        // Prepare
        const targetText = JSON.stringify(target);
        const patchText = JSON.stringify(patch);
        deepFreeze(target);
        deepFreeze(patch);

        // Act
        const run = () => mergePatch(target, patch);

        // Assess
        expect(run).not.toThrow();
        expect(JSON.stringify(target)).toBe(targetText);
        expect(JSON.stringify(patch)).toBe(patchText);
      }),
    );
  });

  it('turns the source into the target with the patch computed as their diff', () => {
    fc.assert(
      fc.property(json, json.map(withoutNullMembers), (source, target) => {
        const patch = diff(source, target);
        expect(mergePatch(source, patch)).toEqual(target);
      }),
    );
  });
});

/* ------------------------------------------------------------------ prototype pollution */

describe('mergePatch: hostile keys stay ordinary data', () => {
  afterEach(() => {
    // Whatever a test did, the global prototype must be untouched.
    expect(Object.hasOwn(Object.prototype, 'polluted')).toBe(false);
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
    expect({}.constructor).toBe(Object);
  });

  it('stores a "__proto__" member of the patch as an own key and leaves the prototype alone', () => {
    // Prepare: JSON.parse makes "__proto__" an own property, as a request body would
    const patch = JSON.parse('{"__proto__":{"polluted":true}}') as Json;

    // Act
    const merged = mergePatch({ a: 1 }, patch) as JsonObject;

    // Assess
    expect(Object.getPrototypeOf(merged)).toBe(Object.prototype);
    expect(hasOwn(merged, '__proto__')).toBe(true);
    expect(Object.keys(merged)).toEqual(['a', '__proto__']);
    expect((merged as Record<string, unknown>).polluted).toBeUndefined();
    expect(JSON.stringify(merged)).toBe('{"a":1,"__proto__":{"polluted":true}}');
  });

  it('stores a "__proto__" member applied to a non-object target as an own key too', () => {
    const merged = mergePatch(null, JSON.parse('{"__proto__":{"polluted":true}}') as Json) as JsonObject;

    expect(Object.getPrototypeOf(merged)).toBe(Object.prototype);
    expect(JSON.stringify(merged)).toBe('{"__proto__":{"polluted":true}}');
  });

  it('carries a "__proto__" member of the target over as an own key', () => {
    const target = JSON.parse('{"__proto__":{"polluted":true},"b":2}') as Json;

    const merged = mergePatch(target, { c: 3 }) as JsonObject;

    expect(Object.getPrototypeOf(merged)).toBe(Object.prototype);
    expect(JSON.stringify(merged)).toBe('{"__proto__":{"polluted":true},"b":2,"c":3}');
  });

  it('merges a "__proto__" member of the patch into the same own member of the target', () => {
    const target = JSON.parse('{"__proto__":{"x":1}}') as Json;
    const patch = JSON.parse('{"__proto__":{"y":2,"polluted":null}}') as Json;

    const merged = mergePatch(target, patch) as JsonObject;

    expect(Object.getPrototypeOf(merged)).toBe(Object.prototype);
    expect(JSON.stringify(merged)).toBe('{"__proto__":{"x":1,"y":2}}');
  });

  it('removes an own "__proto__" member with null and keeps the prototype', () => {
    const target = JSON.parse('{"__proto__":{"x":1},"b":2}') as Json;

    const merged = mergePatch(target, JSON.parse('{"__proto__":null}') as Json) as JsonObject;

    expect(hasOwn(merged, '__proto__')).toBe(false);
    expect(Object.getPrototypeOf(merged)).toBe(Object.prototype);
    expect(merged).toEqual({ b: 2 });
  });

  it('ignores a "__proto__": null when the target has no such member', () => {
    const merged = mergePatch({ b: 2 }, JSON.parse('{"__proto__":null}') as Json) as JsonObject;

    expect(Object.getPrototypeOf(merged)).toBe(Object.prototype);
    expect(JSON.stringify(merged)).toBe('{"b":2}');
  });

  it('stores a nested "__proto__" member as an own key of the nested object', () => {
    const merged = mergePatch({ a: { k: 1 } }, JSON.parse('{"a":{"__proto__":{"polluted":true}}}') as Json);

    const inner = (merged as JsonObject).a as JsonObject;
    expect(Object.getPrototypeOf(inner)).toBe(Object.prototype);
    expect(JSON.stringify(merged)).toBe('{"a":{"k":1,"__proto__":{"polluted":true}}}');
  });

  it('stores a "constructor" member as an own key, never merging into Object', () => {
    // Prepare
    const patch = JSON.parse('{"constructor":{"prototype":{"polluted":true}}}') as Json;

    // Act
    const merged = mergePatch({}, patch) as JsonObject;

    // Assess
    expect(Object.getPrototypeOf(merged)).toBe(Object.prototype);
    expect(hasOwn(merged, 'constructor')).toBe(true);
    expect(JSON.stringify(merged)).toBe('{"constructor":{"prototype":{"polluted":true}}}');
    expect((Object as unknown as Record<string, unknown>).polluted).toBeUndefined();
  });

  it('treats an inherited name such as "toString" as absent from the target', () => {
    // Were the inherited function taken as the current value, the result would not be {"a":1}.
    const merged = mergePatch({}, { toString: { a: 1 } }) as JsonObject;

    expect(JSON.stringify(merged)).toBe('{"toString":{"a":1}}');
  });

  it('leaves an inherited "constructor" in place when the patch removes it', () => {
    const merged = mergePatch({ a: 1 }, { constructor: null }) as JsonObject;

    expect(hasOwn(merged, 'constructor')).toBe(false);
    expect(merged.constructor).toBe(Object);
    expect(JSON.stringify(merged)).toBe('{"a":1}');
  });
});

describe('mergePatchBetween: the patch an event carries', () => {
  const json = fc.jsonValue({ maxDepth: 3 }) as fc.Arbitrary<Json>;

  it('turns prev into next whenever it exists', () => {
    fc.assert(
      fc.property(json, json, (prev, next) => {
        const patch = mergePatchBetween(prev, next);
        if (patch !== undefined) expect(jsonEqual(mergePatch(prev, patch), next)).toBe(true);
      }),
      { numRuns: 500 },
    );
  });

  it('exists for every pair whose next has no null member in an object', () => {
    const noNulls = fc.jsonValue({ maxDepth: 3 }).filter((value) => !JSON.stringify(value).includes(':null')) as fc.Arbitrary<Json>;
    fc.assert(
      fc.property(json, noNulls, (prev, next) => {
        expect(mergePatchBetween(prev, next)).not.toBeUndefined();
      }),
    );
  });

  it.each<[string, Json, Json, Json | undefined]>([
    [
      'a member added, one removed, one changed deep down',
      { a: 1, b: { c: 1, d: 2 } },
      { b: { c: 1, d: 3 }, e: [null] },
      { a: null, b: { d: 3 }, e: [null] },
    ],
    ['equal values', { a: [1, 2] }, { a: [1, 2] }, {}],
    ['a value replaced by a non-object', { a: 1 }, 'text', 'text'],
    ['a member set to null (no merge patch can)', { a: 1 }, { a: null }, undefined],
    ['an object with a null member over a scalar', { a: 1 }, { a: { b: null } }, undefined],
    ['an object over a non-object root', null, { a: 1 }, { a: 1 }],
  ])('%s', (_label, prev, next, patch) => {
    expect(mergePatchBetween(prev, next)).toEqual(patch);
  });
});
