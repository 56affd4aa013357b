import { type AgentStateClient, AgentStateError, CodecError, createClient, SchemaMismatchError } from '@agentstate/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { dynamoDbEndpointOf, issueKey } from '../helpers/admin.js';
import { type RunningApi, startApi } from '../helpers/e2e.js';
import { eventually, uniqueId } from './support.js';

/**
 * `client.memory(namespace)`: memory items with the codec and schema-checked values, against
 * the server as `npm start` runs it (DynamoDB Local, its stream, the change hook).
 */

let api: RunningApi;
let client: AgentStateClient;

beforeAll(async () => {
  api = await startApi();
  client = createClient({ baseUrl: api.url, apiKey: 'dev-key' });
});
afterAll(async () => {
  client?.close();
  await api?.stop();
});

const Fact = z.object({ topic: z.string(), score: z.number(), seen: z.date().optional() });
type Fact = z.infer<typeof Fact>;

describe('client.memory(namespace)', () => {
  it('puts and gets values the codec carries, stored as tagged JSON, with versions and expiry', async () => {
    // Prepare
    const namespace = ['users', uniqueId('u'), 'facts'];
    const facts = client.memory(namespace);
    const seen = new Date('2026-05-01T10:00:00.000Z');

    // Act
    const first = await facts.put('diet', { food: 'vegan', seen, tags: new Set(['a']), big: 10n ** 20n, $odd: 1 });
    const second = await facts.put('diet', { food: 'vegetarian', seen }, { ttlSeconds: 3600 });
    const read = await facts.get('diet');
    const raw = await client.memoryItems.get(namespace, 'diet');

    // Assess
    expect(first).toMatchObject({ created: true, version: 1, namespace, key: 'diet' });
    expect(first.value).toEqual({ food: 'vegan', seen, tags: new Set(['a']), big: 10n ** 20n, $odd: 1 });
    expect(second).toMatchObject({ created: false, version: 2 });
    expect(read?.value).toEqual({ food: 'vegetarian', seen });
    expect(read?.value.seen).toBeInstanceOf(Date);
    // An expiry is kept in whole seconds (DynamoDB's TTL attribute).
    expect(Date.parse(read?.expiresAt ?? '') - Date.parse(read?.updatedAt ?? '')).toBeGreaterThan(3_599_000);
    expect(Date.parse(read?.expiresAt ?? '') - Date.parse(read?.updatedAt ?? '')).toBeLessThanOrEqual(3_600_000);
    expect(raw.value).toEqual({ food: 'vegetarian', seen: { $as: 'Date', $v: '2026-05-01T10:00:00.000Z' } });
  });

  it('reads a missing or deleted item as null, and honours If-Match and If-None-Match', async () => {
    // Prepare
    const notes = client.memory([uniqueId('notes')]);
    await notes.put('n', { text: 'one' });

    // Act
    const stale = await notes.put('n', { text: 'stale' }, { ifMatch: 7 }).catch((error: unknown) => error);
    const taken = await notes.put('n', { text: 'again' }, { ifNoneMatch: '*' }).catch((error: unknown) => error);
    const guarded = await notes.put('n', { text: 'two' }, { ifMatch: 1 });
    const refusedDelete = await notes.delete('n', { ifMatch: 1 }).catch((error: unknown) => error);
    await notes.delete('n', { ifMatch: 2 });
    await notes.delete('n');

    // Assess
    expect(stale).toMatchObject({ code: 'version_mismatch', status: 412, currentVersion: 1 });
    expect(taken).toMatchObject({ code: 'version_mismatch', currentVersion: 1 });
    expect(guarded.version).toBe(2);
    expect(refusedDelete).toMatchObject({ code: 'version_mismatch', currentVersion: 2 });
    expect(refusedDelete).toBeInstanceOf(AgentStateError);
    expect(await notes.get('n')).toBeNull();
    expect(await notes.get('never')).toBeNull();
  });

  it('checks values against the schema: a bad write sends nothing, a stored value that no longer fits throws', async () => {
    // Prepare
    const namespace = [uniqueId('typed')];
    const facts = client.memory<Fact>(namespace, { schema: Fact });
    await client.memoryItems.put(namespace, 'old', { value: { topic: 'x', score: 'high' } });

    // Act
    const badWrite = await facts.put('k', { topic: 'x', score: 'high' } as unknown as Fact).catch((error: unknown) => error);
    const nothing = await client.memoryItems.get(namespace, 'k').catch((error: unknown) => error);
    const badRead = await facts.get('old').catch((error: unknown) => error);
    const good = await facts.put('k', { topic: 'travel', score: 0.5 });

    // Assess
    expect(badWrite).toBeInstanceOf(SchemaMismatchError);
    expect(badWrite).toMatchObject({ phase: 'write', key: `${namespace[0]}/k` });
    expect(nothing).toMatchObject({ code: 'not_found' });
    expect(badRead).toBeInstanceOf(SchemaMismatchError);
    expect(badRead).toMatchObject({ phase: 'read', value: { topic: 'x', score: 'high' } });
    expect(good).toMatchObject({ version: 1, value: { topic: 'travel', score: 0.5 } });
  });

  it('refuses what is no object of fields, and item calls on the root, before sending anything', async () => {
    const root = client.memory([]);
    const some = client.memory([uniqueId('refuse')]);

    await expect(some.put('k', new Map([['a', 1]]) as never)).rejects.toBeInstanceOf(CodecError);
    await expect(some.put('k', { run: () => 1 } as never)).rejects.toBeInstanceOf(CodecError);
    await expect(root.get('k')).rejects.toBeInstanceOf(TypeError);
    expect(() => client.memory(Array.from({ length: 9 }, (_, index) => `n${index}`))).toThrow(TypeError);
    expect(await some.list()).toEqual({ namespaces: [] });
  });

  it('searches this namespace and those below it with filters over decoded values, newest first, page by page', async () => {
    // Prepare
    const user = client.memory(['users', uniqueId('search')]);
    const seen = new Date('2026-01-02T03:04:05.000Z');
    await user.child('facts').put('a', { topic: 'travel', score: 0.2, seen });
    await user.child('facts').put('b', { topic: 'travel', score: 0.9 });
    await user.child('notes').put('c', { topic: 'food', score: 0.7, $kind: 'note' });
    await user.child('notes', 'deep').put('d', { topic: 'travel', score: 0.6 });

    // Act
    const travel = await eventually('the four items searchable', async () => {
      const page = await user.search({ filter: { topic: 'travel', score: { $gte: 0.5 } } });
      return page.items.length === 2 ? page : null;
    });
    const byDate = await user.search({ filter: { seen } });
    const byDollar = await user.search({ filter: { $kind: 'note' } });
    const all: string[] = [];
    for await (const item of user.iterate({ limit: 1 })) all.push(item.key);
    const namespaces = await eventually('the namespace list', async () => {
      const list = await user.list();
      return list.namespaces.length === 3 ? list : null;
    });
    const cut = await user.list({ maxDepth: 3 });

    // Assess
    expect(travel.items.map((item) => item.key)).toEqual(['d', 'b']);
    expect(byDate.items.map((item) => item.key)).toEqual(['a']);
    expect(byDate.items[0]?.value.seen).toEqual(seen);
    expect(byDollar.items.map((item) => [item.key, item.value.$kind])).toEqual([['c', 'note']]);
    expect(all).toEqual(['d', 'c', 'b', 'a']);
    expect(namespaces.namespaces).toEqual([
      [...user.namespace, 'facts'],
      [...user.namespace, 'notes'],
      [...user.namespace, 'notes', 'deep'],
    ]);
    expect(cut.namespaces).toEqual([
      [...user.namespace, 'facts'],
      [...user.namespace, 'notes'],
    ]);
  });

  it('passes a filter the API refuses through to its 400, and lists an item’s versions decoded', async () => {
    const notes = client.memory([uniqueId('versions')]);
    await notes.put('k', { step: 1, at: new Date(0) });
    await notes.put('k', { step: 2, at: new Date(1) });

    const refused = await notes.search({ filter: { step: { $regex: '.*' } } as never }).catch((error: unknown) => error);
    const versions = await eventually('the replaced version kept', async () => {
      const page = await notes.versions('k');
      return page.versions.length === 2 ? page : null;
    });

    expect(refused).toMatchObject({ code: 'invalid_request', status: 400, field: 'filter.step' });
    expect(versions.versions.map((item) => [item.version, item.value])).toEqual([
      [2, { step: 2, at: new Date(1) }],
      [1, { step: 1, at: new Date(0) }],
    ]);
  });

  it('holds a key limited to an agent to its own namespaces: others read as absent, writes are refused', async () => {
    // Prepare
    const [own, other] = [uniqueId('own'), uniqueId('other')];
    await client.memory(['agents', other]).put('k', { secret: true });
    const limited = createClient({ baseUrl: api.url, apiKey: await limitedKey(own), agentId: own });

    // Act
    const foreign = await limited.memory(['agents', other]).get('k');
    const write = await limited
      .memory(['agents', other])
      .put('k', { taken: true })
      .catch((error: unknown) => error);
    const mine = await limited.memory(['agents', own]).put('k', { mine: true });

    // Assess
    expect(foreign).toBeNull();
    expect(write).toMatchObject({ code: 'forbidden', status: 403 });
    expect((await client.memory(['agents', other]).get('k'))?.value).toEqual({ secret: true });
    expect(mine.version).toBe(1);
  });
});

const limitedKey = (agent: string) => issueKey(dynamoDbEndpointOf(api), { agents: [agent] });
