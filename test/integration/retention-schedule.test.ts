import { ThrottlingException } from '@aws-sdk/client-dynamodb';
import { QueryCommand, UpdateCommand } from '@aws-sdk/lib-dynamodb';
import { afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import type { SessionScope } from '../../functions/core/model/model.js';
import { SessionService } from '../../functions/core/sessions/session-service.js';
import { createStores } from '../../functions/store/index.js';
import type { DynamoDbSessionStore } from '../../functions/store/sessions/session-store.js';
import { dynamoDbClient } from '../../functions/store/table/client.js';
import * as keys from '../../functions/store/table/keys.js';
import { tableKeys } from '../../functions/store/table/table.js';
import type { TableClient } from '../../functions/store/table/table-client.js';
import { sweepDuePrunes } from '../../functions/streams/prune-sweep.js';
import { createTestTable, dynamoEndpoint } from '../helpers/dynamodb.js';

/**
 * Retention on a schedule (API.md section 12: "pruned within a minute of falling out", docs/api.md
 * says the bound): versions that fall out of a window with no write after them — by age
 * (`keepDays`), after a write that came when it was not a run's turn, or under a retention set
 * on an idle session — are pruned by the scheduled sweep, which finds the sessions due on the
 * index `byPruneDue` (no scan). On DynamoDB Local, with a clock of the test's own.
 */

const client = dynamoDbClient({ AGENTSTATE_DYNAMODB_ENDPOINT: dynamoEndpoint() });
const MINUTE = 60_000;
const DAY = 24 * 60 * MINUTE;
let clock = Date.parse('2026-06-01T10:00:00.000Z');
let store: DynamoDbSessionStore;
let table: TableClient;
let service: SessionService;
const now = () => new Date(clock);

beforeAll(async () => {
  const tableName = await createTestTable('retention-schedule');
  const stores = createStores(client, tableName, { now: () => clock });
  store = stores.sessions;
  table = stores.table;
  service = new SessionService(store, { now });
});

afterEach(() => {
  vi.restoreAllMocks();
});

/**
 * One sweep as the change hook's schedule runs it, at the test's clock; the sessions it ran. A
 * failure it logs fails the test, unless `logged` takes it.
 */
async function sweep(everyMs = MINUTE, logged?: (message: string) => void): Promise<number> {
  const done = await sweepDuePrunes(
    {
      duePrunes: (perShard) => store.duePrunes(perShard),
      pruneHistory: (scope, options) => store.pruneHistory(scope, options),
      finishClosing: (scope, life, deadline) => store.finishClosing(scope, life, deadline),
      finishErasure: async () => {
        throw new Error('no erasure here');
      },
      putOff: (due, failures, delayMs) => store.putOffDue(due, failures, delayMs),
      log: (message, error) => {
        if (!logged) throw new Error(`${message}: ${String(error)}`);
        logged(message);
      },
    },
    { everyMs },
  );
  return done.sessions;
}

/** The change hook's run after a batch of the session's versions (its builtThrough: the newest). */
async function hookRun(scope: SessionScope) {
  const newest = (await service.readState(scope, {})).version;
  return store.pruneHistory(scope, { builtThrough: { incarnation: 0, version: newest }, everyMs: MINUTE });
}

const errorOf = (promise: Promise<unknown>) =>
  promise.then(
    () => null,
    (error: { code?: string }) => error.code,
  );

/** Every entry of the retention index (tests only: the sweep reads due ones by partition). */
async function dueEntries(): Promise<Array<{ pk: string; dsk: string }>> {
  const entries: Array<{ pk: string; dsk: string }> = [];
  for (let shard = 0; shard < keys.PRUNE_DUE_SHARDS; shard++) {
    const { Items } = await table.send(
      new QueryCommand({
        TableName: table.tableName,
        IndexName: tableKeys.pruneDueIndex.name,
        KeyConditionExpression: 'dpk = :dpk',
        ExpressionAttributeValues: { ':dpk': keys.pruneDue(shard) },
      }),
    );
    entries.push(...(Items ?? []).map((item) => ({ pk: String(item.pk), dsk: String(item.dsk) })));
  }
  return entries;
}

describe('retention that falls due without a write', () => {
  it('prunes versions that age out of keepDays with no write after them: the sweep finds the session when its oldest version leaves the window', async () => {
    // Prepare: five versions an hour apart, keeping one day; the change hook's run after them prunes nothing.
    const scope = { tenant: 'days', sessionId: 'aging' };
    await service.patchState(scope, { n: 0 });
    await service.updateSession(scope, { retention: { keepDays: 1 } });
    for (let n = 1; n <= 4; n++) {
      clock += 60 * MINUTE;
      await service.patchState(scope, { n });
    }
    clock += MINUTE;
    expect((await hookRun(scope))?.pruned).toBe(0);
    const entry = (await dueEntries()).find((due) => due.pk === keys.session(scope));
    // Due when its first version (written at the start) is a day old.
    expect(Number(entry?.dsk)).toBe(Date.parse('2026-06-01T10:00:00.000Z') + DAY);

    // Act: sweeps before that moment find nothing; one after it prunes, and no write came between.
    clock += 2 * 60 * MINUTE;
    expect(await sweep()).toBe(0);
    clock = Date.parse('2026-06-01T10:00:00.000Z') + DAY + 2 * 60 * MINUTE + 30_000;
    expect(await sweep()).toBe(1);

    // Assess: versions 1 to 3 (written 0 to 2 hours in) are older than a day and nothing points
    // at them: pruned. 4 is younger; 5 is the head's.
    expect(await errorOf(service.getVersion(scope, 1))).toBe('version_pruned');
    expect(await errorOf(service.getVersion(scope, 3))).toBe('version_pruned');
    expect((await service.getVersion(scope, 4)).state).toEqual({ n: 3 });
    expect((await service.readState(scope, {})).state).toEqual({ n: 4 });
    // Due again when version 4 ages out.
    const next = (await dueEntries()).find((due) => due.pk === keys.session(scope));
    expect(Number(next?.dsk)).toBeGreaterThan(clock);
  });

  it('prunes what a write pushed out of keepVersions while it was not a run’s turn, an interval later, without another write', async () => {
    // Prepare: a run for the session, then more writes within the same minute: their run is refused.
    const scope = { tenant: 'count', sessionId: 'burst' };
    await service.patchState(scope, { n: 0 });
    await service.updateSession(scope, { retention: { keepVersions: 2 } });
    for (let n = 1; n <= 3; n++) await service.patchState(scope, { n });
    clock += MINUTE + 1;
    expect((await hookRun(scope))?.ran).toBe(true);
    for (let n = 4; n <= 9; n++) await service.patchState(scope, { n });
    const refused = await hookRun(scope);
    expect(refused?.ran).toBe(false);
    // Refused once more: the session is due already, nothing more is written.
    const dueBefore = (await dueEntries()).find((due) => due.pk === keys.session(scope));
    expect(dueBefore).toBeDefined();
    expect((await hookRun(scope))?.ran).toBe(false);
    expect((await dueEntries()).find((due) => due.pk === keys.session(scope))).toEqual(dueBefore);

    // Act: within the interval the sweep may not run it yet; after it, it does.
    clock += 1_000;
    await sweep();
    expect((await service.getVersion(scope, 6)).state).toEqual({ n: 5 });
    clock += MINUTE;
    expect(await sweep()).toBeGreaterThanOrEqual(1);

    // Assess: everything below the window of two (9, 10) is pruned.
    expect(await errorOf(service.getVersion(scope, 6))).toBe('version_pruned');
    expect(await errorOf(service.getVersion(scope, 8))).toBe('version_pruned');
    expect((await service.listVersions(scope, { limit: 10 })).items.map((version) => version.version)).toEqual([10, 9]);
    // Nothing left to do: the session left the index (a count window moves only with writes).
    expect((await dueEntries()).find((due) => due.pk === keys.session(scope))).toBeUndefined();
  });

  it('prunes an idle session whose retention is set after its writes: the PATCH marks it due', async () => {
    // Prepare: ten versions, no retention; then a window of three, and no write after it.
    const scope = { tenant: 'late', sessionId: 'idle' };
    for (let n = 0; n < 10; n++) await service.patchState(scope, { n });
    clock += 10 * MINUTE;
    await service.updateSession(scope, { retention: { keepVersions: 3 } });

    // Act
    clock += 1_000;
    expect(await sweep()).toBeGreaterThanOrEqual(1);

    // Assess: 1 to 7 are pruned; the window (8 to 10) reads.
    for (const version of [1, 5, 7]) expect(await errorOf(service.getVersion(scope, version))).toBe('version_pruned');
    expect((await service.readState(scope, {})).state).toEqual({ n: 9 });
    expect((await service.listVersions(scope, { limit: 10 })).items.map((version) => version.version)).toEqual([10, 9, 8]);
  });

  it('runs nothing for a session whose retention was taken away, and drops it from the index', async () => {
    const scope = { tenant: 'gone', sessionId: 'unset' };
    for (let n = 0; n < 5; n++) await service.patchState(scope, { n });
    await service.updateSession(scope, { retention: { keepVersions: 2 } });
    await service.updateSession(scope, { retention: null });
    clock += MINUTE;
    await sweep();
    expect((await dueEntries()).find((due) => due.pk === keys.session(scope))).toBeUndefined();
    expect((await service.getVersion(scope, 1)).state).toEqual({ n: 0 });
  });

  it('prunes only the session that is due: the same id in another tenant keeps every version', async () => {
    // Prepare: one id in two tenants, only one of them keeping two versions.
    const kept = { tenant: 'tenant-b', sessionId: 'shared-id' };
    const pruned = { tenant: 'tenant-a', sessionId: 'shared-id' };
    for (let n = 0; n < 6; n++) {
      await service.patchState(kept, { n });
      await service.patchState(pruned, { n });
    }
    await service.updateSession(pruned, { retention: { keepVersions: 2 } });

    // Act
    clock += MINUTE;
    await sweep();

    // Assess
    expect(await errorOf(service.getVersion(pruned, 1))).toBe('version_pruned');
    for (let version = 1; version <= 6; version++) expect((await service.getVersion(kept, version)).state).toEqual({ n: version - 1 });
    expect((await dueEntries()).some((due) => due.pk === keys.session(kept))).toBe(false);
  });

  it('serves a whole partition of the index whose first 30 entries fail every run: each failure puts its entry off, longer each time, and it is retried', async () => {
    // Prepare: 30 sessions due first and 10 due a second later, all in one partition of the
    // index (the sweep reads 25 of it a round, oldest first); the 30's runs fail at their claim
    // (DynamoDB throttling past the SDK's retries), the only call faked.
    const ids = (prefix: string, count: number) => {
      const shard = keys.pruneDueShard({ tenant: 'stuck', sessionId: 'x' });
      const found: SessionScope[] = [];
      for (let n = 0; found.length < count; n++) {
        const scope = { tenant: 'stuck', sessionId: `${prefix}${n}` };
        if (keys.pruneDueShard(scope) === shard) found.push(scope);
      }
      return found;
    };
    const failing = ids('failing-', 30);
    const healthy = ids('healthy-', 10);
    for (const scope of failing) await store.markPruneDue(scope);
    clock += 1_000;
    for (const scope of healthy) await store.markPruneDue(scope);
    clock += 1_000;
    const failingKeys = new Set(failing.map((scope) => keys.session(scope)));
    const send = table.send.bind(table);
    vi.spyOn(table, 'send').mockImplementation((async (command: unknown) => {
      const input = (command as UpdateCommand).input;
      const claim = command instanceof UpdateCommand && input.Key?.sk === 'U~prune' && input.UpdateExpression === 'SET #at = :at';
      if (claim && failingKeys.has(String(input.Key?.pk))) throw new ThrottlingException({ message: 'Rate exceeded', $metadata: {} });
      return send(command as Parameters<typeof send>[0]);
    }) as typeof table.send);
    /** Each session's entry on the index (its due time), or undefined. */
    const entriesOf = async (scopes: SessionScope[]) => {
      const entries = new Map((await dueEntries()).map((due) => [due.pk, due.dsk]));
      return scopes.map((scope) => entries.get(keys.session(scope)));
    };
    const logged: string[] = [];

    // Act: one sweep.
    await sweep(MINUTE, (message) => logged.push(message));

    // Assess: every healthy entry ran (nothing to do: it left the index); each failing one was
    // tried once, logged, and is due a minute later, its first failure counted.
    expect(await entriesOf(healthy)).toEqual(healthy.map(() => undefined));
    expect(logged).toEqual(failing.map(() => 'could not prune history'));
    expect(await entriesOf(failing)).toEqual(failing.map(() => keys.pruneDueRetry(clock + MINUTE, 1)));

    // Act: a sweep a minute later tries them again, and they fail again: two minutes now.
    clock += MINUTE + 1;
    logged.length = 0;
    await sweep(MINUTE, (message) => logged.push(message));
    expect(logged).toHaveLength(30);
    expect(await entriesOf(failing)).toEqual(failing.map(() => keys.pruneDueRetry(clock + 2 * MINUTE, 2)));
    // Not before then.
    clock += MINUTE;
    await sweep(MINUTE, (message) => logged.push(message));
    expect(logged).toHaveLength(30);

    // Once their runs succeed, the next sweep after the delay runs them all, and they leave the index.
    vi.restoreAllMocks();
    clock += MINUTE + 1;
    await sweep();
    expect(await entriesOf(failing)).toEqual(failing.map(() => undefined));
  });

  it('50 concurrent writers while sweeps run over and over: every write lands, versions stay contiguous, the window is kept', async () => {
    // Prepare
    const scope = { tenant: 'busy', sessionId: 'fifty' };
    await service.patchState(scope, { start: true });
    await service.updateSession(scope, { retention: { keepVersions: 3 } });
    let writing = true;
    const sweeper = (async () => {
      let sweeps = 0;
      while (writing) {
        // Past a 5 s interval each time, and its grace: the versions written meanwhile may go.
        clock += 6_000;
        await store.markPruneDue(scope);
        await sweep(5_000);
        sweeps++;
      }
      return sweeps;
    })();

    // Act
    const results = await Promise.all(Array.from({ length: 50 }, (_, index) => service.patchState(scope, { [`w${index}`]: index })));
    writing = false;
    expect(await sweeper).toBeGreaterThan(0);
    clock += 6_000;
    await store.markPruneDue(scope);
    await sweep(5_000);

    // Assess: every key in the head's state; versions 2..51 written, numbered without gaps; the newest three read.
    const state = (await service.readState(scope, {})).state as Record<string, number>;
    for (let index = 0; index < 50; index++) expect(state[`w${index}`]).toBe(index);
    expect(new Set(results.map((result) => result.version)).size).toBe(50);
    expect(Math.max(...results.map((result) => result.version))).toBe(51);
    expect((await service.listVersions(scope, { limit: 10 })).items.map((version) => version.version)).toEqual([51, 50, 49]);
    expect(await errorOf(service.getVersion(scope, 40))).toBe('version_pruned');
  });
});
