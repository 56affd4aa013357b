import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ApiClient, uniqueId } from '../helpers/api-client.js';
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

const commit = (sid: string, body: unknown, options = {}) => http.post(`/v1/sessions/${sid}/commits`, body, options);
const set = (key: string, value: unknown, merge = 'disjoint', scope = 'thread') => ({ key, scope, merge, set: value });
const remove = (key: string, merge = 'disjoint', scope = 'thread') => ({ key, scope, merge, remove: true });

describe('merge policies within one batch', () => {
  it('disjoint: the later command replaces', async () => {
    const sid = uniqueId('disjoint');
    const response = await commit(sid, { commands: [set('plan', { a: 1 }), set('plan', { b: 2 }), set('other', 1)] });

    expect(response.status).toBe(200);
    expect(response.body).toMatchObject({ version: 1, changed: true, state: { plan: { b: 2 }, other: 1 } });
    const version = await http.get(`/v1/sessions/${sid}/versions/1`);
    expect(version.body).toMatchObject({ cause: 'commit', state: { plan: { b: 2 }, other: 1 } });
  });

  it('commutative: objects shallow-merge, also with the stored value; other values replace', async () => {
    const sid = uniqueId('commutative');
    await http.put(`/v1/sessions/${sid}/state`, { counts: { x: 1, y: 1 }, tag: 'old' });

    const response = await commit(sid, {
      commands: [set('counts', { y: 2 }, 'commutative'), set('counts', { z: 3 }, 'commutative'), set('tag', 'new', 'commutative')],
    });

    expect(response.body.state).toEqual({ counts: { x: 1, y: 2, z: 3 }, tag: 'new' });
  });

  it('exclusive: a second set rejects the whole batch and writes nothing; a remove is not a second set', async () => {
    const sid = uniqueId('exclusive');
    await http.put(`/v1/sessions/${sid}/state`, { owner: 'nobody' });

    const rejected = await commit(sid, {
      commands: [set('note', 'kept?'), set('owner', 'a', 'exclusive'), set('owner', 'b', 'exclusive')],
    });
    const accepted = await commit(sid, { commands: [set('owner', 'a', 'exclusive'), remove('owner', 'exclusive')] });
    const otherScope = await commit(sid, {
      commands: [set('owner', 'x', 'exclusive'), set('owner', 'y', 'exclusive', 'run')],
      runId: 'run-1',
    });

    expect(rejected.status).toBe(409);
    expect(rejected.body).toMatchObject({ code: 'exclusive_conflict', key: 'owner' });
    expect(accepted.status).toBe(200);
    expect(accepted.body.state).toEqual({});
    // The same key in another scope is another slot.
    expect(otherScope.status).toBe(200);
    expect(otherScope.body.state).toEqual({ owner: 'x' });
    expect(otherScope.body.run).toMatchObject({ runId: 'run-1', version: 1, state: { owner: 'y' } });
    const history = await http.get(`/v1/sessions/${sid}/versions`);
    expect(history.body.versions.map((v: { state: unknown }) => v.state)).toEqual([{ owner: 'x' }, {}, { owner: 'nobody' }]);
  });

  it('remove deletes a key; removing a missing key changes nothing', async () => {
    const sid = uniqueId('remove');
    await commit(sid, { commands: [set('a', 1), set('b', 2)] });

    const removed = await commit(sid, { commands: [remove('a')] });
    const again = await commit(sid, { commands: [remove('a')] });

    expect(removed.body).toMatchObject({ version: 2, state: { b: 2 }, changed: true });
    expect(again.body).toMatchObject({ version: 2, changed: false });
  });
});

