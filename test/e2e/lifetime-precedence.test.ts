import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ApiClient, uniqueId } from '../helpers/api-client.js';
import { type RunningApi, startApi } from '../helpers/e2e.js';

/**
 * Where a session's lifetime comes from (API.md section 12): the deployment's defaults, then
 * its agent's registration (`lifetime`), then the session's own (`PATCH`), field by field, the
 * most specific winning; `null` in a layer says "none" over what is below. A session takes the
 * defaults and its agent's registration when it starts; a registration changed later applies to
 * the sessions that start afterwards (docs/api.md, "Lifetime: expiry", says why).
 */

let api: RunningApi;
let http: ApiClient;
const DAYS_30 = 30 * 86_400;

beforeAll(async () => {
  api = await startApi({ AGENTSTATE_SESSION_TTL_DAYS: '30', AGENTSTATE_RETENTION: 'keepVersions=100,keepDays=7' });
  http = api.client;
});
afterAll(async () => {
  await api?.stop();
});

const lifetimeOf = (body: Record<string, unknown>) => ({ ttlSeconds: body.ttlSeconds, retention: body.retention });

describe('lifetime settings, field by field', () => {
  it('takes the defaults, then the agent’s registration, then the session’s own, each field from the most specific that says it', async () => {
    // Prepare: one agent that sets both fields, one that says "no retention" and leaves the TTL to the defaults.
    const both = uniqueId('agent-both');
    const none = uniqueId('agent-none');
    expect(
      (await http.put(`/v1/agents/${both}`, { config: {}, lifetime: { ttlSeconds: 3600, retention: { keepVersions: 10 } } })).status,
    ).toBe(201);
    expect((await http.put(`/v1/agents/${none}`, { config: {}, lifetime: { retention: null } })).status).toBe(201);

    // Act
    const plain = (await http.post('/v1/sessions', { sessionId: uniqueId('plain') })).body;
    const written = uniqueId('written');
    expect((await http.patch(`/v1/sessions/${written}/state`, { a: 1 })).status).toBe(200);
    const byWrite = (await http.get(`/v1/sessions/${written}`)).body;
    const withBoth = (await http.post('/v1/sessions', { sessionId: uniqueId('with-both'), agentId: both })).body;
    const withNone = (await http.post('/v1/sessions', { sessionId: uniqueId('with-none'), agentId: none })).body;

    // Assess
    const defaults = { ttlSeconds: DAYS_30, retention: { keepVersions: 100, keepDays: 7 } };
    expect(lifetimeOf(plain)).toEqual(defaults);
    expect(lifetimeOf(byWrite)).toEqual(defaults);
    expect(lifetimeOf(withBoth)).toEqual({ ttlSeconds: 3600, retention: { keepVersions: 10 } });
    expect(lifetimeOf(withNone)).toEqual({ ttlSeconds: DAYS_30, retention: null });
  });

  it('lets a PATCH change one field and keeps the others where they came from; a later registration change reaches new sessions only', async () => {
    // Prepare
    const agent = uniqueId('agent-later');
    expect(
      (await http.put(`/v1/agents/${agent}`, { config: {}, lifetime: { ttlSeconds: 3600, retention: { keepVersions: 10 } } })).status,
    ).toBe(201);
    const sid = uniqueId('patched');
    expect((await http.post('/v1/sessions', { sessionId: sid, agentId: agent })).status).toBe(201);

    // Act: the session's own retention, then no TTL at all; then the registration changes.
    const ownRetention = (await http.patch(`/v1/sessions/${sid}`, { retention: { keepDays: 1 } })).body;
    const noTtl = (await http.patch(`/v1/sessions/${sid}`, { ttlSeconds: null })).body;
    expect((await http.put(`/v1/agents/${agent}`, { config: {}, lifetime: { ttlSeconds: 60 } })).status).toBe(200);
    const after = (await http.get(`/v1/sessions/${sid}`)).body;
    const started = (await http.post('/v1/sessions', { sessionId: uniqueId('started-after'), agentId: agent })).body;

    // Assess
    expect(lifetimeOf(ownRetention)).toEqual({ ttlSeconds: 3600, retention: { keepDays: 1 } });
    expect(lifetimeOf(noTtl)).toEqual({ ttlSeconds: null, retention: { keepDays: 1 } });
    expect(noTtl.expiresAt).toBeNull();
    expect(lifetimeOf(after)).toEqual({ ttlSeconds: null, retention: { keepDays: 1 } });
    // The new registration says nothing of retention: the defaults' then.
    expect(lifetimeOf(started)).toEqual({ ttlSeconds: 60, retention: { keepVersions: 100, keepDays: 7 } });
  });
});
