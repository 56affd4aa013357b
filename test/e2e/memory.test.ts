import { ScanCommand } from '@aws-sdk/client-dynamodb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { localDynamoDbClient } from '../../functions/local/dynamodb-local.js';
import { dynamoDbEndpointOf, issueKey } from '../helpers/admin.js';
import { type ApiClient, apiClient, uniqueId } from '../helpers/api-client.js';
import { type RunningApi, startApi } from '../helpers/e2e.js';
import { waitFor } from '../helpers/events.js';

/**
 * Memory items (API.md section 10) through the real HTTP API on a real DynamoDB Local, the
 * change hook included (search and the namespace list follow writes a moment later).
 */

let api: RunningApi;
let http: ApiClient;
let endpoint: string;

beforeAll(async () => {
  api = await startApi();
  http = api.client;
  endpoint = dynamoDbEndpointOf(api);
});
afterAll(async () => {
  await api?.stop();
});

const itemPath = (namespace: string[], key: string) => `/v1/memory/${[...namespace, key].join('/')}`;

/** Puts an item and returns the answer, failing the test on anything but 200/201. */
async function put(namespace: string[], key: string, value: unknown, options: { ttlSeconds?: number } = {}) {
  const response = await http.put(itemPath(namespace, key), { value, ...options });
  expect([200, 201], response.text).toContain(response.status);
  return response;
}

/** Searches until `ready` holds for the items (search follows writes a moment later). */
async function searchUntil(body: Record<string, unknown>, ready: (keys: string[]) => boolean, client: ApiClient = http) {
  return waitFor(`a search ${JSON.stringify(body)}`, async () => {
    const response = await client.post('/v1/memory/search', body);
    expect(response.status, response.text).toBe(200);
    const keys = response.body.items.map((item: { key: string }) => item.key);
    return ready(keys) ? response : null;
  });
}

async function tableItemCount(): Promise<number> {
  const client = localDynamoDbClient(endpoint);
  try {
    const { Count } = await client.send(new ScanCommand({ TableName: 'agentstate', Select: 'COUNT', ConsistentRead: true }));
    return Count ?? 0;
  } finally {
    client.destroy();
  }
}

