import { beforeAll, describe, expect, it } from 'vitest';
import { CommitService } from '../../functions/core/commits/commit-service.js';
import type { JsonObject } from '../../functions/core/json/json.js';
import { MemoryService } from '../../functions/core/memory/memory-service.js';
import type { DocumentStore } from '../../functions/core/model/ports.js';
import { SessionService } from '../../functions/core/sessions/session-service.js';
import { ErasureFinisher } from '../../functions/store/erasure/erasure-finish.js';
import { DynamoDbErasureStore } from '../../functions/store/erasure/erasure-store.js';
import { createStores, type Stores } from '../../functions/store/index.js';
import { DynamoDbMemoryStore } from '../../functions/store/memory/memory-store.js';
import { DynamoDbMemoryUpkeep } from '../../functions/store/memory/memory-upkeep-store.js';
import { dynamoDbClient } from '../../functions/store/table/client.js';
import { LOG_ITEM_KIND } from '../../functions/store/table/item-kinds.js';
import * as keys from '../../functions/store/table/keys.js';
import { sweepDuePrunes } from '../../functions/streams/prune-sweep.js';
import { createTestTable, dynamoEndpoint, partitionItems } from '../helpers/dynamodb.js';

/**
 * An erasure of a user (API.md section 12) at a size: its `DELETE` (the store's `start`) does
 * the same few requests for a user with many sessions and memory items as for a user with
 * none, whatever it finds; the change hook's runs (`finish`) then close and erase everything,
 * and a run that dies anywhere — halfway through a page of sessions, between a tombstone and
 * the cursor's move, during the second step — is followed by another that goes on from what
 * is stored: nothing of the user is readable once closing is done, nothing stored once done,
 * each thing counted once. Real DynamoDB Local; the fault is a request that fails after a
 * number of others, injected on the client (DynamoDB Local cannot be told to fail).
 */

const client = dynamoDbClient({ AGENTSTATE_DYNAMODB_ENDPOINT: dynamoEndpoint() });
let tableName: string;
let stores: Stores;
const tenant = 't';

beforeAll(async () => {
  tableName = await createTestTable('erasure-resume');
  stores = createStores(client, tableName);
});

/** Every item of a partition, read raw. */
function stored(pk: string) {
  return partitionItems(client, tableName, pk);
}

/**
 * A client of the table that counts its requests and, past `allowed` writes (or once a write
 * `diesAfter` picks has landed), fails every request as a run past its timeout would.
 */
function faultyClient(allowed = Number.POSITIVE_INFINITY, diesAfter?: (write: string) => boolean) {
  const faulty = dynamoDbClient({ AGENTSTATE_DYNAMODB_ENDPOINT: dynamoEndpoint() });
  const counts = { requests: 0, writes: 0 };
  let dead = false;
  faulty.middlewareStack.add(
    (next, context) => async (args) => {
      counts.requests++;
      const write = /BatchWriteItem|DeleteItem|PutItem|UpdateItem|TransactWriteItems/.test(String(context.commandName));
      if (dead || (write && ++counts.writes > allowed)) {
        throw Object.assign(new Error('the function timed out'), { name: 'TimeoutError' });
      }
      const result = await next(args);
      if (write && diesAfter?.(JSON.stringify(args.input))) dead = true;
      return result;
    },
    { step: 'initialize', name: 'dieHalfway' },
  );
  return { stores: createStores(faulty, tableName), counts };
}

/** A change hook's run that dies after `allowed` writes (or the first write after one `diesAfter` picks). */
function dyingRun(allowed: number, diesAfter?: (write: string) => boolean): ErasureFinisher {
  const { stores: halfway } = faultyClient(allowed, diesAfter);
  return new ErasureFinisher(halfway.table, halfway.sessions);
}

/** The requests one `DELETE /v1/users/{userId}` makes (the hook not running: it answers that closing goes on). */
async function deleteRequests(userId: string): Promise<{ erasureId: string; closed: boolean; requests: number }> {
  const { stores: counted, counts } = faultyClient();
  const started = await new DynamoDbErasureStore(counted.table, counted.sessions, 0).start(tenant, userId);
  return { ...started, requests: counts.requests };
}

