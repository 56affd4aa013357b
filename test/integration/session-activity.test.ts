import { QueryCommand } from '@aws-sdk/lib-dynamodb';
import { beforeAll, describe, expect, it } from 'vitest';
import { SessionService } from '../../functions/core/sessions/session-service.js';
import { createStores, type Stores } from '../../functions/store/index.js';
import { ACTIVITY_EVERY_MS } from '../../functions/store/log/log-writer.js';
import { dynamoDbClient } from '../../functions/store/table/client.js';
import * as keys from '../../functions/store/table/keys.js';
import { tableKeys } from '../../functions/store/table/table.js';
import { createTestTable, dynamoEndpoint } from '../helpers/dynamodb.js';

/**
 * The sessions list without a key every conversation shares (API.md sections 2 and 14): the
 * activity index is cut into partitions by session, read side by side and merged, and a
 * session's activity moves at most once an interval, however often it is written.
 */
const client = dynamoDbClient({ AGENTSTATE_DYNAMODB_ENDPOINT: dynamoEndpoint() });
let clock = Date.parse('2026-01-01T00:00:00.000Z');
let stores: Stores;
let service: SessionService;
const tenant = 'activity';
const scope = (sessionId: string) => ({ tenant, sessionId });

beforeAll(async () => {
  stores = createStores(client, await createTestTable('activity'), { now: () => clock });
  service = new SessionService(stores.sessions, { now: () => new Date(clock) });
});

const listAll = async (limit: number, prefix?: string) => {
  const pages: string[][] = [];
  let cursor: string | undefined;
  do {
    const page = await stores.sessions.listSessions(tenant, { limit, ...(cursor ? { cursor } : {}), ...(prefix ? { prefix } : {}) });
    pages.push(page.items.map((session) => session.sessionId));
    cursor = page.next;
  } while (cursor && pages.length < 200);
  return pages;
};

describe('the sessions list over the activity partitions', () => {
  it('pages through every session exactly once, newest first, in full pages, from every partition', async () => {
    // Prepare: 45 sessions, each written a second after the one before.
    const ids = Array.from({ length: 45 }, (_, n) => `list-${String(n).padStart(2, '0')}`);
    for (const sessionId of ids) {
      clock += 1_000;
      await service.patchState(scope(sessionId), { n: sessionId });
    }

    // Act
    const pages = await listAll(7);
    const whole = await listAll(500);

    // Assess: the order of their writes, newest first; pages of 7 but the last; the entries spread.
    const newestFirst = [...ids].reverse();
    expect(pages.flat()).toEqual(newestFirst);
    expect(pages.map((page) => page.length)).toEqual([7, 7, 7, 7, 7, 7, 3]);
    expect(whole).toEqual([newestFirst]);
    const partitions = new Set(ids.map((sessionId) => keys.tenantSessions(tenant, keys.activityShard(sessionId))));
    expect(partitions.size).toBeGreaterThan(8);
    const { Items } = await stores.table.send(
      new QueryCommand({
        TableName: stores.table.tableName,
        IndexName: tableKeys.sessionsIndex.name,
        KeyConditionExpression: `${tableKeys.sessionsIndex.partitionKey} = :p`,
        ExpressionAttributeValues: { ':p': `T#${tenant}` },
      }),
    );
    expect(Items).toEqual([]);
  });

  it('finds sessions by a prefix across partitions, every one once, pages short but never wrong', async () => {
    const pages = await listAll(4, 'list-1');
    expect(pages.flat()).toEqual([
      'list-19',
      'list-18',
      'list-17',
      'list-16',
      'list-15',
      'list-14',
      'list-13',
      'list-12',
      'list-11',
      'list-10',
    ]);
    expect(pages.every((page) => page.length <= 4)).toBe(true);
  });

  it('refuses a cursor of another tenant', async () => {
    const page = await stores.sessions.listSessions(tenant, { limit: 2 });
    await expect(stores.sessions.listSessions('other', { limit: 2, cursor: page.next as string })).rejects.toMatchObject({
      code: 'invalid_request',
    });
  });
});

describe('a session activity', () => {
  const touchedAt = async (sessionId: string) => (await stores.sessions.readTip(scope(sessionId), { withState: false })).touchedAt;

  it('is due to move at most once an interval, however often the session is written', async () => {
    // Prepare: the first write moves it (it makes the session).
    clock += 60_000;
    const first = new Date(clock).toISOString();
    await service.patchState(scope('busy'), { n: 0 });
    expect(await touchedAt('busy')).toBe(first);

    // Act: a write a second for most of an interval, then one after it.
    for (let n = 1; n < ACTIVITY_EVERY_MS / 1_000; n++) {
      clock += 1_000;
      await service.patchState(scope('busy'), { n });
    }
    const within = await touchedAt('busy');
    clock += 1_000;
    const due = new Date(clock).toISOString();
    await service.patchState(scope('busy'), { n: 'after' });

    // Assess
    expect(within).toBe(first);
    expect(await touchedAt('busy')).toBe(due);
  });
});
