import { InternalServerError, DeleteItemCommand as RawDeleteItemCommand, QueryCommand as RawQueryCommand } from '@aws-sdk/client-dynamodb';
import { DynamoDBDocumentClient, PutCommand } from '@aws-sdk/lib-dynamodb';
import { mockClient } from 'aws-sdk-client-mock';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { invoke } from '../../bench/invoke.js';
import { dependenciesFor, useDependencies } from '../../functions/http/dependencies.js';
import { keysFromEnv } from '../../functions/http/edge/auth.js';
import { handlers } from '../../functions/http/index.js';
import { localDynamoDbClient } from '../../functions/local/dynamodb-local.js';
import { createStores } from '../../functions/store/index.js';
import * as keys from '../../functions/store/table/keys.js';
import { tableKeys } from '../../functions/store/table/table.js';
import { createTestTable, dynamoEndpoint } from '../helpers/dynamodb.js';

/**
 * A copy (`POST /v1/sessions/{sid}/copy`, API.md section 12) that fails midway leaves nothing a
 * caller can read: the session it made is deleted before it answers, so the id answers 404, is
 * in no list, and a retry (with the same Idempotency-Key) copies whole. Faults DynamoDB Local
 * cannot produce are injected as store-faults.test.ts does: aws-sdk-client-mock hands every
 * command to the real DynamoDB Local but the one armed, which fails as the SDK does after its
 * own retries. Requests go through the HTTP handlers in process.
 */

interface Fault {
  when: (command: unknown) => boolean;
  hits: number;
  /** Every command after the first hit fails too, as for a process that stopped there. */
  stops?: boolean;
}

const docMock = mockClient(DynamoDBDocumentClient);
const realSend = docMock.send.wrappedMethod as (this: DynamoDBDocumentClient, ...args: unknown[]) => Promise<unknown>;
let fault: Fault | null = null;
function faultySend(this: DynamoDBDocumentClient, command: unknown, ...rest: unknown[]): Promise<unknown> {
  if (fault && ((fault.stops && fault.hits > 0) || (fault.hits === 0 && fault.when(command)))) {
    fault.hits++;
    return Promise.reject(
      new InternalServerError({
        message: 'Internal server error',
        $metadata: { httpStatusCode: 500, requestId: 'fault', attempts: 4, totalRetryDelay: 0 },
      }),
    );
  }
  return realSend.call(this, command, ...rest);
}
docMock.send.callsFake(faultySend as unknown as Parameters<typeof docMock.send.callsFake>[0]);

/** Fails the `nth` PutCommand into `sessionId`'s partition whose sort key starts with `prefix`. */
function failPut(sessionId: string, prefix: string, nth: number): Fault {
  let seen = 0;
  const armed: Fault = {
    hits: 0,
    when: (command) => {
      if (!(command instanceof PutCommand)) return false;
      const item = command.input.Item ?? {};
      if (item.pk !== keys.session({ tenant: TENANT, sessionId }) || !String(item.sk).startsWith(prefix)) return false;
      return ++seen === nth;
    },
  };
  fault = armed;
  return armed;
}

/** Like `failPut`, and every command after it fails too: the copy's process stopped there (its undo never runs). */
function stopAtPut(sessionId: string, prefix: string, nth: number): Fault {
  const armed = { ...failPut(sessionId, prefix, nth), stops: true };
  fault = armed;
  return armed;
}

/** How far the stores' clock is ahead of this process's (a copy abandoned a while ago). */
let clockAhead = 0;

let rawClient: ReturnType<typeof localDynamoDbClient>;
let stores: ReturnType<typeof createStores>;
const TENANT = 'copyfaults';
const auth = { authorization: 'Bearer copy-key' };
const json = { ...auth, 'content-type': 'application/json' };

beforeAll(async () => {
  const tableName = await createTestTable('copy-faults');
  rawClient = localDynamoDbClient(dynamoEndpoint());
  stores = createStores(rawClient, tableName, { now: () => Date.now() + clockAhead });
  useDependencies(dependenciesFor(stores, { resolveKey: keysFromEnv(`${TENANT}:copy-key`) }));
  tableNameOf = tableName;
  // 5xx answers are logged by the handlers; that log is expected here.
  vi.spyOn(console, 'error').mockImplementation(() => {});
  vi.spyOn(console, 'warn').mockImplementation(() => {});
});
let tableNameOf = '';

afterEach(() => {
  fault = null;
  clockAhead = 0;
});

