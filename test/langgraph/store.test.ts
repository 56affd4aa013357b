import { type AgentStateApi, createClient } from '@agentstate/client';
import { AgentStateStore } from '@agentstate/langgraph';
import { Annotation, END, type LangGraphRunnableConfig, MemorySaver, START, StateGraph } from '@langchain/langgraph';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type RunningApi, startApi } from '../helpers/e2e.js';

/**
 * AgentStateStore, LangGraph's BaseStore on agentstate's memory items, on a real server and
 * DynamoDB Local: what a graph's nodes put is a memory item any agentstate client reads.
 */
let api: RunningApi;
let agentstate: AgentStateApi;
let stores = 0;

/** A store with a prefix of its own, so that no two tests see each other's items. */
function newStore(options: { ttl?: { defaultTtl?: number } } = {}): { store: AgentStateStore; prefix: string } {
  stores += 1;
  const prefix = `store-${stores}`;
  return { store: new AgentStateStore({ baseUrl: api.url, apiKey: 'dev-key', prefix, ...options }), prefix };
}

/** The item as agentstate's API answers it. */
async function memoryItem(path: string): Promise<{ status: number; body: Record<string, unknown> }> {
  const response = await fetch(`${api.url}/v1/memory/${path}`, { headers: { authorization: 'Bearer dev-key' } });
  return { status: response.status, body: response.status === 200 ? ((await response.json()) as Record<string, unknown>) : {} };
}

beforeAll(async () => {
  api = await startApi();
  agentstate = createClient({ baseUrl: api.url, apiKey: 'dev-key' });
});
afterAll(async () => {
  await api?.stop();
});

