import { randomBytes } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ApiClient, uniqueId } from '../helpers/api-client.js';
import { type RunningApi, startApi } from '../helpers/e2e.js';
import { EventFixtures, waitFor } from '../helpers/events.js';

/**
 * States up to 4 MiB (API.md section 4) through every write path of the real server: PATCH,
 * PUT, a commit, a decision; read back whole, at a version, on two branches.
 */
let api: RunningApi;
let http: ApiClient;
const fixtures = new EventFixtures(() => api.url);
let worker: Server;
let workerUrl: string;
/** What the worker answers next. */
let answer: unknown = {};

const MiB = 1024 * 1024;

/** A state of about `bytes` of JSON text, shaped like an agent's: a log of messages. */
function largeState(bytes: number, tag = 'm'): { log: Array<{ id: string; text: string }>; turns: number } {
  const log: Array<{ id: string; text: string }> = [];
  for (let n = 0; log.length * 1100 < bytes; n++) {
    log.push({ id: `${tag}${n}`, text: `${tag} ${n} ${'the quick brown fox jumps over the lazy dog '.repeat(24)}`.slice(0, 1060) });
  }
  return { log, turns: 0 };
}

const bytesOf = (value: unknown) => Buffer.byteLength(JSON.stringify(value));

beforeAll(async () => {
  worker = createServer(async (req, res) => {
    for await (const _chunk of req) {
      // drain the request
    }
    res.setHeader('content-type', 'application/json');
    res.end(JSON.stringify(answer));
  });
  await new Promise<void>((resolve) => worker.listen(0, '127.0.0.1', resolve));
  workerUrl = `http://127.0.0.1:${(worker.address() as AddressInfo).port}/decide`;
  api = await startApi();
  http = api.client;
}, 60_000);
afterAll(async () => {
  await fixtures.close();
  await api?.stop();
  await new Promise((resolve) => worker?.close(resolve));
});

