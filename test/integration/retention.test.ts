import { QueryCommand } from '@aws-sdk/client-dynamodb';
import { unmarshall } from '@aws-sdk/util-dynamodb';
import { beforeAll, describe, expect, it } from 'vitest';
import type { SessionScope } from '../../functions/core/model/model.js';
import type { TipChange } from '../../functions/core/model/ports.js';
import { SessionService } from '../../functions/core/sessions/session-service.js';
import { createStores } from '../../functions/store/index.js';
import type { DynamoDbSessionStore } from '../../functions/store/sessions/session-store.js';
import { collectPieces } from '../../functions/store/state/state-pieces.js';
import { dynamoDbClient } from '../../functions/store/table/client.js';
import * as keys from '../../functions/store/table/keys.js';
import type { TableClient } from '../../functions/store/table/table-client.js';
import { createTestTable, dynamoEndpoint } from '../helpers/dynamodb.js';

/**
 * Retention (API.md section 12) on DynamoDB Local, with a clock of the test's own: versions
 * outside the window that nothing points at are pruned (`410 version_pruned`), every node and
 * branch still reads its state, what a session stores stays bounded by its nodes and the
 * window, and pruning never takes what a concurrent write or read still needs.
 */

const client = dynamoDbClient({ AGENTSTATE_DYNAMODB_ENDPOINT: dynamoEndpoint() });
let tableName: string;
let clock = Date.parse('2026-06-01T10:00:00.000Z');
let store: DynamoDbSessionStore;
let table: TableClient;
let service: SessionService;
const now = () => new Date(clock);

beforeAll(async () => {
  tableName = await createTestTable('retention');
  const stores = createStores(client, tableName, { now: () => clock });
  store = stores.sessions;
  table = stores.table;
  service = new SessionService(store, { now });
});

/** Every item of the session's partition, as stored. */
async function itemsOf(scope: SessionScope): Promise<Array<Record<string, unknown>>> {
  const items: Array<Record<string, unknown>> = [];
  let start: Record<string, import('@aws-sdk/client-dynamodb').AttributeValue> | undefined;
  do {
    const page = await client.send(
      new QueryCommand({
        TableName: tableName,
        KeyConditionExpression: 'pk = :pk',
        ExpressionAttributeValues: { ':pk': { S: keys.session(scope) } },
        ExclusiveStartKey: start,
        ConsistentRead: true,
      }),
    );
    items.push(...(page.Items ?? []).map((item) => unmarshall(item)));
    start = page.LastEvaluatedKey;
  } while (start);
  return items;
}

/** What the session keeps, not counting what TTL removes within a day. */
async function stored(scope: SessionScope): Promise<{ versions: number; live: number; expiring: number }> {
  const items = await itemsOf(scope);
  const log = items.filter((item) => String(item.sk).startsWith(keys.logPrefix));
  return {
    versions: log.filter((item) => item.kind === 'v' && item.pruned === undefined).length,
    live: items.filter((item) => item.expiresAt === undefined).length,
    expiring: items.filter((item) => item.expiresAt !== undefined).length,
  };
}

/** Runs the pruner until it has caught up (a minute of the test's clock between runs). */
async function pruneAll(scope: SessionScope): Promise<void> {
  for (let run = 0; run < 20; run++) {
    clock += 61_000;
    const report = await store.pruneHistory(scope);
    if (!report?.behind) return;
  }
}

/** A new session keeping its newest `keepVersions`. */
async function retained(scope: SessionScope, keepVersions: number): Promise<void> {
  await service.createSession(scope.tenant, { sessionId: scope.sessionId });
  await service.updateSession(scope, { retention: { keepVersions } });
}

const errorOf = (promise: Promise<unknown>) =>
  promise.then(
    () => null,
    (error: { code?: string }) => error.code,
  );

