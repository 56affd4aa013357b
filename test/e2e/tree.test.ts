import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ApiClient, type ApiResponse, uniqueId } from '../helpers/api-client.js';
import { type RunningApi, startApi } from '../helpers/e2e.js';

let api: RunningApi;
let http: ApiClient;

beforeAll(async () => {
  api = await startApi();
  http = api.client;
});
afterAll(async () => {
  await api?.stop();
});

const uuidv7 = /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

describe('message tree', () => {
  it('appends a chain under the head and moves the head to its end', async () => {
    const sid = uniqueId('chain');

    const first = await http.post(`/v1/sessions/${sid}/messages`, {
      messages: [
        { role: 'user', content: 'hi' },
        { role: 'assistant', content: 'hello', model: 'x' },
      ],
    });
    const second = await http.post(`/v1/sessions/${sid}/messages`, { messages: [{ id: 'u2', role: 'user', content: 'more' }] });
    const path = await http.get(`/v1/sessions/${sid}/messages`);

    expect(first.status).toBe(201);
    const [user, assistant] = first.body.nodes;
    expect(user).toMatchObject({ parentId: 'root', depth: 1, role: 'user', stateVersion: 0 });
    expect(assistant).toMatchObject({ parentId: user.id, depth: 2, role: 'assistant' });
    expect(user.id).toMatch(uuidv7);
    expect(first.body.head).toBe(assistant.id);
    expect(second.body).toMatchObject({ head: 'u2', nodes: [{ id: 'u2', parentId: assistant.id, depth: 3 }] });
    expect(path.body.ancestry).toEqual(['root', user.id, assistant.id, 'u2']);
    expect(path.body.messages).toEqual([
      { role: 'user', content: 'hi', id: user.id, parentId: 'root' },
      { role: 'assistant', content: 'hello', model: 'x', id: assistant.id, parentId: user.id },
      { id: 'u2', role: 'user', content: 'more', parentId: assistant.id },
    ]);
    expect((await http.get(`/v1/sessions/${sid}`)).body).toMatchObject({ head: 'u2', version: 0 });
  });

  it('continues from leading messages that already exist under the same parent', async () => {
    const sid = uniqueId('resend');
    await http.post(`/v1/sessions/${sid}/messages`, {
      messages: [
        { id: 'm1', role: 'user' },
        { id: 'm2', role: 'assistant' },
      ],
    });

    const resent = await http.post(`/v1/sessions/${sid}/messages`, {
      parentId: 'root',
      messages: [
        { id: 'm1', role: 'user' },
        { id: 'm2', role: 'assistant' },
        { id: 'm3', role: 'user' },
      ],
    });
    const tree = await http.get(`/v1/sessions/${sid}/tree`);

    expect(resent.status).toBe(201);
    expect(resent.body.head).toBe('m3');
    expect(resent.body.nodes.map((node: { parentId: string }) => node.parentId)).toEqual(['root', 'm1', 'm2']);
    expect(resent.body.nodes.map((node: { id: string }) => node.id)).toEqual(['m1', 'm2', 'm3']);
    expect(tree.body.nodes.map((node: { id: string }) => node.id)).toEqual(['root', 'm1', 'm2', 'm3']);
  });

  it('reports the current state version of a resent node that was the head', async () => {
    const sid = uniqueId('resend-head');
    await http.post(`/v1/sessions/${sid}/messages`, { messages: [{ id: 'h', role: 'user' }] });
    await http.put(`/v1/sessions/${sid}/state`, { at: 'h' });

    const resent = await http.post(`/v1/sessions/${sid}/messages`, {
      parentId: 'root',
      messages: [
        { id: 'h', role: 'user' },
        { id: 'next', role: 'assistant' },
      ],
    });

    expect(resent.body.nodes).toMatchObject([
      { id: 'h', stateVersion: 1 },
      { id: 'next', stateVersion: 1 },
    ]);
    expect((await http.get(`/v1/sessions/${sid}/nodes/h`)).body.stateVersion).toBe(1);
  });

  it('stores each message exactly as sent, key order included', async () => {
    const sid = uniqueId('verbatim-message');
    await http.request('POST', `/v1/sessions/${sid}/messages`, {
      raw: '{"messages":[{"content":"c","meta":{"z":1,"a":2},"role":"user","id":"v1"}]}',
    });

    const path = await http.get(`/v1/sessions/${sid}/messages`);

    expect(path.text).toContain('{"content":"c","meta":{"z":1,"a":2},"role":"user","id":"v1","parentId":"root"}');
  });

  it('refuses an id that exists under a different parent with 409 node_exists', async () => {
    const sid = uniqueId('exists');
    await http.post(`/v1/sessions/${sid}/messages`, {
      messages: [
        { id: 'a', role: 'user' },
        { id: 'b', role: 'assistant' },
      ],
    });

    const elsewhere = await http.post(`/v1/sessions/${sid}/messages`, { parentId: 'root', messages: [{ id: 'b', role: 'user' }] });
    const afterNew = await http.post(`/v1/sessions/${sid}/messages`, {
      messages: [
        { id: 'c', role: 'user' },
        { id: 'a', role: 'user' },
      ],
    });
    const twice = await http.post(`/v1/sessions/${sid}/messages`, {
      messages: [
        { id: 'd', role: 'user' },
        { id: 'd', role: 'user' },
      ],
    });

    expect(elsewhere.status).toBe(409);
    expect(elsewhere.body).toMatchObject({ code: 'node_exists', nodeId: 'b' });
    expect(afterNew.body.code).toBe('node_exists');
    expect(twice.body.code).toBe('node_exists');
    // Nothing of the refused appends was written.
    const tree = await http.get(`/v1/sessions/${sid}/tree`);
    expect(tree.body.nodes.map((node: { id: string }) => node.id).sort()).toEqual(['a', 'b', 'root']);
    expect(tree.body.head).toBe('b');
  });

  it('answers 404 node_not_found for an unknown parent, node or head target', async () => {
    const sid = uniqueId('unknown');
    await http.post(`/v1/sessions/${sid}/messages`, { messages: [{ id: 'a', role: 'user' }] });

    const parent = await http.post(`/v1/sessions/${sid}/messages`, { parentId: 'nope', messages: [{ role: 'user' }] });
    const node = await http.get(`/v1/sessions/${sid}/nodes/nope`);
    const head = await http.put(`/v1/sessions/${sid}/head`, { nodeId: 'nope' });
    const state = await http.get(`/v1/sessions/${sid}/state?node=nope`);
    const path = await http.get(`/v1/sessions/${sid}/messages?node=nope`);

    for (const response of [parent, node, head, state, path]) {
      expect(response.status).toBe(404);
      expect(response.body.code).toBe('node_not_found');
    }
  });

  it("reads nodes and the tree with each node's state version", async () => {
    const sid = uniqueId('nodes');
    await http.put(`/v1/sessions/${sid}/state`, { v: 1 });
    await http.post(`/v1/sessions/${sid}/messages`, { messages: [{ id: 'q', role: 'user', content: 'x' }] });
    await http.patch(`/v1/sessions/${sid}/state`, { v: 2 });

    const root = await http.get(`/v1/sessions/${sid}/nodes/root`);
    const q = await http.get(`/v1/sessions/${sid}/nodes/q`);
    const tree = await http.get(`/v1/sessions/${sid}/tree`);

    expect(root.body).toMatchObject({ id: 'root', parentId: null, depth: 0, role: null, stateVersion: 1 });
    expect(typeof root.body.createdAt).toBe('string');
    expect(q.body).toMatchObject({ id: 'q', parentId: 'root', depth: 1, role: 'user', stateVersion: 2 });
    expect(tree.body).toEqual({
      head: 'q',
      nodes: [
        { id: 'root', parentId: null, depth: 0, role: null, stateVersion: 1 },
        { id: 'q', parentId: 'root', depth: 1, role: 'user', stateVersion: 2 },
      ],
    });
  });

  it('reads the path of a deep branch past the ancestor window', async () => {
    const sid = uniqueId('deep');
    const depth = 75;
    for (let start = 0; start < depth; start += 25) {
      const messages = Array.from({ length: 25 }, (_, index) => ({ id: `n${start + index}`, role: 'user', i: start + index }));
      expect((await http.post(`/v1/sessions/${sid}/messages`, { messages })).status).toBe(201);
    }

    const path = await http.get(`/v1/sessions/${sid}/messages`);
    const middle = await http.get(`/v1/sessions/${sid}/messages?node=n40`);

    expect(path.body.messages.map((message: { i: number }) => message.i)).toEqual(Array.from({ length: depth }, (_, i) => i));
    expect(path.body.ancestry).toHaveLength(depth + 1);
    expect(middle.body.ancestry.at(-1)).toBe('n40');
    expect(middle.body.messages).toHaveLength(41);
  });
});

