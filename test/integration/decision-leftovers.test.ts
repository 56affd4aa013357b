import type { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { DeleteCommand, PutCommand, QueryCommand } from '@aws-sdk/lib-dynamodb';
import { beforeAll, describe, expect, it } from 'vitest';
import { AgentStateError } from '../../functions/core/kernel/errors.js';
import { resolveLifetime, storedLifetime } from '../../functions/core/model/lifetime.js';
import type { SessionScope } from '../../functions/core/model/model.js';
import type { TipChange } from '../../functions/core/model/ports.js';
import { SessionService } from '../../functions/core/sessions/session-service.js';
import { dependenciesFor } from '../../functions/http/dependencies.js';
import { createStores, type Stores } from '../../functions/store/index.js';
import { logItem } from '../../functions/store/log/log-items.js';
import { PROVISIONAL_SLACK_SECONDS } from '../../functions/store/log/session-writes.js';
import type { DynamoDbSessionStore } from '../../functions/store/sessions/session-store.js';
import { dynamoDbClient } from '../../functions/store/table/client.js';
import { LOG_ITEM_KIND } from '../../functions/store/table/item-kinds.js';
import * as keys from '../../functions/store/table/keys.js';
import { tableKeys } from '../../functions/store/table/table.js';
import type { Item } from '../../functions/store/table/table-client.js';
import { createTestTable, dynamoEndpoint } from '../helpers/dynamodb.js';

/**
 * A decision on a session id never written takes its lease as a change of the log before it
 * calls its worker, and ends it with a change of its own when it fails. No session stands
 * behind those changes (a DELETE of the id answers 404), so they are provisional
 * (store/log/session-writes.ts, `provisionalOf`): each carries the table's TTL, an hour past
 * its lease, and the life's first write leaves them below it. What must hold besides: the
 * first decision of a session costs what it did, and a write that read such a change as the
 * tip, which TTL then removed, loses no other write.
 */

const tenant = 'acme';
const HOUR_MS = 60 * 60 * 1000;
let tableName: string;
let client: DynamoDBClient;
let stores: Stores;
/** How many items each TransactWriteItems sent through `client` held, in order. */
let transactions: number[] = [];
/** Whether the worker fails. */
let fails = true;

beforeAll(async () => {
  tableName = await createTestTable('decision-leftovers');
  client = dynamoDbClient({ AGENTSTATE_DYNAMODB_ENDPOINT: dynamoEndpoint() });
  client.middlewareStack.add(
    (next, context) => async (args) => {
      if (context.commandName === 'TransactWriteItemsCommand') {
        transactions.push((args.input as { TransactItems: unknown[] }).TransactItems.length);
      }
      return next(args);
    },
    { step: 'initialize', name: 'countTransactItems' },
  );
  stores = createStores(client, tableName);
  await decider(stores).agents.putAgent(tenant, 'agent', { worker: { url: 'module:examples/worker.ts' }, config: {} });
});

/** The services over `over`, with a worker that fails while `fails`, and else answers a state. */
function decider(over: Stores) {
  return dependenciesFor(over, {
    invokeWorker: async () => {
      if (fails) throw new AgentStateError('worker_failed', 'the worker answered 500');
      return { state: { decided: true } };
    },
  });
}

/** The stores on a clock `aheadMs` ahead (a write made that much later). */
const later = (aheadMs: number) => createStores(client, tableName, { now: () => Date.now() + aheadMs });

const scopeOf = (sessionId: string): SessionScope => ({ tenant, sessionId });

/** Every item of the session's partition, oldest change first. */
async function partition(sessionId: string): Promise<Item[]> {
  const { Items } = await stores.table.send(
    new QueryCommand({
      TableName: tableName,
      KeyConditionExpression: 'pk = :pk',
      ExpressionAttributeValues: { ':pk': keys.session(scopeOf(sessionId)) },
      ConsistentRead: true,
    }),
  );
  return Items ?? [];
}

const changes = (items: Item[]) => items.filter((item) => String(item.sk).startsWith(keys.logPrefix));

async function failedDecision(sessionId: string): Promise<void> {
  fails = true;
  await expect(decider(stores).decide.decide(scopeOf(sessionId), { agentId: 'agent', trigger: { type: 'tick' } })).rejects.toMatchObject({
    code: 'worker_failed',
  });
}

describe('a decision on a session id never written', () => {
  it('that fails leaves its lease and the lease’s end with a TTL an hour past the lease: the id reads as never written, and has nothing to delete', async () => {
    // Act: a decision that fails, and its retry.
    const at = Math.floor(Date.now() / 1000);
    await failedDecision('failed-twice');
    await failedDecision('failed-twice');

    // Assess: four changes, each to go within the lease (its worker's budget and margin) and an hour.
    const items = await partition('failed-twice');
    expect(items.map((item) => item.kind)).toEqual([
      LOG_ITEM_KIND.lease,
      LOG_ITEM_KIND.release,
      LOG_ITEM_KIND.lease,
      LOG_ITEM_KIND.release,
    ]);
    for (const item of items) {
      expect(item[tableKeys.timeToLive]).toBeGreaterThanOrEqual(at + PROVISIONAL_SLACK_SECONDS);
      expect(item[tableKeys.timeToLive]).toBeLessThanOrEqual(at + PROVISIONAL_SLACK_SECONDS + 120);
    }
    expect((await stores.sessions.readTip(scopeOf('failed-twice'), { withState: false })).kind).toBe('empty');
    expect(await stores.sessions.getMeta(scopeOf('failed-twice'))).toBeNull();
    expect(await stores.sessions.deleteSession(scopeOf('failed-twice'))).toBe(false);
  });

  it('that succeeds costs what it did: the lease and the commit, each a transaction of two items; the lease is left below the life with its TTL', async () => {
    // Act
    fails = false;
    transactions = [];
    const decided = await decider(stores).decide.decide(scopeOf('decided'), { agentId: 'agent', trigger: { type: 'tick' } });

    // Assess: the lease checks the session item, the commit creates it; neither checks the lease.
    expect(decided).toMatchObject({ version: 1, state: { decided: true } });
    expect(transactions).toEqual([2, 2]);
    const log = changes(await partition('decided'));
    expect(log.map((item) => [item.kind, typeof item[tableKeys.timeToLive]])).toEqual([
      [LOG_ITEM_KIND.lease, 'number'],
      [LOG_ITEM_KIND.version, 'undefined'],
    ]);
    // And once the lease has gone, the session reads the same.
    const before = await new SessionService(stores.sessions).readState(scopeOf('decided'), {});
    await stores.table.send(new DeleteCommand({ TableName: tableName, Key: { pk: log[0]?.pk, sk: log[0]?.sk } }));
    expect(await new SessionService(stores.sessions).readState(scopeOf('decided'), {})).toEqual(before);
  });

  it('that failed is followed by the life’s first write in its next place, with no check while their TTL is far and one when it is near', async () => {
    // Prepare
    await failedDecision('written-after');
    await failedDecision('written-near');

    // Act: a write at once, and one 55 minutes later (its tip's TTL 5 minutes away).
    transactions = [];
    await new SessionService(stores.sessions).patchState(scopeOf('written-after'), { n: 1 });
    const far = transactions;
    transactions = [];
    const near = later(HOUR_MS - 5 * 60 * 1000);
    await new SessionService(near.sessions).patchState(scopeOf('written-near'), { n: 1 });

    // Assess: the session item's upsert and the version; the check is one item more.
    expect(far).toEqual([2]);
    expect(transactions).toEqual([3]);
    for (const sessionId of ['written-after', 'written-near']) {
      expect(changes(await partition(sessionId)).map((item) => [item.kind, typeof item[tableKeys.timeToLive]])).toEqual([
        [LOG_ITEM_KIND.lease, 'number'],
        [LOG_ITEM_KIND.release, 'number'],
        [LOG_ITEM_KIND.version, 'undefined'],
      ]);
      expect(await new SessionService(stores.sessions).readState(scopeOf(sessionId), {})).toMatchObject({ version: 1, state: { n: 1 } });
      // The session's delete erases them with the rest.
      expect(await stores.sessions.deleteSession(scopeOf(sessionId))).toBe(true);
    }
  });

  it('loses no write when TTL removes the change a write had read and another write claims its place', async () => {
    // Prepare: a failed decision; 58 minutes later, a write reads the lease's end as the tip;
    // TTL removes it, and another write, which now reads the lease, takes the place after that.
    await failedDecision('raced');
    const near = later(HOUR_MS - 2 * 60 * 1000);
    const [, release] = changes(await partition('raced'));
    let raced = false;
    const pausing = Object.create(near.sessions) as DynamoDbSessionStore;
    pausing.commit = async (target: SessionScope, change: TipChange) => {
      if (!raced) {
        raced = true;
        await stores.table.send(new DeleteCommand({ TableName: tableName, Key: { pk: release?.pk, sk: release?.sk } }));
        await new SessionService(near.sessions).patchState(scopeOf('raced'), { other: 1 });
      }
      return near.sessions.commit(target, change);
    };

    // Act
    const written = await new SessionService(pausing).patchState(scopeOf('raced'), { mine: 1 });

    // Assess: the write read again and came second; both are in the state.
    expect(written).toMatchObject({ version: 2 });
    expect(await new SessionService(stores.sessions).readState(scopeOf('raced'), {})).toMatchObject({
      version: 2,
      state: { other: 1, mine: 1 },
    });
  });

  it('takes 50 decisions that fail and 10 first writes at once: every write lands, and a delete leaves nothing but its fence without a TTL', async () => {
    // Prepare
    fails = true;
    const scope = scopeOf('crowd');
    const service = new SessionService(stores.sessions);

    // Act
    const decisions = Array.from({ length: 50 }, () =>
      decider(stores).decide.decide(scope, { agentId: 'agent', trigger: { type: 'tick' } }),
    );
    const writes = Array.from({ length: 10 }, (_, index) => service.patchState(scope, { [`k${index}`]: index }));
    const [decided, written] = await Promise.all([Promise.allSettled(decisions), Promise.allSettled(writes)]);

    // Assess: the decisions failed (their worker, or another's lease), the writes all landed;
    // what came before the first version carries a TTL; the delete erases the rest.
    expect(decided.every((result) => result.status === 'rejected')).toBe(true);
    expect(written.map((result) => result.status)).toEqual(Array(10).fill('fulfilled'));
    const state = await service.readState(scope, {});
    expect(state).toMatchObject({ version: 10, state: Object.fromEntries(Array.from({ length: 10 }, (_, index) => [`k${index}`, index])) });
    const log = changes(await partition('crowd'));
    const firstVersion = log.findIndex((item) => item.kind === LOG_ITEM_KIND.version);
    for (const item of log.slice(0, firstVersion)) expect(item[tableKeys.timeToLive], String(item.sk)).toEqual(expect.any(Number));
    expect(await stores.sessions.deleteSession(scope)).toBe(true);
    const lasting = (await partition('crowd')).filter((item) => item[tableKeys.timeToLive] === undefined);
    expect(lasting.map((item) => item.fence)).toEqual(['closed']);
  }, 60_000);

  it('under a deployment idle lifetime, leaves changes with no lifetime: the life’s first write starts it, and until then nothing expires', async () => {
    // Prepare: stores whose deployment gives sessions a minute's idle lifetime, and the same two minutes later.
    const idle = { sessionDefaults: resolveLifetime({ ttlSeconds: 60 }) };
    const now = createStores(client, tableName, idle);
    const afterIdle = createStores(client, tableName, { ...idle, now: () => Date.now() + 2 * 60 * 1000 });
    fails = true;

    // Act: decisions that fail on two ids; the first write of one of them.
    for (const sessionId of ['idle-never', 'idle-never', 'idle-written']) {
      await expect(decider(now).decide.decide(scopeOf(sessionId), { agentId: 'agent', trigger: { type: 'tick' } })).rejects.toMatchObject({
        code: 'worker_failed',
      });
    }
    const neverTip = await now.sessions.readTip(scopeOf('idle-never'), { withState: false });
    await new SessionService(now.sessions).patchState(scopeOf('idle-written'), { n: 1 });

    // Assess: the failed decisions carry no lifetime, so once the idle time has passed the id
    // still reads as never written and has nothing to delete; the written session has the
    // deployment's lifetime from its first write, and has expired by then.
    expect(neverTip).toMatchObject({ kind: 'empty', version: 0 });
    expect(neverTip.lifetime).toBeUndefined();
    expect((await now.sessions.readTip(scopeOf('idle-written'), { withState: false })).lifetime).toMatchObject({ ttlSeconds: 60 });
    expect((await afterIdle.sessions.readTip(scopeOf('idle-never'), { withState: false })).kind).toBe('empty');
    expect(await afterIdle.sessions.deleteSession(scopeOf('idle-never'))).toBe(false);
    expect((await partition('idle-never')).filter((item) => item[tableKeys.timeToLive] === undefined)).toEqual([]);
    expect((await afterIdle.sessions.readTip(scopeOf('idle-written'), { withState: false })).kind).toBe('closing');
  });

  it('reads a provisional change written with a lifetime (before they had none) as having none', async () => {
    // Prepare: a lease as a build before this rule put it on an id never written: with the
    // deployment's idle lifetime of a minute, and the table's TTL.
    const scope = scopeOf('old-lease');
    const lease = logItem(
      scope,
      { incarnation: 0, base: 0, seq: 1 },
      {
        kind: LOG_ITEM_KIND.lease,
        createdAt: new Date().toISOString(),
        carried: {
          v: 0,
          h: 'root',
          hv: 0,
          hd: 0,
          hx: 0,
          ag: null,
          u: null,
          ta: null,
          lt: storedLifetime(resolveLifetime({ ttlSeconds: 60 })),
          ls: { k: 'holder', u: Date.now() + 10_000 },
        },
      },
      0,
    );
    await stores.table.send(
      new PutCommand({ TableName: tableName, Item: { ...lease, [tableKeys.timeToLive]: Math.floor(Date.now() / 1000) + 3600 } }),
    );
    const afterIdle = later(2 * 60 * 1000);

    // Act
    const tip = await afterIdle.sessions.readTip(scope, { withState: false });
    const deleted = await afterIdle.sessions.deleteSession(scope);

    // Assess: never written, not expired, nothing to delete, nothing left without a TTL.
    expect(tip).toMatchObject({ kind: 'empty', version: 0 });
    expect(tip.lifetime).toBeUndefined();
    expect(deleted).toBe(false);
    expect((await partition('old-lease')).filter((item) => item[tableKeys.timeToLive] === undefined)).toEqual([]);
  });
});