describe('put, get and delete', () => {
  it('creates an item at version 1, replaces it at version 2, and reads it back verbatim', async () => {
    // Prepare
    const namespace = ['users', uniqueId('u'), 'facts'];

    // Act
    const created = await http.put(itemPath(namespace, 'diet'), { value: { food: 'vegetarian', since: 2019, tags: ['a'] } });
    const replaced = await http.put(itemPath(namespace, 'diet'), { value: { food: 'vegan', ключ: '✓' } });
    const read = await http.get(itemPath(namespace, 'diet'));

    // Assess
    expect(created.status).toBe(201);
    expect(created.headers.get('etag')).toBe('"1"');
    expect(created.headers.get('location')).toBe(itemPath(namespace, 'diet'));
    expect(created.body).toMatchObject({ namespace, key: 'diet', version: 1, value: { food: 'vegetarian', since: 2019 } });
    expect(replaced.status).toBe(200);
    expect(replaced.body).toMatchObject({ version: 2, createdAt: created.body.createdAt });
    expect(read.status).toBe(200);
    expect(read.headers.get('etag')).toBe('"2"');
    expect(read.body.value).toEqual({ food: 'vegan', ключ: '✓' });
    expect(Object.keys(read.body.value)).toEqual(['food', 'ключ']);
    expect(read.body.expiresAt).toBeUndefined();
  });

  it('deletes with 204, reads as 404 afterwards, and starts again at version 1', async () => {
    const namespace = ['notes', uniqueId('n')];
    await put(namespace, 'k', { a: 1 });
    await put(namespace, 'k', { a: 2 });

    const deleted = await http.delete(itemPath(namespace, 'k'));
    const read = await http.get(itemPath(namespace, 'k'));
    const deletedAgain = await http.delete(itemPath(namespace, 'k'));
    const recreated = await http.put(itemPath(namespace, 'k'), { value: { a: 3 } });

    expect(deleted.status).toBe(204);
    expect(read.status).toBe(404);
    expect(read.body.code).toBe('not_found');
    expect(deletedAgain.status).toBe(204);
    expect(recreated.status).toBe(201);
    expect(recreated.body.version).toBe(1);
  });

  it('answers 422 to an Idempotency-Key reused for the same put made create-only (If-None-Match: *)', async () => {
    // Prepare
    const path = itemPath(['cond', uniqueId('idem')], 'k');
    const key = uniqueId('key');
    const first = await http.put(path, { value: { n: 1 } }, { headers: { 'idempotency-key': key } });

    // Act: the same body under the same key, but only if the item does not exist.
    const createOnly = await http.put(path, { value: { n: 1 } }, { headers: { 'idempotency-key': key, 'if-none-match': '*' } });

    // Assess: another request, not the first one's 201 replayed.
    expect(first.status).toBe(201);
    expect(createOnly.status).toBe(422);
    expect(createOnly.body.code).toBe('idempotency_key_reused');
    expect((await http.get(path)).body.version).toBe(1);
  });

  it('honours If-Match on the item version, If-Match: * and If-None-Match: *, writing nothing when they fail', async () => {
    const namespace = ['cond', uniqueId('c')];
    const path = itemPath(namespace, 'k');

    const createOnly = await http.put(path, { value: { n: 1 } }, { headers: { 'if-none-match': '*' } });
    const createOnlyAgain = await http.put(path, { value: { n: 99 } }, { headers: { 'if-none-match': '*' } });
    const stale = await http.put(path, { value: { n: 99 } }, { headers: { 'if-match': '"7"' } });
    const current = await http.put(path, { value: { n: 2 } }, { headers: { 'if-match': 'W/"0", "1"' } });
    const anyVersion = await http.put(path, { value: { n: 3 } }, { headers: { 'if-match': '*' } });
    const staleDelete = await http.delete(path, { headers: { 'if-match': '"2"' } });
    const missing = await http.put(itemPath(namespace, 'absent'), { value: { n: 1 } }, { headers: { 'if-match': '*' } });
    const read = await http.get(path);

    expect(createOnly.status).toBe(201);
    expect(createOnlyAgain.status).toBe(412);
    expect(createOnlyAgain.body).toMatchObject({ code: 'version_mismatch', currentVersion: 1 });
    expect(stale.status).toBe(412);
    expect(stale.body).toMatchObject({ code: 'version_mismatch', currentVersion: 1 });
    expect(current.body.version).toBe(2);
    expect(anyVersion.body.version).toBe(3);
    expect(staleDelete.status).toBe(412);
    expect(staleDelete.body.currentVersion).toBe(3);
    expect(missing.status).toBe(412);
    expect(missing.body.currentVersion).toBe(0);
    expect(read.body).toMatchObject({ version: 3, value: { n: 3 } });
    expect((await http.get(itemPath(namespace, 'absent'))).status).toBe(404);
  });

  it('loses no put among concurrent writers, and numbers their versions without a gap', async () => {
    // Prepare
    const namespace = ['race', uniqueId('r')];
    const path = itemPath(namespace, 'counter');
    await put(namespace, 'counter', { writer: 'seed' });

    // Act: 12 puts without If-Match and 12 with If-Match on the version they read, at once.
    const blind = Array.from({ length: 12 }, (_, index) => http.put(path, { value: { writer: `blind-${index}` } }));
    const guarded = Array.from({ length: 12 }, async (_, index) => {
      for (;;) {
        const read = await http.get(path);
        const answer = await http.put(
          path,
          { value: { writer: `guarded-${index}` } },
          { headers: { 'if-match': read.headers.get('etag') as string } },
        );
        if (answer.status !== 412) return answer;
      }
    });
    const answers = await Promise.all([...blind, ...guarded]);

    // Assess: every put got a version of its own, 2 to 25, and the last one is what reads.
    expect(answers.map((answer) => answer.status).every((status) => status === 200)).toBe(true);
    const versions = answers.map((answer) => answer.body.version as number).sort((a, b) => a - b);
    expect(versions).toEqual(Array.from({ length: 24 }, (_, index) => index + 2));
    const read = await http.get(path);
    expect(read.body.version).toBe(25);
    const last = answers.find((answer) => answer.body.version === 25);
    expect(read.body.value).toEqual(last?.body.value);
  });

  it('never returns an item past its ttlSeconds, and a put over it starts a new item', async () => {
    const namespace = ['ttl', uniqueId('t')];
    const started = Date.now();
    const created = await put(namespace, 'short', { v: 1 }, { ttlSeconds: 1 });
    await put(namespace, 'long', { v: 1 }, { ttlSeconds: 3600 });

    expect(Date.parse(created.body.expiresAt)).toBeGreaterThanOrEqual(Math.floor(started / 1000) * 1000);
    await waitFor('the item to expire', async () => (await http.get(itemPath(namespace, 'short'))).status === 404, 5_000, 200);
    const replaced = await http.put(itemPath(namespace, 'short'), { value: { v: 2 } });
    const long = await http.get(itemPath(namespace, 'long'));

    expect(replaced.status).toBe(201);
    expect(replaced.body).toMatchObject({ version: 1, value: { v: 2 } });
    expect(replaced.body.expiresAt).toBeUndefined();
    expect(long.status).toBe(200);
    expect(Date.parse(long.body.expiresAt)).toBeGreaterThan(Date.now() + 3_000_000);
  });
});

