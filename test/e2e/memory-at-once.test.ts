import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ApiClient, uniqueId } from '../helpers/api-client.js';
import { type RunningApi, startApi } from '../helpers/e2e.js';
import { waitFor } from '../helpers/events.js';

/**
 * Memory items (docs/api.md, 7c) under many requests at once, through real HTTP on DynamoDB
 * Local: a put is found by a search and its namespace listed as soon as the put answered, also
 * while other requests empty and refill the namespace (the change hook forgets an emptied
 * namespace off the request path); puts and deletes of one key leave one answer's item, the
 * same through every read; and what is stored afterwards is read back, not only the answers.
 */
let api: RunningApi;
let http: ApiClient;

beforeAll(async () => {
  api = await startApi();
  http = api.client;
});
afterAll(async () => {
  await api?.stop();
});

const itemPath = (namespace: readonly string[], key: string) => `/v1/memory/${[...namespace, key].join('/')}`;
const counted = (answers: Array<{ status: number }>) =>
  Object.fromEntries(
    [...new Set(answers.map((answer) => answer.status))].map((status) => [status, answers.filter((a) => a.status === status).length]),
  );

/** Every item a search under `prefix` finds, following its pages. */
async function searchAll(prefix: readonly string[], filter?: Record<string, unknown>, limit = 50) {
  const items: Array<{ namespace: string[]; key: string; version: number; value: Record<string, unknown>; expiresAt?: string }> = [];
  let cursor: string | undefined;
  do {
    const page = await http.post('/v1/memory/search', { namespacePrefix: prefix, ...(filter ? { filter } : {}), limit, cursor });
    expect(page.status, page.text).toBe(200);
    items.push(...page.body.items);
    cursor = page.body.next;
  } while (cursor);
  return items;
}