describe('retention of a linear history', () => {
  it('keeps the newest keepVersions and prunes the rest: 410, the list says where it was cut, storage stays bounded', async () => {
    // Prepare: 300 writes at the head, keeping 5.
    const scope = { tenant: 't', sessionId: 'linear' };
    await service.patchState(scope, { n: 0 });
    await service.updateSession(scope, { retention: { keepVersions: 5 } });
    for (let n = 1; n < 300; n++) await service.patchState(scope, { n });

    // Act
    await pruneAll(scope);

    // Assess: the newest five read, older ones are pruned, and the head still reads its state.
    expect((await service.getVersion(scope, 300)).state).toEqual({ n: 299 });
    expect((await service.getVersion(scope, 296)).state).toEqual({ n: 295 });
    expect(await errorOf(service.getVersion(scope, 1))).toBe('version_pruned');
    expect(await errorOf(service.getVersion(scope, 295))).toBe('version_pruned');
    expect(await errorOf(service.readState(scope, { version: 100 }))).toBe('version_pruned');
    expect(await errorOf(service.getVersion(scope, 301))).toBe('version_not_found');
    expect(await service.readState(scope, {})).toMatchObject({ version: 300, state: { n: 299 } });
    const page = await service.listVersions(scope, { limit: 50 });
    expect(page.items.map((version) => version.version)).toEqual([300, 299, 298, 297, 296]);
    expect(page.prunedBefore).toBe(296);
    // The pruned items wait for TTL: later pages read past them, and list nothing more.
    let cursor = page.next;
    while (cursor) {
      const later = await service.listVersions(scope, { limit: 50, cursor });
      expect(later.items).toEqual([]);
      cursor = later.next;
    }
    const lineage = await service.listVersions(scope, { node: 'root', limit: 50 });
    expect(lineage.items.map((version) => version.version)).toEqual([300, 299, 298, 297, 296]);
    expect(lineage.prunedBefore).toBe(296);
    const kept = await stored(scope);
    expect(kept.versions).toBe(5);
    // The session item, its marker, the kept versions and the one settings change; all else goes by TTL.
    expect(kept.live).toBeLessThanOrEqual(8);
  });

  it('prunes the newest writes too when more come: a second round decides only on what fell out since', async () => {
    const scope = { tenant: 't', sessionId: 'rounds' };
    await retained(scope, 2);
    for (let n = 0; n < 10; n++) await service.patchState(scope, { n });
    await pruneAll(scope);
    for (let n = 10; n < 20; n++) await service.patchState(scope, { n });
    await pruneAll(scope);
    const page = await service.listVersions(scope, { limit: 50 });
    expect(page.items.map((version) => version.version)).toEqual([20, 19]);
    expect((await stored(scope)).versions).toBe(2);
  });
});

describe('retention on a tree', () => {
  it('keeps every version a node or the head points at: each branch reads its state, and time travel to a node works', async () => {
    // Prepare: state at the root, a conversation a → b, a branch c off a, each with states; then many writes at b.
    const scope = { tenant: 't', sessionId: 'branches' };
    await retained(scope, 2);
    await service.patchState(scope, { at: 'root' });
    await service.appendMessages(scope, { messages: [{ id: 'a', role: 'user' }] });
    await service.patchState(scope, { at: 'a' });
    await service.appendMessages(scope, { messages: [{ id: 'b', role: 'assistant' }] });
    await service.appendMessages(scope, { parentId: 'a', messages: [{ id: 'c', role: 'assistant' }] });
    await service.patchState(scope, { at: 'c' }, { node: 'c' });
    await service.switchHead(scope, 'b');
    for (let n = 0; n < 30; n++) await service.patchState(scope, { at: 'b', n });
    const before = await Promise.all(['root', 'a', 'b', 'c'].map((node) => service.readState(scope, { node })));

    // Act
    await pruneAll(scope);

    // Assess: every node reads what it read before; the versions they point at are listed; the rest are pruned.
    const after = await Promise.all(['root', 'a', 'b', 'c'].map((node) => service.readState(scope, { node })));
    expect(after).toEqual(before);
    expect(after.map((view) => view.state)).toEqual([{ at: 'root' }, { at: 'a' }, { at: 'b', n: 29 }, { at: 'c' }]);
    const listed = (await service.listVersions(scope, { limit: 50 })).items.map((version) => version.version);
    for (const view of after) expect(listed).toContain(view.version);
    expect(await errorOf(service.getVersion(scope, after[2]?.version ? after[2].version - 5 : 0))).toBe('version_pruned');
    // The branch's own lineage: c's version, then a's (its base); the cut is said.
    const lineage = await service.listVersions(scope, { node: 'b', limit: 50 });
    expect(lineage.items.map((version) => version.version).slice(0, 2)).toEqual([after[2]?.version, (after[2]?.version ?? 0) - 1]);
    expect(lineage.prunedBefore).toBeDefined();
    // A write at an old node still computes from its state.
    const written = await service.patchState(scope, { more: true }, { node: 'a' });
    expect(written.state).toEqual({ at: 'a', more: true });
  });
});