describe('bad input', () => {
  it.each([
    ['a namespace of 9 ids', '/v1/memory/a/b/c/d/e/f/g/h/i/key', { value: {} }, 400, 'invalid_request'],
    ['no namespace', '/v1/memory/key', { value: {} }, 400, 'invalid_request'],
    ['an invalid namespace id', '/v1/memory/bad%20id/key', { value: {} }, 400, 'invalid_id'],
    ['an invalid key', '/v1/memory/ns/bad%23key', { value: {} }, 400, 'invalid_id'],
    // A segment is decoded once, as one id: %2F is a character of it, not a separator (API.md section 1).
    ['a %2F in a namespace id', '/v1/memory/users%2Fu1/key', { value: {} }, 400, 'invalid_id'],
    ['a %2F in a key', '/v1/memory/ns/a%2Fb', { value: {} }, 400, 'invalid_id'],
    ['an array value', '/v1/memory/ns/key', { value: [1, 2] }, 400, 'invalid_request'],
    ['a string value', '/v1/memory/ns/key', { value: 'text' }, 400, 'invalid_request'],
    ['a null value', '/v1/memory/ns/key', { value: null }, 400, 'invalid_request'],
    ['no value', '/v1/memory/ns/key', { ttlSeconds: 5 }, 400, 'invalid_request'],
    ['an unknown field', '/v1/memory/ns/key', { value: {}, extra: 1 }, 400, 'invalid_request'],
    ['a ttlSeconds of 0', '/v1/memory/ns/key', { value: {}, ttlSeconds: 0 }, 400, 'invalid_request'],
    ['a fractional ttlSeconds', '/v1/memory/ns/key', { value: {}, ttlSeconds: 1.5 }, 400, 'invalid_request'],
    ['a value over 256 KiB', '/v1/memory/ns/key', { value: { text: 'x'.repeat(256 * 1024) } }, 413, 'payload_too_large'],
  ])('refuses %s and writes nothing', async (_name, path, body, status, code) => {
    const before = await tableItemCount();

    const response = await http.put(path, body);

    expect(response.status, response.text).toBe(status);
    expect(response.body.code).toBe(code);
    expect(response.headers.get('content-type')).toContain('application/problem+json');
    expect(await tableItemCount()).toBe(before);
  });

  it('accepts a value of exactly 256 KiB and names the limit of a larger one', async () => {
    const namespace = ['big', uniqueId('b')];
    const fits = { text: 'x'.repeat(256 * 1024 - '{"text":""}'.length) };

    const accepted = await http.put(itemPath(namespace, 'k'), { value: fits });
    const refused = await http.put(itemPath(namespace, 'k2'), { value: { ...fits, more: 1 } });

    expect(accepted.status).toBe(201);
    expect(refused.status).toBe(413);
    expect(refused.body).toMatchObject({ code: 'payload_too_large', limitBytes: 262144 });
    // The value's limit, named as such (before, "the limit is 262144 bytes", which a body past 1 MiB also named).
    expect(refused.body.detail).toMatch(/^the value is \d+ bytes; the value limit is 262144 bytes$/);
    expect((await http.get(itemPath(namespace, 'k2'))).status).toBe(404);
  });

  it('names the body limit, 1 MiB, for a body past it', async () => {
    const refused = await http.put(itemPath(['big', uniqueId('b')], 'k'), { value: { text: 'x'.repeat(1100 * 1024) } });

    // Before: "the body is … bytes; the body limit is 262144 bytes" (the value's limit, misnamed).
    expect(refused.status).toBe(413);
    expect(refused.body).toMatchObject({ code: 'payload_too_large', limitBytes: 1048576 });
    expect(refused.body.detail).toMatch(/^the body is \d+ bytes; the body limit is 1048576 bytes$/);
  });

  it('reads a %2F in an item path as a character of one id, never as a separator', async () => {
    // Prepare: an item that a %2F read as a separator would name.
    await put(['users', 'u1'], 'k', { n: 1 });

    // Act
    const read = await http.get('/v1/memory/users%2Fu1/k');
    const deleted = await http.delete('/v1/memory/users/u1%2Fk');

    // Assess: before, the item itself (200), and a delete of it (204).
    expect(read.status).toBe(400);
    expect(read.body.code).toBe('invalid_id');
    expect(deleted.status).toBe(400);
    expect((await http.get('/v1/memory/users/u1/k')).status).toBe(200);
  });

  it('refuses malformed JSON, a malformed If-Match and If-None-Match on a delete', async () => {
    const malformed = await http.request('PUT', '/v1/memory/ns/key', { raw: '{"value": {' });
    const badMatch = await http.put('/v1/memory/ns/key', { value: {} }, { headers: { 'if-match': 'seven' } });
    const badNoneMatch = await http.put('/v1/memory/ns/key', { value: {} }, { headers: { 'if-none-match': '"1"' } });
    const deleteNoneMatch = await http.delete('/v1/memory/ns/key', { headers: { 'if-none-match': '*' } });

    expect(malformed.body.code).toBe('invalid_json');
    expect([badMatch.status, badNoneMatch.status, deleteNoneMatch.status]).toEqual([400, 400, 400]);
  });

  it.each([
    ['a filter that is not an object', { namespacePrefix: ['ns'], filter: [1] }],
    ['an unknown operator', { namespacePrefix: ['ns'], filter: { a: { $regex: 'x' } } }],
    ['operators mixed with plain keys', { namespacePrefix: ['ns'], filter: { a: { $gt: 1, b: 2 } } }],
    ['$in without an array', { namespacePrefix: ['ns'], filter: { a: { $in: 3 } } }],
    ['$gt with an object', { namespacePrefix: ['ns'], filter: { a: { $gt: {} } } }],
    ['a prefix of 9 ids', { namespacePrefix: ['a', 'b', 'c', 'd', 'e', 'f', 'g', 'h', 'i'] }],
    ['a limit of 0', { namespacePrefix: ['ns'], limit: 0 }],
    ['a tampered cursor', { namespacePrefix: ['ns'], cursor: 'not-a-cursor' }],
  ])('refuses a search with %s', async (_name, body) => {
    const response = await http.post('/v1/memory/search', body);

    expect(response.status, response.text).toBe(400);
    expect(response.body.code).toBe('invalid_request');
  });

  it('refuses a search prefix with an invalid id as invalid_id', async () => {
    const response = await http.post('/v1/memory/search', { namespacePrefix: ['ok', 'not ok'] });

    expect(response.status).toBe(400);
    expect(response.body.code).toBe('invalid_id');
  });
});

