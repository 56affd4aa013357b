import { type AgentStateApi, createClient } from '@agentstate/client';
import { AgentStateStore } from '@agentstate/langgraph';
import { Embeddings } from '@langchain/core/embeddings';
import { Annotation, END, type LangGraphRunnableConfig, MemorySaver, START, StateGraph } from '@langchain/langgraph';
import { type IndexConfig, InvalidNamespaceError } from '@langchain/langgraph-checkpoint';
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
function newStore(options: { ttl?: { defaultTtl?: number; refreshOnRead?: boolean }; index?: IndexConfig } = {}): {
  store: AgentStateStore;
  prefix: string;
} {
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

    // Assess: a search sees every put that answered (read-your-writes, no waiting)
    expect(await keys(['users'])).toEqual(['a', 'b', 'c', 'd']);
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
    // Without an index a query is ignored, as LangGraph's InMemoryStore does (a subgraph's node may search so).
    const unranked = await store.search(['users'], { query: 'where did u1 go?', limit: 10 });
    expect(unranked.map((item) => item.key)).toEqual(all.map((item) => item.key));
    expect(unranked.every((item) => item.score === undefined)).toBe(true);
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

    // Assess: the namespaces of puts that answered, at once
    expect(await list()).toEqual([['a', 'b', 'c'], ['a', 'b', 'd'], ['a', 'x', 'c'], ['z']]);
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

  it('refuses a put to a namespace LangGraph calls invalid with its InvalidNamespaceError, before writing; a batch may put under `langgraph`', async () => {
    // Prepare
    const { store, prefix } = newStore();
    const doc = { foo: 'bar' };

    // Act, Assess: as LangGraph's BaseStore.put (an empty namespace or label, a `.`, a `langgraph` root)
    for (const namespace of [[], ['the', 'thing.about'], ['some', 'fun', ''], ['langgraph', 'foo']]) {
      await expect(store.put(namespace, 'foo', doc)).rejects.toThrow(InvalidNamespaceError);
    }
    expect((await memoryItem(`${prefix}/langgraph/foo/foo`)).status).toBe(404);
    await store.put(['foo', 'langgraph', 'foo'], 'bar', doc);
    expect((await store.get(['foo', 'langgraph', 'foo'], 'bar'))?.value).toEqual(doc);
    // batch checks nothing, as LangGraph's stores' batch does not
    await store.batch([{ namespace: ['langgraph', 'foo'], key: 'bar', value: doc }]);
    expect((await store.search(['langgraph', 'foo']))[0]?.value).toEqual(doc);
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

/**
 * A deterministic embeddings model: a text's characters counted into `dims` buckets, normalized
 * (texts that share characters point the same way), and how many texts it embedded.
 */
class CharacterEmbeddings extends Embeddings {
  embedded = 0;

  constructor(readonly dims: number) {
    super({});
  }

  async embedDocuments(texts: string[]): Promise<number[][]> {
    this.embedded += texts.length;
    return texts.map((text) => this.vector(text));
  }

  async embedQuery(text: string): Promise<number[]> {
    return this.vector(text);
  }

  private vector(text: string): number[] {
    const counts = new Array<number>(this.dims).fill(0);
    for (const char of text.toLowerCase()) {
      const bucket = (char.codePointAt(0) as number) % this.dims;
      counts[bucket] = (counts[bucket] as number) + 1;
    }
    const norm = Math.hypot(...counts) || 1;
    return counts.map((count) => count / norm);
  }
}

/** The cosine of two texts' embeddings, as the server ranks them. */
function cosineOf(embeddings: CharacterEmbeddings, a: string, b: string): Promise<number> {
  return Promise.all([embeddings.embedQuery(a), embeddings.embedQuery(b)]).then(([x, y]) =>
    (x as number[]).reduce((sum, value, index) => sum + value * ((y as number[])[index] as number), 0),
  );
}

describe('AgentStateStore semantic search', () => {
  it('embeds each put and ranks a query by cosine similarity, highest first, found as soon as the put answered', async () => {
    // Prepare
    const embeddings = new CharacterEmbeddings(64);
    const { store } = newStore({ index: { dims: 64, embeddings } });
    const docs: Array<[string, Record<string, string>]> = [
      ['doc1', { text: 'short text' }],
      ['doc2', { text: 'longer text document' }],
      ['doc3', { text: 'zany zebra xerxes' }],
      ['doc4', { description: 'text in a description field' }],
    ];
    for (const [key, value] of docs) await store.put(['docs'], key, value);

    // Act
    const results = await store.search(['docs'], { query: 'zebra xerxes', limit: 4 });
    const top2 = await store.search(['docs'], { query: 'zebra xerxes', limit: 2, offset: 1 });

    // Assess: the order and the scores of the whole documents' embeddings (fields default to "$").
    const expected = await Promise.all(
      docs.map(async ([key, value]) => ({ key, score: await cosineOf(embeddings, 'zebra xerxes', JSON.stringify(value, null, 2)) })),
    );
    expected.sort((a, b) => b.score - a.score);
    expect(results.map((item) => item.key)).toEqual(expected.map((entry) => entry.key));
    results.forEach((item, index) => {
      expect(item.score).toBeCloseTo(expected[index]?.score as number, 5);
    });
    expect(results[0]?.key).toBe('doc3');
    expect(top2.map((item) => item.key)).toEqual(expected.slice(1, 3).map((entry) => entry.key));
    expect(store.indexConfig?.dims).toBe(64);
  });

  it('embeds again on update, combines a query with filters, and fills a page with unindexed items, unscored, last', async () => {
    // Prepare
    const embeddings = new CharacterEmbeddings(64);
    const { store } = newStore({ index: { dims: 64, embeddings, fields: ['text'] } });
    await store.put(['t'], 'apple', { text: 'red apple', color: 'red', weight: 4.5 });
    await store.put(['t'], 'car', { text: 'red car', color: 'red', weight: 3 });
    await store.put(['t'], 'green', { text: 'green apple', color: 'green', weight: 4 });
    await store.put(['t'], 'plain', { text: 'red apple', color: 'red', weight: 5 }, false);
    await store.put(['t'], 'untexted', { color: 'red', weight: 1 });
    const before = (await store.search(['t'], { query: 'xylophone' })).find((item) => item.key === 'car')?.score as number;

    // Act
    await store.put(['t'], 'car', { text: 'xylophone', color: 'red', weight: 3 });
    const after = (await store.search(['t'], { query: 'xylophone' })).find((item) => item.key === 'car')?.score as number;
    const red = await store.search(['t'], { query: 'apple', filter: { color: 'red' }, limit: 10 });
    const heavy = await store.search(['t'], { query: 'apple', filter: { weight: { $gte: 4 }, color: 'green' } });

    // Assess
    expect(after).toBeGreaterThan(before);
    expect(after).toBeCloseTo(1, 5);
    expect(red.slice(0, 2).map((item) => item.key)).toEqual(['apple', 'car']);
    expect(red.slice(0, 2).every((item) => typeof item.score === 'number')).toBe(true);
    expect(
      red
        .slice(2)
        .map((item) => [item.key, item.score])
        .sort(),
    ).toEqual([
      ['plain', undefined],
      ['untexted', undefined],
    ]);
    expect(heavy.map((item) => item.key)).toEqual(['green']);
  });

  it('indexes the fields a put names over the store’s, embeds a batch in one call, and refuses a model of other dims before writing', async () => {
    // Prepare
    const embeddings = new CharacterEmbeddings(32);
    const { store } = newStore({ index: { dims: 32, embeddings, fields: ['missing'] } });
    const wrong = newStore({ index: { dims: 16, embeddings: new CharacterEmbeddings(32) } }).store;

    // Act
    await store.batch([
      { namespace: ['f'], key: 'a', value: { title: 'qqqq', body: 'zzzz' }, index: ['title'] },
      { namespace: ['f'], key: 'b', value: { title: 'zzzz', body: 'qqqq' }, index: ['title'] },
      { namespace: ['f'], key: 'c', value: { title: 'qqqq' } },
    ]);
    const found = await store.search(['f'], { query: 'qqqq' });
    const refused = await wrong.put(['f'], 'x', { text: 'abc' }).then(
      () => null,
      (error: Error) => error,
    );

    // Assess: `a` matches by its title; `b`'s title differs; `c` has nothing at the store's field.
    expect(embeddings.embedded).toBe(2);
    expect(found.map((item) => [item.key, item.score === undefined ? undefined : Number(item.score.toFixed(5))])).toEqual([
      ['a', 1],
      ['b', 0],
      ['c', undefined],
    ]);
    expect(refused?.message).toMatch(/dims 16/);
    expect(await wrong.get(['f'], 'x')).toBeNull();
  });

  it('lists a namespace and finds an item as soon as its put answered, and forgets a delete at once', async () => {
    // Prepare
    const { store } = newStore({ index: { dims: 8, embeddings: new CharacterEmbeddings(8) } });

    // Act
    await store.put(['fresh', 'deep', 'ns'], 'k', { text: 'hello' });
    const listed = await store.listNamespaces({ prefix: ['fresh'] });
    const byQuery = await store.search(['fresh'], { query: 'hello' });
    const byFilter = await store.search(['fresh'], { filter: { text: 'hello' } });
    await store.delete(['fresh', 'deep', 'ns'], 'k');
    const gone = await store.search(['fresh'], { query: 'hello' });

    // Assess
    expect(listed).toEqual([['fresh', 'deep', 'ns']]);
    expect(byQuery.map((item) => item.key)).toEqual(['k']);
    expect(byFilter.map((item) => item.key)).toEqual(['k']);
    expect(gone).toEqual([]);
  });
});

describe('AgentStateStore refreshOnRead', () => {
  /** The item as agentstate holds it: its version, its expiry, its embedding. */
  const rawItem = (prefix: string, namespace: string[], key: string) =>
    agentstate.memoryItems.get([prefix, ...namespace], key, { includeEmbedding: true });
  const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
  /** The TTL an item was last put with: agentstate keeps its expiry in whole seconds from the put's second. */
  const ttlOf = (item: { expiresAt?: string; updatedAt: string }) =>
    Math.ceil((Date.parse(item.expiresAt as string) - Date.parse(item.updatedAt)) / 1000);

  it('starts an item’s TTL again on get and search, keeps its embedding, and leaves items without a TTL alone', async () => {
    // Prepare
    const embeddings = new CharacterEmbeddings(16);
    const { store, prefix } = newStore({ ttl: { defaultTtl: 60 }, index: { dims: 16, embeddings } });
    await store.put(['notes'], 'read', { text: 'read me' });
    await store.put(['notes'], 'searched', { text: 'find me' });
    await store.put(['notes'], 'forever', { text: 'no ttl' }, undefined, { ttl: null });
    const before = await rawItem(prefix, ['notes'], 'read');
    const searchedBefore = await rawItem(prefix, ['notes'], 'searched');
    await pause(1_100);

    // Act
    const got = await store.get(['notes'], 'read');
    const found = await store.search(['notes'], { query: 'find me', limit: 3 });

    // Assess
    const after = await rawItem(prefix, ['notes'], 'read');
    const searchedAfter = await rawItem(prefix, ['notes'], 'searched');
    expect(got?.value).toEqual({ text: 'read me' });
    expect(found.map((item) => item.key).sort()).toEqual(['forever', 'read', 'searched']);
    expect(Date.parse(after.expiresAt as string) - Date.parse(before.expiresAt as string)).toBeGreaterThanOrEqual(1_000);
    expect(ttlOf(after)).toBe(3_600);
    expect(Date.parse(searchedAfter.expiresAt as string)).toBeGreaterThan(Date.parse(searchedBefore.expiresAt as string));
    expect(after.embedding).toEqual(before.embedding);
    expect(after.embedding).toHaveLength(16);
    expect(after.value).toEqual(before.value);
    expect((await rawItem(prefix, ['notes'], 'forever')).version).toBe(1);
  });

  it('does nothing with refreshOnRead false', async () => {
    // Prepare
    const { store, prefix } = newStore({ ttl: { defaultTtl: 60, refreshOnRead: false } });
    await store.put(['notes'], 'still', { text: 'x' });
    const before = await rawItem(prefix, ['notes'], 'still');

    // Act
    await store.get(['notes'], 'still');
    await store.search(['notes']);

    // Assess
    expect(await rawItem(prefix, ['notes'], 'still')).toMatchObject({ version: 1, expiresAt: before.expiresAt });
  });

  it('answers 60 concurrent gets of one item, each refreshing it, and a put racing them keeps its value', async () => {
    // Prepare
    const { store, prefix } = newStore({ ttl: { defaultTtl: 60 } });
    await store.put(['hot'], 'item', { n: 0 });

    // Act
    const reads = Array.from({ length: 60 }, () => store.get(['hot'], 'item'));
    const racing = store.put(['hot'], 'item', { n: 1 });
    const answers = await Promise.allSettled([...reads, racing]);

    // Assess
    expect(answers.filter((answer) => answer.status === 'rejected')).toEqual([]);
    const item = await rawItem(prefix, ['hot'], 'item');
    expect(item.value).toEqual({ n: 1 });
    expect(ttlOf(item)).toBe(3_600);
  });
});
