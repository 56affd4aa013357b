import { DeleteItemCommand, PutItemCommand, QueryCommand } from '@aws-sdk/client-dynamodb';
import { marshall, unmarshall } from '@aws-sdk/util-dynamodb';
import { beforeAll, describe, expect, it } from 'vitest';
import { CommitService } from '../../functions/core/commits/commit-service.js';
import type { SessionScope, Tip } from '../../functions/core/model/model.js';
import { StaleTipError, type TipChange } from '../../functions/core/model/ports.js';
import { SessionService } from '../../functions/core/sessions/session-service.js';
import { createStores } from '../../functions/store/index.js';
import { nextPosition } from '../../functions/store/log/log-items.js';
import { fenceItem, SessionDeleter } from '../../functions/store/sessions/session-delete.js';
import type { DynamoDbSessionStore } from '../../functions/store/sessions/session-store.js';
import { dynamoDbClient } from '../../functions/store/table/client.js';
import { FENCE_HANDED_OFF, FENCE_HANDED_OFF_ATTRIBUTE, FENCE_HOLDER, LOG_ITEM_KIND } from '../../functions/store/table/item-kinds.js';
import * as keys from '../../functions/store/table/keys.js';
import { createTestTable, dynamoEndpoint } from '../helpers/dynamodb.js';

/**
 * Deleting a session while it is written (API.md section 2: afterwards it reads as unknown).
 * A write reads the tip, then puts the next version under a condition; a delete closes the
 * session with a tombstone in that place first, so a put during the delete fails, and the
 * write waits and starts a new session. Real DynamoDB Local; the races are made exact by
 * holding one side.
 */

const client = dynamoDbClient({ AGENTSTATE_DYNAMODB_ENDPOINT: dynamoEndpoint() });
let tableName: string;
let store: DynamoDbSessionStore;

beforeAll(async () => {
  tableName = await createTestTable('delete-race');
  store = createStores(client, tableName).sessions;
});

/**
 * Every sort key of the session's items that holds anything, straight from the table: a
 * delete leaves only tombstones (and its fence) in the log, with no content, removed by TTL.
 */
async function sortKeys(scope: SessionScope): Promise<string[]> {
  const { Items } = await client.send(
    new QueryCommand({
      TableName: tableName,
      KeyConditionExpression: 'pk = :pk',
      ExpressionAttributeValues: { ':pk': { S: keys.session(scope) } },
      ConsistentRead: true,
    }),
  );
  return (Items ?? []).filter((item) => item.kind?.S !== LOG_ITEM_KIND.tombstone).map((item) => item.sk?.S ?? '');
}

/** The key of version 1 of a session's next life: the first change after a delete. */
const firstVersionAfterDelete = keys.logEntry({ incarnation: 1, base: 0, seq: 1 });

/**
 * A store whose deletes put their tombstone and then hold the erasing (BatchWriteItem, on its
 * own client) until `release()`: the moment a delete is in progress, made exact.
 */
function heldDeletes(): { store: DynamoDbSessionStore; tombstoned: Promise<void>; release: () => void } {
  let release!: () => void;
  const erasing = new Promise<void>((resolve) => {
    release = resolve;
  });
  let closed!: () => void;
  const tombstoned = new Promise<void>((resolve) => {
    closed = resolve;
  });
  const slowClient = dynamoDbClient({ AGENTSTATE_DYNAMODB_ENDPOINT: dynamoEndpoint() });
  slowClient.middlewareStack.add(
    (next, context) => async (args) => {
      if (context.commandName === 'BatchWriteItemCommand') {
        closed();
        await erasing;
      }
      return next(args);
    },
    { step: 'initialize', name: 'holdTheErase' },
  );
  return { store: createStores(slowClient, tableName).sessions, tombstoned, release };
}

/** Whether `promise` settles (either way) within `ms`; it goes on either way. */
async function settlesWithin(promise: Promise<unknown>, ms: number): Promise<boolean> {
  let settled = false;
  promise.then(
    () => (settled = true),
    () => (settled = true),
  );
  await new Promise((resolve) => setTimeout(resolve, ms));
  return settled;
}