describe('AgentStateStore', () => {
  it('puts, gets, replaces and deletes items, any label and key, kept as memory items', async () => {
    // Prepare
    const { store, prefix } = newStore();
    const namespace = ['users', 'Zoë Müller', 'facts'];
    const value = { food: 'vegetarian', since: 2019, nested: { a: [1, null, 'x'] }, none: null };

    // Act
    await store.put(namespace, 'diet/2026', value);
    const first = await store.get(namespace, 'diet/2026');
    await store.put(namespace, 'diet/2026', { food: 'vegan' });
    const replaced = await store.get(namespace, 'diet/2026');
    const raw = await memoryItem(`${prefix}/users/Zo~C3~AB~20M~C3~BCller/facts/diet~2F2026`);
    await store.delete(namespace, 'diet/2026');
    await store.delete(namespace, 'diet/2026');

    // Assess
    expect(first).toMatchObject({ namespace, key: 'diet/2026', value });
    expect(first?.createdAt).toBeInstanceOf(Date);
    expect(replaced?.value).toEqual({ food: 'vegan' });
    expect(replaced?.createdAt.getTime()).toBe(first?.createdAt.getTime());
    expect(replaced?.updatedAt.getTime()).toBeGreaterThanOrEqual(first?.updatedAt.getTime() ?? 0);
    expect(raw).toMatchObject({ status: 200, body: { value: { food: 'vegan' }, version: 2 } });
    expect(await store.get(namespace, 'diet/2026')).toBeNull();
    expect(await store.get(['users', 'nobody'], 'diet')).toBeNull();
  });

  it('sets expiry from ttl minutes, the store default, or none, and refuses a bad ttl before writing', async () => {
    // Prepare
    const { store, prefix } = newStore({ ttl: { defaultTtl: 60 } });
    const before = Date.now();

    // Act
    await store.put(['notes'], 'short', { text: 'soon gone' }, undefined, { ttl: 2 });
    await store.put(['notes'], 'default', { text: 'an hour' });
    await store.put(['notes'], 'forever', { text: 'kept' }, undefined, { ttl: null });

    // Assess
    const expiry = async (key: string) => (await memoryItem(`${prefix}/notes/${key}`)).body.expiresAt as string | undefined;
    expect(Date.parse((await expiry('short')) ?? '') - before).toBeGreaterThanOrEqual(119_000);
    expect(Date.parse((await expiry('short')) ?? '') - before).toBeLessThan(130_000);
    expect(Date.parse((await expiry('default')) ?? '') - before).toBeGreaterThanOrEqual(3_599_000);
    expect(await expiry('forever')).toBeUndefined();
    await expect(store.put(['notes'], 'bad', { text: 'x' }, undefined, { ttl: 0 })).rejects.toThrow(RangeError);
    expect((await memoryItem(`${prefix}/notes/bad`)).status).toBe(404);
    expect(() => new AgentStateStore({ baseUrl: api.url, apiKey: 'dev-key', ttl: { defaultTtl: -1 } })).toThrow(RangeError);
  });

  it('searches under a namespace prefix, label by label, with filters, limit and offset', async () => {
    // Prepare
    const { store } = newStore();
    await store.put(['users', 'u1', 'trips'], 'a', { topic: 'travel', score: 0.9 });
    await store.put(['users', 'u1', 'trips'], 'b', { topic: 'travel', score: 0.4 });
    await store.put(['users', 'u1'], 'c', { topic: 'food', score: 0.7 });
    await store.put(['users', 'u10'], 'd', { topic: 'travel', score: 1 });

    // Act
    const keys = async (prefix: string[], options: Parameters<AgentStateStore['search']>[1] = {}) =>
      (await store.search(prefix, options)).map((item) => item.key).sort();

    // Assess (search is eventually consistent: it follows writes within a moment)
    await expect.poll(() => keys(['users']), { timeout: 10_000 }).toEqual(['a', 'b', 'c', 'd']);
    expect(await keys(['users', 'u1'])).toEqual(['a', 'b', 'c']);
    expect(await keys(['users', 'u1'], { filter: { topic: 'travel' } })).toEqual(['a', 'b']);
    expect(await keys(['users'], { filter: { score: { $gte: 0.7 } } })).toEqual(['a', 'c', 'd']);
    expect(await keys(['users'], { filter: { topic: { $ne: 'travel' } } })).toEqual(['c']);
    expect(await keys([], { filter: { topic: 'travel' } })).toEqual(['a', 'b', 'd']);
    const all = await store.search(['users'], { limit: 10 });
    const page = await store.search(['users'], { limit: 2, offset: 1 });
    expect(all).toHaveLength(4);
    expect(page.map((item) => item.key)).toEqual(all.slice(1, 3).map((item) => item.key));
    expect(all[0]).toMatchObject({ namespace: expect.any(Array), score: undefined });
    await expect(store.search(['users'], { query: 'where did u1 go?' })).rejects.toThrow(/no semantic search/);
  });

  it('lists namespaces by prefix, suffix, wildcard and depth, with limit and offset', async () => {
    // Prepare
    const { store } = newStore();
    await store.put(['a', 'b', 'c'], 'k', { n: 1 });
    await store.put(['a', 'b', 'd'], 'k', { n: 2 });
    await store.put(['a', 'x', 'c'], 'k', { n: 3 });
    await store.put(['z'], 'k', { n: 4 });

    // Act
    const list = (options: Parameters<AgentStateStore['listNamespaces']>[0] = {}) => store.listNamespaces(options);

    // Assess
    await expect.poll(() => list(), { timeout: 10_000 }).toEqual([['a', 'b', 'c'], ['a', 'b', 'd'], ['a', 'x', 'c'], ['z']]);
    expect(await list({ prefix: ['a', 'b'] })).toEqual([
      ['a', 'b', 'c'],
      ['a', 'b', 'd'],
    ]);
    expect(await list({ suffix: ['c'] })).toEqual([
      ['a', 'b', 'c'],
      ['a', 'x', 'c'],
    ]);
    expect(await list({ prefix: ['a', '*', 'c'] })).toEqual([
      ['a', 'b', 'c'],
      ['a', 'x', 'c'],
    ]);
    expect(await list({ maxDepth: 2 })).toEqual([['a', 'b'], ['a', 'x'], ['z']]);
    expect(await list({ prefix: ['a'], maxDepth: 2 })).toEqual([
      ['a', 'b'],
      ['a', 'x'],
    ]);
    expect(await list({ suffix: ['d'], maxDepth: 1 })).toEqual([['a']]);
    expect(await list({ limit: 2, offset: 1 })).toEqual([
      ['a', 'b', 'd'],
      ['a', 'x', 'c'],
    ]);
  });

  it('keeps stores with different prefixes apart, while any agentstate client reads both', async () => {
    // Prepare
    const one = newStore();
    const two = newStore();

    // Act
    await one.store.put(['shared'], 'k', { by: 'one' });
    await two.store.put(['shared'], 'k', { by: 'two' });

    // Assess
    expect((await one.store.get(['shared'], 'k'))?.value).toEqual({ by: 'one' });
    expect((await two.store.get(['shared'], 'k'))?.value).toEqual({ by: 'two' });
    await expect.poll(() => one.store.search(['shared']), { timeout: 10_000 }).toHaveLength(1);
    expect((await one.store.search(['shared']))[0]?.value).toEqual({ by: 'one' });
    await expect.poll(() => one.store.listNamespaces(), { timeout: 10_000 }).toEqual([['shared']]);
    const listed = async () =>
      (await agentstate.request<{ namespaces: string[][] }>({ method: 'GET', path: '/v1/memory', query: { prefix: two.prefix } })).body
        .namespaces;
    await expect.poll(listed, { timeout: 10_000 }).toEqual([[two.prefix, 'shared']]);
  });

  it('runs a batch as LangGraph does: reads see the items before it, the last put of an item wins', async () => {
    // Prepare
    const { store } = newStore();
    await store.put(['b'], 'k', { v: 0 });

    // Act
    const results = await store.batch([
      { namespace: ['b'], key: 'k', value: { v: 1 } },
      { namespace: ['b'], key: 'k' },
      { namespace: ['b'], key: 'k', value: { v: 2 } },
      { namespace: ['b'], key: 'gone', value: null },
    ]);

    // Assess
    expect(results[0]).toBeUndefined();
    expect(results[1]?.value).toEqual({ v: 0 });
    expect((await store.get(['b'], 'k'))?.value).toEqual({ v: 2 });
  });

  it('is the store of a graph: what one thread remembers, another thread reads', async () => {
    // Prepare: a node that remembers the user's name, and one that greets with what it finds.
    const { store } = newStore();
    const State = Annotation.Root({ name: Annotation<string | undefined>(), greeting: Annotation<string>() });
    const graph = new StateGraph(State)
      .addNode('greet', async (state, config: LangGraphRunnableConfig) => {
        const user = config.configurable?.user_id as string;
        if (state.name) await config.store?.put(['users', user], 'profile', { name: state.name });
        const profile = await config.store?.get(['users', user], 'profile');
        return { greeting: `hello ${(profile?.value.name as string | undefined) ?? 'stranger'}` };
      })
      .addEdge(START, 'greet')
      .addEdge('greet', END)
      .compile({ checkpointer: new MemorySaver(), store });

    // Act
    const first = await graph.invoke({ name: 'Ada' }, { configurable: { thread_id: 't1', user_id: 'u1' } });
    const second = await graph.invoke({}, { configurable: { thread_id: 't2', user_id: 'u1' } });
    const other = await graph.invoke({}, { configurable: { thread_id: 't3', user_id: 'u2' } });

    // Assess
    expect([first.greeting, second.greeting, other.greeting]).toEqual(['hello Ada', 'hello Ada', 'hello stranger']);
  });
});
