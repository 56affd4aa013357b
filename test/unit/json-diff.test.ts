import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { Json } from '../../functions/core/json/json.js';
import { jsonPatchBetween } from '../../functions/core/json/json-diff.js';
import { applyJsonPatch } from '../../functions/core/json/json-patch.js';
import { mergePatch, mergePatchBetween } from '../../functions/core/json/merge-patch.js';

/** JSON values small enough to compare, with keys that need pointer escapes. */
const json: fc.Arbitrary<Json> = fc.letrec((tie) => ({
  value: fc.oneof(
    { depthSize: 'small' },
    fc.constant(null),
    fc.boolean(),
    fc.integer(),
    fc.string({ maxLength: 4 }),
    fc.array(tie('value'), { maxLength: 4 }),
    fc.dictionary(fc.constantFrom('a', 'b', 'c/d', 'e~f', '__proto__'), tie('value'), { maxKeys: 4 }),
  ),
})).value as fc.Arbitrary<Json>;

describe('the change between two states', () => {
  it('as JSON Patch operations, turns prev into next', () => {
    fc.assert(
      fc.property(json, json, (prev, next) => {
        expect(applyJsonPatch(prev, jsonPatchBetween(prev, next))).toEqual(next);
      }),
    );
  });

  it('as a merge patch, turns prev into next whenever one can say it', () => {
    fc.assert(
      fc.property(json, json, (prev, next) => {
        const patch = mergePatchBetween(prev, next);
        if (patch !== undefined) expect(mergePatch(prev, patch)).toEqual(next);
      }),
    );
  });

  it('is small for an append to a large array, and a merge patch cannot say a new null', () => {
    const log = Array.from({ length: 10_000 }, (_, index) => ({ index }));
    const prev = { log, n: 1 };
    const next = { log: [...log, { index: -1 }], n: 1 };

    expect(jsonPatchBetween(prev, next)).toEqual([{ op: 'add', path: '/log/-', value: { index: -1 } }]);
    expect(mergePatchBetween({ a: 1 }, { a: null })).toBeUndefined();
    expect(mergePatchBetween({ a: 1, b: 2 }, { a: 1 })).toEqual({ b: null });
  });
});
