import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ApiClient, uniqueId } from '../helpers/api-client.js';
import { type RunningApi, startApi } from '../helpers/e2e.js';

/**
 * Expiry (API.md section 12), through the HTTP API on DynamoDB Local: from the moment a
 * session expires it reads as unknown at every route, lists leave it out, and a write starts
 * a new session of the same id with nothing of the old one. Times are real: a session set to
 * expire a second or two ahead, and the test waits for that moment (never a timing assertion).
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

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Waits until `at` (an ISO time) has passed on this machine's clock, which the server shares. */
async function until(at: string): Promise<void> {
  const wait = Date.parse(at) - Date.now();
  if (wait > 0) await sleep(wait + 50);
}

/** A session with messages, versions, a decision's worth of history, that expires in a moment. */
async function sessionAboutToExpire(prefix: string): Promise<{ sid: string; expiresAt: string }> {
  const sid = uniqueId(prefix);
  expect((await http.post('/v1/sessions', { sessionId: sid, userId: 'u-exp', metadata: { plan: 'old' } })).status).toBe(201);
  expect((await http.post(`/v1/sessions/${sid}/messages`, { messages: [{ id: 'm1', role: 'user', content: 'hi' }] })).status).toBe(201);
  expect((await http.patch(`/v1/sessions/${sid}/state`, { secret: 'old life' })).status).toBe(200);
  expect((await http.patch(`/v1/sessions/${sid}/state`, { more: 1 })).status).toBe(200);
  const patched = await http.patch(`/v1/sessions/${sid}`, { ttlSeconds: 2 });
  expect(patched.status).toBe(200);
  expect(patched.body).toMatchObject({ sessionId: sid, ttlSeconds: 2, version: 2, head: 'm1' });
  return { sid, expiresAt: patched.body.expiresAt };
}

describe('a session that expires', () => {
  it('reads as unknown at every route from its expiry, leaves lists, and starts again empty on a write', async () => {
    const { sid, expiresAt } = await sessionAboutToExpire('expiry');
    expect((await http.get(`/v1/sessions/${sid}`)).body.expiresAt).toBe(expiresAt);
    await until(expiresAt);

    const session = await http.get(`/v1/sessions/${sid}`);
    expect(session.status).toBe(404);
    expect(session.body.code).toBe('session_not_found');
    const state = await http.get(`/v1/sessions/${sid}/state`);
    expect(state.status).toBe(200);
    expect(state.body).toMatchObject({ state: null, version: 0 });
    expect((await http.get(`/v1/sessions/${sid}/state?version=1`)).body).toMatchObject({ state: null, version: 0 });
    expect((await http.get(`/v1/sessions/${sid}/versions/1`)).status).toBe(404);
    expect((await http.get(`/v1/sessions/${sid}/versions`)).status).toBe(404);
    expect((await http.get(`/v1/sessions/${sid}/decisions`)).status).toBe(404);
    const messages = await http.get(`/v1/sessions/${sid}/messages`);
    expect(messages.body.messages ?? []).toEqual([]);
    expect((await http.get(`/v1/sessions/${sid}/nodes/m1`)).status).toBe(404);
    const tree = await http.get(`/v1/sessions/${sid}/tree`);
    expect(tree.status === 404 || (tree.body.nodes ?? []).length <= 1).toBe(true);
    expect((await http.patch(`/v1/sessions/${sid}`, { ttlSeconds: 60 })).status).toBe(404);
    const listed = await http.get(`/v1/sessions?prefix=${sid}`);
    expect(listed.body.sessions.map((entry: { sessionId: string }) => entry.sessionId)).not.toContain(sid);

    // A write starts a new session of the same id: version 1, none of the old state, metadata or user.
    const write = await http.patch(`/v1/sessions/${sid}/state`, { fresh: true });
    expect(write.status).toBe(200);
    expect(write.body).toMatchObject({ version: 1, prevVersion: 0, state: { fresh: true } });
    const again = await http.get(`/v1/sessions/${sid}`);
    expect(again.body).toMatchObject({ sessionId: sid, version: 1, head: 'root', userId: null, metadata: null, ttlSeconds: null });
    expect((await http.get(`/v1/sessions/${sid}/versions/2`)).status).toBe(404);
    expect((await http.get(`/v1/sessions/${sid}/nodes/m1`)).status).toBe(404);
    const versions = await http.get(`/v1/sessions/${sid}/versions`);
    expect(versions.body.versions.map((version: { state: unknown }) => version.state)).toEqual([{ fresh: true }]);
  });

  it('a session created with a lifetime and never written expires by its item, and can be created again', async () => {
    const sid = uniqueId('created');
    const agent = uniqueId('short-lived');
    expect((await http.put(`/v1/agents/${agent}`, { config: {}, lifetime: { ttlSeconds: 1 } })).status).toBe(201);
    const created = await http.post('/v1/sessions', { sessionId: sid, agentId: agent, metadata: { a: 1 } });
    expect(created.body).toMatchObject({ ttlSeconds: 1 });
    await until(created.body.expiresAt);

    expect((await http.get(`/v1/sessions/${sid}`)).status).toBe(404);
    const again = await http.post('/v1/sessions', { sessionId: sid });
    expect(again.status).toBe(201);
    expect(again.body).toMatchObject({ sessionId: sid, agentId: null, metadata: null, version: 0 });
  });

  it('stays alive while it is written: an idle expiry moves with every write, a PATCH included', async () => {
    const sid = uniqueId('idle');
    await http.patch(`/v1/sessions/${sid}/state`, { n: 0 });
    const set = await http.patch(`/v1/sessions/${sid}`, { ttlSeconds: 3 });
    for (let n = 1; n <= 3; n++) {
      await sleep(1200);
      expect((await http.patch(`/v1/sessions/${sid}/state`, { n })).status).toBe(200);
    }
    const read = await http.get(`/v1/sessions/${sid}`);
    expect(read.status).toBe(200);
    expect(read.body.version).toBe(4);
    expect(Date.parse(read.body.expiresAt)).toBeGreaterThan(Date.parse(set.body.expiresAt));
  });

  it('an absolute expiry, and null to keep forever', async () => {
    const sid = uniqueId('absolute');
    await http.patch(`/v1/sessions/${sid}/state`, { v: 1 });
    const at = new Date(Date.now() + 60_000).toISOString();
    const set = await http.patch(`/v1/sessions/${sid}`, { expiresAt: at, retention: { keepVersions: 10 } });
    expect(set.body).toMatchObject({ expiresAt: at, ttlSeconds: null, retention: { keepVersions: 10 } });
    const cleared = await http.patch(`/v1/sessions/${sid}`, { expiresAt: null, metadata: { k: 'v' } });
    expect(cleared.body).toMatchObject({ expiresAt: null, retention: { keepVersions: 10 }, metadata: { k: 'v' } });
    expect((await http.get(`/v1/sessions/${sid}`)).body).toMatchObject({ expiresAt: null, metadata: { k: 'v' } });
  });
});

