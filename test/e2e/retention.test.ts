import type { DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { tableKeys } from '../../functions/store/table/table.js';
import { dynamoDbEndpointOf, rawTableClient, scanTable } from '../helpers/admin.js';
import { type ApiClient, apiClient, uniqueId } from '../helpers/api-client.js';
import { type RunningApi, startApi } from '../helpers/e2e.js';
import { waitFor } from '../helpers/events.js';

/**
 * Retention (API.md section 12), through the HTTP API on DynamoDB Local: the local change hook
 * (the stream poller `npm start` runs, under the change hook's own role in the synthesized
 * template: the IAM gate) prunes what fell out of a session's window, and every node still
 * reads its state. The test waits for the hook (never a timing assertion).
 */

let api: RunningApi;
let http: ApiClient;
let raw: DynamoDBDocumentClient;

beforeAll(async () => {
  // Pruned at most once a second per session here (a minute by default), so that the test sees two runs.
  api = await startApi({ AGENTSTATE_PRUNE_INTERVAL_SECONDS: '1' });
  http = api.client;
  raw = rawTableClient(dynamoDbEndpointOf(api));
});
afterAll(async () => {
  raw?.destroy();
  await api?.stop();
});

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Polls until `done` holds (the change hook runs a moment after the writes). */
async function eventually(done: () => Promise<boolean>, what: string): Promise<void> {
  for (let attempt = 0; attempt < 150; attempt++) {
    if (await done()) return;
    await sleep(100);
  }
  throw new Error(`never happened: ${what}`);
}

describe('a session with retention', () => {
  it('has its old versions pruned by the change hook: 410 version_pruned, lists say where, every node reads its state', async () => {
    // Prepare: a conversation with a branch, then writes at the head past a window of 3.
    const sid = uniqueId('retention');
    expect((await http.patch(`/v1/sessions/${sid}/state`, { at: 'root' })).status).toBe(200);
    expect((await http.patch(`/v1/sessions/${sid}`, { retention: { keepVersions: 3 } })).body).toMatchObject({
      retention: { keepVersions: 3 },
    });
    expect((await http.post(`/v1/sessions/${sid}/messages`, { messages: [{ id: 'a', role: 'user', content: 'hi' }] })).status).toBe(201);
    expect((await http.patch(`/v1/sessions/${sid}/state`, { at: 'a' })).status).toBe(200);
    const branch = await http.post(`/v1/sessions/${sid}/messages`, {
      parentId: 'a',
      messages: [{ id: 'b', role: 'assistant', content: 'one' }],
    });
    expect(branch.status).toBe(201);
    expect((await http.patch(`/v1/sessions/${sid}/state?node=b`, { at: 'b' })).status).toBe(200);
    expect(
      (await http.post(`/v1/sessions/${sid}/messages`, { parentId: 'a', messages: [{ id: 'c', role: 'assistant', content: 'two' }] }))
        .status,
    ).toBe(201);
    for (let n = 0; n < 12; n++) expect((await http.patch(`/v1/sessions/${sid}/state`, { n })).status).toBe(200);
    const newest = (await http.get(`/v1/sessions/${sid}`)).body.version as number;
    expect(newest).toBe(15);

    // Act: the change hook prunes (version 4, at c before its writes, fell out; nothing points at it),
    // and the runs after it the versions that waited for their events (the newest below the window).
    await eventually(async () => (await http.get(`/v1/sessions/${sid}/versions/4`)).status === 410, 'version 4 pruned');
    await eventually(
      async () => (await http.get(`/v1/sessions/${sid}/versions?limit=100`)).body.pruned?.before === 13,
      'every version below the window that nothing points at pruned',
    );

    // Assess
    const pruned = await http.get(`/v1/sessions/${sid}/versions/4`);
    expect(pruned.headers.get('content-type')).toMatch(/application\/problem\+json/);
    expect(pruned.body).toMatchObject({ status: 410, code: 'version_pruned', version: 4 });
    const travel = await http.get(`/v1/sessions/${sid}/state?version=5`);
    expect(travel.status).toBe(410);
    expect(travel.body.code).toBe('version_pruned');
    // Every node reads the state it read before; time travel to a node works.
    const states = await Promise.all(
      ['root', 'a', 'b', 'c'].map(async (node) => (await http.get(`/v1/sessions/${sid}/state?node=${node}`)).body),
    );
    expect(states.map((view) => view.state)).toEqual([{ at: 'root' }, { at: 'a' }, { at: 'b' }, { at: 'a', n: 11 }]);
    expect((await http.get(`/v1/sessions/${sid}/state?version=${states[1].version}`)).body.state).toEqual({ at: 'a' });
    // The list keeps the window and what nodes point at, and says where history was cut.
    const list = await http.get(`/v1/sessions/${sid}/versions?limit=100`);
    expect(list.status).toBe(200);
    const listed = list.body.versions.map((version: { version: number }) => version.version);
    expect(listed.slice(0, 3)).toEqual([15, 14, 13]);
    for (const view of states) expect(listed).toContain(view.version);
    expect(listed).not.toContain(4);
    expect(list.body.pruned).toEqual({ before: 13 });
    const lineage = await http.get(`/v1/sessions/${sid}/versions?node=c&limit=100`);
    expect(lineage.body.versions.map((version: { version: number }) => version.version).slice(0, 3)).toEqual([15, 14, 13]);
    expect(lineage.body.pruned).toEqual({ before: 13 });
    // Writes go on at any node, on its state.
    expect((await http.patch(`/v1/sessions/${sid}/state?node=b`, { more: true })).body.state).toEqual({ at: 'b', more: true });
  });

  it('prunes an idle session whose retention is set after its writes, with no write after it (the scheduled sweep)', async () => {
    // Prepare: ten versions without retention, then a window of three, and nothing more.
    const sid = uniqueId('retention-idle');
    for (let n = 0; n < 10; n++) expect((await http.patch(`/v1/sessions/${sid}/state`, { n })).status).toBe(200);
    expect((await http.patch(`/v1/sessions/${sid}`, { retention: { keepVersions: 3 } })).status).toBe(200);

    // Act: the server's timer sweeps the sessions due (an EventBridge rule in AWS); no request but reads.
    await eventually(async () => (await http.get(`/v1/sessions/${sid}/versions/7`)).status === 410, 'version 7 pruned');
    // A run strips its versions 16 at a time in no set order, then saves where it cut (the list's
    // `pruned`); a version whose event the hook has not built yet waits for the next run. So 7
    // may read pruned while 1 does not yet.
    await eventually(async () => {
      const list = await http.get(`/v1/sessions/${sid}/versions?limit=100`);
      return list.body.pruned?.before === 8 && list.body.versions.length === 3;
    }, 'every version below the window pruned');

    // Assess: the window reads, the list says where history was cut, the state is whole.
    const list = await http.get(`/v1/sessions/${sid}/versions?limit=100`);
    expect(list.body.versions.map((version: { version: number }) => version.version)).toEqual([10, 9, 8]);
    expect(list.body.pruned).toEqual({ before: 8 });
    expect((await http.get(`/v1/sessions/${sid}/versions/1`)).status).toBe(410);
    expect((await http.get(`/v1/sessions/${sid}/state`)).body).toMatchObject({ version: 10, state: { n: 9 } });
  });

  it('does not tell another tenant that a version was pruned: its session does not exist there', async () => {
    const sid = uniqueId('retention-tenant');
    expect((await http.patch(`/v1/sessions/${sid}/state`, { n: 0 })).status).toBe(200);
    expect((await http.patch(`/v1/sessions/${sid}`, { retention: { keepVersions: 1 } })).status).toBe(200);
    for (let n = 1; n < 5; n++) expect((await http.patch(`/v1/sessions/${sid}/state`, { n })).status).toBe(200);
    await eventually(async () => (await http.get(`/v1/sessions/${sid}/versions/1`)).status === 410, 'version 1 pruned');

    const other = apiClient(api.url, 'other-key');
    const read = await other.get(`/v1/sessions/${sid}/versions/1`);
    expect(read.status).toBe(404);
    expect(read.body.code).toBe('session_not_found');
    expect((await other.get(`/v1/sessions/${sid}/versions`)).status).toBe(404);
  });
});

describe('a session written thousands of times with retention', () => {
  it('stores what it keeps, not what it was written: lasting items and bytes the same after 250 writes and after 1,000', async () => {
    // Prepare: keep the newest 10 versions; each write a 1 KB state.
    const sid = uniqueId('bounded');
    const filler = 'x'.repeat(1000);
    expect((await http.patch(`/v1/sessions/${sid}/state`, { n: 0, filler })).status).toBe(200);
    expect((await http.patch(`/v1/sessions/${sid}`, { retention: { keepVersions: 10 } })).status).toBe(200);
    let n = 1;
    // Two writers: enough to race, few enough not to spend the writes' time on retries.
    const writeUpTo = async (total: number) => {
      await Promise.all(
        Array.from({ length: 2 }, async () => {
          while (n < total) {
            n += 1;
            const answer = await http.patch(`/v1/sessions/${sid}/state`, { n, filler });
            expect(answer.status, answer.text).toBe(200);
          }
        }),
      );
    };
    /** The partition once pruning caught up: items and bytes that last, and those TTL removes. */
    const measure = async (version: number) => {
      await waitFor(
        `pruning to keep 10 of ${version}`,
        async () => {
          // Every page: a list may end a page early where pruned places lie between versions.
          const versions: Array<{ version: number }> = [];
          let cursor: string | undefined;
          do {
            const page = await http.get(`/v1/sessions/${sid}/versions?limit=500${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`);
            expect(page.status, page.text).toBe(200);
            versions.push(...page.body.versions);
            cursor = page.body.next;
          } while (cursor);
          return versions.length === 10 && versions[0]?.version === version ? true : null;
        },
        120_000,
        250,
      );
      const items = await scanTable(raw, `S#local#${sid}`);
      const lasting = items.filter((item) => item[tableKeys.timeToLive] === undefined);
      const expiring = items.filter((item) => item[tableKeys.timeToLive] !== undefined);
      const bytes = (list: Array<Record<string, unknown>>) => list.reduce((sum, item) => sum + JSON.stringify(item).length, 0);
      return { lasting: lasting.length, lastingBytes: bytes(lasting), expiring: expiring.length, expiringBytes: bytes(expiring) };
    };

    // Act
    await writeUpTo(250);
    const after250 = await measure(250);
    await writeUpTo(1000);
    const after1000 = await measure(1000);

    // Assess: what lasts is the same; what waits for TTL (a pruned version's place in the log,
    // docs/api.md Retention) holds no state: far less than a write's 1 KB each. (One run, at 500
    // and 2,000 writes: 12 lasting items of 13.3 KB after each; 1,991 places waiting for TTL of
    // 188 bytes each.)
    expect(after1000.lasting).toBeLessThanOrEqual(after250.lasting + 2);
    expect(after1000.lastingBytes).toBeLessThanOrEqual(after250.lastingBytes + 4000);
    expect(after1000.lastingBytes).toBeLessThan(40_000);
    expect(after1000.expiringBytes / Math.max(1, after1000.expiring)).toBeLessThan(500);
  }, 240_000);
});
