import { QueryCommand } from '@aws-sdk/lib-dynamodb';
import { beforeAll, describe, expect, it } from 'vitest';
import { MemoryService } from '../../functions/core/memory/memory-service.js';
import { codeBytes, embeddingCode, QueryVector } from '../../functions/core/memory/memory-vector.js';
import { OVERFLOW_PAGE, pageIndexOf, pagesFor } from '../../functions/store/memory/memory-codes.js';
import { DynamoDbMemoryStore } from '../../functions/store/memory/memory-store.js';
import { forgetNamespace, namespaceCreations } from '../../functions/store/memory/namespace-entries.js';
import { dynamoDbClient } from '../../functions/store/table/client.js';
import * as keys from '../../functions/store/table/keys.js';
import { TableClient } from '../../functions/store/table/table-client.js';
import { createTestTable, dynamoEndpoint } from '../helpers/dynamodb.js';
import { storedCosine, vectorOf } from '../helpers/vectors.js';

/**
 * Vector search reads the codes of the embeddings (one byte a number, in pages beside the
 * items: store/memory/memory-codes.ts), then fetches and scores exactly only the items whose
 * bound reaches the best (core/memory/memory-service.ts `ranked`). Its answers must be those of
 * scoring every embedding, whatever puts, replaces, deletes and races left in the pages.
 */
let table: TableClient;
let service: MemoryService;
/** Keys fetched by BatchGetItem since the last reset: what a search scored exactly. */
let fetched = 0;
/** Commands sent since the last reset. */
let sent: string[] = [];
const tenant = 'vectors';

beforeAll(async () => {
  const tableName = await createTestTable('memory-vector-pages');
  const client = dynamoDbClient({ AGENTSTATE_DYNAMODB_ENDPOINT: dynamoEndpoint() });
  client.middlewareStack.add(
    (next, context) => async (args) => {
      sent.push(String(context.commandName).replace(/Command$/, ''));
      if (context.commandName === 'BatchGetItemCommand') {
        const input = args.input as { RequestItems: Record<string, { Keys: unknown[] }> };
        fetched += Object.values(input.RequestItems).reduce((sum, request) => sum + request.Keys.length, 0);
      }
      return next(args);
    },
    { step: 'initialize', name: 'countFetches' },
  );
  table = new TableClient(client, tableName);
  service = new MemoryService(new DynamoDbMemoryStore(table));
});

const none = { condition: { kind: 'none' as const }, author: null };

async function put(namespace: string[], key: string, value: Record<string, unknown>, embedding?: number[]) {
  await service.put(tenant, null, { namespace, key }, { value: value as never, ...(embedding ? { embedding } : {}) }, none);
}

async function inBatches<T>(list: readonly T[], each: (entry: T) => Promise<unknown>, size = 25): Promise<void> {
  for (let start = 0; start < list.length; start += size) await Promise.all(list.slice(start, start + size).map(each));
}

async function pagesOf(namespace: string[]): Promise<Array<Record<string, unknown>>> {
  const items: Array<Record<string, unknown>> = [];
  let start: Record<string, unknown> | undefined;
  do {
    const page = await table.send(
      new QueryCommand({
        TableName: table.tableName,
        KeyConditionExpression: 'pk = :pk AND begins_with(sk, :pages)',
        ExpressionAttributeValues: { ':pk': keys.memoryNamespace(tenant, namespace), ':pages': 'V#' },
        ConsistentRead: true,
        ExclusiveStartKey: start,
      }),
    );
    items.push(...(page.Items ?? []));
    start = page.LastEvaluatedKey;
  } while (start);
  return items;
}

describe('the code of an embedding', () => {
  it('gives a cosine within the bound it gives, for any vector and query', () => {
    for (const dimensions of [1, 3, 64, 384, 1536]) {
      for (let seed = 0; seed < 40; seed++) {
        // Skewed vectors too: one large number makes the scale, and so the bound, coarse.
        const stored = vectorOf(seed, dimensions).map((entry, index) => (seed % 4 === 0 && index === 0 ? entry * 40 : entry));
        const query = new QueryVector(vectorOf(seed + 1000, dimensions));
        const code = embeddingCode(Float32Array.from(stored));
        expect(code.length).toBe(codeBytes(dimensions));
        const estimate = query.estimate(code);
        expect(estimate).not.toBeNull();
        const exact = query.cosine(Float32Array.from(stored));
        expect(Math.abs(exact - (estimate?.score ?? Number.NaN))).toBeLessThanOrEqual(estimate?.bound ?? 0);
      }
    }
    // A code of other dimensions is no estimate.
    expect(new QueryVector([1, 2, 3]).estimate(embeddingCode(Float32Array.from([1, 2])))).toBeNull();
  });
});