afterAll(() => {
  docMock.restore();
  useDependencies(undefined);
  rawClient.destroy();
  vi.restoreAllMocks();
});

const call = (method: string, url: string, body?: unknown, headers: Record<string, string> = json) =>
  invoke(handlers, { method, url, headers, ...(body === undefined ? {} : { body: JSON.stringify(body) }) });

let counter = 0;
const sid = (name: string) => `${name}-${++counter}`;

/** A source of three turns, each with a state of its own, a branch, and notes on two nodes. */
async function source(): Promise<string> {
  const id = sid('source');
  expect((await call('PUT', `/v1/sessions/${id}/state`, { topic: 'trip' })).status).toBe(200);
  const turns = [
    { messages: [{ id: 'u1', role: 'user', content: 'Lisbon?' }], state: { plan: 'draft' } },
    { messages: [{ id: 'a1', role: 'assistant', content: 'Sure' }], state: { plan: 'lisbon' } },
    { messages: [{ id: 'u2', role: 'user', content: 'Book it' }], state: { booked: true } },
    { parentId: 'a1', messages: [{ id: 'u2b', role: 'user', content: 'Porto instead' }], state: { plan: 'porto' } },
  ];
  for (const turn of turns) expect((await call('POST', `/v1/sessions/${id}/messages`, turn)).status).toBe(201);
  for (const node of ['a1', 'u2'])
    expect((await call('PUT', `/v1/sessions/${id}/nodes/${node}/notes/seen`, { by: node })).status).toBe(200);
  return id;
}

/** Every node of a session with its parent, message, state and notes, and the head. */
async function everything(id: string): Promise<unknown> {
  const tree = await call('GET', `/v1/sessions/${id}/tree?notes=1`, undefined, auth);
  expect(tree.status, tree.text).toBe(200);
  const nodes: Record<string, unknown> = {};
  for (const node of tree.json.nodes as Array<{ id: string; parentId: string | null }>) {
    const state = await call('GET', `/v1/sessions/${id}/state?node=${node.id}`, undefined, auth);
    const path = await call('GET', `/v1/sessions/${id}/messages?node=${node.id}`, undefined, auth);
    nodes[node.id] = { parentId: node.parentId, state: state.json.state, message: path.json.messages.at(-1) ?? null };
  }
  return { head: tree.json.head, nodes, notes: tree.json.notes };
}

/** The items left in a session's partition, read raw: key and whether each carries a TTL. */
async function stored(id: string): Promise<Array<{ sk: string; ttl: boolean; fence?: string; ttlAt?: number }>> {
  const { Items } = await rawClient.send(
    new RawQueryCommand({
      TableName: tableNameOf,
      KeyConditionExpression: 'pk = :pk',
      ExpressionAttributeValues: { ':pk': { S: keys.session({ tenant: TENANT, sessionId: id }) } },
      ConsistentRead: true,
    }),
  );
  return (Items ?? []).map((item) => ({
    sk: String(item.sk?.S),
    ttl: item[tableKeys.timeToLive] !== undefined,
    ...(item[tableKeys.timeToLive]?.N ? { ttlAt: Number(item[tableKeys.timeToLive]?.N) } : {}),
    ...(item.fence?.S ? { fence: item.fence.S } : {}),
  }));
}

/** What a caller can read of `id`: the session, its tree, whether it is listed. */
async function readable(id: string): Promise<{ session: number; tree: number; state: unknown; listed: boolean }> {
  const listed = await call('GET', '/v1/sessions?limit=500', undefined, auth);
  const state = await call('GET', `/v1/sessions/${id}/state`, undefined, auth);
  return {
    session: (await call('GET', `/v1/sessions/${id}`, undefined, auth)).status,
    tree: (await call('GET', `/v1/sessions/${id}/tree`, undefined, auth)).status,
    state: { state: state.json.state, version: state.json.version },
    listed: listed.json.sessions.some((session: { sessionId: string }) => session.sessionId === id),
  };
}

const unknown = { session: 404, tree: 404, state: { state: null, version: 0 }, listed: false };

