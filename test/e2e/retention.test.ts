import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ApiClient, apiClient, uniqueId } from '../helpers/api-client.js';
import { type RunningApi, startApi } from '../helpers/e2e.js';

/**
 * Retention (API.md section 12), through the HTTP API on DynamoDB Local: the local change hook
 * (the stream poller `npm start` runs, under the change hook's own role in the synthesized
 * template: the IAM gate) prunes what fell out of a session's window, and every node still
 * reads its state. The test waits for the hook (never a timing assertion).
 */

let api: RunningApi;
let http: ApiClient;

beforeAll(async () => {
  // Pruned at most once a second per session here (a minute by default), so that the test sees two runs.
  api = await startApi({ AGENTSTATE_PRUNE_INTERVAL_SECONDS: '1' });
  http = api.client;
});
afterAll(async () => {
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