describe('an erasure of a user with many sessions and memory items', () => {
  // About 16 s alone (85-104 s in full runs before an erasure's eraser skipped deleting a session
  // item it had read as gone, each run's first write per session); 30 s, vitest's default, ran
  // out once in a full run on a loaded machine when it took 22 s alone.
  it('is started by a DELETE of bounded work, and finished by runs of the change hook that die anywhere and go on', async () => {
    // Prepare: u1's 40 sessions with versions, 300 memory items in two namespaces (one with a
    // replaced version kept, as the change hook keeps them); u10's memory beside them.
    const sessions = new SessionService(stores.sessions);
    const memory = new MemoryService(new DynamoDbMemoryStore(stores.table));
    const upkeep = new DynamoDbMemoryUpkeep(stores.table);
    const now = new Date().toISOString();
    const sids = Array.from({ length: 40 }, (_, index) => `u1-session-${index}`);
    await Promise.all(
      sids.map(async (sessionId) => {
        await stores.sessions.createSession(
          { tenant, sessionId },
          { sessionId, agentId: null, userId: 'u1', metadata: null, createdAt: now, updatedAt: now },
        );
        await sessions.patchState({ tenant, sessionId }, { secret: 'old' });
        await sessions.patchState({ tenant, sessionId }, { more: 1 });
      }),
    );
    const put = (namespace: string[], key: string, value: JsonObject) =>
      memory.put(tenant, null, { namespace, key }, { value }, { condition: { kind: 'none' }, author: null });
    const keysOf = Array.from({ length: 150 }, (_, index) => `k${index}`);
    for (const namespace of [
      ['users', 'u1'],
      ['users', 'u1', 'facts'],
    ]) {
      await Promise.all(keysOf.map((key) => put(namespace, key, { old: 1 })));
    }
    const second = await put(['users', 'u1', 'facts'], 'k0', { old: 2 });
    await upkeep.recordHistory(tenant, { ...second.item, version: 1, value: { old: 1 } }, Math.floor(Date.now() / 1000) + 3600);
    await put(['users', 'u10'], 'a', { kept: true });

    // Act 1: the DELETE, against a user with all that and a user with nothing.
    const big = await deleteRequests('u1');
    const none = await deleteRequests('nobody');

    // Assess 1: the same requests whatever the user has (its U item, the erasure, one look at it).
    expect(big.requests).toBe(none.requests);
    expect(big.requests).toBeLessThanOrEqual(5);
    expect(big.closed).toBe(false);

    // Act 2: change hook runs that die after 12 writes each, until one leaves closing done.
    const erasures = new ErasureFinisher(stores.table, stores.sessions);
    const status = async () => (await stored(`E#${tenant}#${big.erasureId}`)).find((item) => item.sk?.S === 'E')?.status?.S;
    let runs = 0;
    while ((await status()) === 'closing') {
      await dyingRun(12)
        .finish(tenant, big.erasureId)
        .catch(() => {});
      runs++;
      expect(runs).toBeLessThan(500);
    }
    // Assess 2: nothing of u1 readable, though nothing is erased yet; joined by a DELETE now, which answers at once.
    expect(runs).toBeGreaterThan(10);
    expect((await deleteRequests('u1')).erasureId).toBe(big.erasureId);
    expect((await deleteRequests('u1')).closed).toBe(true);
    expect((await stores.sessions.listSessions(tenant, { limit: 100, filter: { userId: 'u1' } })).items).toEqual([]);
    expect((await stores.sessions.listSessions(tenant, { limit: 100 })).items).toEqual([]);
    for (const sessionId of sids) {
      expect((await stores.sessions.readTip({ tenant, sessionId }, { withState: false })).kind).toBe('closing');
    }
    for (const key of keysOf.slice(0, 20)) await expect(memory.get(tenant, null, ['users', 'u1'], key)).rejects.toThrow();
    expect(await erasures.get(tenant, big.erasureId)).toMatchObject({ status: 'running', sessions: 40, memoryItems: 300 });

    // Act 3: the second step dies the same way, run after run, until a run does not die (the
    // stream retries the record of a run that died, even when that run had set the erasure done).
    for (let died = true; died; ) {
      died = await dyingRun(12)
        .finish(tenant, big.erasureId)
        .then(
          () => false,
          () => true,
        );
      runs++;
      expect(runs).toBeLessThan(2000);
    }

    // Assess 3
    const finished = await erasures.get(tenant, big.erasureId);
    expect(finished).toMatchObject({ status: 'done', sessions: 40, memoryItems: 300, documents: 0 });
    for (const sessionId of sids) {
      const left = await stored(keys.session({ tenant, sessionId }));
      expect(left.every((item) => item.kind?.S === LOG_ITEM_KIND.tombstone)).toBe(true);
      expect(JSON.stringify(left)).not.toContain('old');
    }
    for (const path of ['users/u1', 'users/u1/facts']) expect(await stored(`M#${tenant}#${path}`)).toEqual([]);
    expect(await stored(`MH#${tenant}#users/u1/facts#k0`)).toEqual([]);
    expect(await stored(`E#${tenant}#${big.erasureId}`)).toHaveLength(1);
    expect(await stored(keys.userErasure(tenant, 'u1'))).toEqual([]);
    expect((await memory.get(tenant, null, ['users', 'u10'], 'a')).value).toEqual({ kept: true });

    // A redelivered record runs it once more: done stays done, counts unchanged.
    await erasures.finish(tenant, big.erasureId);
    expect(await erasures.get(tenant, big.erasureId)).toEqual(finished);
  }, 120_000);
});