describe('deleting a session that is being written', () => {
  it('refuses a write that read the tip before the delete and puts during it; its retry starts a new session', async () => {
    // Prepare: a store whose first commit runs while a delete of the session is erasing it.
    const scope = { tenant: 't', sessionId: 'read-then-deleted' };
    const service = new SessionService(store);
    await service.patchState(scope, { old: 1 });
    await service.patchState(scope, { old: 2 });
    const held = heldDeletes();
    let deletion: Promise<boolean> | undefined;
    const pausing = Object.create(store) as DynamoDbSessionStore;
    pausing.commit = async (target: SessionScope, change: TipChange) => {
      if (!deletion) {
        deletion = held.store.deleteSession(target);
        await held.tombstoned;
        setTimeout(held.release, 200);
      }
      return store.commit(target, change);
    };
    const writer = new SessionService(pausing);

    // Act
    const result = await writer.patchState(scope, { fresh: true });
    await deletion;

    // Assess: the write read version 2 and lost its place to the tombstone; it waited for the
    // delete and wrote version 1 of a new session from nothing, not version 3 on the old state.
    expect(result).toMatchObject({ version: 1, prevVersion: 0, state: { fresh: true } });
    expect(await service.readState(scope, {})).toMatchObject({ version: 1, state: { fresh: true } });
    expect((await sortKeys(scope)).filter((sk) => sk.startsWith(keys.logPrefix))).toEqual([firstVersionAfterDelete]);
  });

  it('reads the session as unknown while it is deleted, and lets writes in only afterwards', async () => {
    // Prepare: a delete that stops before erasing, with its tombstone in place.
    const scope = { tenant: 't', sessionId: 'deleting' };
    const service = new SessionService(store, { retry: { maxElapsedMs: 5_000 } });
    await service.appendMessages(scope, { messages: [{ id: 'm1', role: 'user' }] });
    await service.patchState(scope, { old: true });
    const held = heldDeletes();
    const deletion = held.store.deleteSession(scope);
    await held.tombstoned;

    // Act: a read, and a write that must wait for the delete.
    const during = await service.readState(scope, {});
    const tip: Tip = await store.readTip(scope, { withState: false });
    const sessionRead = await service.getSession(scope).catch((error: unknown) => error);
    const write = service.patchState(scope, { after: true });
    const settledBeforeErase = await settlesWithin(write, 300);
    held.release();
    await deletion;
    const written = await write;

    // Assess
    expect(during).toMatchObject({ version: 0, state: null });
    expect(tip.kind).toBe('closing');
    expect(sessionRead).toMatchObject({ code: 'session_not_found' });
    expect(settledBeforeErase).toBe(false);
    expect(written).toMatchObject({ version: 1, prevVersion: 0, state: { after: true } });
    expect((await sortKeys(scope)).sort()).toEqual([keys.sessionSort, firstVersionAfterDelete].sort());
  });
});

/** A store whose erase fails at its first batch of tombstones, as a DynamoDB that throttles past the SDK's retries would. */
function failingErase(): DynamoDbSessionStore {
  const failing = dynamoDbClient({ AGENTSTATE_DYNAMODB_ENDPOINT: dynamoEndpoint() });
  failing.middlewareStack.add(
    (next, context) => async (args) => {
      if (context.commandName === 'BatchWriteItemCommand') {
        throw Object.assign(new Error('throttled past the retries'), { name: 'ProvisionedThroughputExceededException' });
      }
      return next(args);
    },
    { step: 'initialize', name: 'failTheErase' },
  );
  return createStores(failing, tableName).sessions;
}

/** The fence a delete put: the one log item a delete's erase leaves that is not a plain tombstone. */
async function fenceOfDelete(scope: SessionScope): Promise<Record<string, unknown> | undefined> {
  const { Items = [] } = await client.send(
    new QueryCommand({
      TableName: tableName,
      KeyConditionExpression: 'pk = :pk',
      ExpressionAttributeValues: { ':pk': { S: keys.session(scope) } },
      ConsistentRead: true,
    }),
  );
  const fence = Items.find((item) => item.fence !== undefined);
  return fence && unmarshall(fence);
}