describe('a 4 MiB state', () => {
  it('is written with PUT, patched, and read back whole, now and at every version', async () => {
    // Prepare
    const sid = uniqueId('big');
    const state = largeState(4 * MiB - 64 * 1024);
    expect(bytesOf(state)).toBeGreaterThan(3.8 * MiB);

    // Act
    const put = await http.put(`/v1/sessions/${sid}/state`, state);
    const patched = await http.patch(`/v1/sessions/${sid}/state`, { turns: 1, note: 'n'.repeat(1024) });
    const read = await http.get(`/v1/sessions/${sid}/state`);
    const first = await http.get(`/v1/sessions/${sid}/state?version=1`);
    const version = await http.get(`/v1/sessions/${sid}/versions/2`);

    // Assess
    expect(put.status).toBe(200);
    expect(put.body).toMatchObject({ version: 1, changed: true });
    expect(patched.body).toMatchObject({ version: 2, prevVersion: 1, changed: true });
    expect(read.body.state).toEqual({ ...state, turns: 1, note: 'n'.repeat(1024) });
    expect(read.headers.get('etag')).toBe('"2"');
    expect(first.body).toMatchObject({ version: 1, state });
    expect(version.body).toMatchObject({ version: 2, prevVersion: 1, cause: 'patch', state: read.body.state });
  });

  it('whose strings hold JSON text is read back whole, now and as its version, though its answer escapes past Lambda’s 6 MB', async () => {
    // Prepare: tool outputs kept as JSON text: every `"` and `\` of them is escaped in the
    // state's JSON and would be again inside Lambda's answer (edge/lambda-payload.ts).
    const sid = uniqueId('escaped');
    const output = JSON.stringify({ rows: Array.from({ length: 30 }, (_, index) => ({ id: `r${index}`, path: 'C:\\work\\"quoted"' })) });
    const state = { outputs: Array.from({ length: Math.floor(4_150_000 / (JSON.stringify(output).length + 1)) }, () => output) };
    expect(bytesOf(state)).toBeLessThanOrEqual(4 * MiB);
    expect(Buffer.byteLength(JSON.stringify(JSON.stringify(state)))).toBeGreaterThan(6 * MiB);

    // Act
    const put = await http.put(`/v1/sessions/${sid}/state`, state);
    const read = await http.get(`/v1/sessions/${sid}/state`);
    const version = await http.get(`/v1/sessions/${sid}/versions/1`);

    // Assess
    expect(put.status).toBe(200);
    expect(read.status).toBe(200);
    expect(read.body.state).toEqual(state);
    expect(version.status, version.text.slice(0, 200)).toBe(200);
    expect(version.body.state).toEqual(state);
  });

  it('records no version for a write equal to it, and keeps If-Match', async () => {
    const sid = uniqueId('big-same');
    const state = largeState(2 * MiB);
    await http.put(`/v1/sessions/${sid}/state`, state);

    const same = await http.put(`/v1/sessions/${sid}/state`, structuredClone(state));
    const stale = await http.patch(`/v1/sessions/${sid}/state`, { turns: 9 }, { headers: { 'if-match': '"7"' } });

    expect(same.body).toMatchObject({ version: 1, changed: false });
    expect(stale.status).toBe(412);
    expect((await http.get(`/v1/sessions/${sid}/state`)).body).toMatchObject({ version: 1, state });
  });

  it('follows the message tree: each branch sees its own writes to the same large state', async () => {
    // Prepare: a large state at u1, then two replies, each a branch.
    const sid = uniqueId('big-branches');
    const state = largeState(3 * MiB);
    await http.post(`/v1/sessions/${sid}/messages`, { messages: [{ id: 'u1', role: 'user' }] });
    await http.put(`/v1/sessions/${sid}/state`, state);
    await http.post(`/v1/sessions/${sid}/messages`, { messages: [{ id: 'a1', role: 'assistant' }] });
    await http.patch(`/v1/sessions/${sid}/state`, { branch: 'a1' });
    await http.post(`/v1/sessions/${sid}/messages`, { parentId: 'u1', messages: [{ id: 'a2', role: 'assistant' }] });

    // Act
    await http.patch(`/v1/sessions/${sid}/state`, { branch: 'a2' });
    const onA1 = await http.get(`/v1/sessions/${sid}/state?node=a1`);
    const onA2 = await http.get(`/v1/sessions/${sid}/state?node=a2`);
    const atFork = await http.get(`/v1/sessions/${sid}/state?node=u1`);

    // Assess
    expect(onA1.body.state).toEqual({ ...state, branch: 'a1' });
    expect(onA2.body.state).toEqual({ ...state, branch: 'a2' });
    expect(atFork.body.state).toEqual(state);
  });

  it('is set by a commit, and answered by a decision, atomically with what else they write', async () => {
    // Prepare
    const sid = uniqueId('big-commit');
    const agentId = uniqueId('big-agent');
    const blob = 'c'.repeat(3 * MiB);
    await http.put(`/v1/agents/${agentId}`, { worker: { url: workerUrl } });
    await http.post('/v1/sessions', { sessionId: sid, agentId });

    // Act: a commit sets a 3 MiB key; then the worker answers with a 4 MiB state and a reply.
    const committed = await http.post(`/v1/sessions/${sid}/commits`, {
      commands: [{ key: 'blob', scope: 'thread', merge: 'disjoint', set: blob }],
    });
    const answered = largeState(4 * MiB - 128 * 1024, 'w');
    answer = { state: answered, messages: [{ role: 'assistant', content: 'done' }] };
    const decided = await http.post(`/v1/sessions/${sid}/decide`, { trigger: { type: 'tick' }, decisionId: 'd1' });
    const replayed = await http.post(`/v1/sessions/${sid}/decide`, { trigger: { type: 'tick' }, decisionId: 'd1' });

    // Assess
    expect(committed.status).toBe(200);
    expect(committed.body).toMatchObject({ version: 1, state: { blob } });
    expect(decided.status).toBe(200);
    expect(decided.body).toMatchObject({ version: 2, changed: true, state: answered, decision: { state: answered } });
    expect(replayed.body).toEqual(decided.body);
    const read = await http.get(`/v1/sessions/${sid}/state`);
    expect(read.body).toMatchObject({ version: 2, node: decided.body.head, state: answered });
  });

  it('is refused past 4 MiB by a worker (502) and by a commit (413), writing nothing', async () => {
    const sid = uniqueId('big-refused');
    const agentId = uniqueId('big-refuser');
    await http.put(`/v1/agents/${agentId}`, { worker: { url: workerUrl } });
    await http.post('/v1/sessions', { sessionId: sid, agentId });
    await http.put(`/v1/sessions/${sid}/state`, { small: true });

    answer = { state: { blob: 'x'.repeat(4 * MiB) } };
    const decided = await http.post(`/v1/sessions/${sid}/decide`, { trigger: { type: 'tick' } });
    const committed = await http.post(`/v1/sessions/${sid}/commits`, {
      commands: [{ key: 'blob', scope: 'thread', merge: 'disjoint', set: 'x'.repeat(4 * MiB) }],
    });

    expect(decided.status).toBe(502);
    expect(decided.body.code).toBe('worker_failed');
    expect(committed.status).toBe(413);
    expect(committed.body).toMatchObject({ code: 'state_too_large', limitBytes: 4 * MiB, scope: 'thread' });
    expect((await http.get(`/v1/sessions/${sid}/state`)).body).toMatchObject({ version: 1, state: { small: true } });
  });

  it('replays a write under an Idempotency-Key', async () => {
    const sid = uniqueId('big-idem');
    const state = largeState(4 * MiB - 64 * 1024);
    const headers = { 'idempotency-key': uniqueId('key') };

    const first = await http.put(`/v1/sessions/${sid}/state`, state, { headers });
    await http.patch(`/v1/sessions/${sid}/state`, { turns: 5 });
    const retry = await http.put(`/v1/sessions/${sid}/state`, state, { headers });

    expect(first.status).toBe(200);
    expect(retry.status).toBe(200);
    expect(retry.headers.get('idempotency-replayed')).toBe('true');
    expect(retry.body).toEqual(first.body);
    expect((await http.get(`/v1/sessions/${sid}/state`)).body).toMatchObject({ version: 2 });
  });
});