describe('state follows the tree', () => {
  it('gives a branch the state current at its fork point, and keeps branches apart', async () => {
    // Prepare: root ── u1 ── a1, with state written at a1.
    const sid = uniqueId('fork');
    await http.post(`/v1/sessions/${sid}/messages`, { messages: [{ id: 'u1', role: 'user' }] });
    await http.put(`/v1/sessions/${sid}/state`, { step: 'asked' });
    await http.post(`/v1/sessions/${sid}/messages`, { messages: [{ id: 'a1', role: 'assistant' }] });
    await http.patch(`/v1/sessions/${sid}/state`, { step: 'answered', tokens: 10 });

    // Act: regenerate the reply: a new branch under u1.
    const regenerated = await http.post(`/v1/sessions/${sid}/messages`, { parentId: 'u1', messages: [{ id: 'a2', role: 'assistant' }] });
    const onBranch = await http.get(`/v1/sessions/${sid}/state`);
    const write = await http.patch(`/v1/sessions/${sid}/state`, { step: 'regenerated' });
    const atA1 = await http.get(`/v1/sessions/${sid}/state?node=a1`);
    const atU1 = await http.get(`/v1/sessions/${sid}/state?node=u1`);
    const atA2 = await http.get(`/v1/sessions/${sid}/state?node=a2`);

    // Assess
    expect(regenerated.body.nodes[0]).toMatchObject({ id: 'a2', parentId: 'u1', stateVersion: 1 });
    expect(onBranch.body).toMatchObject({ node: 'a2', version: 1, state: { step: 'asked' } });
    expect(write.body).toMatchObject({ node: 'a2', version: 3, prevVersion: 1, state: { step: 'regenerated' } });
    expect(atA1.body).toMatchObject({ version: 2, state: { step: 'answered', tokens: 10 } });
    expect(atU1.body).toMatchObject({ version: 1, state: { step: 'asked' } });
    expect(atA2.body).toMatchObject({ version: 3 });
  });

  it('never lets a later write elsewhere leak into a branch made earlier', async () => {
    const sid = uniqueId('no-leak');
    await http.post(`/v1/sessions/${sid}/messages`, { messages: [{ id: 'w', role: 'user' }] });
    await http.put(`/v1/sessions/${sid}/state`, { at: 'w' });
    await http.post(`/v1/sessions/${sid}/messages`, { messages: [{ id: 'x', role: 'assistant' }] });

    // Branch from w, then write at w itself (off the head).
    await http.post(`/v1/sessions/${sid}/messages`, { parentId: 'w', messages: [{ id: 'y', role: 'assistant' }] });
    const offHead = await http.patch(`/v1/sessions/${sid}/state?node=w`, { later: true });

    expect(offHead.body).toMatchObject({ node: 'w', version: 2, prevVersion: 1 });
    expect((await http.get(`/v1/sessions/${sid}/state?node=x`)).body).toMatchObject({ version: 1, state: { at: 'w' } });
    expect((await http.get(`/v1/sessions/${sid}/state?node=y`)).body).toMatchObject({ version: 1, state: { at: 'w' } });
    expect((await http.get(`/v1/sessions/${sid}/state`)).body).toMatchObject({ node: 'y', version: 1 });
    expect((await http.get(`/v1/sessions/${sid}/state?node=w`)).body).toMatchObject({ version: 2, state: { at: 'w', later: true } });
    // A branch made now from w sees the later write.
    const fresh = await http.post(`/v1/sessions/${sid}/messages`, { parentId: 'w', messages: [{ id: 'z', role: 'assistant' }] });
    expect(fresh.body.nodes[0].stateVersion).toBe(2);
  });

  it("starts a node appended under root with root's state once the head has left root", async () => {
    // Prepare: state written at root while it is the head, then the head leaves it and writes on.
    const sid = uniqueId('under-root');
    await http.put(`/v1/sessions/${sid}/state`, { at: 'root' });
    await http.post(`/v1/sessions/${sid}/messages`, { messages: [{ id: 'm1', role: 'user' }] });
    await http.patch(`/v1/sessions/${sid}/state`, { at: 'm1' });
    await http.post(`/v1/sessions/${sid}/messages`, { messages: [{ id: 'm2', role: 'assistant' }] });

    // Act: a new branch under root, and a write at root off the head followed by another branch.
    const first = await http.post(`/v1/sessions/${sid}/messages`, { parentId: 'root', messages: [{ id: 'b1', role: 'user' }] });
    const atB1 = await http.get(`/v1/sessions/${sid}/state?node=b1`);
    const atRoot = await http.patch(`/v1/sessions/${sid}/state?node=root`, { later: true });
    await http.post(`/v1/sessions/${sid}/messages`, { parentId: 'm1', messages: [{ id: 'm3', role: 'assistant' }] });
    const second = await http.post(`/v1/sessions/${sid}/messages`, { parentId: 'root', messages: [{ id: 'b2', role: 'user' }] });
    const atB2 = await http.get(`/v1/sessions/${sid}/state?node=b2`);
    const turn = await http.post(`/v1/sessions/${sid}/messages`, {
      parentId: 'root',
      messages: [{ id: 'b3', role: 'user' }],
      state: { b3: 1 },
    });

    // Assess
    expect(first.body.nodes[0]).toMatchObject({ id: 'b1', stateVersion: 1 });
    expect(atB1.body).toMatchObject({ node: 'b1', version: 1, state: { at: 'root' } });
    expect(atRoot.body).toMatchObject({ node: 'root', version: 3, prevVersion: 1, state: { at: 'root', later: true } });
    expect(second.body.nodes[0]).toMatchObject({ id: 'b2', stateVersion: 3 });
    expect(atB2.body).toMatchObject({ node: 'b2', version: 3, state: { at: 'root', later: true } });
    expect(turn.body).toMatchObject({ version: 4, state: { at: 'root', later: true, b3: 1 } });
  });

  it("switches the head between branches and reads each branch's state", async () => {
    const sid = uniqueId('switch');
    await http.post(`/v1/sessions/${sid}/messages`, { messages: [{ id: 'b1', role: 'user' }] });
    await http.put(`/v1/sessions/${sid}/state`, { branch: 1 });
    await http.post(`/v1/sessions/${sid}/messages`, { parentId: 'root', messages: [{ id: 'b2', role: 'user' }] });
    await http.put(`/v1/sessions/${sid}/state`, { branch: 2 });

    const toB1 = await http.put(`/v1/sessions/${sid}/head`, { nodeId: 'b1' });
    const readB1 = await http.get(`/v1/sessions/${sid}/state`);
    const writeB1 = await http.patch(`/v1/sessions/${sid}/state`, { more: true });
    const toB2 = await http.put(`/v1/sessions/${sid}/head`, { nodeId: 'b2' });
    const readB2 = await http.get(`/v1/sessions/${sid}/state`);

    expect(toB1.body).toEqual({ head: 'b1' });
    expect(readB1.body).toMatchObject({ node: 'b1', version: 1, state: { branch: 1 } });
    expect(writeB1.body).toMatchObject({ node: 'b1', version: 3, prevVersion: 1 });
    expect(toB2.body).toEqual({ head: 'b2' });
    expect(readB2.body).toMatchObject({ node: 'b2', version: 2, state: { branch: 2 } });
    const lineage = await http.get(`/v1/sessions/${sid}/versions?node=b1`);
    expect(lineage.body.versions.map((v: { version: number }) => v.version)).toEqual([3, 1]);
    const session = await http.get(`/v1/sessions/${sid}`);
    expect(session.body).toMatchObject({ head: 'b2', version: 3 });
  });

  it("lists a node's lineage in pages", async () => {
    const sid = uniqueId('lineage');
    for (let n = 1; n <= 40; n++) await http.put(`/v1/sessions/${sid}/state`, { n });
    await http.post(`/v1/sessions/${sid}/messages`, { messages: [{ id: 'side', role: 'user' }] });
    await http.put(`/v1/sessions/${sid}/state`, { side: true });

    const first = await http.get(`/v1/sessions/${sid}/versions?node=side&limit=35`);
    const rest = await http.get(`/v1/sessions/${sid}/versions?node=side&limit=35&cursor=${first.body.next}`);

    const numbers = [...first.body.versions, ...rest.body.versions].map((v: { version: number }) => v.version);
    expect(numbers).toEqual(Array.from({ length: 41 }, (_, index) => 41 - index));
    expect(rest.body.next).toBeUndefined();
  });

  it('adds message snippets to the tree on request (?preview=1)', async () => {
    // Prepare
    const sid = uniqueId('preview');
    await http.post(`/v1/sessions/${sid}/messages`, {
      messages: [
        { id: 'u1', role: 'user', content: 'Plan a\n trip to Porto' },
        { id: 'a1', role: 'assistant', content: [{ type: 'text', text: 'Sure.' }] },
        { id: 't1', role: 'tool', name: 'search' },
      ],
    });

    // Act
    const plain = await http.get(`/v1/sessions/${sid}/tree`);
    const withPreview = await http.get(`/v1/sessions/${sid}/tree?preview=1`);

    // Assess
    expect(plain.body.nodes.every((node: object) => !('preview' in node))).toBe(true);
    expect(withPreview.body.nodes.map((node: { id: string; preview: string | null }) => [node.id, node.preview])).toEqual([
      ['root', null],
      ['u1', 'Plan a trip to Porto'],
      ['a1', 'Sure.'],
      ['t1', '{"name":"search"}'],
    ]);
    expect(withPreview.body.nodes[1]).toEqual({ ...plain.body.nodes[1], preview: 'Plan a trip to Porto' });
    expect((await http.get(`/v1/sessions/${sid}/tree?preview=yes`)).status).toBe(400);
  });
});