describe('search', () => {
  const namespace = ['catalog', uniqueId('shop')];
  const products = [
    { key: 'p1', value: { kind: 'book', price: 12.5, stock: 3, lang: 'en' } },
    { key: 'p2', value: { kind: 'book', price: 8, stock: 0, lang: 'de' } },
    { key: 'p3', value: { kind: 'game', price: 59.99, lang: 'en', meta: { rated: 'E' } } },
    { key: 'p4', value: { kind: 'book', price: 12.5, stock: 10, lang: 'fr', note: 'n'.repeat(300) } },
    { key: 'p5', value: { kind: 'toy', price: null, lang: 'en' } },
  ];

  beforeAll(async () => {
    for (const { key, value } of products) await put(namespace, key, value);
    await searchUntil({ namespacePrefix: namespace }, (keys) => keys.length === 5);
  });

  const keysOf = async (filter: unknown) => {
    const response = await http.post('/v1/memory/search', { namespacePrefix: namespace, filter });
    expect(response.status, response.text).toBe(200);
    return response.body.items.map((item: { key: string }) => item.key);
  };

  it('returns the namespace newest first, with whole items', async () => {
    const response = await http.post('/v1/memory/search', { namespacePrefix: namespace });

    expect(response.body.items.map((item: { key: string }) => item.key)).toEqual(['p5', 'p4', 'p3', 'p2', 'p1']);
    expect(response.body.items[4]).toMatchObject({ namespace, key: 'p1', version: 1, value: products[0]?.value });
    expect(response.body.next).toBeUndefined();
  });

  it.each([
    ['equality', { kind: 'book' }, ['p4', 'p2', 'p1']],
    ['equality of numbers by value', { price: 12.5 }, ['p4', 'p1']],
    ['equality with null', { price: null }, ['p5']],
    ['equality with an object', { meta: { rated: 'E' } }, ['p3']],
    ['$eq', { lang: { $eq: 'en' } }, ['p5', 'p3', 'p1']],
    ['$ne (a missing field is not equal)', { stock: { $ne: 0 } }, ['p5', 'p4', 'p3', 'p1']],
    ['$gt', { price: { $gt: 12.5 } }, ['p3']],
    ['$gte', { price: { $gte: 12.5 } }, ['p4', 'p3', 'p1']],
    ['$lt', { price: { $lt: 12.5 } }, ['p2']],
    ['$lte with $gte', { price: { $gte: 8, $lte: 12.5 } }, ['p4', 'p2', 'p1']],
    ['$in', { lang: { $in: ['de', 'fr'] } }, ['p4', 'p2']],
    ['strings by code point', { lang: { $gt: 'en' } }, ['p4']],
    ['a field past the index (a long string)', { note: { $gt: 'm' } }, ['p4']],
    ['strings by code point beyond the BMP', { lang: { $lt: '\u{1F600}' } }, ['p5', 'p4', 'p3', 'p2', 'p1']],
    ['several fields at once', { kind: 'book', stock: { $gt: 0 } }, ['p4', 'p1']],
    ['a field nobody has', { colour: 'red' }, []],
  ])('filters by %s', async (_name, filter, expected) => {
    expect(await keysOf(filter)).toEqual(expected);
  });

  it('keeps numbers verbatim, and compares them exactly, not as doubles', async () => {
    const ns = ['exact', uniqueId('x')];
    const raw = (key: string, n: string) => http.request('PUT', itemPath(ns, key), { raw: `{"value": {"n": ${n}, "same": 1.0}}` });
    expect((await raw('over', '9007199254740993')).status).toBe(201);
    expect((await raw('at', '9007199254740992')).status).toBe(201);
    expect((await raw('tiny', '1e-400')).status).toBe(201);

    const read = await http.get(itemPath(ns, 'over'));
    const found = await waitFor('the exact search', async () => {
      const response = await http.request('POST', '/v1/memory/search', {
        raw: `{"namespacePrefix": ${JSON.stringify(ns)}, "filter": {"n": {"$gt": 9007199254740992}}}`,
      });
      return response.body.items?.length === 1 ? response : null;
    });
    const tiny = await http.request('POST', '/v1/memory/search', {
      raw: `{"namespacePrefix": ${JSON.stringify(ns)}, "filter": {"n": {"$gt": 0, "$lt": 1e-300}}}`,
    });

    expect(read.text).toContain('"n":9007199254740993');
    expect(read.text).toContain('"same":1.0');
    expect(found.text).toContain('"key":"over"');
    expect(tiny.body.items.map((item: { key: string }) => item.key)).toEqual(['tiny']);
  });

  it('pages with limit and a cursor, and refuses that cursor for another filter', async () => {
    const first = await http.post('/v1/memory/search', { namespacePrefix: namespace, limit: 2 });
    const second = await http.post('/v1/memory/search', { namespacePrefix: namespace, limit: 2, cursor: first.body.next });
    const third = await http.post('/v1/memory/search', { namespacePrefix: namespace, limit: 2, cursor: second.body.next });
    const misused = await http.post('/v1/memory/search', { namespacePrefix: namespace, filter: { kind: 'toy' }, cursor: first.body.next });

    expect(first.body.items.map((item: { key: string }) => item.key)).toEqual(['p5', 'p4']);
    expect(second.body.items.map((item: { key: string }) => item.key)).toEqual(['p3', 'p2']);
    expect(third.body.items.map((item: { key: string }) => item.key)).toEqual(['p1']);
    expect(misused.status).toBe(400);
  });

  it('spans every namespace under a prefix, newest first across them, id by id', async () => {
    const root = uniqueId('tree');
    await put([root, 'a'], 'one', { n: 1 });
    await put([root, 'a', 'deep'], 'two', { n: 2 });
    await put([`${root}0`], 'other', { n: 3 });
    await put([root], 'three', { n: 3 });

    const all = await searchUntil({ namespacePrefix: [root] }, (keys) => keys.length === 3);
    const under = await searchUntil({ namespacePrefix: [root, 'a'], filter: { n: { $gte: 2 } } }, (keys) => keys.length === 1);

    expect(all.body.items.map((item: { key: string }) => item.key)).toEqual(['three', 'two', 'one']);
    expect(under.body.items[0]).toMatchObject({ namespace: [root, 'a', 'deep'], key: 'two' });
  });

  it('leaves out deleted and expired items', async () => {
    const ns = ['gone', uniqueId('g')];
    await put(ns, 'stays', { a: 1 });
    await put(ns, 'deleted', { a: 1 });
    const expiring = await put(ns, 'expires', { a: 1 }, { ttlSeconds: 2 });
    // An expiry is a whole second, so the item may expire anywhere in the next two.
    await searchUntil({ namespacePrefix: ns }, (keys) => keys.includes('stays') && keys.includes('deleted'));

    await http.delete(itemPath(ns, 'deleted'));
    await new Promise((wake) => setTimeout(wake, Math.max(0, Date.parse(expiring.body.expiresAt) - Date.now()) + 50));

    await searchUntil({ namespacePrefix: ns, filter: { a: 1 } }, (keys) => keys.join() === 'stays');
  });
});