describe('search with a vector over pages of codes', () => {
  it('answers what scoring every embedding answers, after replaces, deletes and embeddings taken away, fetching a few items', async () => {
    // Prepare: 1,500 items of 64 numbers; then 300 with new embeddings, 150 deleted, 100 put
    // again without one, in one namespace, and 100 more in a second one under the same prefix.
    const dimensions = 64;
    const namespace = ['exact', 'a'];
    const second = ['exact', 'b'];
    const truth = new Map<string, { embedding: number[]; topic: string }>();
    const keep = (key: string, seed: number) => {
      const entry = { embedding: vectorOf(seed, dimensions), topic: seed % 10 === 0 ? 'travel' : 'food' };
      truth.set(key, entry);
      return entry;
    };
    const all = Array.from({ length: 1500 }, (_, index) => index);
    await inBatches(all, async (index) => {
      const entry = keep(`a/k${index}`, index);
      await put(namespace, `k${index}`, { topic: entry.topic, n: index }, entry.embedding);
    });
    await inBatches(all.slice(0, 100), async (index) => {
      const entry = keep(`b/k${index}`, 50_000 + index);
      await put(second, `k${index}`, { topic: entry.topic, n: index }, entry.embedding);
    });
    await inBatches(all.slice(0, 300), async (index) => {
      const entry = keep(`a/k${index * 5}`, 10_000 + index);
      await put(namespace, `k${index * 5}`, { topic: entry.topic, n: index }, entry.embedding);
    });
    await inBatches(all.slice(0, 150), async (index) => {
      truth.delete(`a/k${index * 7 + 1}`);
      await service.delete(tenant, null, { namespace, key: `k${index * 7 + 1}` }, none);
    });
    await inBatches(all.slice(0, 100), async (index) => {
      truth.delete(`a/k${index * 11 + 2}`);
      await put(namespace, `k${index * 11 + 2}`, { topic: 'food', n: -1 });
    });

    // Act and assess: 12 queries, with and without a filter, against every embedding scored.
    for (let query = 0; query < 12; query++) {
      const vector = vectorOf(900_000 + query, dimensions);
      const filtered = query % 2 === 1;
      const expected = [...truth.entries()]
        .filter(([, entry]) => !filtered || entry.topic === 'travel')
        .map(([key, entry]) => ({ key, score: storedCosine(vector, entry.embedding) }))
        .sort((a, b) => b.score - a.score)
        .slice(0, 10);
      fetched = 0;
      const page = await service.search(tenant, null, {
        namespacePrefix: ['exact'],
        vector,
        limit: 10,
        ...(filtered ? { filter: { topic: 'travel' } } : {}),
      });
      expect(page.items.map((item) => `${item.namespace[1]}/${item.key}`)).toEqual(expected.map((entry) => entry.key));
      page.items.forEach((item, index) => {
        expect(item.score).toBeCloseTo(expected[index]?.score as number, 6);
      });
      // Scored exactly: a few dozen of the 1,500 (a 10 % filter needs about ten times as many).
      expect(fetched).toBeLessThan(filtered ? 600 : 150);
    }
    // Over 2,000 writes before the queries: 16-20 s on a quiet machine, and past the default
    // 30 s in a loaded CI run, whose unfinished writes then counted in the next test's requests.
  }, 120_000);

  it('puts an embedding in three writes (the dimensions, the item, its code), a fourth when it creates the item, and deletes it in two', async () => {
    const namespace = ['requests'];
    await put(namespace, 'first', { n: 0 }, vectorOf(1, 16));
    sent = [];
    // Creating: the namespace listed again after the item, counting the creation (namespace-entries.ts).
    await put(namespace, 'fresh', { n: 1 }, vectorOf(2, 16));
    expect(sent).toEqual(['UpdateItem', 'UpdateItem', 'UpdateItem', 'UpdateItem']);
    sent = [];
    await put(namespace, 'fresh', { n: 2 }, vectorOf(3, 16));
    expect(sent).toEqual(['UpdateItem', 'UpdateItem', 'UpdateItem']);
    sent = [];
    await service.delete(tenant, null, { namespace, key: 'fresh' }, none);
    expect(sent).toEqual(['UpdateItem', 'UpdateItem']);
  });

  it('ranks a put at once and never again once its delete answered', async () => {
    const namespace = ['at-once'];
    await inBatches(
      Array.from({ length: 50 }, (_, index) => index),
      (index) => put(namespace, `k${index}`, { n: index }, vectorOf(index, 16)),
    );
    const mine = vectorOf(123_456, 16);
    await put(namespace, 'mine', { n: -1 }, mine);
    const found = await service.search(tenant, null, { namespacePrefix: namespace, vector: mine, limit: 1 });
    expect(found.items.map((item) => item.key)).toEqual(['mine']);
    expect(found.items[0]?.score).toBeCloseTo(1, 6);
    await service.delete(tenant, null, { namespace, key: 'mine' }, none);
    const after = await service.search(tenant, null, { namespacePrefix: namespace, vector: mine, limit: 50 });
    expect(after.items.map((item) => item.key)).not.toContain('mine');
    // Its code went with it.
    expect(JSON.stringify(Object.keys(Object.assign({}, ...(await pagesOf(namespace)))))).not.toContain('c:mine');
  });

  it('keeps every code of 100 concurrent puts, and the newest of 50 concurrent puts of one key', async () => {
    const namespace = ['many-at-once'];
    const dimensions = 32;
    // 100 writers into one namespace at once: every one found by its own vector.
    await Promise.all(Array.from({ length: 100 }, (_, index) => put(namespace, `k${index}`, { n: index }, vectorOf(index, dimensions))));
    const everything = await service.search(tenant, null, { namespacePrefix: namespace, vector: vectorOf(0, dimensions), limit: 100 });
    expect(everything.items.map((item) => item.key).sort()).toEqual(Array.from({ length: 100 }, (_, index) => `k${index}`).sort());
    // 50 writers of one key at once, each with its own embedding: the page keeps the code of
    // whichever the item kept, so a search with the item's embedding finds it at 1.
    await Promise.all(
      Array.from({ length: 50 }, (_, index) => put(namespace, 'contested', { n: index }, vectorOf(7_000 + index, dimensions))),
    );
    const item = await service.get(tenant, null, namespace, 'contested', { withEmbedding: true });
    const page = (await pagesOf(namespace)).find((entry) => 'n:contested' in entry) as Record<string, unknown>;
    expect(page['n:contested']).toBe(keys.memoryHistoryVersion(item.createdAt, item.version));
    expect(page['c:contested']).toEqual(embeddingCode(Float32Array.from(item.embedding as number[])));
    const best = await service.search(tenant, null, { namespacePrefix: namespace, vector: item.embedding as number[], limit: 1 });
    expect(best.items[0]?.key).toBe('contested');
    expect(best.items[0]?.score).toBeCloseTo(1, 6);
  });

  it('reads the items of a namespace whose page passed 400 KB instead, and every put still lands', async () => {
    // 100 keys of one page of a 4,096-number layout: some 97 codes of 4 KB fill a page.
    const namespace = ['overflow'];
    const dimensions = 4096;
    const pages = pagesFor(dimensions);
    const crowded: string[] = [];
    for (let candidate = 0; crowded.length < 100; candidate++) {
      if (pageIndexOf(`k${candidate}`, pages) === 0) crowded.push(`k${candidate}`);
    }
    await inBatches(crowded, (key) => put(namespace, key, { key }, vectorOf(Number(key.slice(1)), dimensions)), 10);
    const marks = await pagesOf(namespace);
    expect(marks.some((entry) => entry.sk === OVERFLOW_PAGE)).toBe(true);
    for (const key of [crowded[0], crowded[50], crowded[99]] as string[]) {
      const vector = vectorOf(Number(key.slice(1)), dimensions);
      const found = await service.search(tenant, null, { namespacePrefix: namespace, vector, limit: 3 });
      expect(found.items[0]?.key).toBe(key);
      expect(found.items[0]?.score).toBeCloseTo(1, 6);
      expect(found.items).toHaveLength(3);
    }
  });

  it('leaves no page of a namespace taken off the list, but keeps a page a put wrote to', async () => {
    const namespace = ['emptied'];
    await inBatches(
      Array.from({ length: 20 }, (_, index) => index),
      (index) => put(namespace, `k${index}`, { n: index }, vectorOf(index, 8)),
    );
    expect((await pagesOf(namespace)).length).toBeGreaterThan(0);
    await inBatches(
      Array.from({ length: 20 }, (_, index) => index),
      (index) => service.delete(tenant, null, { namespace, key: `k${index}` }, none),
    );
    await put(namespace, 'late', { n: 1 }, vectorOf(99, 8));
    await forgetNamespace(table, tenant, namespace, await namespaceCreations(table, tenant, namespace));
    const left = await pagesOf(namespace);
    expect(left).toHaveLength(1);
    expect(left[0]?.['c:late']).toBeDefined();
    await service.delete(tenant, null, { namespace, key: 'late' }, none);
    await forgetNamespace(table, tenant, namespace, await namespaceCreations(table, tenant, namespace));
    expect(await pagesOf(namespace)).toEqual([]);
  });
});
