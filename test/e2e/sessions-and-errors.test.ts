import { readFileSync } from 'node:fs';
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

function expectProblem(response: { status: number; headers: Headers; body: any; text: string }, status: number, code: string) {
  expect(response.status).toBe(status);
  expect(response.headers.get('content-type')).toContain('application/problem+json');
  expect(response.body).toMatchObject({ status, code });
  expect(typeof response.body.type).toBe('string');
  expect(typeof response.body.title).toBe('string');
  expect(typeof response.body.detail).toBe('string');
  expect(response.text).not.toMatch(/at .*\.ts:\d+|node_modules|Exception/);
}

describe('sessions', () => {
  it('creates, reads and refuses a duplicate', async () => {
    const sid = uniqueId('create');

    const created = await http.post('/v1/sessions', { sessionId: sid, userId: 'user-1', agentId: 'helper', metadata: { plan: 'pro' } });
    const read = await http.get(`/v1/sessions/${sid}`);
    const duplicate = await http.post('/v1/sessions', { sessionId: sid });

    expect(created.status).toBe(201);
    expect(created.headers.get('location')).toBe(`/v1/sessions/${sid}`);
    expect(created.body).toMatchObject({
      sessionId: sid,
      userId: 'user-1',
      agentId: 'helper',
      head: 'root',
      version: 0,
      metadata: { plan: 'pro' },
    });
    expect(read.body).toEqual(created.body);
    expectProblem(duplicate, 409, 'session_exists');
  });

  it('generates a session id when none is given', async () => {
    const created = await http.post('/v1/sessions', {});
    const bare = await http.request('POST', '/v1/sessions');

    expect(created.status).toBe(201);
    expect(created.body.sessionId).toMatch(/^[0-9a-f-]{36}$/);
    expect(bare.status).toBe(201);
    expect(bare.body.sessionId).not.toBe(created.body.sessionId);
  });

  it('creates a session implicitly on its first write and keeps explicit fields', async () => {
    const implicit = uniqueId('implicit');
    const explicit = uniqueId('explicit');
    await http.post('/v1/sessions', { sessionId: explicit, userId: 'u-9' });

    expectProblem(await http.get(`/v1/sessions/${implicit}`), 404, 'session_not_found');
    await http.patch(`/v1/sessions/${implicit}/state`, { a: 1 });
    await http.patch(`/v1/sessions/${explicit}/state`, { a: 1 });

    expect((await http.get(`/v1/sessions/${implicit}`)).body).toMatchObject({
      sessionId: implicit,
      version: 1,
      head: 'root',
      userId: null,
    });
    expect((await http.get(`/v1/sessions/${explicit}`)).body).toMatchObject({ sessionId: explicit, version: 1, userId: 'u-9' });
  });

  it('lists sessions most recently active first, in pages', async () => {
    // A tenant of its own, so that other tests' sessions do not interleave.
    const own = { key: 'list-key' };
    const ids = [uniqueId('l1'), uniqueId('l2'), uniqueId('l3')];
    for (const sid of ids) await http.put(`/v1/sessions/${sid}/state`, { created: true }, own);
    // A session's activity moves at most once every 20 s, whatever writes it (the list may trail
    // the latest write by up to 30 s, API.md section 2; each move is two writes in an index the
    // tenant's conversations share, section 14): the first write of each moved it, and this one,
    // a moment later, does not yet. That a later write does is session-activity.test.ts's.
    const written = await http.patch(`/v1/sessions/${ids[0]}/state`, { touched: true }, own);
    const first = await http.get(`/v1/sessions/${ids[0]}/versions/1`, own);
    const page1 = await http.get('/v1/sessions?limit=2', own);
    const page2 = await http.get(`/v1/sessions?limit=2&cursor=${page1.body.next}`, own);

    const order = [...page1.body.sessions, ...page2.body.sessions].map((session: { sessionId: string }) => session.sessionId);
    expect(written.status).toBe(200);
    expect(order).toEqual([ids[2], ids[1], ids[0]]);
    expect(page2.body.sessions[0].updatedAt).toBe(first.body.createdAt);
    expect(page2.body.next).toBeUndefined();
    expectProblem(await http.get(`/v1/sessions?cursor=${page1.body.next}`), 400, 'invalid_request');
  });

  it('finds sessions by the start of their id (prefix), still most recently active first', async () => {
    // Prepare
    const own = { key: 'list-key' };
    const stem = uniqueId('find');
    const ids = [`${stem}-a`, `${stem}-b`, `other-${stem}`];
    for (const sid of ids) await http.post('/v1/sessions', { sessionId: sid }, own);

    // Act
    const found = await http.get(`/v1/sessions?limit=500&prefix=${stem}`, own);
    const none = await http.get(`/v1/sessions?limit=500&prefix=${stem}-zzz`, own);

    // Assess: a prefix, not a substring; another tenant's sessions never match.
    expect(found.status).toBe(200);
    expect(found.body.sessions.map((session: { sessionId: string }) => session.sessionId)).toEqual([`${stem}-b`, `${stem}-a`]);
    expect(none.body.sessions).toEqual([]);
    expect((await http.get(`/v1/sessions?limit=500&prefix=${stem}`)).body.sessions).toEqual([]);
    expectProblem(await http.get('/v1/sessions?prefix='), 400, 'invalid_request');
    expectProblem(await http.get('/v1/sessions?prefix=a%2Fb'), 400, 'invalid_request');
  });

  it('deletes every item of a session', async () => {
    const sid = uniqueId('delete');
    await http.post(`/v1/sessions/${sid}/messages`, { messages: [{ id: 'm', role: 'user' }] });
    await http.put(`/v1/sessions/${sid}/state`, { doomed: true });

    const deleted = await http.delete(`/v1/sessions/${sid}`);

    expect(deleted.status).toBe(204);
    expectProblem(await http.get(`/v1/sessions/${sid}`), 404, 'session_not_found');
    expect((await http.get(`/v1/sessions/${sid}/state`)).body).toMatchObject({ version: 0, state: null });
    expectProblem(await http.get(`/v1/sessions/${sid}/tree`), 404, 'session_not_found');
    expectProblem(await http.get(`/v1/sessions/${sid}/versions`), 404, 'session_not_found');
    expectProblem(await http.delete(`/v1/sessions/${sid}`), 404, 'session_not_found');
    // The id is free again: a new session starts from scratch.
    const reborn = await http.put(`/v1/sessions/${sid}/state`, { fresh: true });
    expect(reborn.body).toMatchObject({ version: 1, prevVersion: 0 });
  });

  it('creates a session afresh under the id of a deleted one', async () => {
    const sid = uniqueId('recreate');
    await http.post('/v1/sessions', { sessionId: sid, metadata: { life: 1 } });
    await http.patch(`/v1/sessions/${sid}/state`, { old: true });
    expect((await http.delete(`/v1/sessions/${sid}`)).status).toBe(204);

    const created = await http.post('/v1/sessions', { sessionId: sid, metadata: { life: 2 } });

    expect(created.status).toBe(201);
    expect((await http.get(`/v1/sessions/${sid}`)).body).toMatchObject({ metadata: { life: 2 }, version: 0, head: 'root' });
    expect((await http.get(`/v1/sessions/${sid}/state`)).body).toMatchObject({ version: 0, state: null });
    expectProblem(await http.post('/v1/sessions', { sessionId: sid }), 409, 'session_exists');
  });
});