describe('lifetime settings that cannot be', () => {
  it('are refused with 400 naming the field, and nothing is written', async () => {
    const sid = uniqueId('bad');
    await http.patch(`/v1/sessions/${sid}/state`, { v: 1 });
    const cases: Array<[Record<string, unknown>, string]> = [
      [{ ttlSeconds: 0 }, 'ttlSeconds'],
      [{ ttlSeconds: -5 }, 'ttlSeconds'],
      [{ ttlSeconds: 10 * 365 * 24 * 3600 + 1 }, 'ttlSeconds'],
      [{ ttlSeconds: 1.5 }, 'ttlSeconds'],
      [{ expiresAt: '2001-01-01T00:00:00Z' }, 'expiresAt'],
      [{ expiresAt: 'tomorrow' }, 'expiresAt'],
      [{ retention: { keepVersions: 0 } }, 'retention.keepVersions'],
      [{ retention: { keepDays: 0 } }, 'retention.keepDays'],
    ];
    for (const [body, field] of cases) {
      const refused = await http.patch(`/v1/sessions/${sid}`, body);
      expect(refused.status, JSON.stringify(body)).toBe(400);
      expect(refused.body).toMatchObject({ code: 'invalid_request', field });
    }
    const agent = await http.put(`/v1/agents/${uniqueId('bad-agent')}`, { config: {}, lifetime: { ttlSeconds: 0 } });
    expect(agent.status).toBe(400);
    expect(agent.body).toMatchObject({ field: 'lifetime.ttlSeconds' });
    const read = await http.get(`/v1/sessions/${sid}`);
    expect(read.body).toMatchObject({ ttlSeconds: null, expiresAt: null, retention: null, version: 1 });
    expect((await http.patch(`/v1/sessions/${uniqueId('nobody')}`, { ttlSeconds: 5 })).status).toBe(404);
  });
});
