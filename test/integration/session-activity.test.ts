import { GetCommand, QueryCommand } from '@aws-sdk/lib-dynamodb';
import { marshall } from '@aws-sdk/util-dynamodb';
import { beforeAll, describe, expect, it } from 'vitest';
import { startDynamoDbRecorder } from '../../bench/dynamodb-recorder.js';
import { CommitService } from '../../functions/core/commits/commit-service.js';
import { ChangeFanout } from '../../functions/core/fanout/change-fanout.js';
import { encodeStoredJson } from '../../functions/core/json/json.js';
import type { SessionMeta } from '../../functions/core/model/model.js';
import type { SessionFilter } from '../../functions/core/model/ports.js';
import { SessionService } from '../../functions/core/sessions/session-service.js';
import { recordedDocumentOf } from '../../functions/store/events/stream-images.js';
import { createStores, type Stores } from '../../functions/store/index.js';
import { ACTIVITY_EVERY_MS } from '../../functions/store/log/session-writes.js';
import { entryItems, moveEntries } from '../../functions/store/sessions/list-entries.js';
import * as sessionItem from '../../functions/store/sessions/session-item.js';
import { dynamoDbClient } from '../../functions/store/table/client.js';
import * as keys from '../../functions/store/table/keys.js';
import { tableKeys } from '../../functions/store/table/table.js';
import { batchPut } from '../../functions/store/table/table-client.js';
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

  it('pages one by one too: a partition that stops at its limit hands out the entry it stopped at', async () => {
    // Was a bug: every partition read one entry and stopped there, nothing was newer than the
    // newest stop, so every page was empty and its cursor the same (the list never ended).
    const pages = await listAll(1);

    expect(pages.flat().slice(0, 45)).toEqual(Array.from({ length: 45 }, (_, n) => `list-${String(44 - n).padStart(2, '0')}`));
    expect(pages.slice(0, 45).every((page) => page.length === 1)).toBe(true);
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

  it("does not move on a session's first write within an interval of its creation, and moves an interval after the creation", async () => {
    // Prepare: a session made (POST /v1/sessions), written a moment later (an append and a state write).
    clock += 60_000;
    const created = new Date(clock).toISOString();
    await service.createSession(tenant, { sessionId: 'fresh', userId: 'cy', metadata: { topic: 'fresh' } });
    const session = () => stores.sessions.getMeta(scope('fresh'));
    const indexed = async () => {
      const { Items } = await stores.table.send(
        new QueryCommand({
          TableName: stores.table.tableName,
          IndexName: tableKeys.sessionsIndex.name,
          KeyConditionExpression: `${tableKeys.sessionsIndex.partitionKey} = :p`,
          ExpressionAttributeValues: { ':p': keys.tenantSessions(tenant, keys.activityShard('fresh')) },
        }),
      );
      return Items?.find((item) => item.sessionId === 'fresh')?.lsk;
    };
    const entryBefore = await indexed();

    // Act: the first writes within the interval; then one an interval after the creation.
    clock += 2_000;
    await service.appendMessages(scope('fresh'), { messages: [{ role: 'user', content: 'hi' }] });
    clock += 1_000;
    await service.patchState(scope('fresh'), { n: 1 });
    const within = { touchedAt: await touchedAt('fresh'), updatedAt: (await session())?.updatedAt, entry: await indexed() };
    clock = Date.parse(created) + ACTIVITY_EVERY_MS + 1_000;
    const due = new Date(clock).toISOString();
    await service.appendMessages(scope('fresh'), { messages: [{ role: 'user', content: 'later' }] });

    // Assess: the creation's time carried on, nothing moved, then the move comes an interval after it.
    expect(within).toEqual({ touchedAt: created, updatedAt: created, entry: entryBefore });
    expect(await touchedAt('fresh')).toBe(due);
    expect((await session())?.updatedAt).toBe(due);
    expect(await indexed()).not.toBe(entryBefore);
  });

  it('lands 50 concurrent first writes of a session made a moment ago, each once, moving nothing', async () => {
    // Prepare
    clock += 60_000;
    const created = new Date(clock).toISOString();
    await service.createSession(tenant, { sessionId: 'crowd', userId: 'dee' });
    clock += 1_000;

    // Act: 50 writers at once race for the session's first change, half of them appends.
    const results = await Promise.all(
      Array.from({ length: 50 }, (_, index) =>
        index % 2 === 0
          ? service.patchState(scope('crowd'), { [`w${index}`]: index })
          : service.appendMessages(scope('crowd'), { messages: [{ role: 'user', content: `m${index}` }] }),
      ),
    );

    // Assess: every write landed (25 versions, contiguous; 25 messages), and the activity is the creation's.
    const versions = results.flatMap((result) => ('version' in result && typeof result.version === 'number' ? [result.version] : []));
    expect(versions.sort((a, b) => a - b)).toEqual(Array.from({ length: 25 }, (_, index) => index + 1));
    const state = (await service.readState(scope('crowd'), {})).state as Record<string, number>;
    expect(Object.keys(state)).toHaveLength(25);
    expect(await touchedAt('crowd')).toBe(created);
    expect((await stores.sessions.getMeta(scope('crowd')))?.updatedAt).toBe(created);
  }, 60_000);
});

