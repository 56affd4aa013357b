import { marshall } from '@aws-sdk/util-dynamodb';
import type { DynamoDBRecord } from 'aws-lambda';
import { describe, expect, it } from 'vitest';
import { buildMemoryChangedEvent } from '../../functions/core/events/memory-changed.js';
import { matchesStreamFilter } from '../../functions/store/events/stream-images.js';
import { memoryRecordFilters, recordedMemoryChangeOf } from '../../functions/store/memory/memory-stream.js';

const live = {
  pk: 'M#t1#users/u1',
  sk: 'K#k',
  kind: 'mem',
  value: '{"a":1}',
  version: 3,
  createdAt: '2026-01-01T00:00:00.000Z',
  updatedAt: '2026-01-02T00:00:00.000Z',
  expiresAt: 1_700_000_000,
};

function record(eventName: string, images: { NewImage?: object; OldImage?: object }): DynamoDBRecord {
  return {
    eventName: eventName as DynamoDBRecord['eventName'],
    dynamodb: {
      ...(images.NewImage ? { NewImage: marshall(images.NewImage) as never } : {}),
      ...(images.OldImage ? { OldImage: marshall(images.OldImage) as never } : {}),
    },
  };
}

describe('memory records of the stream', () => {
  it.each([['REMOVE'], ['UNKNOWN_TO_SDK_VERSION']])('reads a TTL removal (%s) as a removal that makes no event', (eventName) => {
    const removal = record(eventName, { OldImage: live });

    const change = recordedMemoryChangeOf(removal);

    expect(memoryRecordFilters.some((pattern) => matchesStreamFilter(pattern, removal))).toBe(true);
    expect(change).toMatchObject({ kind: 'removed', tenant: 't1', namespace: ['users', 'u1'], key: 'k' });
    expect(buildMemoryChangedEvent(change as never)).toBeNull();
  });

  it('reads a tombstone over an item as its delete, one version after the last put', () => {
    const change = recordedMemoryChangeOf(
      record('MODIFY', {
        OldImage: live,
        NewImage: { pk: live.pk, sk: live.sk, kind: 'mem:deleted', deletedAt: '2026-01-03T00:00:00.000Z', author: 'a1' },
      }),
    );

    expect(buildMemoryChangedEvent(change as never)).toMatchObject({
      id: `memory:users/u1/k:${Date.parse(live.createdAt)}:4`,
      cause: 'delete',
      version: 4,
      prevVersion: 3,
      next: null,
      prev: { a: 1 },
      author: 'a1',
      occurredAt: '2026-01-03T00:00:00.000Z',
    });
  });

  it('lets nothing else of the table through its patterns', () => {
    const session = record('INSERT', { NewImage: { pk: 'S#t1#s1', sk: 'S' } });
    const history = record('INSERT', { NewImage: { pk: 'MH#t1#users/u1#k', sk: 'x', value: '{}' } });

    expect(memoryRecordFilters.some((pattern) => matchesStreamFilter(pattern, session) || matchesStreamFilter(pattern, history))).toBe(
      false,
    );
    expect(recordedMemoryChangeOf(history)).toBeNull();
  });
});