// From idempotency.test.ts, a file of its own before, which started a server as this one does: its
// tests on this file's, each on sessions and keys of its own.
/**
 * `Idempotency-Key` on the writes of a session's log (issue 33): the answer is kept in the change
 * the write makes, so the key's claim is its only write. Many retries of one request at once all
 * get the one answer, and the request writes once; a key is the tenant's own.
 */
/** What a client sees of an answer: status, body text, the version's ETag. */
const seen = (response: ApiResponse) => ({ status: response.status, text: response.text, etag: response.headers.get('etag') });

describe('many retries of one request at once', () => {
  it.each([
    ['PATCH state', 'PATCH', 'state', { turn: 1 }],
    ['POST messages', 'POST', 'messages', { messages: [{ role: 'user', content: 'once' }] }],
    ['POST decide', 'POST', 'decide', { trigger: { type: 'tick' }, proposed: { state: { decided: 1 } } }],
  ])(
    '%s: 100 concurrent requests under one key all get the first answer, and it writes once',
    async (_name, method, route, body) => {
      // Prepare
      const sid = uniqueId('idem-many');
      await http.put(`/v1/sessions/${sid}/state`, { before: true });
      const headers = { 'idempotency-key': uniqueId('key') };

      // Act
      const answers = await Promise.all(
        Array.from({ length: 100 }, () => http.request(method, `/v1/sessions/${sid}/${route}`, { json: body, headers })),
      );

      // Assess: one answer, given once and replayed 99 times.
      const first = answers.find((answer) => answer.headers.get('idempotency-replayed') === null) as ApiResponse;
      expect(first.status, first.text).toBeLessThan(300);
      expect(answers.filter((answer) => answer.headers.get('idempotency-replayed') === 'true')).toHaveLength(99);
      for (const answer of answers) expect(seen(answer)).toEqual(seen(first));
      // One write: one version after the first (an append with no state records none), one message at most.
      const versions = (await http.get(`/v1/sessions/${sid}/versions`)).body.versions;
      expect(versions).toHaveLength(route === 'messages' ? 1 : 2);
      const messages = (await http.get(`/v1/sessions/${sid}/messages`)).body.messages;
      expect(messages).toHaveLength(route === 'messages' ? 1 : 0);
    },
    60_000,
  );
});