describe('the filtered lists (by user, agent, metadata string)', () => {
  const listed = async (filter: SessionFilter, limit = 500) => {
    const pages: string[][] = [];
    let cursor: string | undefined;
    do {
      const page = await stores.sessions.listSessions(tenant, { limit, filter, ...(cursor ? { cursor } : {}) });
      pages.push(page.items.map((session) => session.sessionId));
      cursor = page.next;
    } while (cursor && pages.length < 200);
    return pages;
  };

  it('hold a session from its creation, follow its activity, and write nothing of its metadata to the index', async () => {
    // Prepare: two sessions of one user, agent and channel, a second apart; a large metadata.
    clock += 60_000;
    const padding = 'x'.repeat(12_000);
    await service.createSession(tenant, { sessionId: 'f-old', userId: 'ann', agentId: 'helper', metadata: { channel: 'web', padding } });
    clock += 1_000;
    await service.createSession(tenant, { sessionId: 'f-new', userId: 'ann', agentId: 'helper', metadata: { channel: 'web', n: 1 } });
    const created = await Promise.all([
      listed({ userId: 'ann' }),
      listed({ agentId: 'helper' }),
      listed({ metadata: { key: 'channel', value: 'web' } }),
    ]);

    // Act: the older one is written an interval later (a version: the change hook moves it, as here).
    clock += ACTIVITY_EVERY_MS + 1_000;
    const at = new Date(clock).toISOString();
    await service.patchState(scope('f-old'), { n: 1 });
    await stores.sessions.moveActivity(scope('f-old'), at);
    const moved = await Promise.all([
      listed({ userId: 'ann' }),
      listed({ agentId: 'helper' }),
      listed({ metadata: { key: 'channel', value: 'web' } }),
    ]);

    // Assess: newest first, then the written one first; only strings match; the index holds ids and keys alone.
    expect(created).toEqual([[['f-new', 'f-old']], [['f-new', 'f-old']], [['f-new', 'f-old']]]);
    expect(moved).toEqual([[['f-old', 'f-new']], [['f-old', 'f-new']], [['f-old', 'f-new']]]);
    expect(await listed({ metadata: { key: 'n', value: '1' } })).toEqual([[]]);
    expect(await listed({ userId: 'bob' })).toEqual([[]]);
    const page = await stores.sessions.listSessions(tenant, { limit: 1, filter: { userId: 'ann' } });
    expect(page.items[0]).toMatchObject({ sessionId: 'f-old', updatedAt: at, metadata: { channel: 'web', padding } });
    const { Items } = await stores.table.send(
      new QueryCommand({
        TableName: stores.table.tableName,
        IndexName: tableKeys.sessionsIndex.name,
        KeyConditionExpression: `${tableKeys.sessionsIndex.partitionKey} = :p`,
        ExpressionAttributeValues: { ':p': keys.tenantSessions(tenant, keys.activityShard('f-old')) },
      }),
    );
    const entry = Items?.find((item) => item.sessionId === 'f-old');
    expect(entry && Object.keys(entry).sort()).toEqual(['lpk', 'lsk', 'pk', 'sessionId', 'sk']);
  });

  it('keep a session in the lists a PATCH moved it to when a move based on a read from before the PATCH lands after it', async () => {
    // Prepare: a session of one user, agent and channel; what a move read of it before the PATCH.
    clock += 60_000;
    const moving = scope('f-moving');
    await service.createSession(tenant, {
      sessionId: moving.sessionId,
      userId: 'cid-moving',
      agentId: 'mover',
      metadata: { channel: 'app-moving' },
    });
    const readBefore = await stores.sessions.getMeta(moving);
    clock += ACTIVITY_EVERY_MS + 1_000;
    await service.updateSession(moving, { userId: 'dee-moving', agentId: null, metadata: { channel: 'tv-moving' } });

    // Act: the move of a write that read the session before the PATCH, a moment after it.
    clock += 1_000;
    await moveEntries(stores.table, moving, readBefore as SessionMeta, new Date(clock).toISOString());

    // Assess: listed under its new user and channel, and under neither old one nor any agent.
    const lists = await Promise.all(
      [{ userId: 'dee-moving' }, { metadata: { key: 'channel', value: 'tv-moving' } }, { userId: 'cid-moving' }, { agentId: 'mover' }].map(
        (filter) => listed(filter as SessionFilter),
      ),
    );
    expect(lists).toEqual([[['f-moving']], [['f-moving']], [[]], [[]]]);
    const { Items } = await stores.table.send(
      new QueryCommand({
        TableName: stores.table.tableName,
        IndexName: tableKeys.sessionsIndex.name,
        KeyConditionExpression: `${tableKeys.sessionsIndex.partitionKey} = :p`,
        ExpressionAttributeValues: { ':p': keys.listSessions(tenant, 'a:mover', keys.activityShard('f-moving')) },
      }),
    );
    expect(Items).toEqual([]);
  });

  it('follow a blind commit that changes only the shared document: its write says the move is due, and the change hook makes it once an interval', async () => {
    // Prepare: two sessions of one user, a second apart; the older one commits to the shared document
    // within an interval of its creation, then an interval after it.
    clock += 60_000;
    await service.createSession(tenant, { sessionId: 'doc-old', userId: 'dora' });
    clock += 1_000;
    await service.createSession(tenant, { sessionId: 'doc-new', userId: 'dora' });
    const commits = new CommitService(stores, { now: () => new Date(clock) });
    const shared = async () =>
      (await stores.table.send(new GetCommand({ TableName: stores.table.tableName, Key: { pk: `A#${tenant}`, sk: 'G' } }))).Item ?? {};
    const hook = new ChangeFanout({
      deliversWebhooks: false,
      readState: async () => null,
      moveActivity: (target, when, lifetime, options) => stores.sessions.moveActivity(target, when, false, lifetime, options),
    });
    const streamed = async () => {
      const recorded = recordedDocumentOf({ eventName: 'MODIFY', dynamodb: { NewImage: marshall(await shared()) as never } });
      await hook.process(recorded ? [{ key: 'record', change: recorded }] : []);
      return recorded;
    };
    const commit = (n: number) =>
      commits.commit(scope('doc-old'), { commands: [{ key: 'n', scope: 'shared', merge: 'disjoint', set: n }] });

    const before = await listed({ userId: 'dora' });

    // Act
    clock += 5_000;
    await commit(1);
    const early = await streamed();
    clock += ACTIVITY_EVERY_MS;
    const at = new Date(clock).toISOString();
    await commit(2);
    const due = await streamed();
    const afterDue = await listed({ userId: 'dora' });
    // A move a moment later, as the hook would make for a session whose tip cannot tell it moved.
    clock += 1_000;
    await stores.sessions.moveActivity(scope('doc-old'), new Date(clock).toISOString(), false, undefined, { onceAnInterval: true });

    // Assess: within the interval nothing is due; after it the move is made, the list follows.
    expect(before).toEqual([['doc-new', 'doc-old']]);
    expect(early).toMatchObject({ document: { kind: 'shared' } });
    expect(early).not.toHaveProperty('activityDue');
    expect(due).toMatchObject({ document: { kind: 'shared', sessionId: 'doc-old', createdAt: at }, activityDue: true });
    expect(afterDue).toEqual([['doc-old', 'doc-new']]);
    expect((await stores.sessions.getMeta(scope('doc-old')))?.updatedAt).toBe(at);
  });

  it('page exactly through many sessions of one user, across every partition, and never into another list', async () => {
    // Prepare: 40 sessions of one user a second apart, and others of another user between them.
    clock += 60_000;
    const ids = Array.from({ length: 40 }, (_, n) => `many-${String(n).padStart(2, '0')}`);
    for (const sessionId of ids) {
      clock += 1_000;
      await service.createSession(tenant, { sessionId, userId: 'many' });
      await service.createSession(tenant, { sessionId: `${sessionId}-else`, userId: 'many-else' });
    }

    // Act
    const pages = await listed({ userId: 'many' }, 6);

    // Assess
    expect(pages.flat()).toEqual([...ids].reverse());
    expect(pages.map((page) => page.length)).toEqual([6, 6, 6, 6, 6, 6, 4]);
    const first = await stores.sessions.listSessions(tenant, { limit: 6, filter: { userId: 'many' } });
    await expect(
      stores.sessions.listSessions(tenant, { limit: 6, filter: { userId: 'many-else' }, cursor: first.next as string }),
    ).rejects.toMatchObject({ code: 'invalid_request' });
    await expect(stores.sessions.listSessions(tenant, { limit: 6, cursor: first.next as string })).rejects.toMatchObject({
      code: 'invalid_request',
    });
  });
});

