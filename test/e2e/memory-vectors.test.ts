import { type DynamoDBDocumentClient, PutCommand, QueryCommand } from '@aws-sdk/lib-dynamodb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { embeddingBytes, memoryItem } from '../../functions/store/memory/memory-codecs.js';
import { defaultTableName } from '../../functions/store/table/table.js';
import { dynamoDbEndpointOf, issueKey, rawTableClient } from '../helpers/admin.js';
import { type ApiClient, apiClient, uniqueId } from '../helpers/api-client.js';
import { type RunningApi, startApi } from '../helpers/e2e.js';
import { waitFor } from '../helpers/events.js';
import { storedCosine, vectorOf } from '../helpers/vectors.js';

/**
 * Semantic search over memory items (API.md section 10): embeddings put beside values, a search
 * with `vector` ranked by cosine similarity, and read-your-writes: a search and the namespace
 * list see a put as soon as it answered, with no waiting for the change hook.
 */
let api: RunningApi;
let http: ApiClient;

let raw: DynamoDBDocumentClient;

beforeAll(async () => {
  api = await startApi();
  http = api.client;
  raw = rawTableClient(dynamoDbEndpointOf(api));
});
afterAll(async () => {
  raw?.destroy();
  await api?.stop();
});

const itemPath = (namespace: string[], key: string) => `/v1/memory/${[...namespace, key].join('/')}`;

async function put(namespace: string[], key: string, value: unknown, embedding?: number[]) {
  const response = await http.put(itemPath(namespace, key), { value, ...(embedding ? { embedding } : {}) });
  expect([200, 201], response.text).toContain(response.status);
  return response;
}

async function search(body: Record<string, unknown>, client: ApiClient = http, headers: Record<string, string> = {}) {
  const response = await client.post('/v1/memory/search', body, { headers });
  expect(response.status, response.text).toBe(200);
  return response.body as {
    items: Array<{ key: string; score?: number; embedding?: number[]; value: Record<string, unknown> }>;
    next?: string;
  };
}

describe('memory items with embeddings', () => {
  it('keeps an embedding beside the value: not in a plain read, as 32-bit floats when asked, outside the value limit', async () => {
    // Prepare
    const ns = ['vectors', uniqueId('keep')];
    const embedding = [0.1, -0.25, 1e-3, 3];
    const big = { text: 'x'.repeat(256 * 1024 - 11) };

    // Act
    const created = await put(ns, 'a', { text: 'hello' }, embedding);
    const plain = await http.get(itemPath(ns, 'a'));
    const withEmbedding = await http.get(`${itemPath(ns, 'a')}?includeEmbedding=true`);
    const atLimit = await http.put(itemPath(ns, 'big'), { value: big, embedding: vectorOf(1, 4) });
    const replaced = await put(ns, 'a', { text: 'no embedding now' });
    const after = await http.get(`${itemPath(ns, 'a')}?includeEmbedding=true`);

    // Assess
    expect(created.status).toBe(201);
    expect(created.body.embedding).toBeUndefined();
    expect(plain.body).toEqual(expect.not.objectContaining({ embedding: expect.anything() }));
    expect(withEmbedding.body.embedding).toEqual(Array.from(Float32Array.from(embedding)));
    expect(atLimit.status, atLimit.text).toBe(201);
    expect(replaced.status).toBe(200);
    expect(after.body.embedding).toBeUndefined();
  });

  it('refuses an embedding that is not 1–4,096 finite numbers, not all zero, or of other dimensions than its namespace’s', async () => {
    // Prepare
    const ns = ['vectors', uniqueId('refuse')];
    await put(ns, 'first', { n: 1 }, [1, 0, 0]);

    // Act
    const answers = await Promise.all(
      [[], Array.from({ length: 4097 }, () => 1), [1, 'two', 3], [0, 0, 0], [1, 2], { 0: 1 }].map((embedding) =>
        http.put(itemPath(ns, 'bad'), { value: { n: 2 }, embedding }),
      ),
    );
    const maxDimensions = await http.put(itemPath(['vectors', uniqueId('max')], 'k'), { value: {}, embedding: vectorOf(2, 4096) });
    const otherNamespace = await http.put(itemPath([...ns, 'below'], 'k'), { value: {}, embedding: [1, 2] });

    // Assess
    for (const answer of answers) expect(answer.status, answer.text).toBe(400);
    expect(answers[4]?.body).toMatchObject({ code: 'invalid_request', field: 'embedding', dimensions: 3 });
    expect((await http.get(itemPath(ns, 'bad'))).status).toBe(404);
    expect(maxDimensions.status).toBe(201);
    expect(otherNamespace.status).toBe(201);
  });

  it('lets one of two dimensions win in a new namespace, whatever the race, and 50 puts of one dimension all land', async () => {
    // Prepare
    const ns = ['vectors', uniqueId('race')];

    // Act
    const [three, four] = await Promise.all([
      http.put(itemPath(ns, 'three'), { value: {}, embedding: [1, 2, 3] }),
      http.put(itemPath(ns, 'four'), { value: {}, embedding: [1, 2, 3, 4] }),
    ]);
    const winner = three.status === 201 ? 3 : 4;
    const many = await Promise.all(
      Array.from({ length: 50 }, (_, n) => http.put(itemPath(ns, `k${n}`), { value: { n }, embedding: vectorOf(n + 10, winner) })),
    );
    const found = await search({ namespacePrefix: ns, vector: vectorOf(99, winner), limit: 500 });

    // Assess
    expect([three.status, four.status].sort()).toEqual([201, 400]);
    expect(many.map((answer) => answer.status)).toEqual(Array(50).fill(201));
    expect(found.items).toHaveLength(51);
  });
});

