import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { main } from '../../bin/agentstate.js';
import { type ApiClient, apiClient, uniqueId } from '../helpers/api-client.js';
import { type GatedServer, startGatedServer } from '../helpers/e2e.js';

/**
 * A key limited to some agents (made with the admin CLI, as an operator would) against
 * `npm start`: it reads and writes only the registrations of its agents and the agents below
 * them (API.md section 7), acts only as its own agents, and never gets another key's
 * Idempotency-Key answer. The attack of issue 16: a key limited to `planner` tried to take
 * over `billing` (make its private `card` field public, replace its worker and drop its
 * secret), read its registration, and create agents outside its list.
 */

let server: GatedServer;
let admin: ApiClient;
let planner: ApiClient;
const billingWorker = { url: 'http://127.0.0.1:9/billing', secret: 'billing-secret', timeoutMs: 2000 };
const billingFields = { card: { type: 'string', read: 'private', write: 'private' } };

async function cli(endpoint: string, ...args: string[]): Promise<string> {
  const out: string[] = [];
  const code = await main([...args, '--endpoint', endpoint], { out: (line) => out.push(line), err: () => {}, env: {} });
  expect(code).toBe(0);
  return out.join('\n');
}

beforeAll(async () => {
  server = await startGatedServer();
  const endpoint = /DynamoDB Local: (\S+)/.exec(server.output())?.[1];
  if (!endpoint) throw new Error(`no DynamoDB Local endpoint in the banner:\n${server.output()}`);
  const { apiKey } = JSON.parse(await cli(endpoint, 'keys', 'create', '--tenant', 'local', '--agents', 'planner', '--json')) as {
    apiKey: string;
  };
  admin = apiClient(server.url);
  planner = apiClient(server.url, apiKey);
  // Prepare: the tenant's registry, as its admin key set it up.
  //   planner ── researcher          billing (private field card, a worker with a secret)
  for (const [agentId, body] of [
    ['planner', { config: { role: 'plans' } }],
    ['researcher', { parentId: 'planner' }],
    ['billing', { worker: billingWorker, stateFields: billingFields, config: { token: 'billing-config-token' } }],
  ] as const) {
    expect((await admin.put(`/v1/agents/${agentId}`, body)).status).toBe(201);
  }
});

afterAll(async () => {
  await server?.stop();
});

const asPlanner = { headers: { 'x-agent-id': 'planner' } };

describe('a key limited to planner, in the agent registry', () => {
  it('reads its agent and the agents below it, and nothing else', async () => {
    // Act
    const own = await planner.get('/v1/agents/planner', asPlanner);
    const below = await planner.get('/v1/agents/researcher', asPlanner);
    const other = await planner.get('/v1/agents/billing', asPlanner);
    const missing = await planner.get('/v1/agents/nobody', asPlanner);
    const list = await planner.get('/v1/agents', asPlanner);
    // Assess
    expect(own.status).toBe(200);
    expect(below.status).toBe(200);
    expect(other.status).toBe(404);
    expect(other.body).toMatchObject({ code: 'agent_not_found', agentId: 'billing' });
    expect(other.text).not.toContain('billing-config-token');
    expect(other.body).toEqual({ ...missing.body, agentId: 'billing', detail: 'agent billing does not exist' });
    expect(list.body.agents.map((agent: { agentId: string }) => agent.agentId).sort()).toEqual(['planner', 'researcher']);
  });

  it('cannot take over another agent: 403, and billing stays exactly as it was', async () => {
    // Act: the attack of issue 16.
    const hijack = await planner.put(
      '/v1/agents/billing',
      { worker: { url: 'http://127.0.0.1:9/attacker' }, stateFields: { card: { type: 'string', read: 'public', write: 'public' } } },
      asPlanner,
    );
    const billing = await admin.get('/v1/agents/billing');
    // Assess
    expect(hijack.status).toBe(403);
    expect(hijack.body.code).toBe('forbidden');
    expect(billing.body.worker).toEqual({ url: billingWorker.url, timeoutMs: billingWorker.timeoutMs, hasSecret: true });
    expect(billing.body.stateFields).toEqual(billingFields);
  });

  it.each([
    ['a new agent at the top', 'newcomer', {}],
    ['a new agent under another agent', 'newcomer', { parentId: 'billing' }],
    ['a new agent under an agent that does not exist', 'newcomer', { parentId: 'ghost' }],
    ['moving an agent below out of the subtree', 'researcher', { parentId: null }],
    ['moving an agent below under another agent', 'researcher', { parentId: 'billing' }],
    ['hanging its own agent under another agent', 'planner', { parentId: 'billing' }],
  ])('refuses %s with 403 and writes nothing', async (_name, agentId, body) => {
    // Prepare
    const before = await admin.get('/v1/agents');
    // Act
    const response = await planner.put(`/v1/agents/${agentId}`, body, asPlanner);
    // Assess
    expect(response.status).toBe(403);
    expect(response.body).toMatchObject({ code: 'forbidden', agents: ['planner'] });
    expect((await admin.get('/v1/agents')).body).toEqual(before.body);
  });

  it('writes inside its subtree: its own agent, and a new agent below it', async () => {
    // Act
    const own = await planner.put('/v1/agents/planner', { config: { role: 'plans', v: 2 } }, asPlanner);
    const helper = await planner.put('/v1/agents/helper', { parentId: 'researcher' }, asPlanner);
    const moved = await planner.put('/v1/agents/helper', { parentId: 'planner' }, asPlanner);
    // Assess
    expect(own.status).toBe(200);
    expect(helper.status).toBe(201);
    expect(moved.status).toBe(200);
    expect((await planner.get('/v1/agents/helper', asPlanner)).body.parentId).toBe('planner');
  });
});