describe('a delete whose erase fails halfway (docs/architecture.md, "Deleting a session")', () => {
  it('hands the rest to the change hook, whose run erases it', async () => {
    // Prepare: a session with messages and versions; a delete that closes it and then fails.
    const scope = { tenant: 't', sessionId: 'erase-failed' };
    const service = new SessionService(store);
    await service.appendMessages(scope, { messages: [{ id: 'm1', role: 'user' }] });
    await service.patchState(scope, { old: true });
    await expect(failingErase().deleteSession(scope)).rejects.toMatchObject({ code: 'throttled' });

    // Act: the change hook's run for the fence's change.
    const fence = await fenceOfDelete(scope);
    const finished = await store.finishDelete(scope);

    // Assess: the fence said "the hook's", held by nobody (the stream's filter passes exactly
    // that change: stream-images.ts), and the hook's run erased everything.
    expect(fence).toMatchObject({ fence: 'closing', [FENCE_HANDED_OFF_ATTRIBUTE]: FENCE_HANDED_OFF });
    expect(fence?.[FENCE_HOLDER]).toBeUndefined();
    expect(finished).toBe(true);
    expect(await sortKeys(scope)).toEqual([]);
    expect(await service.readState(scope, {})).toMatchObject({ version: 0, state: null });
  });

  it('is erased by the DELETE sent again at once, which does not find it held by the one that failed', async () => {
    // Prepare
    const scope = { tenant: 't', sessionId: 'erase-failed-retried' };
    const service = new SessionService(store);
    await service.appendMessages(scope, { messages: [{ id: 'm1', role: 'user' }] });
    await service.patchState(scope, { old: true });
    await expect(failingErase().deleteSession(scope)).rejects.toMatchObject({ code: 'throttled' });

    // Act: the client's retry of the DELETE that answered an error.
    await store.deleteSession(scope);

    // Assess: nothing of the session is left; the next write is version 1 of the next life.
    expect(await sortKeys(scope)).toEqual([]);
    expect(await service.patchState(scope, { after: true })).toMatchObject({ version: 1, prevVersion: 0 });
  });
});

/** What a delete that died two minutes ago, before erasing anything, leaves: its fence above the tip. */
async function leaveAbandonedTombstone(scope: SessionScope): Promise<void> {
  const next = nextPosition(await store.readTip(scope, { withState: false }));
  await client.send(
    new PutItemCommand({
      TableName: tableName,
      Item: marshall(fenceItem(scope, next, new Date(Date.now() - 120_000).toISOString(), 'closing')),
    }),
  );
}

describe('a delete that stopped halfway', () => {
  it('is finished by the next write once it is clearly abandoned, which then starts a new session', async () => {
    // Prepare: a session closed by a delete that died before erasing (two minutes ago).
    const scope = { tenant: 't', sessionId: 'abandoned' };
    const service = new SessionService(store);
    await service.appendMessages(scope, { messages: [{ id: 'm1', role: 'user' }] });
    await service.patchState(scope, { old: true });
    await leaveAbandonedTombstone(scope);

    // Act
    const during = await service.readState(scope, {});
    const written = await service.patchState(scope, { after: true });

    // Assess
    expect(during).toMatchObject({ version: 0, state: null });
    expect(written).toMatchObject({ version: 1, prevVersion: 0, state: { after: true } });
    expect((await sortKeys(scope)).sort()).toEqual([keys.sessionSort, firstVersionAfterDelete].sort());
  });

  it('is finished by a create of the same id, whose session then reads as created', async () => {
    // Prepare: the delete died after erasing the session item, before the versions and its tombstone.
    const scope = { tenant: 't', sessionId: 'abandoned-then-created' };
    const service = new SessionService(store);
    await service.patchState(scope, { old: true });
    await service.patchState(scope, { older: false });
    await leaveAbandonedTombstone(scope);
    await client.send(
      new DeleteItemCommand({ TableName: tableName, Key: { pk: { S: keys.session(scope) }, sk: { S: keys.sessionSort } } }),
    );

    // Act
    const created = await service.createSession('t', { sessionId: scope.sessionId, agentId: 'fresh' });
    const read = await service.getSession(scope);
    const written = await service.patchState(scope, { after: true });

    // Assess
    expect(created).toMatchObject({ sessionId: scope.sessionId, agentId: 'fresh', version: 0 });
    expect(read).toMatchObject({ agentId: 'fresh', version: 0 });
    expect(written).toMatchObject({ version: 1, prevVersion: 0, state: { after: true } });
    // The session, its entry in its agent's list (list-entries.ts) and its first version: nothing of the old life.
    expect((await sortKeys(scope)).sort()).toEqual([keys.agentEntry, keys.sessionSort, firstVersionAfterDelete].sort());
  });
});