describe('an erasure whose run dies right after it set done', () => {
  it('leaves none of its records behind once the stream retries that run: the records of what it erased and the user’s erasure go', async () => {
    // Prepare: three sessions of the user, with a version each.
    const sessions = new SessionService(stores.sessions);
    const sids = ['left-1', 'left-2', 'left-3'];
    for (const sessionId of sids) {
      await sessions.createSession(tenant, { sessionId, userId: 'u-left' });
      await sessions.patchState({ tenant, sessionId }, { secret: 'old' });
    }
    const { erasureId } = await new DynamoDbErasureStore(stores.table, stores.sessions, 0).start(tenant, 'u-left');
    const partition = `E#${tenant}#${erasureId}`;

    // Act: a run that closes and erases everything and dies at its first write after the one
    // that set the erasure done; then the stream's retry of its record.
    const setsDone = (write: string) => write.includes('"UpdateExpression":"SET #status = :done');
    const died = await dyingRun(Number.POSITIVE_INFINITY, setsDone)
      .finish(tenant, erasureId)
      .then(
        () => false,
        () => true,
      );
    const afterDeath = await stored(partition);
    await new ErasureFinisher(stores.table, stores.sessions).finish(tenant, erasureId);

    // Assess: the run died with the erasure done and its records there; after the retry only
    // the erasure's own item is left (what GET /v1/erasures reads for 30 days), without the user.
    expect(died).toBe(true);
    expect(afterDeath.find((item) => item.sk?.S === 'E')?.status?.S).toBe('done');
    expect(await new ErasureFinisher(stores.table, stores.sessions).get(tenant, erasureId)).toMatchObject({ status: 'done', sessions: 3 });
    const left = await stored(partition);
    expect(left.map((item) => item.sk?.S)).toEqual(['E']);
    expect(left[0]?.userId).toBeUndefined();
    expect(await stored(keys.userErasure(tenant, 'u-left'))).toEqual([]);
    for (const sessionId of sids) {
      expect((await stored(keys.session({ tenant, sessionId }))).every((item) => item.kind?.S === LOG_ITEM_KIND.tombstone)).toBe(true);
    }
  });
});

describe('an erasure whose runs stop once its sessions are closed', () => {
  it('leaves them to the retention sweep, which erases them and marks the erasure’s records as its run would', async () => {
    // Prepare: two sessions of the user, written; the erasure's runs close everything (it is
    // `running`), and then none comes: the run that would erase was killed and the stream gave
    // its record up (the on-failure queue). Nothing else asks for either id.
    const sessions = new SessionService(stores.sessions);
    const sids = ['stalled-1', 'stalled-2'];
    for (const sessionId of sids) {
      await sessions.createSession(tenant, { sessionId, userId: 'u-stalled' });
      await sessions.patchState({ tenant, sessionId }, { secret: 'old' });
    }
    const { erasureId } = await new DynamoDbErasureStore(stores.table, stores.sessions, 0).start(tenant, 'u-stalled');
    const finisher = new ErasureFinisher(stores.table, stores.sessions);
    const closing = async () => (await stored(`E#${tenant}#${erasureId}`)).find((item) => item.sk?.S === 'E')?.status?.S === 'closing';
    while (await closing()) await finisher.finish(tenant, erasureId, Date.now() + 20_000, 'closed');
    const closedOnly = await Promise.all(sids.map(async (sessionId) => (await stored(keys.session({ tenant, sessionId }))).length));

    // Act: one sweep of the schedule, as the change hook runs it (the erasure is not due: its
    // last run just ended).
    const failures: string[] = [];
    const sweep = await sweepAt(stores, failures);

    // Assess: the sweep erased both (tombstones and the closed fence alone, nothing due any
    // more), and the erasure's records say so; a run of the erasure that comes later after all
    // finds nothing left to erase and counts both.
    expect(failures).toEqual([]);
    expect(closedOnly.every((count) => count > 2)).toBe(true);
    expect(sweep.erased).toBeGreaterThanOrEqual(2);
    for (const sessionId of sids) {
      const items = await stored(keys.session({ tenant, sessionId }));
      expect(items.filter((item) => item.kind?.S !== LOG_ITEM_KIND.tombstone)).toEqual([]);
      expect(items.filter((item) => item.fence !== undefined).map((item) => item.fence?.S)).toEqual(['closed']);
      expect(items.filter((item) => item.dsk !== undefined || item.er !== undefined)).toEqual([]);
    }
    const records = (await stored(`E#${tenant}#${erasureId}`)).filter((item) => item.sk?.S?.startsWith(keys.erasedSessionPrefix));
    expect(records.map((record) => [record.sessionId?.S, record.erased?.BOOL]).sort()).toEqual(sids.map((sessionId) => [sessionId, true]));
    await finisher.finish(tenant, erasureId);
    expect(await finisher.get(tenant, erasureId)).toMatchObject({ status: 'done', sessions: 2 });
  });
});

