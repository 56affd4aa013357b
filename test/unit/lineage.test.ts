import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { LINEAGE_WINDOW } from '../../functions/core/model/model.js';
import { decodeLineage, encodeLineage, type LineageEntry } from '../../functions/store/state/lineage.js';

/** A lineage window as the tree makes one: distinct versions, nearest (largest) first, each with its seq in the log. */
const lineageWindow = fc
  .uniqueArray(fc.record({ version: fc.integer({ min: 1, max: 1_000_000 }), seq: fc.integer({ min: 1, max: 4 }) }), {
    maxLength: LINEAGE_WINDOW,
    selector: (entry) => entry.version,
  })
  .map((entries) => entries.sort((a, b) => b.version - a.version));

/** Versions at seq 1 (a version right after the one before it, the common case). */
const first = (...versions: number[]): LineageEntry[] => versions.map((version) => ({ version, seq: 1 }));

describe('stored lineage', () => {
  it('keeps runs of consecutive versions as ranges', () => {
    expect(encodeLineage(first(56, 55, 54, 50, 20, 19, 18))).toBe('56-54,50,20-18');
    expect(encodeLineage(first(...Array.from({ length: 32 }, (_, index) => 1031 - index)))).toBe('1031-1000');
    expect(encodeLineage(first(7))).toBe('7');
    expect(encodeLineage([])).toBe('');
  });

  it('says where in the log a version is when it is not the first change after the one before it', () => {
    const lineage = [
      { version: 9, seq: 2 },
      { version: 8, seq: 2 },
      { version: 7, seq: 1 },
      { version: 3, seq: 5 },
    ];

    expect(encodeLineage(lineage)).toBe('9-8@2,7,3@5');
    expect(decodeLineage('9-8@2,7,3@5')).toEqual(lineage);
  });

  it("writes a chat's alternating seqs (a decision's version third after the one before, a PATCH's first) as one run", () => {
    const turns = Array.from({ length: 19 }, (_, index) => ({ version: 19 - index, seq: index % 2 === 0 ? 3 : 1 }));

    expect(encodeLineage(turns)).toBe('19-1@3/1');
    expect(decodeLineage('19-1@3/1')).toEqual(turns);
    // Two alone are shorter written apart.
    expect(encodeLineage(turns.slice(0, 2))).toBe('19@3,18');
  });

  it('reads back exactly what was written, runs of repeating seqs included', () => {
    const dense = fc
      .record({ top: fc.integer({ min: 40, max: 1_000 }), seqs: fc.array(fc.constantFrom(1, 2, 3), { maxLength: LINEAGE_WINDOW }) })
      .map(({ top, seqs }) => seqs.map((seq, index) => ({ version: top - index, seq })));
    fc.assert(
      fc.property(dense, (lineage) => {
        expect(decodeLineage(encodeLineage(lineage))).toEqual(lineage);
      }),
    );
  });

  it('reads back exactly what was written', () => {
    fc.assert(
      fc.property(lineageWindow, (lineage) => {
        expect(decodeLineage(encodeLineage(lineage))).toEqual(lineage);
      }),
    );
  });

  it('reads an absent lineage as none', () => {
    expect(decodeLineage(undefined)).toEqual([]);
    expect(decodeLineage('')).toEqual([]);
  });
});