describe('search with a vector', () => {
  it('ranks every item of the vector’s dimensions under the prefix by exact cosine, with filters, at once after the puts', async () => {
    // Prepare: 60 items in two namespaces, some without an embedding, one namespace of other dimensions.
    const root = ['vectors', uniqueId('rank')];
    const vectors = new Map<string, number[]>();
    await Promise.all(
      Array.from({ length: 60 }, (_, n) => {
        const ns = [...root, n % 2 === 0 ? 'even' : 'odd'];
        const vector = vectorOf(n + 1, 16);
        vectors.set(`k${n}`, vector);
        return put(ns, `k${n}`, { n, topic: n % 3 === 0 ? 'travel' : 'food', note: 'y'.repeat(n % 5 === 0 ? 600 : 10) }, vector);
      }),
    );
    await put([...root, 'even'], 'plain', { n: -1, topic: 'travel' });
    await put([...root, 'other'], 'small', { n: -2 }, [1, 2, 3]);
    const query = vectorOf(1000, 16);
    const expected = [...vectors]
      .map(([key, vector]) => ({ key, n: Number(key.slice(1)), score: storedCosine(query, vector) }))
      .sort((a, b) => b.score - a.score);

    // Act
    const all = await search({ namespacePrefix: root, vector: query, limit: 500 });
    const top5 = await search({ namespacePrefix: root, vector: query, limit: 5 });
    const travel = await search({ namespacePrefix: root, vector: query, filter: { topic: 'travel', n: { $gte: 10 } }, limit: 500 });
    const longNote = await search({ namespacePrefix: root, vector: query, filter: { note: 'y'.repeat(600) }, limit: 500 });
    const smallOnly = await search({ namespacePrefix: root, vector: [3, 2, 1], includeEmbedding: true });

    // Assess
    expect(all.items.map((item) => item.key)).toEqual(expected.map((entry) => entry.key));
    all.items.forEach((item, index) => {
      expect(item.score).toBeCloseTo(expected[index]?.score as number, 6);
    });
    expect(all.next).toBeUndefined();
    expect(top5.items.map((item) => item.key)).toEqual(expected.slice(0, 5).map((entry) => entry.key));
    expect(travel.items.map((item) => item.key)).toEqual(
      expected.filter((entry) => entry.n % 3 === 0 && entry.n >= 10).map((entry) => entry.key),
    );
    expect(longNote.items.map((item) => item.key)).toEqual(expected.filter((entry) => entry.n % 5 === 0).map((entry) => entry.key));
    expect(smallOnly.items).toEqual([expect.objectContaining({ key: 'small', embedding: [1, 2, 3], score: expect.any(Number) })]);
    expect(smallOnly.items[0]?.score).toBeCloseTo(10 / 14, 6);
    expect(all.items.every((item) => item.embedding === undefined)).toBe(true);
  });

  it('finds a put and stops finding a delete as soon as each answered, the namespace listed at once, under a shorter prefix too', async () => {
    // Prepare
    const root = ['vectors', uniqueId('ryw')];
    const ns = [...root, 'new', 'deep'];

    // Act
    await put(ns, 'k', { text: 'fresh' }, [1, 0]);
    const byVector = await search({ namespacePrefix: root, vector: [1, 0.1] });
    const byRecency = await search({ namespacePrefix: root });
    const listed = await http.get(`/v1/memory?prefix=${root.join('/')}`);
    await put([...root, 'plain'], 'p', { text: 'no embedding' });
    const plainListed = await http.get(`/v1/memory?prefix=${root.join('/')}`);
    const plainFound = await search({ namespacePrefix: [...root, 'plain'] });
    await http.delete(itemPath(ns, 'k'));
    const afterDelete = await search({ namespacePrefix: root, vector: [1, 0.1] });

    // Assess
    expect(byVector.items.map((item) => item.key)).toEqual(['k']);
    expect(byRecency.items.map((item) => item.key)).toEqual(['k']);
    expect(listed.body.namespaces).toEqual([ns]);
    expect(plainListed.body.namespaces).toEqual([ns, [...root, 'plain']]);
    expect(plainFound.items.map((item) => item.key)).toEqual(['p']);
    expect(afterDelete.items).toEqual([]);
  });

  it('refuses a bad vector or a cursor with a vector, and leaves out an expired item', async () => {
    // Prepare
    const ns = ['vectors', uniqueId('edges')];
    await http.put(itemPath(ns, 'short'), { value: { n: 1 }, embedding: [1, 1], ttlSeconds: 3 });
    await put(ns, 'long', { n: 2 }, [1, -1]);

    // Act
    const bad = await Promise.all(
      [{ vector: [] }, { vector: [0, 0] }, { vector: ['a'] }, { vector: [1, 1], cursor: 'x' }].map((body) =>
        http.post('/v1/memory/search', { namespacePrefix: ns, ...body }),
      ),
    );
    const before = await search({ namespacePrefix: ns, vector: [1, 1] });
    await new Promise((resolve) => setTimeout(resolve, 3_100));
    const after = await search({ namespacePrefix: ns, vector: [1, 1] });

    // Assess
    for (const answer of bad) expect(answer.status, answer.text).toBe(400);
    expect(before.items.map((item) => item.key)).toEqual(['short', 'long']);
    expect(after.items.map((item) => item.key)).toEqual(['long']);
  });

  it('reads pages of codes past 1 MB in ranges side by side, every item once', async () => {
    // Prepare: 300 items with keys of every first character and embeddings of 4,096 numbers (the
    // most an embedding may have), whose codes (4.1 KB each, in pages beside the items: about
    // 1.25 MB) pass one 1 MB read. (700 of 1,536 numbers, 1.1 MB of codes, took twice as long
    // to put: what is read is bytes of codes, not items.)
    const dimensions = 4096;
    const ns = ['vectors', uniqueId('large')];
    const alphabet = '-.0123456789:@ABCDEFGHIJKLMNOPQRSTUVWXYZ_abcdefghijklmnopqrstuvwxyz~';
    const keys = Array.from({ length: 300 }, (_, n) => `${alphabet[n % alphabet.length]}${n}`);
    for (let start = 0; start < keys.length; start += 50) {
      await Promise.all(
        keys.slice(start, start + 50).map((key, n) => put(ns, key, { pad: 'z'.repeat(500) }, vectorOf(start + n + 1, dimensions))),
      );
    }
    // The premise: one read of the pages (the search's first, as DynamoDB answers it) stops short of the last.
    const firstRead = await raw.send(
      new QueryCommand({
        TableName: defaultTableName,
        KeyConditionExpression: 'pk = :pk AND begins_with(sk, :pages)',
        ExpressionAttributeValues: { ':pk': `M#local#${ns.join('/')}`, ':pages': 'V#' },
        ConsistentRead: true,
      }),
    );
    expect(firstRead.LastEvaluatedKey).toBeDefined();

    // Act
    const found = await search({ namespacePrefix: ns, vector: vectorOf(5, dimensions), limit: 200 });
    const worst = await search({ namespacePrefix: ns, vector: vectorOf(5, dimensions).map((x) => -x), limit: 200 });

    // Assess: the best 200 and the worst 200 together cover all 300, none twice within one.
    expect(new Set(found.items.map((item) => item.key)).size).toBe(200);
    expect(new Set([...found.items, ...worst.items].map((item) => item.key))).toEqual(new Set(keys));
    const scores = found.items.map((item) => item.score as number);
    expect(scores).toEqual([...scores].sort((a, b) => b - a));
  }, 120_000);

  it('ranks an item whose put died before writing its code, once the change hook mended it from the stream', async () => {
    // Prepare: a namespace with an item, its dimensions claimed.
    const ns = ['vectors', uniqueId('mend')];
    await put(ns, 'first', { n: 1 }, vectorOf(1, 8));
    const orphan = [0.9, -0.3, 0.2, 0.1, -0.7, 0.4, 0.05, 0.6];

    // Act: the item as a put writes it, its code never written (the put died in between).
    const now = new Date().toISOString();
    await raw.send(
      new PutCommand({
        TableName: defaultTableName,
        Item: {
          ...memoryItem.key('local', ns, 'orphan'),
          ...memoryItem.attributes({ n: 2 }, now, 'orphan', null, embeddingBytes(orphan)),
          version: 1,
          createdAt: now,
        },
      }),
    );

    // Assess: the change hook writes the code from the item's stream record (Lambda's JSON
    // image, its bytes as base64), in the page a put would have written it to.
    const found = await waitFor('the orphan ranked by its own vector', async () => {
      const page = await search({ namespacePrefix: ns, vector: orphan, limit: 1 });
      return page.items[0]?.key === 'orphan' ? page.items[0] : null;
    });
    expect(found.score).toBeCloseTo(1, 6);
    // One code a key, where the put's own would be: the hook rewrote neither into another page.
    const { Items: pages = [] } = await raw.send(
      new QueryCommand({
        TableName: defaultTableName,
        KeyConditionExpression: 'pk = :pk AND begins_with(sk, :pages)',
        ExpressionAttributeValues: { ':pk': `M#local#${ns.join('/')}`, ':pages': 'V#' },
        ConsistentRead: true,
      }),
    );
    expect(pages.flatMap((page) => Object.keys(page).filter((name) => name.startsWith('c:'))).sort()).toEqual(['c:first', 'c:orphan']);
  });

  it('searches only what a key limited to an agent may read', async () => {
    // Prepare
    const [own, other] = [uniqueId('own'), uniqueId('other')];
    const limited = apiClient(api.url, await issueKey(dynamoDbEndpointOf(api), { agents: [own] }));
    await put(['agents', own, 'v'], 'mine', {}, [1, 0]);
    await put(['agents', other, 'v'], 'theirs', {}, [1, 0]);

    // Act
    const found = await search({ namespacePrefix: ['agents'], vector: [1, 0] }, limited, { 'x-agent-id': own });

    // Assess
    expect(found.items.map((item) => item.key)).toEqual(['mine']);
  });
});
