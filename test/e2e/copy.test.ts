import { createHash, randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ApiClient, apiClient, uniqueId } from '../helpers/api-client.js';
import { type RunningApi, startApi } from '../helpers/e2e.js';

/**
 * `POST /v1/sessions/{sid}/copy` (API.md section 12): a new session whose nodes read what they
 * read in the source, versions numbered from 1 (one for each state its nodes read), independent
 * afterwards. Through the HTTP API on DynamoDB Local, every call under the tree function's role.
 */
let api: RunningApi;
let http: ApiClient;
let other: ApiClient;

beforeAll(async () => {
  api = await startApi();
  http = api.client;
  other = apiClient(api.url, 'other-key');
});
afterAll(async () => {
  await api?.stop();
});

interface TreeNode {
  id: string;
  parentId: string | null;
  stateVersion: number;
}

/**
 * A source with state before its first message, turns that change it and turns that do not,
 * and a branch (an edited user message) that is the head:
 *
 *   root {topic} ── u1 ── a1 {+plan} ── u2 ── a2 {+booked}
 *                              └──── u2b {+plan changed}   (head)
 */
async function source(): Promise<string> {
  const sid = uniqueId('copy-src');
  expect((await http.post('/v1/sessions', { sessionId: sid, userId: 'u-7', metadata: { channel: 'web' } })).status).toBe(201);
  expect((await http.put(`/v1/sessions/${sid}/state`, { topic: 'trip' })).status).toBe(200);
  const turns = [
    {
      messages: [
        { id: 'u1', role: 'user', content: 'Lisbon?' },
        { id: 'a1', role: 'assistant', content: 'Sure' },
      ],
      state: { plan: 'draft' },
    },
    {
      messages: [
        { id: 'u2', role: 'user', content: 'Book it' },
        { id: 'a2', role: 'assistant', content: 'Booked' },
      ],
      state: { booked: true },
    },
    { parentId: 'a1', messages: [{ id: 'u2b', role: 'user', content: 'Porto instead' }], state: { plan: 'porto' } },
  ];
  for (const turn of turns) expect((await http.post(`/v1/sessions/${sid}/messages`, turn)).status).toBe(201);
  return sid;
}

/** Every node's state and message, by id, as the session reads them. */
async function everything(
  sid: string,
): Promise<{ head: string; nodes: Record<string, { parentId: string | null; state: unknown; message: unknown }> }> {
  const tree = await http.get(`/v1/sessions/${sid}/tree`);
  expect(tree.status).toBe(200);
  const nodes: Record<string, { parentId: string | null; state: unknown; message: unknown }> = {};
  for (const node of tree.body.nodes as TreeNode[]) {
    const state = await http.get(`/v1/sessions/${sid}/state?node=${node.id}`);
    const path = await http.get(`/v1/sessions/${sid}/messages?node=${node.id}`);
    nodes[node.id] = { parentId: node.parentId, state: state.body.state, message: path.body.messages.at(-1) ?? null };
  }
  return { head: tree.body.head, nodes };
}