describe('scopes', () => {
  it('keeps a run document per run, readable on its own', async () => {
    const sid = uniqueId('runs');
    await commit(sid, { runId: 'r1', commands: [set('step', 1, 'disjoint', 'run'), set('log', { a: true }, 'commutative', 'run')] });
    await commit(sid, { runId: 'r1', commands: [set('log', { b: true }, 'commutative', 'run')] });
    await commit(sid, { runId: 'r2', commands: [set('step', 9, 'disjoint', 'run')] });

    const r1 = await http.get(`/v1/sessions/${sid}/runs/r1/state`);
    const r2 = await http.get(`/v1/sessions/${sid}/runs/r2/state`);
    const none = await http.get(`/v1/sessions/${sid}/runs/r3/state`);

    expect(r1.body).toMatchObject({ sessionId: sid, runId: 'r1', version: 2, state: { step: 1, log: { a: true, b: true } } });
    expect(r2.body).toMatchObject({ version: 1, state: { step: 9 } });
    expect(none.body).toMatchObject({ version: 0, state: null });
    expect((await http.get(`/v1/sessions/${sid}`)).body.version).toBe(0);
  });

  it("shares a profile across one user's sessions, and hides it from another tenant", async () => {
    const user = uniqueId('user');
    const first = uniqueId('p1');
    const second = uniqueId('p2');
    await http.post('/v1/sessions', { sessionId: first, userId: user });
    await http.post('/v1/sessions', { sessionId: second, userId: user });

    await commit(first, { commands: [set('language', 'fr', 'disjoint', 'profile')] });
    const fromSecond = await commit(second, { commands: [set('seen', { [second]: true }, 'commutative', 'profile')] });
    const profile = await http.get(`/v1/profiles/${user}/state`);
    const otherTenant = await http.get(`/v1/profiles/${user}/state`, { key: 'other-key' });
    const noUser = await commit(uniqueId('anonymous'), { commands: [set('x', 1, 'disjoint', 'profile')] });

    expect(fromSecond.body.profile).toMatchObject({ userId: user, version: 2, state: { language: 'fr', seen: { [second]: true } } });
    expect(profile.body).toMatchObject({ userId: user, version: 2, state: { language: 'fr' } });
    expect(otherTenant.body).toMatchObject({ version: 0, state: null });
    expect(noUser.status).toBe(400);
  });

  it('shows the shared document to every session of the tenant and to no other tenant', async () => {
    const key = uniqueId('setting');
    await commit(uniqueId('s1'), { commands: [set(key, 'on', 'disjoint', 'shared')] });

    const shared = await http.get('/v1/shared/state');
    const otherTenant = await http.get('/v1/shared/state', { key: 'other-key' });

    expect(shared.body.state[key]).toBe('on');
    expect(otherTenant.body.state?.[key]).toBeUndefined();
  });

  it('refuses thread keys on a state that is not an object', async () => {
    const sid = uniqueId('scalar');
    await http.put(`/v1/sessions/${sid}/state`, 42);

    const response = await commit(sid, { commands: [set('a', 1)] });

    expect(response.status).toBe(409);
    expect(response.body.detail).toContain('not an object');
  });
});