describe('a retry long after', () => {
  it('replays the first answer after other writes moved the session on, and a different request under the key is 422', async () => {
    // Prepare: a keyed write, then 60 more changes (more than a tip read brings along).
    const sid = uniqueId('idem-later');
    const key = uniqueId('key');
    const first = await http.patch(`/v1/sessions/${sid}/state`, { step: 'first' }, { headers: { 'idempotency-key': key } });
    for (let index = 0; index < 30; index++) {
      await http.post(`/v1/sessions/${sid}/messages`, { messages: [{ role: 'user', content: `m${index}` }] });
      await http.patch(`/v1/sessions/${sid}/state`, { step: index });
    }

    // Act
    const retry = await http.patch(`/v1/sessions/${sid}/state`, { step: 'first' }, { headers: { 'idempotency-key': key } });
    const other = await http.patch(`/v1/sessions/${sid}/state`, { step: 'other' }, { headers: { 'idempotency-key': key } });
    const elsewhere = await http.patch(
      `/v1/sessions/${uniqueId('idem-else')}/state`,
      { step: 'first' },
      { headers: { 'idempotency-key': key } },
    );

    // Assess
    expect(first.status).toBe(200);
    expect(retry.headers.get('idempotency-replayed')).toBe('true');
    expect(seen(retry)).toEqual(seen(first));
    expect(other.status).toBe(422);
    expect(other.body.code).toBe('idempotency_key_reused');
    expect(elsewhere.status).toBe(422);
    expect((await http.get(`/v1/sessions/${sid}/state`)).body).toMatchObject({ version: 31, state: { step: 29 } });
  });
});