describe('a key limited to planner, acting as another agent', () => {
  it.each([
    ['a state write', 'PATCH', 'state', { card: '4111' }],
    ['a commit', 'POST', 'commits', { commands: [{ key: 'card', scope: 'thread', merge: 'disjoint', set: '4111' }] }],
    ['a decision', 'POST', 'decide', { trigger: { type: 'x' } }],
  ])('is refused %s as billing (X-Agent-Id) with 403, writing nothing', async (_name, method, route, body) => {
    // Prepare
    const sid = uniqueId('billing-session');
    await admin.post('/v1/sessions', { sessionId: sid, agentId: 'billing' });
    // Act
    const response = await planner.request(method, `/v1/sessions/${sid}/${route}`, { json: body, headers: { 'x-agent-id': 'billing' } });
    // Assess
    expect(response.status).toBe(403);
    expect(response.body.code).toBe('forbidden');
    expect((await admin.get(`/v1/sessions/${sid}`)).body.version).toBe(0);
  });

  it('is refused a decision run as billing (agentId in the body) with 403', async () => {
    const sid = uniqueId('billing-session');
    const response = await planner.post(`/v1/sessions/${sid}/decide`, { trigger: { type: 'x' }, agentId: 'billing' }, asPlanner);
    expect(response.status).toBe(403);
    expect((await admin.get(`/v1/sessions/${sid}/state`)).body.version).toBe(0);
  });

  it("reads none of billing's private fields through a session of billing's", async () => {
    // Prepare: billing's card, written by the tenant's admin key.
    const sid = uniqueId('billing-session');
    await admin.post('/v1/sessions', { sessionId: sid, agentId: 'billing' });
    await admin.patch(`/v1/sessions/${sid}/state`, { card: '4111-1111-1111-1111' }, { headers: { 'x-agent-id': 'billing' } });
    // Act
    const state = await planner.get(`/v1/sessions/${sid}/state`, asPlanner);
    const versions = await planner.get(`/v1/sessions/${sid}/versions`, asPlanner);
    // Assess
    expect(state.status).toBe(200);
    expect(state.body.state).toEqual({});
    expect(versions.text).not.toContain('4111');
  });
});

describe('a key limited to planner, deleting sessions', () => {
  // The attack of session 7: the key could not write billing's card (403 field_forbidden), but
  // it could delete billing's session, and the card with it.
  it("is refused a delete of billing's session with 403, and the session keeps its card", async () => {
    // Prepare
    const sid = uniqueId('billing-session');
    await admin.post('/v1/sessions', { sessionId: sid, agentId: 'billing' });
    await admin.patch(`/v1/sessions/${sid}/state`, { card: '4111' }, { headers: { 'x-agent-id': 'billing' } });
    // Act
    const deleted = await planner.delete(`/v1/sessions/${sid}`, asPlanner);
    // Assess
    expect(deleted.status).toBe(403);
    expect(deleted.body.code).toBe('forbidden');
    expect((await admin.get(`/v1/sessions/${sid}/state`)).body).toMatchObject({ version: 1, state: { card: '4111' } });
  });

  it('deletes sessions of its agent, of the agents below it, and without an agent', async () => {
    // Prepare
    const sessions = [
      [uniqueId('planner-session'), 'planner'],
      [uniqueId('researcher-session'), 'researcher'],
      [uniqueId('agentless-session'), null],
    ] as const;
    for (const [sessionId, agentId] of sessions) {
      expect((await admin.post('/v1/sessions', { sessionId, agentId })).status).toBe(201);
    }
    // Act
    const answers = await Promise.all(sessions.map(([sessionId]) => planner.delete(`/v1/sessions/${sessionId}`, asPlanner)));
    // Assess
    expect(answers.map((answer) => answer.status)).toEqual([204, 204, 204]);
    for (const [sessionId] of sessions) expect((await admin.get(`/v1/sessions/${sessionId}`)).status).toBe(404);
  });
});