describe('tenants', () => {
  it("keeps tenants apart: another tenant's session does not exist for you", async () => {
    const sid = uniqueId('tenant');
    await http.put(`/v1/sessions/${sid}/state`, { owner: 'local' });
    await http.post(`/v1/sessions/${sid}/messages`, { messages: [{ id: 'private', role: 'user' }] });

    const other = { key: 'other-key' };
    expectProblem(await http.get(`/v1/sessions/${sid}`, other), 404, 'session_not_found');
    expect((await http.get(`/v1/sessions/${sid}/state`, other)).body).toMatchObject({ version: 0, state: null });
    expectProblem(await http.get(`/v1/sessions/${sid}/nodes/private`, other), 404, 'session_not_found');
    expectProblem(await http.delete(`/v1/sessions/${sid}`, other), 404, 'session_not_found');
    const list = await http.get('/v1/sessions?limit=500', other);
    expect(list.body.sessions.map((session: { sessionId: string }) => session.sessionId)).not.toContain(sid);

    // The same id in the other tenant is another session altogether.
    await http.put(`/v1/sessions/${sid}/state`, { owner: 'other' }, other);
    expect((await http.get(`/v1/sessions/${sid}/state`)).body.state).toEqual({ owner: 'local' });
    expect((await http.get(`/v1/sessions/${sid}/state`, other)).body.state).toEqual({ owner: 'other' });
  });
});