describe('the retention sweep’s erase of a delete that stopped halfway (docs/architecture.md, "An eraser that dies")', () => {
  it('leaves the next life alone when a write finished that delete and began it between the sweep’s reads of the tip', async () => {
    // Prepare: a delete that died; a deleter (the sweep's) whose first tip read is the closing
    // one, and before whose next read a write finishes the delete and lands in the next life.
    const scope = { tenant: 't', sessionId: 'swept-after-rewrite' };
    const service = new SessionService(store);
    await service.patchState(scope, { old: true });
    await leaveAbandonedTombstone(scope);
    let reads = 0;
    const sweeper = new SessionDeleter(createStores(client, tableName).table, async (read) => {
      const tip = await store.readTip(read, { withState: false });
      if (++reads === 1) await service.patchState(scope, { after: true });
      return tip;
    });

    // Act: the sweep's run for the fence of life 0.
    const closed = await sweeper.finishClosed(scope, 0);

    // Assess: done (that delete is), and the write of the next life is still there.
    expect(reads).toBe(2);
    expect(closed).toBe(true);
    expect(await service.readState(scope, {})).toMatchObject({ version: 1, state: { after: true } });
  });
});

describe('a commit over a delete that stopped halfway', () => {
  // Was a bug (fixed in functions/core/commits/commit-service.ts): other writes finished an abandoned
  // delete, but a commit spun on its fence (about 245 consistent reads in 14 s), then
  // answered 409. Expected: the commit finishes the delete and lands in a new session.
  it.each([
    ['a thread commit', [{ key: 'after', scope: 'thread', merge: 'disjoint', set: true }], { version: 1, changed: true }],
    ['a documents-only commit', [{ key: 'step', scope: 'run', merge: 'disjoint', set: 1 }], { version: 0, changed: false }],
  ] as const)('%s finishes it and lands', async (_name, commands, expected) => {
    // Prepare
    const scope = { tenant: 't', sessionId: `abandoned-commit-${commands[0].scope}` };
    const stores = createStores(client, tableName);
    await new SessionService(stores.sessions).patchState(scope, { old: true });
    const fence = keys.logEntry(nextPosition(await store.readTip(scope, { withState: false })));
    await leaveAbandonedTombstone(scope);
    const started = Date.now();

    // Act
    const committed = await new CommitService(stores).commit(scope, { runId: 'r1', commands: commands as never });

    // Assess
    expect(committed).toMatchObject(expected);
    expect(Date.now() - started).toBeLessThan(5_000);
    // The delete is finished: its fence and the old state are gone.
    expect(await sortKeys(scope)).not.toContain(fence);
    expect(await new SessionService(stores.sessions).readState(scope, {})).not.toMatchObject({ state: { old: true } });
  });
});

describe('the store’s clock', () => {
  it('decides when a tombstone counts as abandoned: a write waits for a fresh one and finishes an old one', async () => {
    // Prepare: a session closed by a delete that put its tombstone just now and then stopped.
    const scope = { tenant: 't', sessionId: 'clocked' };
    const service = new SessionService(store);
    await service.patchState(scope, { old: true });
    const next = nextPosition(await store.readTip(scope, { withState: false }));
    const closedAt = Date.now();
    await client.send(
      new PutItemCommand({ TableName: tableName, Item: marshall(fenceItem(scope, next, new Date(closedAt).toISOString(), 'closing')) }),
    );
    const twoMinutesLater = createStores(client, tableName, { now: () => closedAt + 120_000 }).sessions;
    const meta = { sessionId: scope.sessionId, agentId: null, userId: null, metadata: null, createdAt: 'c', updatedAt: 'c' };

    // Act
    const now = await store.createSession(scope, meta).catch((error: unknown) => error);
    await twoMinutesLater.createSession(scope, meta);

    // Assess: on the real clock the delete is still in progress; two minutes on, it is finished first.
    expect(now).toBeInstanceOf(StaleTipError);
    expect(await store.getMeta(scope)).toEqual(meta);
    expect(await sortKeys(scope)).toEqual([keys.sessionSort]);
  });
});

