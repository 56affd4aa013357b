import { describe, expect, it } from 'vitest';
import {
  failedWriteUnits,
  indexWrites,
  itemSize,
  kilobytes,
  type TableShape,
  transactItemUnits,
  transactTargets,
  type WireItem,
} from '../../bench/capacity-rules.js';

/**
 * The bench's estimate of what AWS bills where DynamoDB Local does not say (bench/capacity-rules.ts),
 * which both the meter (sections 1, 3, 5…) and the partition-load recorder use. The cases are the
 * ones measured on DynamoDB Local against the real table definition, with what it reported beside
 * what DynamoDB's published rules bill.
 */
describe("the bench's capacity rules", () => {
  const s = (value: string) => ({ S: value });
  const item = (bytes: number, extra: WireItem = {}): WireItem => ({ pk: s('p'), sk: s('s'), d: s('x'.repeat(bytes)), ...extra });

  it('sizes an item as DynamoDB does: names plus values, one write unit per started KB', () => {
    expect(itemSize({ pk: s('abc'), n: { N: '12345' } })).toBe(2 + 3 + 1 + 4);
    expect(itemSize({ m: { M: { a: s('xy') } }, l: { L: [{ BOOL: true }] } })).toBe(1 + (3 + 1 + 1 + 2) + 1 + (3 + 1 + 1));
    expect(kilobytes(0)).toBe(1);
    expect(kilobytes(1024)).toBe(1);
    expect(kilobytes(1025)).toBe(2);
  });

  it("prices a transaction's update at twice the larger of the item before and after, not as an item under 1 KB", () => {
    // A copy's opening updates the session item (1-2 KB, 16 KiB at most with metadata) in a transaction.
    expect(transactItemUnits('Update', { before: 1_500, after: 1_520 })).toBe(4);
    expect(transactItemUnits('Update', { before: 16 * 1024, after: 16 * 1024 + 10 })).toBe(34);
    // One that shrinks the item is billed at its size before (DynamoDB Local: 6 for a 3 KB item set to 1 byte).
    expect(transactItemUnits('Update', { before: 3_000, after: 20 })).toBe(6);
    // An update that creates its item: the item after.
    expect(transactItemUnits('Update', { after: 100 })).toBe(2);
  });

  it('prices a condition check in 1 KB steps like a write, and each item of a transaction on its own', () => {
    // DynamoDB Local reports a 5,000-byte check as 4 (4 KB steps, like a read); the rules bill 10.
    expect(transactItemUnits('ConditionCheck', { before: 5_000 })).toBe(10);
    expect(transactItemUnits('ConditionCheck', {})).toBe(2);
    // A 100 B put, a 1.5 KB update and a 100 B check: DynamoDB Local reports 6 (the sum rounded), the rules 8.
    const units = [
      transactItemUnits('Put', { after: 110 }),
      transactItemUnits('Update', { before: 1_510, after: 1_514 }),
      transactItemUnits('ConditionCheck', { before: 110 }),
    ];
    expect(units).toEqual([2, 4, 2]);
    // A put over a larger item and a delete are billed at the larger item.
    expect(transactItemUnits('Put', { before: 3_000, after: 100 })).toBe(6);
    expect(transactItemUnits('Delete', { before: 3_000 })).toBe(6);
  });

  it('prices a write whose condition failed at the item that is there (DynamoDB Local reports nothing)', () => {
    expect(failedWriteUnits(3_000)).toBe(3);
    expect(failedWriteUnits(undefined)).toBe(1);
  });

  it('names the items a transaction writes, a Put by its key attributes', () => {
    const targets = transactTargets(
      {
        TransactItems: [
          { Put: { TableName: 't', Item: item(10) } },
          { Update: { TableName: 't', Key: { pk: s('u'), sk: s('1') }, UpdateExpression: 'SET a = :a' } },
          { ConditionCheck: { TableName: 't', Key: { pk: s('c'), sk: s('1') }, ConditionExpression: 'attribute_exists(pk)' } },
        ],
      },
      () => ['pk', 'sk'],
    );
    expect(targets.map(({ kind, key }) => [kind, key])).toEqual([
      ['Put', { pk: s('p'), sk: s('s') }],
      ['Update', { pk: s('u'), sk: s('1') }],
      ['ConditionCheck', { pk: s('c'), sk: s('1') }],
    ]);
  });

  describe('index writes', () => {
    const shape: TableShape = {
      keys: ['pk', 'sk'],
      indexes: [
        { name: 'all', partitionKey: 'gpk', sortKey: 'gsk', projected: 'ALL' },
        { name: 'list', partitionKey: 'lpk', sortKey: 'lsk', projected: ['sessionId'] },
      ],
    };

    it('puts a new entry, and a whole item in an index that projects every attribute', () => {
      const after = item(3_000, { gpk: s('G'), gsk: s('1') });
      expect(indexWrites(shape, undefined, after)).toEqual([{ index: 'all', key: 'G', writeUnits: 3 }]);
    });

    it('deletes and puts an entry whose index key moved, each at the size of its projection', () => {
      // DynamoDB Local reported the same for the 3 KB item (2 for the list entry, 6 for the whole item).
      const before = item(3_000, { gpk: s('G'), gsk: s('1'), lpk: s('L'), lsk: s('1'), sessionId: s('w') });
      const after = { ...before, gsk: s('2'), lsk: s('2') };
      expect(indexWrites(shape, before, after)).toEqual([
        { index: 'all', key: 'G', writeUnits: 3 },
        { index: 'all', key: 'G', writeUnits: 3 },
        { index: 'list', key: 'L', writeUnits: 1 },
        { index: 'list', key: 'L', writeUnits: 1 },
      ]);
    });

    it('puts an entry again when a projected attribute changed, and writes nothing when none did', () => {
      const before = item(100, { lpk: s('L'), lsk: s('1'), sessionId: s('a') });
      expect(indexWrites(shape, before, { ...before, sessionId: s('b') })).toEqual([{ index: 'list', key: 'L', writeUnits: 1 }]);
      expect(indexWrites(shape, before, { ...before, d: s('changed') })).toEqual([]);
      expect(indexWrites(shape, before, undefined)).toEqual([{ index: 'list', key: 'L', writeUnits: 1 }]);
    });
  });
});
