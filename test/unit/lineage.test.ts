import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { LINEAGE_WINDOW } from '../../functions/core/model.js';
import { decodeLineage, encodeLineage } from '../../functions/store/lineage.js';

/** A lineage window as the tree makes one: distinct versions, nearest (largest) first. */
const lineageWindow = fc
  .uniqueArray(fc.integer({ min: 1, max: 1_000_000 }), { maxLength: LINEAGE_WINDOW })
  .map((versions) => versions.sort((a, b) => b - a));

describe('stored lineage', () => {
  it('keeps runs of consecutive versions as ranges', () => {
    expect(encodeLineage([56, 55, 54, 50, 20, 19, 18])).toBe('56-54,50,20-18');
    expect(encodeLineage(Array.from({ length: 32 }, (_, index) => 1031 - index))).toBe('1031-1000');
    expect(encodeLineage([7])).toBe('7');
    expect(encodeLineage([])).toBe('');
  });

  it('reads back exactly what was written', () => {
    fc.assert(
      fc.property(lineageWindow, (lineage) => {
        expect(decodeLineage(encodeLineage(lineage))).toEqual(lineage);
      }),
    );
  });

  it('reads the plain lists of items written before ranges, and an absent lineage', () => {
    expect(decodeLineage([3, 2, 1])).toEqual([3, 2, 1]);
    expect(decodeLineage(['3', '2'])).toEqual([3, 2]);
    expect(decodeLineage(undefined)).toEqual([]);
    expect(decodeLineage('')).toEqual([]);
  });
});