describe('a large state already there, through every route group', () => {
  it('is committed to, appended under, branched, switched, decided on, listed and deleted, each within its function’s role', async () => {
    // Prepare: a session with an agent and a user, whose state (300 KiB, stored in pieces) is
    // read by every write after it. Each route group's function reads those pieces with the
    // calls its own role allows (test/helpers/iam-gate.ts): a call it is refused is a 500 here.
    const sid = uniqueId('big-groups');
    const agentId = uniqueId('big-grouper');
    await http.put(`/v1/agents/${agentId}`, { worker: { url: workerUrl } });
    await http.post('/v1/sessions', { sessionId: sid, agentId, userId: uniqueId('big-user') });
    await http.post(`/v1/sessions/${sid}/messages`, { messages: [{ id: 'u1', role: 'user' }] });
    const state = largeState(300 * 1024);
    expect((await http.put(`/v1/sessions/${sid}/state`, state)).status).toBe(200);

    // Act
    const thread = await http.post(`/v1/sessions/${sid}/commits`, {
      commands: [{ key: 'notes', scope: 'thread', merge: 'disjoint', set: { a: 1 } }],
    });
    const scopes = await http.post(`/v1/sessions/${sid}/commits`, {
      runId: 'r1',
      commands: [
        { key: 'turns', scope: 'thread', merge: 'commutative', set: 1 },
        { key: 'k', scope: 'run', merge: 'disjoint', set: 1 },
        { key: 'k', scope: 'profile', merge: 'disjoint', set: 1 },
        { key: 'k', scope: 'shared', merge: 'disjoint', set: 1 },
      ],
    });
    const appended = await http.post(`/v1/sessions/${sid}/messages`, { messages: [{ id: 'a1', role: 'assistant' }] });
    const offHead = await http.post(`/v1/sessions/${sid}/messages`, { parentId: 'u1', messages: [{ id: 'a2', role: 'assistant' }] });
    const patchedOffHead = await http.patch(`/v1/sessions/${sid}/state?node=a2`, { branch: 'a2' });
    const switched = await http.put(`/v1/sessions/${sid}/head`, { nodeId: 'a2' });
    const tree = await http.get(`/v1/sessions/${sid}/tree`);
    answer = { state: { ...state, turns: 2 }, messages: [{ role: 'assistant', content: 'done' }] };
    const decided = await http.post(`/v1/sessions/${sid}/decide`, { trigger: { type: 'tick' } });
    const versions = await http.get(`/v1/sessions/${sid}/versions`);
    const atOne = await http.get(`/v1/sessions/${sid}/state?version=1`);
    const deleted = await http.delete(`/v1/sessions/${sid}`);

    // Assess
    expect(thread.status).toBe(200);
    expect(thread.body.state).toEqual({ ...state, notes: { a: 1 } });
    expect(scopes.status).toBe(200);
    expect(appended.status).toBe(201);
    expect(offHead.status).toBe(201);
    expect(patchedOffHead.status).toBe(200);
    expect(switched.status).toBe(200);
    expect(tree.status).toBe(200);
    expect(decided.status).toBe(200);
    expect(decided.body.state).toEqual({ ...state, turns: 2 });
    expect(versions.status).toBe(200);
    expect(atOne.body.state).toEqual(state);
    expect(deleted.status).toBe(204);
    expect((await http.get(`/v1/sessions/${sid}`)).status).toBe(404);
  });
});