describe('atomicity and concurrency', () => {
  it('fails a batch spanning thread and profile as a whole', async () => {
    const user = uniqueId('user');
    const sid = uniqueId('atomic');
    await http.post('/v1/sessions', { sessionId: sid, userId: user });
    await commit(sid, { commands: [set('t', 1), set('p', 1, 'disjoint', 'profile')] });

    const stale = await commit(sid, { expectedVersion: 0, commands: [set('t', 2), set('p', 2, 'disjoint', 'profile')] });
    const staleProfileOnly = await commit(sid, { expectedVersion: 0, commands: [set('p', 3, 'disjoint', 'profile')] });

    expect(stale.status).toBe(412);
    expect(stale.body).toMatchObject({ code: 'version_mismatch', currentVersion: 1 });
    expect(staleProfileOnly.status).toBe(412);
    expect((await http.get(`/v1/sessions/${sid}/state`)).body.state).toEqual({ t: 1 });
    expect((await http.get(`/v1/profiles/${user}/state`)).body).toMatchObject({ version: 1, state: { p: 1 } });
  });

  it('loses nothing when many clients commit commutatively to one key at once', async () => {
    const sid = uniqueId('crowd');
    const user = uniqueId('user');
    await http.post('/v1/sessions', { sessionId: sid, userId: user });
    // DynamoDB Local runs contending transactions about a second each (real DynamoDB takes
    // milliseconds), so ten clients keep this test well inside the server's retry budget.
    const clients = 10;

    const responses = await Promise.all(
      Array.from({ length: clients }, (_, index) =>
        commit(sid, {
          runId: 'r',
          commands: [
            set('votes', { [`c${index}`]: index }, 'commutative'),
            set('votes', { [`c${index}`]: index }, 'commutative', 'profile'),
            set('votes', { [`c${index}`]: index }, 'commutative', 'run'),
          ],
        }),
      ),
    );

    expect(responses.filter((response) => response.status !== 200).map((response) => response.body)).toEqual([]);
    const thread = await http.get(`/v1/sessions/${sid}/state`);
    const profile = await http.get(`/v1/profiles/${user}/state`);
    const run = await http.get(`/v1/sessions/${sid}/runs/r/state`);
    for (const document of [thread.body, profile.body, run.body]) {
      expect(Object.keys(document.state.votes)).toHaveLength(clients);
      expect(document.version).toBe(clients);
    }
  });

  it('answers bad batches with clear errors and writes nothing', async () => {
    const sid = uniqueId('bad-commit');
    expect((await commit(sid, { commands: [] })).body.code).toBe('invalid_request');
    expect((await commit(sid, { commands: [{ key: 'a', scope: 'thread', merge: 'disjoint' }] })).body.code).toBe('invalid_request');
    expect((await commit(sid, { commands: [{ key: 'a', scope: 'thread', merge: 'disjoint', set: 1, remove: true }] })).body.code).toBe(
      'invalid_request',
    );
    expect((await commit(sid, { commands: [{ key: 'a', scope: 'galaxy', merge: 'disjoint', set: 1 }] })).body.code).toBe('invalid_request');
    expect((await commit(sid, { commands: [set('a', 1, 'disjoint', 'run')] })).body.code).toBe('invalid_request');
    expect((await commit(sid, { commands: [set('a', 1), set('a', 2, 'exclusive')] })).body.code).toBe('invalid_request');
    expect((await commit(sid, { commands: [set('a', 1, 'disjoint', 'run')], runId: 'bad id' })).body.code).toBe('invalid_id');
    expect((await http.get(`/v1/sessions/${sid}`)).status).toBe(404);
  });

  it('refuses a scope grown past its limit with 413 state_too_large naming the scope, and writes nothing', async () => {
    // Prepare: two keys that each fit, but not together: the thread holds 4 MiB, a run 256 KiB.
    const sid = uniqueId('large-commit');
    await commit(sid, { runId: 'r1', commands: [set('small', true), set('small', true, 'disjoint', 'run')] });
    const halfThread = 'x'.repeat(2 * 1024 * 1024 + 1024);
    const halfRun = 'x'.repeat(150 * 1024);

    // Act
    const thread = await commit(sid, { commands: [set('a', halfThread), set('b', halfThread)] });
    const run = await commit(sid, { runId: 'r1', commands: [set('a', halfRun, 'disjoint', 'run'), set('b', halfRun, 'disjoint', 'run')] });

    // Assess: the same answer as a state write over the limit, with the scope that broke it.
    for (const [response, scope, limitBytes] of [
      [thread, 'thread', 4194304],
      [run, 'run', 262144],
    ] as const) {
      expect(response.status).toBe(413);
      expect(response.body).toMatchObject({ code: 'state_too_large', limitBytes, scope });
      expect(response.body.sizeBytes).toBeGreaterThan(limitBytes);
    }
    expect((await http.get(`/v1/sessions/${sid}/state`)).body).toMatchObject({ version: 1, state: { small: true } });
    expect((await http.get(`/v1/sessions/${sid}/runs/r1/state`)).body).toMatchObject({ version: 1, state: { small: true } });
  });
});

describe('decide carries profile and shared', () => {
  it("passes the user's profile and the tenant's shared document to the worker", async () => {
    // A worker that answers with the context it was given.
    const worker = createServer(async (req, res) => {
      let raw = '';
      for await (const chunk of req) raw += chunk;
      const request = JSON.parse(raw);
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ context: { profile: request.profile, shared: request.shared } }));
    });
    await new Promise<void>((resolve) => worker.listen(0, '127.0.0.1', resolve));
    try {
      const agentId = uniqueId('echo');
      const url = `http://127.0.0.1:${(worker.address() as AddressInfo).port}/`;
      await http.put(`/v1/agents/${agentId}`, { worker: { url } });
      const user = uniqueId('user');
      const sid = uniqueId('decide-docs');
      await http.post('/v1/sessions', { sessionId: sid, userId: user, agentId });
      await commit(sid, { commands: [set('tone', 'warm', 'disjoint', 'profile'), set('beta', true, 'disjoint', 'shared')] });

      const decided = await http.post(`/v1/sessions/${sid}/decide`, { trigger: { type: 'tick' } });

      expect(decided.status).toBe(200);
      expect(decided.body.decision.context.profile).toEqual({ tone: 'warm' });
      expect(decided.body.decision.context.shared).toMatchObject({ beta: true });
    } finally {
      await new Promise((resolve) => worker.close(resolve));
    }
  });
});