describe('a tree larger than what one run reads', () => {
  /** One run as the hook's are, on the test's clock (past the grace), reading at most `nodePage` node index items. */
  const run = async (scope: SessionScope, nodePage: number) => {
    clock += 6_000;
    return store.pruneHistory(scope, { force: true, nodePage });
  };

  it('reads the node index a page a run, and decides only once the pass has read it whole', async () => {
    // Prepare: 12 nodes under the root, then writes at the head past a window of two.
    const scope = { tenant: 't', sessionId: 'paged' };
    await retained(scope, 2);
    await service.patchState(scope, { at: 'root' });
    await service.appendMessages(scope, { messages: Array.from({ length: 12 }, (_, index) => ({ id: `n${index}`, role: 'user' })) });
    for (let n = 0; n < 8; n++) await service.patchState(scope, { n });

    // Act: runs of at most 4 index items each, until one decides.
    const reports = [];
    for (let runs = 0; runs < 20; runs++) {
      const report = await run(scope, 4);
      reports.push(report);
      if (report && !report.behind) break;
    }

    // Assess: the first runs only read (12 nodes, each an index item, and the root's pointer:
    // 13 items, 4 a run); the last decides: the root's version (its nodes start there too) and
    // the window stay, the rest is pruned.
    expect(reports.slice(0, 3).map((report) => [report?.behind, report?.pruned])).toEqual([
      [true, 0],
      [true, 0],
      [true, 0],
    ]);
    expect(reports.at(-1)?.behind).toBe(false);
    expect(await errorOf(service.getVersion(scope, 2))).toBe('version_pruned');
    expect((await service.readState(scope, { node: 'n3' })).state).toEqual({ at: 'root' });
    expect((await service.listVersions(scope, { limit: 10 })).items.map((version) => version.version)).toEqual([9, 8, 1]);
  });

  it('keeps the version a node made while its pass ran starts at, though its index sorts before the pages read and its parent moved on', async () => {
    // Prepare: p points at version 2 (written there as the head); b (a node that sorts first)
    // and z beside it; the head then goes to z, written past a window of one.
    const scope = { tenant: 't', sessionId: 'paged-race' };
    await retained(scope, 1);
    await service.patchState(scope, { at: 'root' });
    await service.appendMessages(scope, { messages: [{ id: 'b', role: 'user' }] });
    await service.appendMessages(scope, { parentId: 'root', messages: [{ id: 'p', role: 'user' }] });
    await service.patchState(scope, { at: 'p' });
    await service.appendMessages(scope, { parentId: 'root', messages: [{ id: 'z', role: 'user' }] });
    for (let n = 0; n < 5; n++) await service.patchState(scope, { at: 'z', n });
    // The pass starts at version 7: its first page is b's index item (p's items are left to the next).
    expect(await run(scope, 2)).toMatchObject({ behind: true, pruned: 0 });

    // Act: a node under p, starting at p's version 2 (its index sorts before the pages still to
    // read); the head back to z; a write at p, and one after it (which puts p's moved pointer):
    // when the pass reads p, p points past 2, and only a0 points at it.
    await service.appendMessages(scope, { parentId: 'p', messages: [{ id: 'a0', role: 'assistant' }] });
    await service.switchHead(scope, 'z');
    await service.patchState(scope, { at: 'p', again: true }, { node: 'p' });
    await service.patchState(scope, { at: 'z', n: 5 });
    const reports = [];
    for (let runs = 0; runs < 20; runs++) {
      const report = await run(scope, 2);
      reports.push(report);
      if (report && !report.behind) break;
    }

    // Assess: a0 reads p's old state: version 2 stayed; what nothing points at is pruned.
    expect(reports.at(-1)?.behind).toBe(false);
    expect((await service.readState(scope, { node: 'a0' })).state).toEqual({ at: 'p' });
    expect((await service.getVersion(scope, 2)).state).toEqual({ at: 'p' });
    expect(await errorOf(service.getVersion(scope, 4))).toBe('version_pruned');
    expect((await service.readState(scope, { node: 'p' })).state).toEqual({ at: 'p', again: true });
  });
});