describe('a large state and its agent’s declarations', () => {
  it('is read where the agents group checks a type change against stored values', async () => {
    // Prepare: typed fields, and a session whose stored state (300 KiB of random text, so it
    // stays in pieces however well it compresses) the agents group must read to judge a retype.
    const owner = uniqueId('big-owner');
    const fields = {
      blob: { type: 'json', read: 'public', write: 'public' },
      count: { type: 'number', read: 'public', write: 'public' },
    };
    await http.put(`/v1/agents/${owner}`, { stateFields: fields });
    const sid = uniqueId('big-retype');
    await http.post('/v1/sessions', { sessionId: sid, agentId: owner });
    const blob = Array.from({ length: 300 }, () => randomBytes(768).toString('base64'));
    expect((await http.put(`/v1/sessions/${sid}/state`, { blob, count: 3 })).status).toBe(200);

    // Act
    const retyped = await http.put(`/v1/agents/${owner}`, { stateFields: { ...fields, count: { ...fields.count, type: 'string' } } });

    // Assess: before, 500 in AWS (the agents function may not query the sessions index).
    expect(retyped.status).toBe(409);
    expect(retyped.body.sessions).toEqual([sid]);
  });
});

describe('JSON Patch (application/json-patch+json)', () => {
  const jsonPatch = (sid: string, operations: unknown, headers: Record<string, string> = {}) =>
    http.request('PATCH', `/v1/sessions/${sid}/state`, { json: operations, contentType: 'application/json-patch+json', headers });

  it('appends to an array of a 4 MiB state without resending it, and records cause "patch"', async () => {
    // Prepare
    const sid = uniqueId('jp-append');
    const state = largeState(4 * MiB - 64 * 1024);
    await http.put(`/v1/sessions/${sid}/state`, state);

    // Act
    const appended = await jsonPatch(sid, [
      { op: 'add', path: '/log/-', value: { id: 'new', text: 'appended' } },
      { op: 'replace', path: '/turns', value: 1 },
    ]);

    // Assess
    expect(appended.status).toBe(200);
    expect(appended.body).toMatchObject({ version: 2, prevVersion: 1, changed: true });
    expect(appended.body.state.log.at(-1)).toEqual({ id: 'new', text: 'appended' });
    expect(appended.body.state.log).toHaveLength(state.log.length + 1);
    expect((await http.get(`/v1/sessions/${sid}/versions/2`)).body).toMatchObject({ cause: 'patch', state: appended.body.state });
  });

  it('applies all six operations in order, with ~0 and ~1 escapes', async () => {
    const sid = uniqueId('jp-six');
    await http.put(`/v1/sessions/${sid}/state`, { 'a/b': 1, 'm~n': [1, 2], keep: { x: true } });

    const response = await jsonPatch(sid, [
      { op: 'test', path: '/a~1b', value: 1 },
      { op: 'add', path: '/m~0n/1', value: 9 },
      { op: 'remove', path: '/m~0n/0' },
      { op: 'replace', path: '/a~1b', value: 'one' },
      { op: 'copy', from: '/keep', path: '/copied' },
      { op: 'move', from: '/keep/x', path: '/moved' },
    ]);

    expect(response.status).toBe(200);
    expect(response.body.state).toEqual({ 'a/b': 'one', 'm~n': [9, 2], keep: {}, copied: { x: true }, moved: true });
  });

  it('answers 409 patch_conflict naming the operation, and 400 for a malformed one; nothing is written', async () => {
    // Prepare
    const sid = uniqueId('jp-fail');
    await http.put(`/v1/sessions/${sid}/state`, { items: [1] });

    // Act
    const failedTest = await jsonPatch(sid, [
      { op: 'add', path: '/items/-', value: 2 },
      { op: 'test', path: '/items/0', value: 5 },
    ]);
    const missing = await jsonPatch(sid, [{ op: 'remove', path: '/nope' }]);
    const pastEnd = await jsonPatch(sid, [{ op: 'add', path: '/items/5', value: 0 }]);
    const malformed = await jsonPatch(sid, [
      { op: 'add', path: '/items/-', value: 1 },
      { op: 'add', path: 'no-slash', value: 1 },
    ]);
    const notAnArray = await jsonPatch(sid, { op: 'add', path: '/a', value: 1 });

    // Assess
    expect(failedTest.status).toBe(409);
    expect(failedTest.body).toMatchObject({ code: 'patch_conflict', operation: 1, pointer: '/items/0' });
    expect(missing.body).toMatchObject({ code: 'patch_conflict', operation: 0 });
    expect(pastEnd.body).toMatchObject({ code: 'patch_conflict', operation: 0 });
    expect(malformed.status).toBe(400);
    expect(malformed.body).toMatchObject({ code: 'invalid_request', operation: 1 });
    expect(notAnArray.body.code).toBe('invalid_request');
    expect((await http.get(`/v1/sessions/${sid}/state`)).body).toMatchObject({ version: 1, state: { items: [1] } });
  });

  it('keeps If-Match, records nothing for an empty patch, and refuses a result over 4 MiB', async () => {
    const sid = uniqueId('jp-guard');
    await http.put(`/v1/sessions/${sid}/state`, { n: 1 });

    const stale = await jsonPatch(sid, [{ op: 'replace', path: '/n', value: 2 }], { 'if-match': '"5"' });
    const empty = await jsonPatch(sid, []);
    const tooLarge = await jsonPatch(sid, [
      { op: 'add', path: '/a', value: 'x'.repeat(2 * MiB) },
      { op: 'copy', from: '/a', path: '/b' },
    ]);

    expect(stale.status).toBe(412);
    expect(empty.body).toMatchObject({ version: 1, changed: false });
    expect(tooLarge.status).toBe(413);
    expect(tooLarge.body).toMatchObject({ code: 'state_too_large', limitBytes: 4 * MiB });
    expect((await http.get(`/v1/sessions/${sid}/state`)).body).toMatchObject({ version: 1, state: { n: 1 } });
  });
});