/** One sweep of the retention schedule as the change hook runs it, over `at`'s table (its clock); what it logged goes to `failures`. */
function sweepAt(at: Stores, failures: string[]) {
  return sweepDuePrunes(
    {
      duePrunes: (perShard) => at.sessions.duePrunes(perShard),
      pruneHistory: (scope, options) => at.sessions.pruneHistory(scope, options),
      finishClosing: (scope, life, deadline) => at.sessions.finishClosing(scope, life, deadline),
      finishErasure: (tenant, erasureId, deadline) => new ErasureFinisher(at.table, at.sessions).run(tenant, erasureId, 'sweep', deadline),
      putOff: (due, count, delayMs) => at.sessions.putOffDue(due, count, delayMs),
      log: (message, error) => failures.push(`${message}: ${String(error)}`),
    },
    { everyMs: 60_000 },
  );
}

/** The stores of the same table with a clock `offsetMs` ahead: the sweep of a later minute. */
const later = (offsetMs: number) => createStores(client, tableName, { now: () => Date.now() + offsetMs });

/**
 * A user with two written sessions, a profile and five memory items in two namespaces; the
 * erasure's `DELETE` (which waits for no run: `409`), and no run of the change hook after it.
 */
async function stalledErasure(userId: string): Promise<{ erasureId: string; sids: string[] }> {
  const sessions = new SessionService(stores.sessions);
  const memory = new MemoryService(new DynamoDbMemoryStore(stores.table));
  const sids = [`${userId}-1`, `${userId}-2`];
  for (const sessionId of sids) {
    await sessions.createSession(tenant, { sessionId, userId });
    await sessions.patchState({ tenant, sessionId }, { secret: 'old' });
  }
  await new CommitService(stores).commit({ tenant, sessionId: `${userId}-1` }, {
    commands: [{ key: 'lang', scope: 'profile', merge: 'disjoint', set: 'en' }],
  } as never);
  for (const [namespace, key] of [
    [['users', userId], 'a'],
    [['users', userId], 'b'],
    [['users', userId], 'c'],
    [['users', userId, 'facts'], 'd'],
    [['users', userId, 'facts'], 'e'],
  ] as const) {
    await memory.put(
      tenant,
      null,
      { namespace: [...namespace], key },
      { value: { secret: key } },
      { condition: { kind: 'none' }, author: null },
    );
  }
  const { erasureId, closed } = await new DynamoDbErasureStore(stores.table, stores.sessions, 0).start(tenant, userId);
  expect(closed).toBe(false);
  return { erasureId, sids };
}

/** Nothing of the user readable or stored but the erasure's own item, done with exact counts. */
async function expectErased(userId: string, erasureId: string, sids: string[]) {
  const finisher = new ErasureFinisher(stores.table, stores.sessions);
  expect(await finisher.get(tenant, erasureId)).toMatchObject({ status: 'done', sessions: 2, memoryItems: 5, documents: 1 });
  const memory = new MemoryService(new DynamoDbMemoryStore(stores.table));
  for (const key of ['a', 'b', 'c']) await expect(memory.get(tenant, null, ['users', userId], key)).rejects.toThrow();
  expect(await stores.documents.getDocument({ kind: 'profile', tenant, id: userId })).toBeNull();
  for (const pk of [
    `M#${tenant}#users/${userId}`,
    `M#${tenant}#users/${userId}/facts`,
    keys.profile(tenant, userId),
    keys.userErasure(tenant, userId),
  ]) {
    expect(await stored(pk), pk).toEqual([]);
  }
  for (const sessionId of sids) {
    const items = await stored(keys.session({ tenant, sessionId }));
    expect(items.filter((item) => item.kind?.S !== LOG_ITEM_KIND.tombstone)).toEqual([]);
    expect(items.filter((item) => item.fence !== undefined).map((item) => item.fence?.S)).toEqual(['closed']);
  }
  const left = await stored(`E#${tenant}#${erasureId}`);
  expect(left.map((item) => item.sk?.S)).toEqual(['E']);
  // Nothing of it due any more: the sweep leaves it be.
  expect(left[0]?.dsk).toBeUndefined();
  expect(left[0]?.dpk).toBeUndefined();
}