describe('boundaries', () => {
  it("never replays another tenant's answer: the same key and session id in two tenants are two requests", async () => {
    // Prepare: tenant `local` writes under a key.
    const sid = uniqueId('idem-tenants');
    const key = uniqueId('key');
    const mine = await http.post(
      `/v1/sessions/${sid}/messages`,
      { messages: [{ role: 'user', content: 'mine' }] },
      { headers: { 'idempotency-key': key } },
    );

    // Act: tenant `other` sends the very same request, then both retry.
    const theirs = await http.post(
      `/v1/sessions/${sid}/messages`,
      { messages: [{ role: 'user', content: 'mine' }] },
      { key: 'other-key', headers: { 'idempotency-key': key } },
    );
    const theirRetry = await http.post(
      `/v1/sessions/${sid}/messages`,
      { messages: [{ role: 'user', content: 'mine' }] },
      { key: 'other-key', headers: { 'idempotency-key': key } },
    );
    const myRetry = await http.post(
      `/v1/sessions/${sid}/messages`,
      { messages: [{ role: 'user', content: 'mine' }] },
      { headers: { 'idempotency-key': key } },
    );

    // Assess: each tenant ran its own request once and gets its own answer back.
    expect(mine.status).toBe(201);
    expect(theirs.status).toBe(201);
    expect(theirs.headers.get('idempotency-replayed')).toBeNull();
    expect(theirs.body.head).not.toBe(mine.body.head);
    expect(seen(theirRetry)).toEqual(seen(theirs));
    expect(seen(myRetry)).toEqual(seen(mine));
    expect((await http.get(`/v1/sessions/${sid}/messages`)).body.messages).toHaveLength(1);
    expect((await http.get(`/v1/sessions/${sid}/messages`, { key: 'other-key' })).body.messages).toHaveLength(1);
  });
});