describe('namespaces', () => {
  it('lists the namespaces under a prefix, cut to maxDepth, and forgets one whose last item is deleted', async () => {
    // Prepare
    const root = uniqueId('list');
    await put([root, 'u1', 'facts'], 'k', { a: 1 });
    await put([root, 'u1', 'notes'], 'k', { a: 1 });
    await put([root, 'u2', 'facts'], 'k', { a: 1 });
    await put([root], 'k', { a: 1 });

    // Act
    const list = (query: string) =>
      waitFor(`the namespaces ${query}`, async () => {
        const response = await http.get(`/v1/memory?${query}`);
        expect(response.status, response.text).toBe(200);
        return response.body.namespaces.length > 0 ? response : null;
      });
    const all = await waitFor('four namespaces', async () => {
      const response = await http.get(`/v1/memory?prefix=${root}`);
      return response.body.namespaces.length === 4 ? response : null;
    });
    const cut = await list(`prefix=${root}&maxDepth=2`);
    const paged = await http.get(`/v1/memory?prefix=${root}&limit=2`);
    const rest = await http.get(`/v1/memory?prefix=${root}&limit=2&cursor=${paged.body.next}`);
    await http.delete(itemPath([root, 'u1', 'notes'], 'k'));
    const afterDelete = await waitFor('the emptied namespace to leave the list', async () => {
      const response = await http.get(`/v1/memory?prefix=${root}/u1`);
      return response.body.namespaces.length === 1 ? response : null;
    });

    // Assess
    expect(all.body.namespaces).toEqual([[root], [root, 'u1', 'facts'], [root, 'u1', 'notes'], [root, 'u2', 'facts']]);
    expect(cut.body.namespaces).toEqual([[root], [root, 'u1'], [root, 'u2']]);
    expect([...paged.body.namespaces, ...rest.body.namespaces]).toEqual(all.body.namespaces);
    expect(rest.body.next).toBeUndefined();
    expect(afterDelete.body.namespaces).toEqual([[root, 'u1', 'facts']]);
  });

  it('cuts to a maxDepth as deep as the prefix: the prefix once, on every page', async () => {
    // Prepare
    const root = uniqueId('flat');
    await put([root, 'u1', 'facts'], 'k', { a: 1 });
    await put([root, 'u1'], 'k', { a: 1 });
    await put([root, 'u2'], 'k', { a: 1 });
    await waitFor('three namespaces', async () => {
      const response = await http.get(`/v1/memory?prefix=${root}`);
      return response.body.namespaces.length === 3 ? response : null;
    });

    // Act
    const top = await http.get(`/v1/memory?prefix=${root}&maxDepth=1`);
    const nested = await http.get(`/v1/memory?prefix=${root}/u1&maxDepth=2`);
    const first = await http.get(`/v1/memory?prefix=${root}&maxDepth=2&limit=1`);
    const second = await http.get(`/v1/memory?prefix=${root}&maxDepth=2&limit=1&cursor=${first.body.next}`);

    // Assess (before, each answered 500: the skip past the cut started the next query at the
    // end of the prefix's range, which DynamoDB refuses)
    expect(top.status, top.text).toBe(200);
    expect(top.body).toEqual({ namespaces: [[root]] });
    expect(nested.status, nested.text).toBe(200);
    expect(nested.body).toEqual({ namespaces: [[root, 'u1']] });
    expect([first, second].map((page) => page.body.namespaces)).toEqual([[[root, 'u1']], [[root, 'u2']]]);
    expect(second.body.next).toBeUndefined();
  });

  it('refuses a maxDepth shallower than the prefix, or out of range', async () => {
    expect((await http.get('/v1/memory?prefix=a/b&maxDepth=1')).status).toBe(400);
    expect((await http.get('/v1/memory?maxDepth=9')).status).toBe(400);
    expect((await http.get('/v1/memory?prefix=a//b')).status).toBe(400);
  });
});