describe('an erasure whose runs stop before anything is closed', () => {
  // About 1 s.
  it('is gone on with by the retention sweep once no run moved it for longer than a run takes, to done with exact counts, from sweeps alone', async () => {
    // Prepare: the erasure's DELETE, and no run after it (the run its put brought was killed,
    // and the stream gave its record up).
    const { erasureId, sids } = await stalledErasure('u-swept');
    const failures: string[] = [];

    // Act: a sweep now (its first run may still come: not due), then sweeps a minute apart
    // from two minutes on, as the schedule's, until it is done.
    const early = await sweepAt(stores, failures);
    const sweeps = [];
    for (let minute = 2; minute < 8 && (await stored(`E#${tenant}#${erasureId}`)).some((item) => item.dsk !== undefined); minute++) {
      sweeps.push(await sweepAt(later(minute * 60_000), failures));
    }

    // Assess: not touched by the early sweep; erased by the later ones, the first of which took it.
    expect(failures).toEqual([]);
    expect(early.erasures).toBe(0);
    // (Another erasure of the file's is due too: the first test's of a user with nothing, never run.)
    expect(sweeps[0]?.erasures).toBeGreaterThanOrEqual(1);
    expect(sweeps.length).toBeLessThanOrEqual(3);
    await expectErased('u-swept', erasureId, sids);
  });

  // About 1.5 s.
  it('counts each thing once when a run of the change hook and a run of the sweep go on with it at once', async () => {
    // Prepare
    const { erasureId, sids } = await stalledErasure('u-twice');

    // Act: the change hook's run (its record redelivered after all) and the sweep's, side by side, until done.
    const failures: string[] = [];
    const hook = new ErasureFinisher(stores.table, stores.sessions);
    for (let round = 0; round < 5 && (await hook.get(tenant, erasureId))?.status !== 'done'; round++) {
      await Promise.all([hook.run(tenant, erasureId, 'hook'), sweepAt(later((round + 2) * 60_000), failures)]);
    }

    // Assess: the same counts as one run alone.
    expect(failures).toEqual([]);
    await expectErased('u-twice', erasureId, sids);
  });
});

describe('a run of the retention sweep beside a run of the change hook, of one erasure', () => {
  // About 1.5 s.
  it('holds a session’s fence under a name of its own: it waits while the hook’s run erases it, rather than erasing and closing it too', async () => {
    // Prepare: a written session of the user, closed (the erasure running); a run of the change
    // hook that holds its fence and is held back before its first page of tombstones.
    const sessions = new SessionService(stores.sessions);
    const scope = { tenant, sessionId: 'shared-hold' };
    await sessions.createSession(tenant, { sessionId: scope.sessionId, userId: 'u-hold' });
    await sessions.patchState(scope, { secret: 'old' });
    const { erasureId } = await new DynamoDbErasureStore(stores.table, stores.sessions, 0).start(tenant, 'u-hold');
    const finisher = new ErasureFinisher(stores.table, stores.sessions);
    // (On a clock a few seconds on: closing's first pass need not wait for the list index.)
    const ahead = later(5_000);
    await new ErasureFinisher(ahead.table, ahead.sessions).finish(tenant, erasureId, Date.now() + 20_000, 'closed');
    let holding: () => void = () => {};
    const held = new Promise<void>((resolve) => {
      holding = resolve;
    });
    let release: () => void = () => {};
    const released = new Promise<void>((resolve) => {
      release = resolve;
    });
    const slow = dynamoDbClient({ AGENTSTATE_DYNAMODB_ENDPOINT: dynamoEndpoint() });
    slow.middlewareStack.add(
      (next, context) => async (args) => {
        if (context.commandName === 'BatchWriteItemCommand' && JSON.stringify(args.input).includes(keys.session(scope))) {
          holding();
          await released;
        }
        return next(args);
      },
      { step: 'initialize', name: 'holdBack' },
    );
    const hookStores = createStores(slow, tableName);
    const hookRun = new ErasureFinisher(hookStores.table, hookStores.sessions).run(tenant, erasureId, 'hook');
    await held;

    // Act: the sweep's run, for a second, while the hook's run holds the fence.
    await finisher.finish(tenant, erasureId, Date.now() + 1_000, 'done', 'sweep');
    const fence = (await stored(keys.session(scope))).find((item) => item.fence !== undefined);
    release();
    await hookRun;

    // Assess: the fence still closing and the hook's run's when the sweep's ended (the sweep
    // neither erased under it nor closed it); then the hook's run erased it and finished.
    expect(fence?.fence?.S).toBe('closing');
    expect(fence?.ew?.S).toBe(`erasure:${erasureId}`);
    expect(await finisher.get(tenant, erasureId)).toMatchObject({ status: 'done', sessions: 1 });
    const items = await stored(keys.session(scope));
    expect(items.filter((item) => item.kind?.S !== LOG_ITEM_KIND.tombstone)).toEqual([]);
  });
});

/**
 * A client of the table that holds back the first request `matches` picks (before it is sent,
 * or, with `after`, once it is answered) until `release`; `reached` resolves when it got there.
 */
function heldClient(matches: (command: string, input: string) => boolean, after = false) {
  const held = dynamoDbClient({ AGENTSTATE_DYNAMODB_ENDPOINT: dynamoEndpoint() });
  let reach: () => void = () => {};
  const reached = new Promise<void>((resolve) => {
    reach = resolve;
  });
  let release: () => void = () => {};
  const released = new Promise<void>((resolve) => {
    release = resolve;
  });
  let first = true;
  held.middlewareStack.add(
    (next, context) => async (args) => {
      const picked = first && matches(String(context.commandName), JSON.stringify(args.input));
      if (picked) first = false;
      if (picked && !after) {
        reach();
        await released;
      }
      const result = await next(args);
      if (picked && after) {
        reach();
        await released;
      }
      return result;
    },
    { step: 'initialize', name: 'holdBack' },
  );
  return { stores: createStores(held, tableName), reached, release };
}