describe('creating a session while a delete of its id is erasing it', () => {
  it('waits for the delete, then creates it afresh', async () => {
    // Prepare
    const scope = { tenant: 't', sessionId: 'recreated' };
    const service = new SessionService(store);
    await service.createSession('t', { sessionId: scope.sessionId, agentId: 'before' });
    await service.patchState(scope, { old: true });
    const held = heldDeletes();
    const deleting = new SessionService(held.store).deleteSession(scope);
    await held.tombstoned;

    // Act
    const creating = service.createSession('t', { sessionId: scope.sessionId, agentId: 'after' });
    const settledDuringDelete = await settlesWithin(creating, 300);
    held.release();
    await deleting;
    const created = await creating;

    // Assess
    expect(settledDuringDelete).toBe(false);
    expect(created).toMatchObject({ agentId: 'after', version: 0 });
    expect(await service.getSession(scope)).toMatchObject({ agentId: 'after', version: 0 });
    // The session and its entry in its agent's list (list-entries.ts): the old life's were erased.
    expect((await sortKeys(scope)).sort()).toEqual([keys.agentEntry, keys.sessionSort].sort());
  });
});

/**
 * A store whose first commit reads its tip and then waits for `release()` before writing: a
 * write in flight across a whole delete, made exact (issue 17, item 1).
 */
function heldWrite(): { store: DynamoDbSessionStore; holding: Promise<void>; release: () => void } {
  let release!: () => void;
  const gate = new Promise<void>((resolve) => {
    release = resolve;
  });
  let held!: () => void;
  const holding = new Promise<void>((resolve) => {
    held = resolve;
  });
  let first = true;
  const holdingStore = Object.create(store) as DynamoDbSessionStore;
  holdingStore.commit = async (target: SessionScope, change: TipChange) => {
    if (first) {
      first = false;
      held();
      await gate;
    }
    return store.commit(target, change);
  };
  return { store: holdingStore, holding, release };
}

describe('a write in flight across a whole delete (API.md section 2)', () => {
  it('never lands in the deleted session: what was written before the 204 stays erased', async () => {
    // Prepare: a session with state, and a write that read its tip and is held before its put.
    const scope = { tenant: 't', sessionId: 'straggler' };
    const service = new SessionService(store);
    await service.replaceState(scope, { erased: 'must not come back' });
    const held = heldWrite();
    const straggler = new SessionService(held.store).patchState(scope, { late: true });
    await held.holding;

    // Act: the delete runs to its end (204), then the held write puts.
    await new SessionService(store).deleteSession(scope);
    const afterDelete = await service.readState(scope, {});
    held.release();
    const written = await straggler;

    // Assess: before the fix the put landed as version 2 on the erased state. Now its place is
    // taken (a tombstone), so it lost its race, retried, and started the session's next life.
    expect(afterDelete).toMatchObject({ version: 0, state: null });
    expect(written).toMatchObject({ version: 1, prevVersion: 0, state: { late: true } });
    expect(await service.readState(scope, {})).toMatchObject({ version: 1, state: { late: true } });
    expect((await service.listVersions(scope, { limit: 10 })).items.map((version) => version.state)).toEqual([{ late: true }]);
    expect(await service.readState(scope, { version: 2 }).catch((error: unknown) => error)).toMatchObject({ code: 'version_not_found' });
  });

  it('keeps an append in flight out of the next life, whose nodes of the same ids are its own', async () => {
    // Prepare: a conversation, an append that read its tip and is held, the delete, and the
    // session made again with a message of the same id.
    const scope = { tenant: 't', sessionId: 'straggler-append' };
    const service = new SessionService(store);
    await service.appendMessages(scope, { messages: [{ id: 'u1', role: 'user', content: 'old' }] });
    await service.patchState(scope, { old: true });
    const held = heldWrite();
    const straggler = new SessionService(held.store).appendMessages(scope, { messages: [{ id: 'u2', role: 'user', content: 'late' }] });
    await held.holding;
    await service.deleteSession(scope);
    await service.appendMessages(scope, { messages: [{ id: 'u1', role: 'user', content: 'new' }] });

    // Act
    held.release();
    await straggler;

    // Assess: the old life is gone for every reader; the late append went on in the new life.
    const path = await service.getPath(scope);
    expect(path.messages.map((message) => message.content)).toEqual(['new', 'late']);
    expect(await service.getNode(scope, 'u1')).toMatchObject({ parentId: 'root', depth: 1, stateVersion: 0 });
    expect(await service.readState(scope, {})).toMatchObject({ version: 0, state: null });
    expect((await service.getTree(scope)).nodes.map((node) => node.id)).toEqual(['root', 'u1', 'u2']);
  });
});