describe('errors', () => {
  it('answers 401 unauthorized without a valid key', async () => {
    expectProblem(await http.get('/v1/sessions', { key: null }), 401, 'unauthorized');
    expectProblem(await http.get('/v1/sessions', { key: 'wrong' }), 401, 'unauthorized');
    expectProblem(await http.get('/v1/sessions', { key: null, headers: { authorization: 'Basic abc' } }), 401, 'unauthorized');
    const health = await http.get('/health', { key: null });
    expect(health.status).toBe(200);
    expect(health.body).toEqual({ ok: true });
  });

  it('answers 400 invalid_json for malformed JSON and writes nothing', async () => {
    const sid = uniqueId('badjson');
    await http.put(`/v1/sessions/${sid}/state`, { ok: true });

    expectProblem(await http.request('PATCH', `/v1/sessions/${sid}/state`, { raw: '{"a": ' }), 400, 'invalid_json');
    expectProblem(
      await http.request('PUT', `/v1/sessions/${sid}/state`, { raw: '', contentType: 'application/json' }),
      400,
      'invalid_json',
    );
    expectProblem(await http.request('POST', `/v1/sessions/${sid}/messages`, { raw: '[1,' }), 400, 'invalid_json');
    expect((await http.get(`/v1/sessions/${sid}/state`)).body.version).toBe(1);
  });

  it('answers 415 unsupported_media_type for a body that is not JSON', async () => {
    const sid = uniqueId('media');
    const response = await http.request('PUT', `/v1/sessions/${sid}/state`, {
      raw: 'a=1',
      contentType: 'application/x-www-form-urlencoded',
    });

    expectProblem(response, 415, 'unsupported_media_type');
    expectProblem(await http.get(`/v1/sessions/${sid}`), 404, 'session_not_found');
  });

  it('answers 400 invalid_id for bad identifiers anywhere', async () => {
    const tooLong = 'x'.repeat(129);
    expectProblem(await http.get(`/v1/sessions/${tooLong}/state`), 400, 'invalid_id');
    expectProblem(await http.get('/v1/sessions/bad%20id/state'), 400, 'invalid_id');
    expectProblem(await http.put('/v1/sessions/a%23b/state', {}), 400, 'invalid_id');
    expectProblem(await http.get('/v1/sessions/ok/state?node=no%2Fslash'), 400, 'invalid_id');
    expectProblem(await http.post('/v1/sessions', { sessionId: 'has space' }), 400, 'invalid_id');
    expectProblem(await http.post('/v1/sessions/ok/messages', { messages: [{ id: 'root', role: 'user' }] }), 400, 'invalid_id');
    expectProblem(await http.post('/v1/sessions/ok/messages', { messages: [{ id: 'é', role: 'user' }] }), 400, 'invalid_id');
    expectProblem(await http.put('/v1/sessions/ok/head', { nodeId: '../x' }), 400, 'invalid_id');
    expectProblem(await http.get('/v1/sessions/ok/state', { headers: { 'x-agent-id': 'bad agent' } }), 400, 'invalid_id');
    expectProblem(await http.patch('/v1/sessions/ok/state', { a: 1 }, { headers: { 'x-agent-id': 'bad agent' } }), 400, 'invalid_id');
    expectProblem(await http.get('/v1/sessions/ok'), 404, 'session_not_found');
  });

  it('refuses the ids . and .., which no URL can name, with 400 invalid_id, creating nothing', async () => {
    // A session called ".." was created (201) and listed, but every URL naming it lost it:
    // fetch, browsers and curl remove dot segments, so the client asked PATCH /v1/state (404).
    const sid = uniqueId('dots');
    for (const id of ['.', '..']) {
      expectProblem(await http.post('/v1/sessions', { sessionId: id }), 400, 'invalid_id');
      expectProblem(await http.post('/v1/sessions', { sessionId: sid, userId: id }), 400, 'invalid_id');
      expectProblem(await http.post(`/v1/sessions/${sid}/messages`, { messages: [{ id, role: 'user' }] }), 400, 'invalid_id');
      expectProblem(await http.get(`/v1/sessions/${sid}/state?node=${id}`), 400, 'invalid_id');
      expectProblem(await http.post('/v1/memory/search', { namespacePrefix: [id] }), 400, 'invalid_id');
      expectProblem(await http.get(`/v1/sessions/${sid}/state`, { headers: { 'x-agent-id': id } }), 400, 'invalid_id');
    }
    // An id may still hold dots, and a session list may still look for ids that start with one.
    expect((await http.post('/v1/sessions', { sessionId: `..${sid}` })).status).toBe(201);
    expect((await http.get('/v1/sessions?prefix=..')).body.sessions.map((session: { sessionId: string }) => session.sessionId)).toEqual([
      `..${sid}`,
    ]);
    expectProblem(await http.get(`/v1/sessions/${sid}`), 404, 'session_not_found');
  });

  it('answers 400 invalid_request for bodies and queries of the wrong shape', async () => {
    const sid = uniqueId('shape');
    expectProblem(await http.post(`/v1/sessions/${sid}/messages`, { messages: [] }), 400, 'invalid_request');
    expectProblem(await http.post(`/v1/sessions/${sid}/messages`, { messages: [{ content: 'no role' }] }), 400, 'invalid_request');
    const wrongType = await http.post(`/v1/sessions/${sid}/messages`, { messages: [{ role: 7 }] });
    expectProblem(wrongType, 400, 'invalid_request');
    // zod's English message, naming the field (imported by the first body refused: http/edge/request.ts).
    expect(wrongType.body.detail).toBe('messages.0.role: Invalid input: expected string, received number');
    expectProblem(await http.post(`/v1/sessions/${sid}/messages`, [{ role: 'user' }]), 400, 'invalid_request');
    expectProblem(
      await http.post(`/v1/sessions/${sid}/messages`, { messages: Array.from({ length: 51 }, () => ({ role: 'user' })) }),
      400,
      'invalid_request',
    );
    expectProblem(await http.post('/v1/sessions', { sessionId: sid, surprise: 1 }), 400, 'invalid_request');
    expectProblem(await http.post('/v1/sessions', { metadata: 'not an object' }), 400, 'invalid_request');
    expectProblem(await http.put(`/v1/sessions/${sid}/head`, { node: 'x' }), 400, 'invalid_request');
    expectProblem(await http.get('/v1/sessions?limit=0'), 400, 'invalid_request');
    expectProblem(await http.get('/v1/sessions?limit=501'), 400, 'invalid_request');
    expectProblem(await http.get('/v1/sessions?limit=abc'), 400, 'invalid_request');
    expectProblem(await http.get('/v1/sessions?cursor=%%%'), 400, 'invalid_request');
    expectProblem(await http.get(`/v1/sessions/${sid}/state?version=-1`), 400, 'invalid_request');
    expectProblem(await http.get(`/v1/sessions/${sid}/state?version=1&node=root`), 400, 'invalid_request');
    expectProblem(await http.get(`/v1/sessions/${sid}/versions/abc`), 400, 'invalid_request');
    expectProblem(await http.patch(`/v1/sessions/${sid}/state`, { a: 1 }, { headers: { 'if-match': 'soon' } }), 400, 'invalid_request');
    expectProblem(
      await http.put(`/v1/sessions/${sid}/state`, { a: 1 }, { headers: { 'idempotency-key': 'has space' } }),
      400,
      'invalid_request',
    );
    // None of it created the session.
    expectProblem(await http.get(`/v1/sessions/${sid}`), 404, 'session_not_found');
  });

  it('answers 404 for unknown sessions, versions and routes', async () => {
    const sid = uniqueId('nothing');
    expectProblem(await http.get(`/v1/sessions/${sid}`), 404, 'session_not_found');
    expectProblem(await http.get(`/v1/sessions/${sid}/versions/1`), 404, 'session_not_found');
    expectProblem(await http.get(`/v1/sessions/${sid}/tree`), 404, 'session_not_found');
    expectProblem(await http.get(`/v1/sessions/${sid}/versions`), 404, 'session_not_found');
    expectProblem(await http.get(`/v1/sessions/${sid}/versions?node=root`), 404, 'session_not_found');
    expectProblem(await http.get(`/v1/sessions/${sid}/messages`), 404, 'session_not_found');
    expectProblem(await http.get(`/v1/sessions/${sid}/nodes/root`), 404, 'session_not_found');
    expectProblem(await http.put(`/v1/sessions/${sid}/head`, { nodeId: 'root' }), 404, 'session_not_found');
    expectProblem(await http.get('/v1/nothing-here'), 404, 'not_found');
    expectProblem(await http.request('DELETE', `/v1/sessions/${sid}/state`), 404, 'not_found');
  });

  it('answers 413 payload_too_large for a message larger than one item may hold', async () => {
    const sid = uniqueId('bigmessage');
    const response = await http.post(`/v1/sessions/${sid}/messages`, {
      messages: [{ role: 'user', content: 'x'.repeat(300 * 1024) }],
    });

    expectProblem(response, 413, 'payload_too_large');
    expect(response.body.limitBytes).toBe(262144);
    expectProblem(await http.get(`/v1/sessions/${sid}`), 404, 'session_not_found');
  });

  it('refuses a cursor from another list', async () => {
    const sid = uniqueId('cursor');
    for (let n = 0; n < 3; n++) await http.put(`/v1/sessions/${sid}/state`, { n });
    await http.post(`/v1/sessions/${sid}/messages`, { messages: [{ id: 'm', role: 'user' }] });
    await http.post('/v1/sessions', { sessionId: `${sid}-2` });
    const sessions = await http.get('/v1/sessions?limit=1');
    const versions = await http.get(`/v1/sessions/${sid}/versions?limit=1`);
    const lineage = await http.get(`/v1/sessions/${sid}/versions?node=m&limit=1`);

    expectProblem(await http.get(`/v1/sessions/${sid}/versions?cursor=${sessions.body.next}`), 400, 'invalid_request');
    expectProblem(await http.get(`/v1/sessions?cursor=${versions.body.next}`), 400, 'invalid_request');
    expectProblem(await http.get(`/v1/sessions/${sid}/versions?node=root&cursor=${lineage.body.next}`), 400, 'invalid_request');
    expectProblem(await http.get(`/v1/sessions/${sid}-2/versions?node=m&cursor=${lineage.body.next}`), 400, 'invalid_request');
    expect((await http.get(`/v1/sessions/${sid}/versions?node=m&limit=1&cursor=${lineage.body.next}`)).status).toBe(200);
  });

  it('answers 413 payload_too_large for an oversize body', async () => {
    const response = await http.request('POST', '/v1/sessions/big/messages', {
      raw: JSON.stringify({ messages: [{ role: 'user', content: 'x'.repeat(2 * 1024 * 1024) }] }),
    });

    expectProblem(response, 413, 'payload_too_large');
    expect(typeof response.body.limitBytes).toBe('number');
  });
});

describe('the public routes', () => {
  it('serves this API as an OpenAPI 3.1 document without a key: the committed docs/openapi.json', async () => {
    // Act
    const response = await http.get('/v1/openapi.json', { key: null });

    // Assess
    expect(response.status).toBe(200);
    expect(response.headers.get('content-type')).toBe('application/json');
    expect(response.body).toEqual(JSON.parse(readFileSync(new URL('../../docs/openapi.json', import.meta.url), 'utf8')));
    expect(response.body.openapi).toBe('3.1.1');
  });

  it('answers /health whatever X-Agent-Id says: it takes no input (docs/api.md, Headers)', async () => {
    // Act
    const [plain, badAgent] = await Promise.all([
      http.get('/health', { key: null }),
      http.get('/health', { key: null, headers: { 'x-agent-id': 'not an id!' } }),
    ]);

    // Assess
    expect([plain.status, plain.body]).toEqual([200, { ok: true }]);
    expect([badAgent.status, badAgent.body]).toEqual([200, { ok: true }]);
  });
});