describe("a session's metadata, in an item of its own beside the session item", () => {
  const listedIds = async (filter?: SessionFilter) =>
    (await stores.sessions.listSessions(tenant, { limit: 500, ...(filter ? { filter } : {}) })).items.map((session) => session.sessionId);
  const itemsOf = async (sessionId: string) =>
    (
      await stores.table.send(
        new QueryCommand({
          TableName: stores.table.tableName,
          KeyConditionExpression: 'pk = :pk AND sk BETWEEN :s AND :sm',
          ExpressionAttributeValues: { ':pk': keys.session(scope(sessionId)), ':s': keys.sessionSort, ':sm': keys.sessionMetadataSort },
        }),
      )
    ).Items ?? [];

  it('costs a turn no more write units in the table with 16 KiB of metadata than with none, its activity moving every turn', async () => {
    // Prepare: two sessions of one user, agent and channel, one with 16 KiB more metadata (in no
    // string of its own: the same lists); their requests priced as AWS bills them (bench/dynamodb-recorder.ts).
    const recorder = await startDynamoDbRecorder(dynamoEndpoint());
    const metered = dynamoDbClient({ AGENTSTATE_DYNAMODB_ENDPOINT: recorder.url });
    try {
      const meteredStores = createStores(metered, stores.table.tableName, { now: () => clock });
      const turns = new SessionService(meteredStores.sessions, { now: () => new Date(clock) });
      const sessions = { small: 'cost-small', large: 'cost-large' };
      clock += 60_000;
      const metadata = { channel: 'cost' };
      await service.createSession(tenant, { sessionId: sessions.small, userId: 'cost', agentId: 'helper', metadata });
      await service.createSession(tenant, {
        sessionId: sessions.large,
        userId: 'cost',
        agentId: 'helper',
        metadata: { ...metadata, notes: { text: 'x'.repeat(16_300) } },
      });
      recorder.take();

      // Act: four turns of each, an interval apart: the first write of each turn moves the
      // activity (the first turn's in the transaction of the session's first change; then the
      // log's writer, after an append; or the change hook, after a version that says it is due).
      const writeUnits = { small: 0, large: 0 };
      for (let turn = 0; turn < 4; turn++) {
        clock += ACTIVITY_EVERY_MS + 1_000;
        for (const size of ['small', 'large'] as const) {
          const target = scope(sessions[size]);
          if (turn % 2 === 0) {
            await turns.appendMessages(target, { messages: [{ role: 'user', content: `question ${turn}` }] });
            await turns.patchState(target, { turn });
          } else {
            await turns.patchState(target, { turn });
            await meteredStores.sessions.moveActivity(target, new Date(clock).toISOString());
            await turns.appendMessages(target, { messages: [{ role: 'user', content: `question ${turn}` }] });
          }
          const charges = recorder.take().flatMap((request) => request.charges);
          writeUnits[size] += charges.filter((charge) => charge.where === 'table').reduce((sum, charge) => sum + charge.writeUnits, 0);
        }
      }

      // Assess: the same units a turn (the moves happened: the lists follow).
      expect((writeUnits.large - writeUnits.small) / 4, JSON.stringify(writeUnits)).toBeLessThanOrEqual(0.1);
      // (Both moved to the same time: the list orders them by id.)
      const last = new Date(clock).toISOString();
      const listed = await stores.sessions.listSessions(tenant, { limit: 500, filter: { metadata: { key: 'channel', value: 'cost' } } });
      expect(listed.items.map((session) => [session.sessionId, session.updatedAt])).toEqual([
        [sessions.small, last],
        [sessions.large, last],
      ]);
      expect(listed.items[1]?.metadata).toMatchObject({ notes: { text: 'x'.repeat(16_300) } });
    } finally {
      metered.destroy();
      await recorder.close();
    }
  });

  it('reads a session item written with its metadata inline as before, and a PATCH of the metadata moves it out', async () => {
    // Prepare: a session as it was written before the metadata had an item of its own.
    clock += 60_000;
    const at = new Date(clock).toISOString();
    const old = scope('inline-old');
    const meta = {
      sessionId: old.sessionId,
      agentId: 'keeper',
      userId: 'ida',
      metadata: { shelf: 'old', n: 1 },
      createdAt: at,
      updatedAt: at,
    };
    await batchPut(stores.table, [
      { ...sessionItem.encode(old, meta), metadata: encodeStoredJson(meta.metadata) },
      ...entryItems(old, meta),
    ]);
    const shelf = (value: string) => ({ metadata: { key: 'shelf', value } });

    // Act: read, listed, moved; then a PATCH of its metadata, and a move after it.
    const read = await stores.sessions.getMeta(old);
    const listedBefore = await listedIds(shelf('old'));
    clock += ACTIVITY_EVERY_MS + 1_000;
    const moved = new Date(clock).toISOString();
    await stores.sessions.moveActivity(old, moved);
    const afterMove = (await stores.sessions.listSessions(tenant, { limit: 1, filter: shelf('old') })).items[0];
    clock += 1_000;
    const patched = await service.updateSession(old, { metadata: { shelf: 'new', extra: true } });
    const itemsAfterPatch = await itemsOf(old.sessionId);
    clock += ACTIVITY_EVERY_MS + 1_000;
    const movedAgain = new Date(clock).toISOString();
    await stores.sessions.moveActivity(old, movedAgain);

    // Assess: the same session before the PATCH; after it, its metadata in its own item, merged,
    // and the lists follow it (under its new string, no longer its old one).
    expect(read).toMatchObject({ metadata: { shelf: 'old', n: 1 }, userId: 'ida', agentId: 'keeper' });
    expect(listedBefore).toEqual([old.sessionId]);
    expect(afterMove).toMatchObject({ sessionId: old.sessionId, updatedAt: moved, metadata: { shelf: 'old', n: 1 } });
    expect(patched.metadata).toEqual({ shelf: 'new', n: 1, extra: true });
    const [session, metadataItem] = [itemsAfterPatch.find((item) => item.sk === 'S'), itemsAfterPatch.find((item) => item.sk === 'SM')];
    expect(session).not.toHaveProperty('metadata');
    expect(typeof session?.mv).toBe('string');
    expect(metadataItem?.mv).toBe(session?.mv);
    expect((await stores.sessions.getMeta(old))?.metadata).toEqual({ shelf: 'new', n: 1, extra: true });
    expect(await listedIds(shelf('old'))).toEqual([]);
    expect((await stores.sessions.listSessions(tenant, { limit: 1, filter: shelf('new') })).items).toMatchObject([
      { sessionId: old.sessionId, updatedAt: movedAgain, metadata: { shelf: 'new', n: 1, extra: true } },
    ]);
  });

  it('is written with the session and by a PATCH that changes it; a PATCH to null erases it, and neither item carries the other', async () => {
    // Prepare
    clock += 60_000;
    const made = scope('meta-own');
    await service.createSession(tenant, { sessionId: made.sessionId, metadata: { topic: 'own', deep: { a: 1 } } });
    const created = await itemsOf(made.sessionId);

    // Act
    clock += 1_000;
    await service.updateSession(made, { userId: 'ola' });
    const userOnly = await itemsOf(made.sessionId);
    clock += 1_000;
    await service.updateSession(made, { metadata: null });
    const cleared = await itemsOf(made.sessionId);

    // Assess
    expect(created.map((item) => item.sk)).toEqual(['S', 'SM']);
    expect(created[0]).not.toHaveProperty('metadata');
    expect(userOnly).toEqual([expect.objectContaining({ userId: 'ola', mv: created[0]?.mv }), created[1]]);
    expect(cleared.map((item) => item.sk)).toEqual(['S']);
    expect(cleared[0]).not.toHaveProperty('mv');
    expect(await stores.sessions.getMeta(made)).toMatchObject({ userId: 'ola', metadata: null });
    expect(await listedIds({ metadata: { key: 'topic', value: 'own' } })).toEqual([]);
  });
});