describe('pruning racing writes and reads', () => {
  it('a write at an old node whose version is pruned while it is in flight retries on the newer state, and loses nothing', async () => {
    // Prepare: node x points at an old version, outside a window of 1.
    const scope = { tenant: 't', sessionId: 'race-old-node' };
    await retained(scope, 1);
    await service.appendMessages(scope, { messages: [{ id: 'x', role: 'user' }] });
    await service.patchState(scope, { x: 1 });
    await service.appendMessages(scope, { messages: [{ id: 'y', role: 'user' }] });
    for (let n = 0; n < 5; n++) await service.patchState(scope, { y: n });
    // A writer at x that reads x's version, then waits while another write at x lands and the pruner runs.
    let paused = false;
    const pausing = Object.create(store) as DynamoDbSessionStore;
    pausing.commit = async (target: SessionScope, change: TipChange) => {
      if (!paused) {
        paused = true;
        await service.patchState(scope, { other: true }, { node: 'x' });
        clock += 61_000;
        const report = await store.pruneHistory(scope);
        expect(report?.pruned).toBeGreaterThan(0);
      }
      return store.commit(target, change);
    };
    const writer = new SessionService(pausing, { now });

    // Act
    const result = await writer.patchState(scope, { mine: true }, { node: 'x' });

    // Assess: the write landed on the state the other write made (nothing lost), and x reads it.
    expect(paused).toBe(true);
    expect(result.state).toEqual({ x: 1, other: true, mine: true });
    expect((await service.readState(scope, { node: 'x' })).state).toEqual({ x: 1, other: true, mine: true });
    expect((await service.readState(scope, { node: 'y' })).state).toEqual({ x: 1, y: 4 });
  });

  it('a read of a node whose version is pruned under it reads again and answers the node’s state', async () => {
    const scope = { tenant: 't', sessionId: 'race-read' };
    await retained(scope, 1);
    await service.appendMessages(scope, { messages: [{ id: 'x', role: 'user' }] });
    await service.patchState(scope, { v: 1 });
    await service.appendMessages(scope, { messages: [{ id: 'y', role: 'user' }] });
    await service.patchState(scope, { v: 2 });
    // The reader's first version read comes after a write at x moved it on and the pruner ran.
    let interleaved = false;
    const pausing = Object.create(store) as DynamoDbSessionStore;
    pausing.getVersion = async (target, version, tip) => {
      if (!interleaved && tip) {
        interleaved = true;
        await service.patchState(scope, { v: 3 }, { node: 'x' });
        clock += 61_000;
        expect((await store.pruneHistory(scope))?.pruned).toBe(1);
      }
      return store.getVersion(target, version, tip);
    };
    const reader = new SessionService(pausing, { now });

    const view = await reader.readState(scope, { node: 'x' });

    expect(interleaved).toBe(true);
    expect(view.state).toEqual({ v: 3 });
  });

  it('50 concurrent writers while the pruner runs over and over: every write lands, versions stay contiguous', async () => {
    // Prepare
    const scope = { tenant: 't', sessionId: 'fifty' };
    await retained(scope, 3);
    await service.appendMessages(scope, { messages: [{ id: 'old', role: 'user' }] });
    await service.patchState(scope, { start: true });
    await service.appendMessages(scope, { messages: [{ id: 'head', role: 'user' }] });
    let writing = true;
    const pruner = (async () => {
      let runs = 0;
      while (writing) {
        // Past the grace each time: the versions written meanwhile are old enough to go.
        clock += 6_000;
        await store.pruneHistory(scope, { force: true });
        runs++;
      }
      return runs;
    })();

    // Act: 40 writers at the head, 10 at the old node.
    const results = await Promise.all(
      Array.from({ length: 50 }, (_, index) =>
        index < 40
          ? service.patchState(scope, { [`h${index}`]: index })
          : service.patchState(scope, { [`o${index}`]: index }, { node: 'old' }),
      ),
    );
    writing = false;
    const runs = await pruner;
    clock += 6_000;
    await store.pruneHistory(scope, { force: true });

    // Assess: every key is in its node's state; 52 versions, numbered without gaps.
    expect(runs).toBeGreaterThan(0);
    const head = (await service.readState(scope, { node: 'head' })).state as Record<string, number>;
    const old = (await service.readState(scope, { node: 'old' })).state as Record<string, number>;
    for (let index = 0; index < 40; index++) expect(head[`h${index}`]).toBe(index);
    for (let index = 40; index < 50; index++) expect(old[`o${index}`]).toBe(index);
    expect(new Set(results.map((result) => result.version)).size).toBe(50);
    expect(Math.max(...results.map((result) => result.version))).toBe(51);
    expect((await stored(scope)).versions).toBeLessThanOrEqual(6);
  });
});