describe('Idempotency-Key across keys of one tenant', () => {
  it("never replays another key's answer to a request this key may not make", async () => {
    // Prepare: the admin key writes as billing under an Idempotency-Key.
    const sid = uniqueId('idem');
    const idempotencyKey = uniqueId('key');
    const asBilling = { headers: { 'x-agent-id': 'billing', 'idempotency-key': idempotencyKey } };
    const first = await admin.patch(`/v1/sessions/${sid}/state`, { note: 'by billing' }, asBilling);
    expect(first.status).toBe(200);
    // Act: the limited key sends the very same request, same Idempotency-Key.
    const replayed = await planner.patch(`/v1/sessions/${sid}/state`, { note: 'by billing' }, asBilling);
    // Assess: refused as the request it is, not answered from the store.
    expect(replayed.status).toBe(403);
    expect(replayed.body.code).toBe('forbidden');
    expect(replayed.headers.get('idempotency-replayed')).toBeNull();
  });

  it("answers 422 to a key that reuses another key's Idempotency-Key, even for a request it may make", async () => {
    // Prepare: the admin key commits while acting as planner, and runs a decision as researcher (which the limited key may not act as).
    const sid = uniqueId('idem');
    const idempotencyKey = uniqueId('key');
    const headers = { 'x-agent-id': 'planner', 'idempotency-key': idempotencyKey };
    const body = { trigger: { type: 'x' }, agentId: 'researcher', proposed: { state: { took: 'over' } } };
    const first = await admin.post(
      `/v1/sessions/${sid}/commits`,
      { commands: [{ key: 'a', scope: 'thread', merge: 'disjoint', set: 1 }] },
      { headers },
    );
    expect(first.status).toBe(200);
    // Act
    const sameRequest = await planner.post(
      `/v1/sessions/${sid}/commits`,
      { commands: [{ key: 'a', scope: 'thread', merge: 'disjoint', set: 1 }] },
      { headers },
    );
    const decideHeaders = { headers: { ...headers, 'idempotency-key': `${idempotencyKey}-d` } };
    const decide = await admin.post(`/v1/sessions/${sid}-d/decide`, body, decideHeaders);
    const decideAgain = await planner.post(`/v1/sessions/${sid}-d/decide`, body, decideHeaders);
    // Assess
    expect(sameRequest.status).toBe(422);
    expect(sameRequest.body.code).toBe('idempotency_key_reused');
    expect(decide.status).toBe(200);
    expect(decideAgain.status).not.toBe(200);
    expect(decideAgain.text).not.toContain('took');
  });

  it('still replays the same key', async () => {
    const sid = uniqueId('idem');
    const headers = { 'x-agent-id': 'planner', 'idempotency-key': uniqueId('key') };
    const first = await planner.patch(`/v1/sessions/${sid}/state`, { n: 1 }, { headers });
    const again = await planner.patch(`/v1/sessions/${sid}/state`, { n: 1 }, { headers });
    expect(again.status).toBe(200);
    expect(again.headers.get('idempotency-replayed')).toBe('true');
    expect(again.text).toBe(first.text);
  });
});

describe('a decisionId replay', () => {
  // The attack of session 7: a decision's answer is replayed for its decisionId, and it holds the
  // state as the deciding agent saw it. A key limited to planner that learnt (or guessed) the id
  // of a decision made as another agent asked for the same decisionId and got that agent's
  // private fields in `state` and `decision`.
  it("never hands planner a decision made as another agent: 422, none of that agent's fields, nothing written", async () => {
    // Prepare: vault keeps a private pin; the admin key decides as vault (no worker: proposed).
    expect(
      (await admin.put('/v1/agents/vault', { stateFields: { pin: { type: 'string', read: 'private', write: 'private' } } })).status,
    ).toBe(201);
    const sid = uniqueId('vault-session');
    await admin.post('/v1/sessions', { sessionId: sid, agentId: 'vault' });
    const decisionId = uniqueId('decision');
    const made = await admin.post(`/v1/sessions/${sid}/decide`, {
      decisionId,
      trigger: { type: 'x' },
      proposed: { state: { pin: '7351' } },
    });
    expect(made.status).toBe(200);
    expect(made.body.state).toEqual({ pin: '7351' });

    // Act: the limited key asks for the same decision, acting as planner.
    const replayed = await planner.post(`/v1/sessions/${sid}/decide`, { decisionId, trigger: { type: 'x' } }, asPlanner);

    // Assess
    expect(replayed.status).toBe(422);
    expect(replayed.body.code).toBe('idempotency_key_reused');
    expect(replayed.text).not.toContain('7351');
    expect((await admin.get(`/v1/sessions/${sid}`)).body.version).toBe(1);
  });

  it('still replays a decision to the agent that made it', async () => {
    // Prepare
    const sid = uniqueId('planner-session');
    const decisionId = uniqueId('decision');
    const body = { decisionId, trigger: { type: 'x' }, proposed: { state: { step: 1 } } };
    const first = await planner.post(`/v1/sessions/${sid}/decide`, body, asPlanner);
    // Act: the same decision, from the same key and from the admin key acting as planner.
    const again = await planner.post(`/v1/sessions/${sid}/decide`, body, asPlanner);
    const asAdmin = await admin.post(`/v1/sessions/${sid}/decide`, body, asPlanner);
    // Assess
    expect(first.status).toBe(200);
    expect(again.body).toEqual(first.body);
    expect(asAdmin.body).toEqual(first.body);
    expect((await admin.get(`/v1/sessions/${sid}`)).body.version).toBe(1);
  });
});