/** An erasure's runs one step at a time (a step as the change hook's run takes it). */
class Stepper extends ErasureFinisher {
  async step(tenantId: string, erasureId: string, runner: 'hook' | 'sweep'): Promise<void> {
    const item = await this.itemOf(tenantId, erasureId);
    if (!item) throw new Error('no erasure');
    const erasure = {
      tenant: tenantId,
      erasureId,
      userId: String(item.userId),
      createdAt: String(item.createdAt),
      cursor: String(item.cursor),
      deadline: Date.now() + 20_000,
      eraser: runner,
    };
    await this.closeStep(erasure);
  }
}

describe('two runs of one erasure closing the same page of memory items', () => {
  // About 1 s.
  it('count the page whole whichever moves the cursor: one that finds an item tombstoned by the other counts it as its own', async () => {
    // Prepare: three memory items of the user; the erasure closed up to that namespace's first page.
    const memory = new MemoryService(new DynamoDbMemoryStore(stores.table));
    for (const key of ['a', 'b', 'c']) {
      await memory.put(
        tenant,
        null,
        { namespace: ['users', 'u-page'], key },
        { value: { key } },
        { condition: { kind: 'none' }, author: null },
      );
    }
    const { erasureId } = await new DynamoDbErasureStore(stores.table, stores.sessions, 0).start(tenant, 'u-page');
    // (On a clock a few seconds on: closing's first pass need not wait for the list index.)
    const ahead = later(5_000);
    const stepper = new Stepper(ahead.table, ahead.sessions);
    const cursor = async () => JSON.parse(String((await stored(`E#${tenant}#${erasureId}`)).find((item) => item.sk?.S === 'E')?.cursor?.S));
    while ((await cursor()).namespace === undefined) await stepper.step(tenant, erasureId, 'hook');

    // Act: the sweep's run reads the page and is held; the hook's run tombstones all three and
    // is held before its move of the cursor; the sweep's goes on (its three tombstones taken),
    // and moves the cursor first; then the hook's.
    const namespacePage = (command: string, input: string) => command.startsWith('Query') && input.includes(`M#${tenant}#users/u-page`);
    const sweep = heldClient(namespacePage, true);
    const hook = heldClient((command, input) => command.startsWith('UpdateItem') && input.includes(`E#${tenant}#${erasureId}`));
    const sweepStep = new Stepper(sweep.stores.table, sweep.stores.sessions).step(tenant, erasureId, 'sweep');
    await sweep.reached;
    const hookStep = new Stepper(hook.stores.table, hook.stores.sessions).step(tenant, erasureId, 'hook');
    await hook.reached;
    sweep.release();
    await sweepStep;
    hook.release();
    await hookStep;
    while ((await stepper.get(tenant, erasureId))?.status !== 'done') await stepper.run(tenant, erasureId, 'hook');

    // Assess: three, counted once.
    expect(await stepper.get(tenant, erasureId)).toMatchObject({ status: 'done', memoryItems: 3 });
  });
});

describe('a DELETE of a user whose erasure stopped', () => {
  // About 0.5 s.
  it('joins it, and brings one run with one write: only when no run moved it for longer than a run takes, once for 50 at once', async () => {
    // Prepare: the erasure's DELETE, and no run after it; a client that counts the writes of the erasure's item.
    const { erasureId } = await stalledErasure('u-nudged');
    const counted = (offsetMs: number) => {
      const counting = dynamoDbClient({ AGENTSTATE_DYNAMODB_ENDPOINT: dynamoEndpoint() });
      const landed: string[] = [];
      counting.middlewareStack.add(
        (next, context) => async (args) => {
          const result = await next(args);
          const input = JSON.stringify(args.input);
          if (/UpdateItem|PutItem/.test(String(context.commandName)) && input.includes(`E#${tenant}#${erasureId}`)) landed.push(input);
          return result;
        },
        { step: 'initialize', name: 'countErasureWrites' },
      );
      const at = createStores(counting, tableName, { now: () => Date.now() + offsetMs });
      return { erasures: new DynamoDbErasureStore(at.table, at.sessions, 0), landed };
    };
    const before = (await stored(`E#${tenant}#${erasureId}`)).find((item) => item.sk?.S === 'E');

    // Act: a DELETE again at once (its first run may still come), then 50 at once two minutes on.
    const soon = counted(0);
    const again = await soon.erasures.start(tenant, 'u-nudged');
    const stalled = counted(2 * 60_000);
    const many = await Promise.all(Array.from({ length: 50 }, () => stalled.erasures.start(tenant, 'u-nudged')));
    const after = (await stored(`E#${tenant}#${erasureId}`)).find((item) => item.sk?.S === 'E');

    // Assess: each joined the erasure; the early one wrote nothing, the 50 one write between them
    // (its entry moved on, past a run: no longer due), which is the stream record that brings the change hook.
    expect(again).toEqual({ erasureId, closed: false });
    expect(many.every((start) => start.erasureId === erasureId && !start.closed)).toBe(true);
    expect(soon.landed).toEqual([]);
    expect(stalled.landed).toHaveLength(1);
    expect(stalled.landed[0]).toContain('"ConditionExpression":"#dsk = :read"');
    expect(after?.status?.S).toBe('closing');
    expect(after?.cursor).toEqual(before?.cursor);
    expect(Number(after?.dsk?.S)).toBeGreaterThan(Date.now() + 2 * 60_000);
    expect(Number(after?.dsk?.S)).toBeGreaterThan(Number(before?.dsk?.S));
  });
});