describe('retention of large states', () => {
  it('keeps the splice chains kept versions need, and the collector removes the pieces only pruned versions named', async () => {
    // Prepare: a 300 KB state at node a, then 40 small changes at the head (splices on checkpoints).
    const scope = { tenant: 't', sessionId: 'large' };
    await retained(scope, 3);
    const big = Array.from({ length: 3000 }, (_, index) => `item ${index} ${'x'.repeat(90)}`);
    await service.replaceState(scope, { big, n: -1 });
    await service.appendMessages(scope, { messages: [{ id: 'a', role: 'user' }] });
    for (let n = 0; n < 40; n++) await service.patchState(scope, { n });
    // Then large states nothing will point at once they fall out of the window: their pieces go.
    for (let round = 0; round < 4; round++) {
      await service.patchState(scope, { n: 50 + round, other: big.map((text) => `${round} ${text}`) });
    }
    for (let n = 60; n < 70; n++) await service.patchState(scope, { n });
    const expected = (await service.readState(scope, {})).state;
    const before = (await itemsOf(scope)).filter((item) => String(item.sk).startsWith('B#')).length;
    // The head is a splice on a checkpoint, with a chain of versions below the window.
    const head = (await itemsOf(scope)).find((item) => item.version === 55);
    expect(String(head?.stateK ?? '').split(' ').length).toBeGreaterThan(3);

    // Act
    await pruneAll(scope);
    clock += 16 * 60_000;
    const removed = await collectPieces(table, scope);

    // Assess: the head and the root (its own pointer) still read whole; old versions are pruned; pieces went.
    expect((await service.readState(scope, {})).state).toEqual(expected);
    expect((await service.readState(scope, { node: 'root' })).state).toEqual({ big, n: -1 });
    expect(await errorOf(service.getVersion(scope, 10))).toBe('version_pruned');
    expect(removed).toBeGreaterThan(0);
    const after = (await itemsOf(scope)).filter((item) => String(item.sk).startsWith('B#')).length;
    expect(after).toBeLessThan(before);
    // A write from the kept head still splices on what is left.
    await service.patchState(scope, { n: 100 });
    expect((await service.readState(scope, {})).state).toMatchObject({ n: 100 });
  });
});