describe('copying a session', () => {
  it('copies the path to a node: each node reads its source state, versions from 1, the node is the head', async () => {
    // Prepare
    const sid = await source();
    const before = await everything(sid);

    // Act
    const copy = await http.post(`/v1/sessions/${sid}/copy`, { sessionId: uniqueId('copy-path'), node: 'a2' });
    const after = await everything(copy.body.sessionId);
    const versions = await http.get(`/v1/sessions/${copy.body.sessionId}/versions`);

    // Assess
    expect(copy.status).toBe(201);
    expect(copy.headers.get('location')).toBe(`/v1/sessions/${copy.body.sessionId}`);
    expect(copy.body).toMatchObject({ head: 'a2', version: 3, userId: 'u-7', agentId: null, metadata: { channel: 'web' } });
    expect(after.head).toBe('a2');
    expect(Object.keys(after.nodes).sort()).toEqual(['a1', 'a2', 'root', 'u1', 'u2']);
    for (const [id, node] of Object.entries(after.nodes)) expect(node, id).toEqual(before.nodes[id]);
    // root, a1 and a2 read three states: versions 1, 2, 3, each at its node, oldest last.
    expect(versions.body.versions.map((v: { version: number; node: string; state: unknown }) => [v.version, v.node])).toEqual([
      [3, 'a2'],
      [2, 'a1'],
      [1, 'root'],
    ]);
  });

  it('copies the whole tree with "tree": true, with the source head, and the path to the head by default', async () => {
    // Prepare
    const sid = await source();
    const before = await everything(sid);

    // Act
    const whole = await http.post(`/v1/sessions/${sid}/copy`, { tree: true, metadata: { copied: 'yes' } });
    const byDefault = await http.post(`/v1/sessions/${sid}/copy`, {});

    // Assess: the whole tree, node by node; the default is the path root→head (u2b).
    expect(whole.status).toBe(201);
    expect(whole.body).toMatchObject({ head: 'u2b', metadata: { copied: 'yes' } });
    expect(await everything(whole.body.sessionId)).toEqual(before);
    expect(byDefault.status).toBe(201);
    const path = await everything(byDefault.body.sessionId);
    expect(path.head).toBe('u2b');
    expect(Object.keys(path.nodes).sort()).toEqual(['a1', 'root', 'u1', 'u2b']);
    for (const [id, node] of Object.entries(path.nodes)) expect(node, id).toEqual(before.nodes[id]);
  });

  it('copies a tree whose head is the root (switched back to it) with the root as its head', async () => {
    // Prepare: the source's head moved back to the root after its turns.
    const sid = await source();
    expect((await http.put(`/v1/sessions/${sid}/head`, { nodeId: 'root' })).status).toBe(200);
    const before = await everything(sid);

    // Act
    const whole = await http.post(`/v1/sessions/${sid}/copy`, { tree: true });

    // Assess: the whole tree, and the source's head, not the last node the copy appended.
    expect(before.head).toBe('root');
    expect(whole.status, whole.text).toBe(201);
    expect(whole.body).toMatchObject({ head: 'root' });
    expect(await everything(whole.body.sessionId)).toEqual(before);
  });

  it('is independent of its source afterwards, both ways, and outlives its deletion', async () => {
    // Prepare
    const sid = await source();
    const copyId = (await http.post(`/v1/sessions/${sid}/copy`, { tree: true })).body.sessionId as string;

    // Act
    await http.patch(`/v1/sessions/${copyId}/state`, { plan: 'copy only' });
    await http.post(`/v1/sessions/${sid}/messages`, { messages: [{ id: 'late', role: 'user' }], state: { plan: 'source only' } });
    const sourceHead = await http.get(`/v1/sessions/${sid}/state`);
    await http.delete(`/v1/sessions/${sid}`);
    const copyHead = await http.get(`/v1/sessions/${copyId}/state`);
    const copyTree = await http.get(`/v1/sessions/${copyId}/tree`);

    // Assess
    expect(sourceHead.body.state).toEqual({ topic: 'trip', plan: 'source only' });
    expect(copyHead.body.state).toEqual({ topic: 'trip', plan: 'copy only' });
    expect(copyTree.body.nodes.map((node: TreeNode) => node.id)).not.toContain('late');
  });

  it('copies long paths (more messages than one append carries) and large states exactly', async () => {
    // Prepare: 130 messages in appends of 26, every other append changing a 2 MiB state.
    const sid = uniqueId('copy-long');
    const big = (seed: number) => ({ seed, blob: createHash('sha512').update(String(seed)).digest('hex').repeat(16_384) });
    for (let turn = 0; turn < 5; turn++) {
      const messages = Array.from({ length: 26 }, (_, n) => ({
        id: `m${turn * 26 + n}`,
        role: n % 2 ? 'assistant' : 'user',
        text: `${turn}.${n}`,
      }));
      const body = turn % 2 === 0 ? { messages, replaceState: big(turn) } : { messages };
      expect((await http.post(`/v1/sessions/${sid}/messages`, body)).status).toBe(201);
    }

    // Act
    const copy = await http.post(`/v1/sessions/${sid}/copy`, { node: 'm120' });
    const copyId = copy.body.sessionId as string;

    // Assess: the path's messages, and the large state at the nodes that changed it and after.
    expect(copy.status).toBe(201);
    expect((await http.get(`/v1/sessions/${copyId}/messages`)).body.messages).toEqual(
      (await http.get(`/v1/sessions/${sid}/messages?node=m120`)).body.messages,
    );
    for (const node of ['m25', 'm51', 'm77', 'm103', 'm120']) {
      const [mine, theirs] = await Promise.all([
        http.get(`/v1/sessions/${copyId}/state?node=${node}`),
        http.get(`/v1/sessions/${sid}/state?node=${node}`),
      ]);
      expect(mine.body.state, node).toEqual(theirs.body.state);
    }
    // Two appends changed the state on this path (the third changed it after m120).
    expect(copy.body.version).toBe(2);
  });

  it('copies a path whose messages would pass one change of the log when run together (each append of the source fits)', async () => {
    // Prepare: 100 messages of 12 KB that do not compress (base64 of random bytes), 25 an append:
    // each append about 230 KB compressed, two of them together more than one change may hold.
    const sid = uniqueId('copy-wide');
    for (let turn = 0; turn < 4; turn++) {
      const messages = Array.from({ length: 25 }, (_, n) => ({
        id: `w${turn * 25 + n}`,
        role: n % 2 ? 'assistant' : 'user',
        content: randomBytes(9000).toString('base64'),
      }));
      const appended = await http.post(`/v1/sessions/${sid}/messages`, { messages, ...(turn === 0 ? { state: { wide: true } } : {}) });
      expect(appended.status, appended.text).toBe(201);
    }

    // Act
    const copy = await http.post(`/v1/sessions/${sid}/copy`, {});
    const copyId = copy.body.sessionId as string;

    // Assess: the whole path, message for message.
    expect(copy.status, copy.text).toBe(201);
    const [mine, theirs] = await Promise.all([
      http.get(`/v1/sessions/${copyId}/messages?limit=1000`),
      http.get(`/v1/sessions/${sid}/messages?limit=1000`),
    ]);
    expect(mine.body.messages).toHaveLength(100);
    expect(mine.body.messages).toEqual(theirs.body.messages);
  });

  it('answers 404 for an unknown source or node, 409 for an existing id, 400 for node with tree, and nothing across tenants', async () => {
    // Prepare
    const sid = await source();
    const taken = uniqueId('copy-taken');
    await http.post('/v1/sessions', { sessionId: taken });

    // Act
    const unknown = await http.post(`/v1/sessions/${uniqueId('nobody')}/copy`, {});
    const noNode = await http.post(`/v1/sessions/${sid}/copy`, { node: 'nope' });
    const exists = await http.post(`/v1/sessions/${sid}/copy`, { sessionId: taken });
    const both = await http.post(`/v1/sessions/${sid}/copy`, { node: 'a1', tree: true });
    const badId = await http.post(`/v1/sessions/${sid}/copy`, { sessionId: 'a/b' });
    const extra = await http.post(`/v1/sessions/${sid}/copy`, { deep: true });
    const otherTenant = await other.post(`/v1/sessions/${sid}/copy`, { sessionId: uniqueId('stolen') });

    // Assess
    expect(unknown.body).toMatchObject({ status: 404, code: 'session_not_found' });
    expect(noNode.body).toMatchObject({ status: 404, code: 'node_not_found' });
    expect(exists.body).toMatchObject({ status: 409, code: 'session_exists' });
    expect((await http.get(`/v1/sessions/${taken}`)).body).toMatchObject({ version: 0, head: 'root' });
    expect(both.body).toMatchObject({ status: 400, code: 'invalid_request', field: 'node' });
    expect(badId.body).toMatchObject({ status: 400, code: 'invalid_id', field: 'sessionId' });
    expect(extra.body).toMatchObject({ status: 400, code: 'invalid_request' });
    expect(otherTenant.body).toMatchObject({ status: 404, code: 'session_not_found' });
  });

  it('refuses a tree of more appends than one copy makes with 413 before writing, and still copies one path of it', async () => {
    // Prepare: 151 branches of one message under the root: a copy of the tree is 151 appends
    // (the limit is 150), told from the tree before anything is written. One after another:
    // writers at once on one session only take turns.
    const sid = uniqueId('copy-branches');
    for (let n = 0; n < 151; n++) {
      const id = `b${n}`;
      const appended = await http.post(`/v1/sessions/${sid}/messages`, { parentId: 'root', messages: [{ id, role: 'user', content: id }] });
      expect(appended.status, appended.text).toBe(201);
    }
    const target = uniqueId('copy-branches-target');

    // Act
    const refused = await http.post(`/v1/sessions/${sid}/copy`, { sessionId: target, tree: true });
    const onePath = await http.post(`/v1/sessions/${sid}/copy`, { node: 'b7' });

    // Assess: the limit and the count; the id unknown, in no list, and free.
    expect(refused.status, refused.text).toBe(413);
    expect(refused.body).toMatchObject({ code: 'payload_too_large', limit: 'appends', limitCount: 150, count: 151 });
    expect((await http.get(`/v1/sessions/${target}`)).status).toBe(404);
    const listed = await http.get('/v1/sessions?limit=500');
    expect(listed.body.sessions.map((session: { sessionId: string }) => session.sessionId)).not.toContain(target);
    expect((await http.post('/v1/sessions', { sessionId: target })).status).toBe(201);
    expect(onePath.status, onePath.text).toBe(201);
    expect(onePath.body.head).toBe('b7');
  }, 60_000);

  it('refuses a path of more distinct large states than one copy puts with 413 before writing, and copies one just under', async () => {
    // Prepare: four nodes, each with a distinct state of 3.5 MiB (random, so no piece is shared):
    // 14 MiB of pieces on the path to the fourth, 10.5 on the path to the third (the limit is 12).
    const sid = uniqueId('copy-states');
    const blobs: string[] = [];
    for (let n = 0; n < 4; n++) {
      blobs.push(randomBytes((3.5 * 1024 * 1024 * 3) / 4).toString('base64'));
      const appended = await http.post(`/v1/sessions/${sid}/messages`, {
        messages: [{ id: `s${n}`, role: 'user', content: `s${n}` }],
        replaceState: { blob: blobs[n] },
      });
      expect(appended.status, appended.text).toBe(201);
    }
    const target = uniqueId('copy-states-target');

    // Act
    const refused = await http.post(`/v1/sessions/${sid}/copy`, { sessionId: target });
    const under = await http.post(`/v1/sessions/${sid}/copy`, { node: 's2' });

    // Assess: which limit, and the bytes counted; the id unknown, in no list, and free; the copy
    // under the limit is whole.
    expect(refused.status, refused.text).toBe(413);
    expect(refused.body).toMatchObject({ code: 'payload_too_large', limit: 'stateBytes', limitBytes: 12 * 1024 * 1024 });
    expect(refused.body.sizeBytes).toBeGreaterThan(14 * 1024 * 1024);
    expect((await http.get(`/v1/sessions/${target}`)).status).toBe(404);
    const listed = await http.get('/v1/sessions?limit=500');
    expect(listed.body.sessions.map((session: { sessionId: string }) => session.sessionId)).not.toContain(target);
    expect((await http.post('/v1/sessions', { sessionId: target })).status).toBe(201);
    expect(under.status, under.text).toBe(201);
    const copied = await http.get(`/v1/sessions/${under.body.sessionId}/state?node=s2`);
    expect(copied.body.state.blob === blobs[2]).toBe(true);
  }, 60_000);

  it('copies a path whose large state changes a little at each node: what the states share counts once', async () => {
    // Prepare: one 3.5 MiB state, then three nodes that each change one key of it: 14 MiB of
    // state if each counted whole (the limit is 12), one state's pieces and three small changes.
    const sid = uniqueId('copy-checkpoints');
    const blob = randomBytes((3.5 * 1024 * 1024 * 3) / 4).toString('base64');
    let appended = await http.post(`/v1/sessions/${sid}/messages`, {
      messages: [{ id: 'c0', role: 'user', content: 'c0' }],
      replaceState: { blob, step: 0 },
    });
    expect(appended.status, appended.text).toBe(201);
    for (let n = 1; n <= 3; n++) {
      appended = await http.post(`/v1/sessions/${sid}/messages`, {
        messages: [{ id: `c${n}`, role: 'user', content: `c${n}` }],
        state: { step: n },
      });
      expect(appended.status, appended.text).toBe(201);
    }

    // Act
    const copied = await http.post(`/v1/sessions/${sid}/copy`, {});

    // Assess: copied, each node reading its state.
    expect(copied.status, copied.text).toBe(201);
    const last = await http.get(`/v1/sessions/${copied.body.sessionId}/state?node=c3`);
    expect(last.body.state.step).toBe(3);
    expect(last.body.state.blob === blob).toBe(true);
  }, 60_000);

  it('takes 50 copies of one source at once, and one of 50 racing for the same id: the others answer 409 and write nothing', async () => {
    // Prepare
    const sid = await source();
    const expected = await everything(sid);
    const contested = uniqueId('copy-race');

    // Act
    const copies = await Promise.all(Array.from({ length: 50 }, () => http.post(`/v1/sessions/${sid}/copy`, { tree: true })));
    const race = await Promise.all(
      Array.from({ length: 50 }, () => http.post(`/v1/sessions/${sid}/copy`, { sessionId: contested, tree: true })),
    );

    // Assess
    expect(copies.map((copy) => copy.status)).toEqual(copies.map(() => 201));
    expect(new Set(copies.map((copy) => copy.body.sessionId)).size).toBe(50);
    for (const copy of copies.slice(0, 5)) expect(await everything(copy.body.sessionId)).toEqual(expected);
    expect(race.filter((copy) => copy.status === 201)).toHaveLength(1);
    expect(race.filter((copy) => copy.status === 409).map((copy) => copy.body.code)).toEqual(Array(49).fill('session_exists'));
    expect(await everything(contested)).toEqual(expected);
  });
});