describe('versions', () => {
  it('lists the current version and those it replaced, newest first, and forgets them with a delete', async () => {
    const ns = ['hist', uniqueId('h')];
    await put(ns, 'k', { step: 1 });
    await put(ns, 'k', { step: 2 });
    await put(ns, 'k', { step: 3 });
    const versions = (query = '') => http.get(`/v1/memory/versions?namespace=${ns.join('/')}&key=k${query}`);

    const all = await waitFor('three versions', async () => {
      const response = await versions();
      return response.body.versions?.length === 3 ? response : null;
    });
    const first = await versions('&limit=1');
    const second = await versions(`&limit=1&cursor=${first.body.next}`);
    await http.delete(itemPath(ns, 'k'));
    await put(ns, 'k', { step: 'new' });
    const afterDelete = await versions();

    expect(all.body.versions.map((item: { version: number; value: unknown }) => [item.version, item.value])).toEqual([
      [3, { step: 3 }],
      [2, { step: 2 }],
      [1, { step: 1 }],
    ]);
    expect(first.body.versions.map((item: { version: number }) => item.version)).toEqual([3]);
    expect(second.body.versions.map((item: { version: number }) => item.version)).toEqual([2]);
    expect(afterDelete.body.versions.map((item: { version: number }) => item.version)).toEqual([1]);
    expect((await http.get(`/v1/memory/versions?namespace=${ns.join('/')}&key=nothing`)).status).toBe(404);
  });
});