// From json-edge.test.ts, a file of its own before, which started a server as this one does: its
// tests on this file's. They write sessions and an agent of their own (unique ids); the requests
// to fixed ids ('s', 'ns', 'a') are refused before anything is written.
/**
 * JSON at the edge (API.md section 1), against `npm start` over real HTTP: numbers read back
 * digit for digit on every route that stores JSON, and bodies that cannot be taken as sent —
 * bytes that are not UTF-8, another charset, a key given twice — are refused with nothing
 * written. Path segments are decoded exactly once; `If-Match` follows RFC 9110.
 */
/** The numbers of the issue, and others a double would change, inside one JSON text. */
const VERBATIM =
  '{"n":9007199254740993,"big":123456789012345678901234567890,"tiny":1e-400,"f":0.1000000000000000055,"one":1.0,"z":-0,"e":1E3}';
const MEMBERS = VERBATIM.slice(1, -1);

/** Sends raw bytes, as a client that does not go through a JSON library would. */
async function send(method: string, path: string, body: string | Uint8Array, headers: Record<string, string> = {}) {
  const response = await fetch(`${api.url}${path}`, {
    method,
    headers: { authorization: 'Bearer dev-key', ...(body === '' ? {} : { 'content-type': 'application/json' }), ...headers },
    ...(body === '' ? {} : { body }),
  });
  const text = await response.text();
  return {
    status: response.status,
    text,
    body: text ? (JSON.parse(text) as Record<string, unknown>) : undefined,
    headers: response.headers,
  };
}

const statePath = (sid: string) => `/v1/sessions/${sid}/state`;