describe('change events of a large state', () => {
  it('reach webhooks and WebSocket followers as the recorded change, each under every channel limit', async () => {
    // Prepare: a webhook and a follower of the session, then a 4 MiB state.
    const sid = uniqueId('big-events');
    const target = await fixtures.receiver();
    const created = await http.post('/v1/webhooks', { url: target.url, sessionId: sid });
    expect(created.status).toBe(201);
    const follower = await fixtures.live('dev-key');
    follower.send({ action: 'subscribe', sessionId: sid });
    await waitFor('the subscription', () => follower.messages.find((message) => message.type === 'subscribed'));
    const state = largeState(4 * MiB - 64 * 1024);

    // Act: the state, a merge patch, an append, and a small state again.
    await http.put(`/v1/sessions/${sid}/state`, state);
    await http.patch(`/v1/sessions/${sid}/state`, { turns: 1 });
    await http.request('PATCH', `/v1/sessions/${sid}/state`, {
      json: [{ op: 'add', path: '/log/-', value: { id: 'last', text: 'appended' } }],
      contentType: 'application/json-patch+json',
    });
    await http.put(`/v1/sessions/${sid}/state`, { small: true });
    await waitFor('four webhook deliveries', () => target.accepted().length >= 4 || undefined, 20_000);
    await waitFor('four live events', () => follower.events().length >= 4 || undefined, 20_000);

    // Assess: every event delivered, in order, truncated, carrying what changed.
    for (const events of [target.accepted(), follower.events()]) {
      expect(events.map((event) => event.version)).toEqual([1, 2, 3, 4]);
      for (const event of events) {
        // Truncated: next and prev are left out (not null), as API.md section 9 says.
        expect(event).toMatchObject({ type: 'state.changed', sessionId: sid, truncated: true });
        expect(event).not.toHaveProperty('next');
        expect(event).not.toHaveProperty('prev');
        expect(Buffer.byteLength(JSON.stringify(event))).toBeLessThan(64 * 1024);
      }
      expect(events[1]).toMatchObject({ patch: { turns: 1 }, jsonPatch: [{ op: 'replace', path: '/turns', value: 1 }] });
      expect(events[2].jsonPatch).toEqual([{ op: 'add', path: '/log/-', value: { id: 'last', text: 'appended' } }]);
      // A merge patch of an append would resend the whole array: too large to carry.
      expect(events[2].patch).toBeUndefined();
      expect(events[3]).toMatchObject({ patch: { small: true } });
    }
  });
});