/** Every namespace listed under `prefix` (cut to `maxDepth`), following pages of `limit`. */
async function listAll(prefix: readonly string[], limit: number, maxDepth?: number): Promise<string[][]> {
  const namespaces: string[][] = [];
  let cursor: string | undefined;
  let pages = 0;
  do {
    const query = `prefix=${prefix.join('/')}&limit=${limit}${maxDepth ? `&maxDepth=${maxDepth}` : ''}${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`;
    const page = await http.get(`/v1/memory?${query}`);
    expect(page.status, page.text).toBe(200);
    expect(page.body.namespaces.length).toBeLessThanOrEqual(limit);
    namespaces.push(...page.body.namespaces);
    cursor = page.body.next;
    pages += 1;
    expect(pages).toBeLessThan(10_000);
  } while (cursor);
  return namespaces;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

const pathOrder = (a: string[], b: string[]) => {
  const left = `${a.join('/')}/`;
  const right = `${b.join('/')}/`;
  return left < right ? -1 : left > right ? 1 : 0;
};

describe('puts at once, read right after each answer', () => {
  it('finds each of 100 puts at once by search and lists its namespace as soon as it answered; pages list every namespace once', async () => {
    // Prepare: half the puts into one new namespace, half each into a new namespace of its own.
    const root = uniqueId('mem-once');
    const shared = [root, 'shared'];
    const namespaceOf = (n: number) => (n % 2 === 0 ? shared : [root, 'own', `n${n}`]);
    const misses: string[] = [];

    // Act: each put, then at once a search for it and the list of its namespace's parent.
    const answers = await Promise.all(
      Array.from({ length: 100 }, async (_, n) => {
        const namespace = namespaceOf(n);
        const answer = await http.put(itemPath(namespace, `k${n}`), { value: { n, tag: 'once' } });
        if (answer.status !== 201) return answer;
        const found = await http.post('/v1/memory/search', { namespacePrefix: [root], filter: { n } });
        if (found.status !== 200 || found.body.items.length !== 1 || found.body.items[0].key !== `k${n}`) {
          misses.push(`search for k${n}: ${found.status} ${found.text}`);
        }
        const listed = await http.get(`/v1/memory?prefix=${namespace.slice(0, -1).join('/')}&limit=500`);
        const names = (listed.body.namespaces ?? []).map((each: string[]) => each.join('/'));
        if (listed.status !== 200 || !names.includes(namespace.join('/'))) misses.push(`list for k${n}: ${listed.status} ${listed.text}`);
        return answer;
      }),
    );

    // Assess: every put created its item and was found at once; the search and the list
    // afterwards hold each exactly once, the list in path order across pages of 7.
    expect(
      answers.every((answer) => answer.status === 201),
      JSON.stringify(counted(answers)),
    ).toBe(true);
    expect(misses).toEqual([]);
    const items = await searchAll([root], undefined, 13);
    expect(items.map((item) => item.key).sort()).toEqual(Array.from({ length: 100 }, (_, n) => `k${n}`).sort());
    expect(items.every((item) => item.version === 1 && item.value.n === Number(item.key.slice(1)))).toBe(true);
    const expected = [shared, ...Array.from({ length: 50 }, (_, n) => [root, 'own', `n${2 * n + 1}`])].sort(pathOrder);
    expect(await listAll([root], 7)).toEqual(expected);
    expect(await listAll([root], 500)).toEqual(expected);
  }, 180_000);

  it('lists exactly the 200 namespaces made at once, in path order, on pages of every size, cut to every depth', async () => {
    // Prepare: namespaces of depths 2 to 4 under ids that sort around the separator ('-' and
    // '.' before '/', so `g1-x/…` and `g1.y/…` come before `g1/…`).
    const root = uniqueId('mem-names');
    const groups = ['g1', 'g1-x', 'g1.y', 'g10', 'g2'];
    const namespaces = Array.from({ length: 200 }, (_, n) => {
      const group = groups[n % groups.length] as string;
      if (n < groups.length) return [root, group];
      return n % 4 === 0 ? [root, group, `ns${n}`, 'deep'] : [root, group, `ns${n}`];
    });

    // Act
    const answers = await Promise.all(namespaces.map((namespace, n) => http.put(itemPath(namespace, 'k'), { value: { n } })));

    // Assess: each listed once, in path order, however it is paged and cut.
    expect(
      answers.every((answer) => answer.status === 201),
      JSON.stringify(counted(answers)),
    ).toBe(true);
    // The listings (about 950 pages, most of them of one or two) follow their pages side by side:
    // nothing is written meanwhile, so each reads what it would alone.
    const expected = [...namespaces].sort(pathOrder);
    const listings: Array<Promise<void>> = [];
    const listing = (prefix: string[], limit: number, maxDepth: number | undefined, want: string[][], what: string) =>
      listings.push(listAll(prefix, limit, maxDepth).then((listed) => expect(listed, what).toEqual(want)));
    for (const limit of [1, 3, 50, 199, 200, 500]) listing([root], limit, undefined, expected, `pages of ${limit}`);
    listing(
      [root, 'g1'],
      4,
      undefined,
      expected.filter((namespace) => namespace[1] === 'g1'),
      'under g1',
    );
    for (const maxDepth of [1, 2, 3, 4]) {
      const cuts = new Map(expected.map((namespace) => [namespace.slice(0, maxDepth).join('/'), namespace.slice(0, maxDepth)]));
      const cut = [...cuts.values()].sort(pathOrder);
      for (const limit of [1, 2, 7, 500]) listing([root], limit, maxDepth, cut, `maxDepth ${maxDepth}, pages of ${limit}`);
    }
    await Promise.all(listings);
  }, 180_000);
});

describe('the 100 namespaces a search may cover, crossed by puts at once', () => {
  it('answers each racing search with its items or 400 naming maxNamespaces, never 5xx, and 400 once past', async () => {
    // Prepare
    const root = uniqueId('mem-cap');
    const searches = (n: number) =>
      n % 2 === 0
        ? http.post('/v1/memory/search', { namespacePrefix: [root], limit: 500 })
        : http.post('/v1/memory/search', { namespacePrefix: [root], vector: [1, 0], limit: 500 });

    // Act: 120 puts, each into a namespace of its own, and 40 searches of the prefix among them.
    const [puts, found] = await Promise.all([
      Promise.all(Array.from({ length: 120 }, (_, n) => http.put(itemPath([root, `ns${n}`], 'k'), { value: { n }, embedding: [1, n] }))),
      Promise.all(
        Array.from({ length: 40 }, async (_, n) => {
          await sleep(n * 25);
          return searches(n);
        }),
      ),
    ]);

    // Assess
    expect(
      puts.every((answer) => answer.status === 201),
      JSON.stringify(counted(puts)),
    ).toBe(true);
    for (const answer of found) {
      if (answer.status === 200) {
        const namespaces = new Set(answer.body.items.map((item: { namespace: string[] }) => item.namespace.join('/')));
        expect(namespaces.size).toBeLessThanOrEqual(100);
      } else {
        expect(answer.status, answer.text).toBe(400);
        expect(answer.body).toMatchObject({ code: 'invalid_request', maxNamespaces: 100 });
      }
    }
    for (const n of [0, 1]) {
      const past = await searches(n);
      expect(past.status, past.text).toBe(400);
      expect(past.body).toMatchObject({ code: 'invalid_request', maxNamespaces: 100 });
    }
    // A narrower prefix still searches.
    const one = await http.post('/v1/memory/search', { namespacePrefix: [root, 'ns7'] });
    expect(one.body.items.map((item: { key: string; value: unknown }) => item.value)).toEqual([{ n: 7 }]);
  }, 120_000);
});

describe('a namespace emptied and refilled by many at once', () => {
  it('finds every put as soon as it answered while others delete the namespace’s last items, and keeps it listed while it holds one', async () => {
    // Prepare: 10 writers, each its own key of one namespace, put and delete it 12 times, so
    // the namespace runs empty again and again while the change hook forgets it.
    const root = uniqueId('mem-flip');
    const namespace = [root, 'ns'];
    const writers = 10;
    const rounds = 12;
    const misses: string[] = [];

    // Act
    const statuses = await Promise.all(
      Array.from({ length: writers }, async (_, w) => {
        const seen: number[] = [];
        for (let round = 0; round < rounds; round += 1) {
          const put = await http.put(itemPath(namespace, `w${w}`), { value: { w, round } });
          seen.push(put.status);
          if (put.status !== 201) continue;
          const found = await http.post('/v1/memory/search', { namespacePrefix: [root], filter: { w } });
          if (found.status !== 200 || found.body.items.length !== 1 || found.body.items[0].value.round !== round) {
            misses.push(`w${w} round ${round} search: ${found.status} ${found.text}`);
          }
          const listed = await http.get(`/v1/memory?prefix=${root}`);
          if (listed.status !== 200 || listed.body.namespaces.length !== 1) misses.push(`w${w} round ${round} list: ${listed.text}`);
          // The last round leaves the item there.
          if (round < rounds - 1) seen.push((await http.delete(itemPath(namespace, `w${w}`))).status);
        }
        return seen;
      }),
    );

    // Assess: every put created, every delete removed, every put found at once; afterwards,
    // once the change hook has seen every change, the namespace is still listed and searched.
    const all = statuses.flat();
    expect(
      all.every((status) => status === 201 || status === 204),
      JSON.stringify(counted(all.map((status) => ({ status })))),
    ).toBe(true);
    expect(misses).toEqual([]);
    await settle();
    expect(await listAll([root], 50)).toEqual([namespace]);
    const items = await searchAll([root]);
    expect(items.map((item) => item.key).sort()).toEqual(Array.from({ length: writers }, (_, w) => `w${w}`).sort());
    expect(items.every((item) => item.value.round === rounds - 1 && item.version === 1)).toBe(true);
  }, 180_000);

  it('keeps one dimension among the embeddings of a namespace emptied and refilled by puts of two dimensions at once', async () => {
    // Prepare: even writers embed in 2 dimensions, odd ones in 3; each puts and deletes its
    // own key, so the namespace forgets its dimensions when it runs empty and takes new ones.
    const root = uniqueId('mem-dims');
    const namespace = [root, 'ns'];
    const writers = 20;
    const rounds = 8;
    const embedding = (w: number) => (w % 2 === 0 ? [1, w + 1] : [1, 0, w + 1]);

    // Act
    const statuses = await Promise.all(
      Array.from({ length: writers }, async (_, w) => {
        const seen: number[] = [];
        for (let round = 0; round < rounds; round += 1) {
          const put = await http.put(itemPath(namespace, `w${w}`), { value: { w, round }, embedding: embedding(w) });
          seen.push(put.status);
          if (round < rounds - 1) seen.push((await http.delete(itemPath(namespace, `w${w}`))).status);
        }
        return seen;
      }),
    );

    // Assess: a put of the other dimensions is refused as documented, never 5xx; the items
    // stored afterwards all have one dimension.
    const all = statuses.flat();
    expect(
      all.every((status) => status === 201 || status === 204 || status === 400),
      JSON.stringify(counted(all.map((status) => ({ status })))),
    ).toBe(true);
    await settle();
    const dimensions = new Set<number>();
    for (let w = 0; w < writers; w += 1) {
      const read = await http.get(`${itemPath(namespace, `w${w}`)}?includeEmbedding=true`);
      expect([200, 404]).toContain(read.status);
      if (read.status === 200) dimensions.add(read.body.embedding.length);
    }
    expect(dimensions.size, [...dimensions].join()).toBeLessThanOrEqual(1);
  }, 180_000);
});

describe('a namespace of many deleted items, emptied and refilled', () => {
  it('stays listed and searched from each put’s answer on, though the change hook takes long to see it empty', async () => {
    // Prepare: 4 namespaces, each with 300 deleted items (tombstones until TTL removes them)
    // sorting after the keys put below, so the change hook's look for a live item, after each
    // delete, reads page after page of them while a put lands before where it has read. (Before
    // the hook's forget was conditional, 8 namespaces missed 66 times in a run; 4 miss about half.)
    const root = uniqueId('mem-tombs');
    const namespaces = Array.from({ length: 4 }, (_, n) => [root, `ns${n}`]);
    for (const namespace of namespaces) {
      const keys = Array.from({ length: 300 }, (_, n) => `z${String(n).padStart(3, '0')}`);
      const made = await Promise.all(keys.map((key) => http.put(itemPath(namespace, key), { value: {} })));
      expect(made.every((answer) => answer.status === 201)).toBe(true);
      const gone = await Promise.all(keys.map((key) => http.delete(itemPath(namespace, key))));
      expect(gone.every((answer) => answer.status === 204)).toBe(true);
    }
    const misses: string[] = [];

    // Act: in each namespace, 10 times: put a key, look for it for 300 ms, delete it, 300 ms
    // empty (when the hook's look after the delete may run).
    await Promise.all(
      namespaces.map(async (namespace, n) => {
        for (let round = 0; round < 10; round += 1) {
          const key = `a${round}`;
          expect((await http.put(itemPath(namespace, key), { value: { n, round } })).status).toBe(201);
          for (const until = Date.now() + 300; Date.now() < until; ) {
            const found = await http.post('/v1/memory/search', { namespacePrefix: namespace, filter: { round } });
            if (found.body.items?.length !== 1) misses.push(`${namespace.join('/')}/${key}: ${found.status} ${found.text}`);
            const listed = await http.get(`/v1/memory?prefix=${namespace.join('/')}`);
            if (listed.body.namespaces?.length !== 1) misses.push(`${namespace.join('/')} list: ${listed.text}`);
            await sleep(20);
          }
          expect((await http.delete(itemPath(namespace, key))).status).toBe(204);
          await sleep(300);
        }
      }),
    );

    // Assess
    expect(misses.slice(0, 10), `${misses.length} misses`).toEqual([]);
  }, 240_000);
});

describe('puts and deletes of one key at once', () => {
  it('leaves the item of one answer or none, the same through get, search, versions and the namespace list', async () => {
    for (let trial = 0; trial < 3; trial += 1) {
      // Prepare
      const root = uniqueId('mem-pd');
      const namespace = [root, 'ns'];
      expect((await http.put(itemPath(namespace, 'k'), { value: { n: -1 } })).status).toBe(201);

      // Act: 50 puts and 50 deletes of the key, interleaved, all at once.
      const answers = await Promise.all(
        Array.from({ length: 100 }, (_, n) =>
          n % 2 === 0 ? http.put(itemPath(namespace, 'k'), { value: { n } }) : http.delete(itemPath(namespace, 'k')),
        ),
      );

      // Assess
      const puts = answers.filter((_, n) => n % 2 === 0);
      const deletes = answers.filter((_, n) => n % 2 === 1);
      expect(
        puts.every((answer) => answer.status === 200 || answer.status === 201),
        JSON.stringify(counted(puts)),
      ).toBe(true);
      expect(
        deletes.every((answer) => answer.status === 204),
        JSON.stringify(counted(deletes)),
      ).toBe(true);
      const read = await http.get(itemPath(namespace, 'k'));
      expect([200, 404]).toContain(read.status);
      const found = await searchAll([root]);
      if (read.status === 404) {
        expect(found).toEqual([]);
      } else {
        // The item is one put's answer, whole.
        const answer = puts.find((each) => each.body.value?.n === read.body.value.n && each.body.version === read.body.version);
        expect(answer?.body).toEqual(read.body);
        expect(found).toEqual([read.body]);
        expect((await http.get(`/v1/memory?prefix=${root}`)).body.namespaces).toEqual([namespace]);
        const versions = await http.get(`/v1/memory/versions?namespace=${namespace.join('/')}&key=k`);
        expect(versions.status).toBe(200);
        expect(versions.body.versions[0]).toEqual(read.body);
      }
      await settle();
      // After the change hook: listed exactly while it holds the item.
      const listed = await waitFor('the namespace list to follow the item', async () => {
        const now = (await http.get(`/v1/memory?prefix=${root}`)).body.namespaces as string[][];
        return now.length === (read.status === 200 ? 1 : 0) ? now : null;
      });
      expect(listed.length).toBe(read.status === 200 ? 1 : 0);
      expect((await http.get(itemPath(namespace, 'k'))).body).toEqual(read.body);
      if (read.status === 200) {
        // Its versions, once the hook recorded them: its own life's only (a delete erased the
        // lives before it), each whole as its put answered it.
        const history = await waitFor('the item’s replaced versions', async () => {
          const list = await http.get(`/v1/memory/versions?namespace=${namespace.join('/')}&key=k&limit=500`);
          return list.body.versions.length >= read.body.version ? list : null;
        });
        const answered = (version: { version: number; createdAt: string }) =>
          puts.find((each) => each.body.version === version.version && each.body.createdAt === version.createdAt)?.body;
        expect(history.body.versions.map((version: { version: number }) => version.version)).toEqual(
          Array.from({ length: read.body.version }, (_, n) => read.body.version - n),
        );
        for (const version of history.body.versions) expect(version).toEqual(answered(version));
      }
    }
  }, 180_000);

  it('restarts an expired item once under 50 puts at once: versions 1 to 50 of one new life, its history that life only', async () => {
    // Prepare: an item of 3 versions that expires in a second.
    const root = uniqueId('mem-reborn');
    const namespace = [root, 'ns'];
    for (let n = 0; n < 3; n += 1)
      expect((await http.put(itemPath(namespace, 'k'), { value: { old: n }, ttlSeconds: 1 })).status).toBeLessThan(300);
    await waitFor('the item to expire', async () => ((await http.get(itemPath(namespace, 'k'))).status === 404 ? true : null), 15_000, 100);

    // Act
    const puts = await Promise.all(Array.from({ length: 50 }, (_, n) => http.put(itemPath(namespace, 'k'), { value: { n } })));

    // Assess: one created it, the others replaced it, numbered 1 to 50 in one life.
    expect(puts.filter((answer) => answer.status === 201).length, JSON.stringify(counted(puts))).toBe(1);
    expect(puts.filter((answer) => answer.status === 200).length, JSON.stringify(counted(puts))).toBe(49);
    expect(puts.map((answer) => answer.body.version).sort((a, b) => a - b)).toEqual(Array.from({ length: 50 }, (_, n) => n + 1));
    expect(new Set(puts.map((answer) => answer.body.createdAt)).size).toBe(1);
    expect(puts.every((answer) => answer.body.expiresAt === undefined)).toBe(true);
    const read = await http.get(itemPath(namespace, 'k'));
    expect(read.body).toEqual(puts.find((answer) => answer.body.version === 50)?.body);
    expect(await searchAll([root])).toEqual([read.body]);
    const history = await waitFor('the item’s replaced versions', async () => {
      const list = await http.get(`/v1/memory/versions?namespace=${namespace.join('/')}&key=k&limit=500`);
      return list.body.versions.length >= 50 ? list : null;
    });
    expect(history.body.versions).toEqual(
      Array.from({ length: 50 }, (_, n) => puts.find((answer) => answer.body.version === 50 - n)?.body),
    );
  }, 120_000);

  it('puts with and without ttlSeconds at once, beside reads: each read a whole item, the last put’s expiry stored, gone when it passes', async () => {
    // Prepare
    const root = uniqueId('mem-ttl');
    const namespace = [root, 'ns'];
    const withTtl = (n: number) => n % 2 === 0;

    // Act: 50 puts, the even ones with a 3 s lifetime, and 50 reads of the key among them.
    const answers = await Promise.all(
      Array.from({ length: 100 }, (_, n) =>
        n % 2 === 0
          ? http.put(itemPath(namespace, 'k'), { value: { n: n / 2 }, ...(withTtl(n / 2) ? { ttlSeconds: 3 } : {}) })
          : http.get(itemPath(namespace, 'k')),
      ),
    );

    // Assess: every read is a whole item some put answered (or 404 before the first); the
    // stored item carries the expiry of the put that wrote it, and is gone once it passed.
    const puts = answers.filter((_, n) => n % 2 === 0);
    const reads = answers.filter((_, n) => n % 2 === 1);
    expect(
      puts.every((answer) => answer.status === 200 || answer.status === 201),
      JSON.stringify(counted(puts)),
    ).toBe(true);
    expect(puts.map((answer) => answer.body.version).sort((a, b) => a - b)).toEqual(Array.from({ length: 50 }, (_, n) => n + 1));
    for (const read of reads) {
      expect([200, 404]).toContain(read.status);
      if (read.status === 200) expect(puts.find((answer) => answer.body.version === read.body.version)?.body).toEqual(read.body);
    }
    const stored = await http.get(itemPath(namespace, 'k'));
    expect(stored.body.version).toBe(50);
    const last = puts.find((answer) => answer.body.version === 50);
    expect(stored.body).toEqual(last?.body);
    expect('expiresAt' in stored.body).toBe(withTtl(stored.body.value.n));
    expect(await searchAll([root])).toEqual([stored.body]);
    if (withTtl(stored.body.value.n)) {
      await waitFor(
        'the item to expire',
        async () => ((await http.get(itemPath(namespace, 'k'))).status === 404 ? true : null),
        15_000,
        200,
      );
      expect(await searchAll([root])).toEqual([]);
    } else {
      await new Promise((resolve) => setTimeout(resolve, 3500));
      expect((await http.get(itemPath(namespace, 'k'))).body).toEqual(stored.body);
    }
  }, 180_000);
});

/**
 * Waits until the change hook has handled what was written before: a marker namespace, put
 * and emptied now, leaves the list only when the hook has read the delete from the stream.
 */
async function settle(): Promise<void> {
  const marker = [uniqueId('mem-settle')];
  expect((await http.put(itemPath(marker, 'k'), { value: {} })).status).toBe(201);
  expect((await http.delete(itemPath(marker, 'k'))).status).toBe(204);
  await waitFor('the change hook to catch up', async () => ((await listAll(marker, 5)).length === 0 ? true : null), 60_000, 250);
}