describe('a copy that fails midway', () => {
  it('leaves nothing readable when a write of its log fails, and its retry with the same Idempotency-Key copies whole', async () => {
    // Prepare: the copy's third change of the log (after the first transaction) fails.
    const from = await source();
    const expected = await everything(from);
    const target = sid('copy');
    const keyed = { ...json, 'idempotency-key': `copy-${target}` };
    const armed = failPut(target, keys.logPrefix, 2);

    // Act
    const failed = await call('POST', `/v1/sessions/${from}/copy`, { sessionId: target, tree: true }, keyed);
    const after = await readable(target);
    const left = await stored(target);
    const retried = await call('POST', `/v1/sessions/${from}/copy`, { sessionId: target, tree: true }, keyed);
    const replayed = await call('POST', `/v1/sessions/${from}/copy`, { sessionId: target, tree: true }, keyed);

    // Assess: the failure reached the caller after part of the copy was written; then the id
    // read as unknown, and only a delete's tombstones and closed fence were stored, all with a TTL.
    expect(armed.hits).toBe(1);
    expect(failed.status, failed.text).toBeGreaterThanOrEqual(500);
    expect(after).toEqual(unknown);
    expect(left.filter((item) => item.fence === 'closed')).toHaveLength(1);
    expect(left.filter((item) => !item.ttl)).toEqual([]);
    expect(left.filter((item) => !item.sk.startsWith(keys.logPrefix))).toEqual([]);
    expect(retried.status, retried.text).toBe(201);
    expect(replayed.status).toBe(201);
    expect(replayed.json).toEqual(retried.json);
    expect(await everything(target)).toEqual(expected);
  });

  it('leaves nothing readable when a note fails after every node was written, and copies whole when asked again', async () => {
    // Prepare
    const from = await source();
    const expected = await everything(from);
    const target = sid('copy');
    const armed = failPut(target, keys.notePrefix, 2);

    // Act
    const failed = await call('POST', `/v1/sessions/${from}/copy`, { sessionId: target, tree: true });
    const after = await readable(target);
    const again = await call('POST', `/v1/sessions/${from}/copy`, { sessionId: target, tree: true });

    // Assess
    expect(armed.hits).toBe(1);
    expect(failed.status, failed.text).toBeGreaterThanOrEqual(500);
    expect(after).toEqual(unknown);
    expect(again.status, again.text).toBe(201);
    expect(await everything(target)).toEqual(expected);
  });

  it('leaves nothing readable when its process stops midway (its undo never runs), refuses the id while it may still run, and then copies whole', async () => {
    // Prepare: the copy's third change of the log fails, and so does every request after it,
    // the undo's included, as when a Lambda passes its timeout or `npm start` is killed.
    const from = await source();
    const expected = await everything(from);
    const target = sid('copy');
    const armed = stopAtPut(target, keys.logPrefix, 2);

    // Act
    const failed = await call('POST', `/v1/sessions/${from}/copy`, { sessionId: target, tree: true });
    fault = null;
    const after = await readable(target);
    const appends = await call('POST', `/v1/sessions/${target}/messages`, { messages: [{ role: 'user', content: 'hi' }] });
    const left = await stored(target);
    const retriedAtOnce = await call('POST', `/v1/sessions/${from}/copy`, { sessionId: target, tree: true });
    // Two minutes on, the copy is abandoned: nothing of it ran for longer than a request may.
    clockAhead = 2 * 60_000;
    const afterAWhile = await readable(target);
    const retried = await call('POST', `/v1/sessions/${from}/copy`, { sessionId: target, tree: true });

    // Assess: part of the copy was written, none of it was ever readable, and the session item,
    // out of every list, carries a TTL that removes it within the hour (its removal makes the
    // change hook erase the rest: the next test).
    expect(armed.hits).toBeGreaterThanOrEqual(1);
    expect(failed.status, failed.text).toBeGreaterThanOrEqual(500);
    expect(left.filter((item) => item.sk.startsWith(keys.logPrefix)).length).toBeGreaterThanOrEqual(2);
    expect(after).toEqual(unknown);
    expect(appends.status, appends.text).toBe(409);
    const sessionItem = left.find((item) => item.sk === keys.sessionSort);
    expect(sessionItem?.ttlAt).toBeLessThanOrEqual(Math.ceil(Date.now() / 1000) + 3600);
    expect(retriedAtOnce.status, retriedAtOnce.text).toBe(409);
    expect(afterAWhile).toEqual(unknown);
    expect(retried.status, retried.text).toBe(201);
    expect(await everything(target)).toEqual(expected);
  });

  it('whose process stopped is erased when TTL removes its session item, as an expired session is', async () => {
    // Prepare: a copy that stopped midway, as above.
    const from = await source();
    const target = sid('copy');
    stopAtPut(target, keys.logPrefix, 3);
    expect((await call('POST', `/v1/sessions/${from}/copy`, { sessionId: target, tree: true })).status).toBeGreaterThanOrEqual(500);
    fault = null;
    const ttlAt = (await stored(target)).find((item) => item.sk === keys.sessionSort)?.ttlAt as number;
    expect(ttlAt).toBeTypeOf('number');

    // Act: the change hook's sweep, as when TTL removed the session item (DynamoDB Local runs no TTL).
    clockAhead = ttlAt * 1000 - Date.now() + 1000;
    await stores.sessions.sweepExpired({ tenant: TENANT, sessionId: target }, new Date(ttlAt * 1000).toISOString());
    const left = await stored(target);

    // Assess: everything left goes by TTL, the closed fence too.
    expect(await readable(target)).toEqual(unknown);
    expect(left.filter((item) => item.fence === 'closed')).toHaveLength(1);
    expect(left.filter((item) => !item.ttl)).toEqual([]);
    expect(left.filter((item) => !item.sk.startsWith(keys.logPrefix))).toEqual([]);
  });
});