describe('numbers are stored verbatim', () => {
  it('reads back the issue numbers digit for digit after a PUT, in the answer, the read and the version', async () => {
    // Prepare
    const sid = uniqueId('verbatim');

    // Act
    const write = await send('PUT', statePath(sid), VERBATIM);
    const read = await send('GET', statePath(sid), '');
    const version = await send('GET', `/v1/sessions/${sid}/versions/1`, '');

    // Assess
    expect(write.status).toBe(200);
    expect(write.text).toContain(`"state":${VERBATIM}`);
    expect(read.text).toContain(`"state":${VERBATIM}`);
    expect(version.text).toContain(`"state":${VERBATIM}`);
  });

  it('keeps verbatim numbers through a merge patch, and a PATCH of the same text changes nothing', async () => {
    // Prepare
    const sid = uniqueId('verbatim-patch');
    await send('PUT', statePath(sid), VERBATIM);

    // Act
    const patched = await send('PATCH', statePath(sid), '{"added":2.50}', { 'content-type': 'application/merge-patch+json' });
    const again = await send('PATCH', statePath(sid), '{"added":2.50}', { 'content-type': 'application/merge-patch+json' });
    const other = await send('PATCH', statePath(sid), '{"added":2.5}', { 'content-type': 'application/merge-patch+json' });

    // Assess
    expect(patched.text).toContain(`"state":{${MEMBERS},"added":2.50}`);
    expect(again.body).toMatchObject({ changed: false, version: 2 });
    // 2.5 reads back differently from 2.50, so it is a change (numbers compare as written).
    expect(other.body).toMatchObject({ changed: true, version: 3 });
    expect(other.text).toContain(`"state":{${MEMBERS},"added":2.5}`);
  });

  it('keeps verbatim numbers in messages, commits, session metadata and agent config', async () => {
    // Prepare
    const sid = uniqueId('verbatim-routes');
    const agentId = uniqueId('agent');

    // Act
    const session = await send('POST', '/v1/sessions', `{"sessionId":"${sid}","metadata":${VERBATIM}}`);
    const messages = await send('POST', `/v1/sessions/${sid}/messages`, `{"messages":[{"role":"user","content":${VERBATIM}}]}`);
    const commit = await send(
      'POST',
      `/v1/sessions/${sid}/commits`,
      `{"runId":"r1","commands":[{"key":"k","scope":"thread","merge":"disjoint","set":${VERBATIM}},{"key":"k","scope":"run","merge":"disjoint","set":${VERBATIM}}]}`,
    );
    const agent = await send('PUT', `/v1/agents/${agentId}`, `{"config":${VERBATIM}}`);
    const [readSession, path, run, readAgent] = await Promise.all([
      send('GET', `/v1/sessions/${sid}`, ''),
      send('GET', `/v1/sessions/${sid}/messages`, ''),
      send('GET', `/v1/sessions/${sid}/runs/r1/state`, ''),
      send('GET', `/v1/agents/${agentId}`, ''),
    ]);

    // Assess
    expect([session.status, messages.status, commit.status, agent.status]).toEqual([201, 201, 200, 201]);
    expect(readSession.text).toContain(`"metadata":${VERBATIM}`);
    expect(path.text).toContain(`"content":${VERBATIM}`);
    expect(commit.text).toContain(`"state":{"k":${VERBATIM}}`);
    // A document keeps each member of an object under a key apart (so that commits can write
    // members without reading one another's: docs/architecture.md, "Commits"), and gives them
    // back sorted by name: JSON objects are unordered; every number still reads digit for digit.
    const sortedMembers = MEMBERS.split(',').sort();
    expect(run.text).toContain(`"state":{"k":{${sortedMembers.join(',')}}}`);
    expect(readAgent.text).toContain(`"config":${VERBATIM}`);
  });

  it('refuses a non-integer where the API reads a number itself, naming the field', async () => {
    const response = await send('POST', `/v1/sessions/${uniqueId('expected')}/commits`, `{"expectedVersion":1.0,"commands":[]}`);

    expect(response.status).toBe(400);
    expect(response.body).toMatchObject({ code: 'invalid_request' });
    expect(response.text).toContain('expectedVersion');
  });

  it.each([
    [
      'a commit',
      'POST',
      '/v1/sessions/s/commits',
      '{"expectedVersion":1.0,"commands":[{"key":"a","scope":"thread","merge":"disjoint","set":1}]}',
      'expectedVersion',
    ],
    ['a memory put', 'PUT', '/v1/memory/ns/k', '{"value":{},"ttlSeconds":1e3}', 'ttlSeconds'],
    ['a memory search', 'POST', '/v1/memory/search', '{"namespacePrefix":["ns"],"limit":50.0}', 'limit'],
    ['an agent', 'PUT', '/v1/agents/a', '{"worker":{"url":"module:examples/worker.ts","timeoutMs":9007199254740993}}', 'worker.timeoutMs'],
  ])('says how to write such a number, in words the caller sent (%s)', async (_name, method, path, body, field) => {
    // Before: "Invalid input: expected number, received JsonNumber", a type the caller never saw.
    const response = await send(method, path, body);

    expect(response.status).toBe(400);
    expect(response.body?.detail).toBe(
      `${field}: must be a number written plainly: an integer in its shortest form (7, not 7.0 or 7e0), within ±2^53`,
    );
    expect(response.text).not.toContain('JsonNumber');
  });
});