describe('an erasure closing a session a PATCH gave to another user', () => {
  it('closes it only while it is the erased user’s, and was since the erasure began: a PATCH that landed first wins', async () => {
    // Prepare: a written session of u-was, given to u-now; the erasure's step had read it as
    // u-was's before that PATCH landed (what closePage checks first), and closes it only now.
    const sessions = new SessionService(stores.sessions);
    const scope = { tenant, sessionId: 'given-away' };
    await sessions.createSession(tenant, { sessionId: scope.sessionId, userId: 'u-was' });
    await sessions.patchState(scope, { secret: 'old' });
    const erasureBegan = new Date().toISOString();
    await new Promise((resolve) => setTimeout(resolve, 5));
    await sessions.updateSession(scope, { userId: 'u-now' });

    // Act
    const asWas = await stores.sessions.closeForErasure(scope, { userId: 'u-was', before: erasureBegan, erasureId: 'e-1' });
    const asNowBeforeThePatch = await stores.sessions.closeForErasure(scope, { userId: 'u-now', before: erasureBegan, erasureId: 'e-2' });
    const readable = await sessions.getSession(scope);
    const asNow = await stores.sessions.closeForErasure(scope, { userId: 'u-now', before: new Date().toISOString(), erasureId: 'e-3' });

    // Assess: neither the old user's erasure nor one older than the PATCH closes it; the new user's does.
    expect([asWas, asNowBeforeThePatch]).toEqual([null, null]);
    expect(readable).toMatchObject({ userId: 'u-now', version: 1 });
    expect(asNow).toBe(0);
    expect((await stores.sessions.readTip(scope, { withState: false })).kind).toBe('closing');
    await expect(sessions.getSession(scope)).rejects.toMatchObject({ code: 'session_not_found' });
  });
});

/**
 * A blind profile commit is one keyed `UpdateItem` of the profile (document-store.ts
 * `writeDocument`): the session's user is checked by reading the session item after the
 * profile, and the write lands only while the profile's fence is the one read with it, which a
 * `PATCH` giving a session of the user to another user and the user's erasure replace. Each
 * race below is held at the point where one of them is all that stops the old user's profile
 * from being written: without the fence (or the check) these tests fail.
 */