describe('the id of a copy that failed', () => {
  /** Removes what TTL would: every item of the session's partition that carries one (DynamoDB Local runs no TTL). */
  async function ttlRemoves(id: string): Promise<void> {
    for (const item of (await stored(id)).filter((left) => left.ttl)) {
      await rawClient.send(
        new RawDeleteItemCommand({
          TableName: tableNameOf,
          Key: { pk: { S: keys.session({ tenant: TENANT, sessionId: id }) }, sk: { S: item.sk } },
        }),
      );
    }
  }

  it('keeps nothing once TTL has removed what the undo left, and is copied into again, reading only the new copy', async () => {
    // Prepare: a copy whose fourth change fails (its undo runs), into an id never written.
    const from = await source();
    const expected = await everything(from);
    const target = sid('copy');
    failPut(target, keys.logPrefix, 3);
    expect((await call('POST', `/v1/sessions/${from}/copy`, { sessionId: target, tree: true })).status).toBeGreaterThanOrEqual(500);
    fault = null;

    // Act: TTL removes what is left; then the id is copied into again.
    await ttlRemoves(target);
    const left = await stored(target);
    const again = await call('POST', `/v1/sessions/${from}/copy`, { sessionId: target, tree: true });
    const versions = await call('GET', `/v1/sessions/${target}/versions?limit=50`, undefined, auth);

    // Assess: nothing was kept; the new copy starts the id's first life over and reads as the
    // source does, its versions 1 to 5, with nothing of the failed one.
    expect(left).toEqual([]);
    expect(again.status, again.text).toBe(201);
    expect(await everything(target)).toEqual(expected);
    expect(versions.json.versions.map((version: { version: number }) => version.version)).toEqual([5, 4, 3, 2, 1]);
    expect((await stored(target)).every((item) => !item.sk.startsWith(keys.logPrefix) || item.sk.startsWith(keys.lifePrefix(0)))).toBe(
      true,
    );
  });

  it('once erased as abandoned, leaves nothing without a TTL of the copy, and is written again in a life of its own', async () => {
    // Prepare: a copy that stopped midway (its undo never ran), two minutes ago.
    const from = await source();
    const target = sid('copy');
    stopAtPut(target, keys.logPrefix, 3);
    expect((await call('POST', `/v1/sessions/${from}/copy`, { sessionId: target, tree: true })).status).toBeGreaterThanOrEqual(500);
    fault = null;
    clockAhead = 2 * 60_000;

    // Act: a write of the id erases it first, then writes.
    const written = await call('PUT', `/v1/sessions/${target}/state`, { fresh: true });
    const left = await stored(target);
    const state = await call('GET', `/v1/sessions/${target}/state`, undefined, auth);
    const tree = await call('GET', `/v1/sessions/${target}/tree`, undefined, auth);

    // Assess: the copy's life (0) holds only what TTL removes; the write is version 1 of life 1,
    // with the root alone.
    expect(written.status, written.text).toBe(200);
    expect(left.filter((item) => item.sk.startsWith(keys.lifePrefix(0)) && !item.ttl)).toEqual([]);
    expect(left.filter((item) => item.sk.startsWith(keys.lifePrefix(1))).length).toBeGreaterThanOrEqual(1);
    expect({ state: state.json.state, version: state.json.version }).toEqual({ state: { fresh: true }, version: 1 });
    expect(tree.json.nodes.map((node: { id: string }) => node.id)).toEqual(['root']);
  });
});