describe('bodies that cannot be taken as sent write nothing', () => {
  it.each([
    ['bytes that are not UTF-8', Uint8Array.from([...Buffer.from('{"a":"'), 0xff, 0xfe, ...Buffer.from('"}')]), {}, 400, 'invalid_json'],
    ['a truncated UTF-8 sequence', Uint8Array.from([...Buffer.from('{"a":"'), 0xe2, 0x82, ...Buffer.from('"}')]), {}, 400, 'invalid_json'],
    [
      'a merge patch that is not UTF-8',
      Uint8Array.from([...Buffer.from('{"a":"'), 0xc3, ...Buffer.from('"}')]),
      { 'content-type': 'application/merge-patch+json' },
      400,
      'invalid_json',
    ],
    ['charset=iso-8859-1', '{"a":"caf\u00e9"}', { 'content-type': 'application/json; charset=iso-8859-1' }, 415, 'unsupported_media_type'],
    ['charset="utf-16"', '{"a":1}', { 'content-type': 'application/json; charset="utf-16"' }, 415, 'unsupported_media_type'],
    ['text/plain', '{"a":1}', { 'content-type': 'text/plain' }, 415, 'unsupported_media_type'],
    ['a key twice', '{"a":1,"a":2}', {}, 400, 'invalid_json'],
    ['a key twice with the same value', '{"a":{"b":1,"b":1}}', {}, 400, 'invalid_json'],
  ] as const)('refuses %s', async (_label, body, headers, status, code) => {
    // Prepare
    const sid = uniqueId('refused');

    // Act
    const response = await send('PUT', statePath(sid), body, headers);
    const read = await send('GET', statePath(sid), '');

    // Assess
    expect(response.status).toBe(status);
    expect(response.body).toMatchObject({ code });
    expect(response.headers.get('content-type')).toBe('application/problem+json');
    expect(read.body).toMatchObject({ version: 0, state: null });
  });

  it.each([
    ['application/json; charset=utf-8', 'application/json; charset=utf-8'],
    ['application/json; charset="UTF-8"', 'application/json; charset="UTF-8"'],
    ['application/merge-patch+json', 'application/merge-patch+json'],
  ])('takes %s', async (_label, contentType) => {
    const response = await send('PUT', statePath(uniqueId('taken')), '{"café":"☕"}', { 'content-type': contentType });

    expect(response.status).toBe(200);
    expect(response.body).toMatchObject({ state: { café: '☕' } });
  });
});

describe('path segments are decoded exactly once', () => {
  it('reads x%2541 as the id x%41, which is invalid, and writes neither x%41 nor xA', async () => {
    // Act
    const response = await send('PUT', '/v1/sessions/x%2541/state', '{"a":1}');
    const decodedTwice = await send('GET', '/v1/sessions/xA', '');

    // Assess
    expect(response.status).toBe(400);
    expect(response.body).toMatchObject({ code: 'invalid_id' });
    expect(decodedTwice.status).toBe(404);
  });

  it('reads an encoded valid id (%41 is A) as that id', async () => {
    const sid = uniqueId('enc');

    const write = await send('PUT', `/v1/sessions/${sid}%41/state`, '{"a":1}');
    const read = await send('GET', `/v1/sessions/${sid}A/state`, '');

    expect(write.status).toBe(200);
    expect(read.body).toMatchObject({ sessionId: `${sid}A`, version: 1 });
  });
});

describe('If-Match as RFC 9110 writes it', () => {
  it.each([
    ['"1"', 200],
    ['W/"1"', 200],
    ['*', 200],
    ['"7", "1"', 200],
    ['"2"', 412],
    ['"7", "8"', 412],
  ])('If-Match: %s on a node at version 1 → %i', async (header, status) => {
    // Prepare
    const sid = uniqueId('if-match');
    await send('PUT', statePath(sid), '{"v":1}');

    // Act
    const response = await send('PUT', statePath(sid), '{"v":2}', { 'if-match': header });

    // Assess
    expect(response.status).toBe(status);
    if (status === 412) expect(response.body).toMatchObject({ code: 'version_mismatch', currentVersion: 1 });
  });

  it('If-Match: * on a node with no recorded version → 412, nothing written', async () => {
    const sid = uniqueId('if-match-star');

    const response = await send('PUT', statePath(sid), '{"v":1}', { 'if-match': '*' });
    const read = await send('GET', statePath(sid), '');

    expect(response.status).toBe(412);
    expect(response.body).toMatchObject({ code: 'version_mismatch', currentVersion: 0 });
    expect(read.body).toMatchObject({ version: 0 });
  });

  it.each(['"9', '9', '7', 'W/7', 'w/"1"', '"01"', '"abc"', '*, "1"', ',', '""'])('If-Match: %s → 400, nothing written', async (header) => {
    // Prepare
    const sid = uniqueId('if-match-bad');
    await send('PUT', statePath(sid), '{"v":1}');

    // Act
    const response = await send('PUT', statePath(sid), '{"v":2}', { 'if-match': header });
    const read = await send('GET', statePath(sid), '');

    // Assess
    expect(response.status).toBe(400);
    expect(response.body).toMatchObject({ code: 'invalid_request', field: 'If-Match' });
    expect(read.body).toMatchObject({ version: 1, state: { v: 1 } });
  });
});