describe('keyed profile commits racing a PATCH of the session’s user and the user’s erasure', () => {
  const sessions = () => new SessionService(stores.sessions);

  /**
   * A commit service whose document store runs `before` once, just before the named call:
   * `write` is the commit's write of the profile, keyed (`writeDocument`) or in a transaction
   * (`commitDocuments`, the user's first profile).
   */
  function heldAt(call: 'readProfile' | 'write', before: () => Promise<void>) {
    let held = true;
    const hold = async () => {
      if (!held) return;
      held = false;
      await before();
    };
    const documents: DocumentStore = {
      getDocument: (ref) => stores.documents.getDocument(ref),
      readProfile: async (ref) => {
        if (call === 'readProfile') await hold();
        return stores.documents.readProfile(ref);
      },
      writeDocument: async (ref, write) => {
        if (call === 'write') await hold();
        return stores.documents.writeDocument(ref, write);
      },
      commitDocuments: async (...args) => {
        if (call === 'write') await hold();
        return stores.documents.commitDocuments(...args);
      },
    };
    // A write to a session being erased tries again until it gives up: not for long here.
    return new CommitService({ sessions: stores.sessions, documents }, { retry: { maxElapsedMs: 2_000 } });
  }

  const commitN = (n: number) => ({ commands: [{ key: 'n', scope: 'profile', merge: 'disjoint', set: n }] as never });
  const profileOf = (id: string) => stores.documents.getDocument({ kind: 'profile', tenant, id });

  for (const had of [false, true]) {
    it(`a PATCH between the commit's reads and its write${had ? ' (the old user has a profile)' : ''}: the new user's profile is written, not the old one's`, async () => {
      // Prepare: a session of the old user; with `had`, the old user's profile written by another of their sessions.
      const [from, to, sessionId] = [`pf-${had}`, `ps-${had}`, `patch-race-${had}`];
      await sessions().createSession(tenant, { sessionId, userId: from });
      if (had) {
        await sessions().createSession(tenant, { sessionId: `${sessionId}-other`, userId: from });
        await new CommitService(stores).commit({ tenant, sessionId: `${sessionId}-other` }, commitN(0));
      }
      const scope = { tenant, sessionId };
      // The commit has read the tip, the profile and the session item; the PATCH lands before its write.
      const commits = heldAt('write', async () => {
        await sessions().updateSession(scope, { userId: to });
      });

      // Act
      const committed = await commits.commit(scope, commitN(1));

      // Assess: written again on the session as it is now, one version each, none of it in the old user's.
      expect(committed.profile).toMatchObject({ userId: to, version: 1, state: { n: 1 } });
      expect(await profileOf(to)).toMatchObject({ version: 1, state: { n: 1 } });
      expect(await profileOf(from)).toEqual(had ? expect.objectContaining({ version: 1, state: { n: 0 } }) : null);
    });
  }

  it("a PATCH between the commit's read of the tip and its read of the profile: the session item read after the profile tells", async () => {
    // Prepare: the PATCH lands after the tip named the old user and before the old user's profile (and fence) is read.
    const scope = { tenant, sessionId: 'patch-before-profile' };
    await sessions().createSession(tenant, { sessionId: scope.sessionId, userId: 'pb-first' });
    const commits = heldAt('readProfile', async () => {
      await sessions().updateSession(scope, { userId: 'pb-second' });
    });

    // Act
    const committed = await commits.commit(scope, commitN(1));

    // Assess
    expect(committed.profile).toMatchObject({ userId: 'pb-second', version: 1 });
    expect(await profileOf('pb-first')).toBeNull();
  });

  for (const had of [false, true]) {
    it(`an erasure of the user between the commit's reads and its write${had ? ' (the user has a profile)' : ''}: nothing of the profile is written again`, async () => {
      // Prepare: a session of the user (and with `had`, their profile); the erasure closes
      // everything (its tombstone in the profile's place) after the commit's reads, before its write.
      const userId = `erased-${had}`;
      const scope = { tenant, sessionId: `erasure-race-${had}` };
      await sessions().createSession(tenant, { sessionId: scope.sessionId, userId });
      if (had) await new CommitService(stores).commit(scope, commitN(0));
      const finisher = new ErasureFinisher(stores.table, stores.sessions);
      let erasureId = '';
      const commits = heldAt('write', async () => {
        ({ erasureId } = await new DynamoDbErasureStore(stores.table, stores.sessions, 0).start(tenant, userId));
        const closing = async () => (await stored(`E#${tenant}#${erasureId}`)).find((item) => item.sk?.S === 'E')?.status?.S === 'closing';
        while (await closing()) await finisher.finish(tenant, erasureId, Date.now() + 20_000, 'closed');
      });

      // Act: the commit's write comes once the erasure's closing is done (it answers 202 then).
      const outcome = await commits.commit(scope, commitN(1)).then(
        (result) => result,
        (error: unknown) => error,
      );

      // Assess: not written; nothing readable, and once the erasure is done nothing stored.
      expect(outcome).toBeInstanceOf(Error);
      expect(await profileOf(userId)).toBeNull();
      await finisher.finish(tenant, erasureId);
      expect(await finisher.get(tenant, erasureId)).toMatchObject({ status: 'done', documents: had ? 1 : 0 });
      expect(await stored(keys.profile(tenant, userId))).toEqual([]);
    });

    it(`an erasure of the user done, its tombstone gone, between the commit's reads and its write${had ? ' (the user had a profile)' : ''}: the profile is not made again`, async () => {
      // Prepare: the erasure runs to the end (sessions erased, the profile's tombstone deleted)
      // after the commit read the tip, the profile and the session item, before its write.
      const userId = `gone-${had}`;
      const scope = { tenant, sessionId: `erased-done-race-${had}` };
      await sessions().createSession(tenant, { sessionId: scope.sessionId, userId });
      if (had) await new CommitService(stores).commit(scope, commitN(0));
      const finisher = new ErasureFinisher(stores.table, stores.sessions);
      let erasureId = '';
      const commits = heldAt('write', async () => {
        ({ erasureId } = await new DynamoDbErasureStore(stores.table, stores.sessions, 0).start(tenant, userId));
        for (let run = 0; run < 20 && (await finisher.get(tenant, erasureId))?.status !== 'done'; run++) {
          await finisher.finish(tenant, erasureId, Date.now() + 20_000);
        }
        expect(await finisher.get(tenant, erasureId)).toMatchObject({ status: 'done' });
        expect(await stored(keys.profile(tenant, userId))).toEqual([]);
      });

      // Act
      const outcome = await commits.commit(scope, commitN(1)).then(
        (result) => result,
        (error: unknown) => error,
      );

      // Assess: refused, and nothing of the user stored again.
      expect(outcome).toBeInstanceOf(Error);
      expect(await profileOf(userId)).toBeNull();
      expect(await stored(keys.profile(tenant, userId))).toEqual([]);
    });
  }
});