describe('who may touch what', () => {
  const createKey = (tenant: string, agents: string[]) => issueKey(endpoint, { tenant, agents });

  it('keeps tenants apart: another tenant’s items, namespaces and search results do not exist', async () => {
    const ns = ['secret', uniqueId('s')];
    await put(ns, 'k', { mine: true });
    const other = apiClient(api.url, 'other-key');

    const read = await other.get(itemPath(ns, 'k'));
    const listed = await other.get(`/v1/memory?prefix=${ns[0]}`);
    const found = await other.post('/v1/memory/search', { namespacePrefix: ns });
    const theirs = await other.put(itemPath(ns, 'k'), { value: { theirs: true } });
    await searchUntil({ namespacePrefix: ns }, (keys) => keys.length === 1);

    expect(read.status).toBe(404);
    expect(listed.body.namespaces).toEqual([]);
    expect(found.body.items).toEqual([]);
    expect(theirs.status).toBe(201);
    expect((await http.get(itemPath(ns, 'k'))).body.value).toEqual({ mine: true });
  });

  it('lets a key limited to an agent touch only agents/<its agent> and shared', async () => {
    // Prepare
    const [own, other] = [uniqueId('own'), uniqueId('other')];
    const apiKey = await createKey('local', [own]);
    const limited = apiClient(api.url, apiKey);
    const as = { headers: { 'x-agent-id': own } };
    await put(['agents', other, 'notes'], 'k', { private: true });
    await put(['agents', own, 'notes'], 'k', { mine: true });
    await put(['shared', own], 'k', { everyone: true });
    await put(['users', own], 'k', { tenantWide: true });

    // Act
    const readOwn = await limited.get(itemPath(['agents', own, 'notes'], 'k'), as);
    const readShared = await limited.get(itemPath(['shared', own], 'k'), as);
    const readOther = await limited.get(itemPath(['agents', other, 'notes'], 'k'), as);
    const readUsers = await limited.get(itemPath(['users', own], 'k'), as);
    const writeOther = await limited.put(itemPath(['agents', other, 'notes'], 'k'), { value: { stolen: true } }, as);
    const writeUsers = await limited.put(itemPath(['users', own], 'k'), { value: { stolen: true } }, as);
    const deleteOther = await limited.delete(itemPath(['agents', other, 'notes'], 'k'), as);
    const writeOwn = await limited.put(itemPath(['agents', own, 'notes'], 'new'), { value: { mine: 2 } }, as);
    const wholeTenant = await waitFor('the limited key’s search', async () => {
      const response = await limited.post('/v1/memory/search', { namespacePrefix: [] }, as);
      return response.body.items?.length >= 3 ? response : null;
    });
    const agentsSearch = await limited.post('/v1/memory/search', { namespacePrefix: ['agents'] }, as);
    const otherSearch = await limited.post('/v1/memory/search', { namespacePrefix: ['agents', other] }, as);
    const namespaces = await limited.get('/v1/memory', as);

    // Assess
    expect(readOwn.status).toBe(200);
    expect(readShared.status).toBe(200);
    expect(readOther.status).toBe(404);
    expect(readUsers.status).toBe(404);
    for (const refused of [writeOther, writeUsers, deleteOther]) {
      expect(refused.status).toBe(403);
      expect(refused.body.code).toBe('forbidden');
    }
    expect(writeOwn.status).toBe(201);
    const seen = (response: typeof wholeTenant) =>
      response.body.items.map((item: { namespace: string[] }) => (item.namespace[0] === 'agents' ? item.namespace[1] : item.namespace[0]));
    expect(new Set(seen(wholeTenant))).toEqual(new Set([own, 'shared']));
    expect(new Set(seen(agentsSearch))).toEqual(new Set([own]));
    expect(otherSearch.body.items).toEqual([]);
    expect(namespaces.body.namespaces.every((ns: string[]) => (ns[0] === 'agents' && ns[1] === own) || ns[0] === 'shared')).toBe(true);
    // Its namespaces cut to one or two ids (before, 500: its roots are as deep as the cut)
    const [depthOne, depthTwo] = [await limited.get('/v1/memory?maxDepth=1', as), await limited.get('/v1/memory?maxDepth=2', as)];
    expect(depthOne.status, depthOne.text).toBe(200);
    expect(depthOne.body.namespaces).toEqual([['agents'], ['shared']]);
    expect(depthTwo.status, depthTwo.text).toBe(200);
    expect(depthTwo.body.namespaces).toContainEqual(['agents', own]);
    expect(depthTwo.body.namespaces).toContainEqual(['shared', own]);
    expect(depthTwo.body.namespaces.every((ns: string[]) => (ns[0] === 'agents' && ns[1] === own) || ns[0] === 'shared')).toBe(true);
    expect((await http.get(itemPath(['agents', other, 'notes'], 'k'))).body).toMatchObject({ version: 1, value: { private: true } });
    expect((await http.get(itemPath(['users', own], 'k'))).body.value).toEqual({ tenantWide: true });
  });
});
