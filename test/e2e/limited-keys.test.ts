import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { dynamoDbEndpointOf, issueKey } from '../helpers/admin.js';
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
/** Where the admin CLI issues keys: the server's DynamoDB Local. */
let endpoint: string;
const billingWorker = { url: 'http://127.0.0.1:9/billing', secret: 'billing-secret', timeoutMs: 2000 };
const billingFields = { card: { type: 'string', read: 'private', write: 'private' } };

beforeAll(async () => {
  server = await startGatedServer();
  endpoint = dynamoDbEndpointOf(server);
  const apiKey = await issueKey(endpoint, { agents: ['planner'] });
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

describe('a key limited to planner, copying sessions', () => {
  it("is refused a copy of billing's session with 403 and no copy is made; copies its own agent's", async () => {
    // Prepare
    const theirs = uniqueId('billing-copied');
    const mine = uniqueId('planner-copied');
    await admin.post('/v1/sessions', { sessionId: theirs, agentId: 'billing' });
    await admin.patch(`/v1/sessions/${theirs}/state`, { card: '4111' }, { headers: { 'x-agent-id': 'billing' } });
    await admin.post('/v1/sessions', { sessionId: mine, agentId: 'researcher' });
    await admin.patch(`/v1/sessions/${mine}/state`, { notes: 'x' });
    const stolen = uniqueId('stolen-copy');

    // Act
    const refused = await planner.post(`/v1/sessions/${theirs}/copy`, { sessionId: stolen }, asPlanner);
    const copied = await planner.post(`/v1/sessions/${mine}/copy`, {}, asPlanner);

    // Assess
    expect(refused.body).toMatchObject({ status: 403, code: 'forbidden' });
    expect((await admin.get(`/v1/sessions/${stolen}`)).status).toBe(404);
    expect(copied.status).toBe(201);
    expect(copied.body).toMatchObject({ agentId: 'researcher', version: 1 });
    expect((await admin.get(`/v1/sessions/${copied.body.sessionId}/state`)).body.state).toEqual({ notes: 'x' });
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

describe('a key limited to mid, in the conversations of its tenant', () => {
  // The registry: top ── mid ── low, and top ── side ── far. A key limited to mid works in the
  // sessions of top (above it), mid, low (below it) and of no agent; side's and far's (a
  // sibling's and a cousin's) are not its conversations (API.md section 7, last paragraph).
  // top declares `budget` (everyone reads it, only top writes it) and `topic` (anyone writes it).
  let mid: ApiClient;
  const asMid = { headers: { 'x-agent-id': 'mid' } };
  const asTop = { headers: { 'x-agent-id': 'top' } };
  const topFields = {
    budget: { type: 'number', read: 'public', write: 'private' },
    topic: { type: 'string', read: 'public', write: 'public' },
  };

  beforeAll(async () => {
    mid = apiClient(server.url, await issueKey(endpoint, { agents: ['mid'] }));
    for (const [agentId, body] of [
      ['top', { stateFields: topFields }],
      ['mid', { parentId: 'top' }],
      ['low', { parentId: 'mid' }],
      ['side', { parentId: 'top' }],
      ['far', { parentId: 'side' }],
    ] as const) {
      expect((await admin.put(`/v1/agents/${agentId}`, body)).status).toBe(201);
    }
  });

  it.each([
    ['its own agent', 'mid'],
    ['the agent above it', 'top'],
    ['an agent below it', 'low'],
    ['no agent', null],
  ])('works in a session of %s: appends, writes, commits, decides, switches the head and deletes', async (_name, agentId) => {
    // Prepare
    const sid = uniqueId('mid-works');
    expect((await mid.post('/v1/sessions', { sessionId: sid, agentId, userId: 'ada' }, asMid)).status).toBe(201);
    const topic = agentId === null ? 'hello' : { topic: 'hello' };

    // Act
    const appended = await mid.post(`/v1/sessions/${sid}/messages`, { messages: [{ id: 'u1', role: 'user' }] }, asMid);
    const written = await mid.patch(`/v1/sessions/${sid}/state`, agentId === null ? { topic } : topic, asMid);
    const committed = await mid.post(
      `/v1/sessions/${sid}/commits`,
      {
        commands: [
          { key: 'topic', scope: 'thread', merge: 'disjoint', set: 'committed' },
          { key: 'seen', scope: 'profile', merge: 'disjoint', set: true },
        ],
      },
      asMid,
    );
    const decided = await mid.post(
      `/v1/sessions/${sid}/decide`,
      { trigger: { type: 'tick' }, proposed: { state: { topic: 'decided' } } },
      asMid,
    );
    const switched = await mid.put(`/v1/sessions/${sid}/head`, { nodeId: 'u1' }, asMid);
    const deleted = await mid.delete(`/v1/sessions/${sid}`, asMid);

    // Assess
    expect([appended, written, committed, decided, switched, deleted].map((response) => [response.status, response.body?.code])).toEqual([
      [201, undefined],
      [200, undefined],
      [200, undefined],
      [200, undefined],
      [200, undefined],
      [204, undefined],
    ]);
  });

  it.each([
    ['a sibling', 'side'],
    ['a cousin', 'far'],
  ])('is refused every write in a session of %s with 403, and nothing of it is written', async (_name, agentId) => {
    // Prepare: a session of that agent, with a message and a state the admin key wrote.
    const sid = uniqueId('not-mine');
    await admin.post('/v1/sessions', { sessionId: sid, agentId, userId: 'bob' });
    await admin.post(`/v1/sessions/${sid}/messages`, {
      messages: [
        { id: 'u1', role: 'user' },
        { id: 'a1', role: 'assistant' },
      ],
    });
    await admin.patch(`/v1/sessions/${sid}/state`, { topic: 'theirs' });
    const before = { tree: (await admin.get(`/v1/sessions/${sid}/tree`)).body, state: (await admin.get(`/v1/sessions/${sid}/state`)).body };

    // Act
    const attempts = {
      append: await mid.post(`/v1/sessions/${sid}/messages`, { messages: [{ id: 'x1', role: 'user' }] }, asMid),
      offHead: await mid.post(`/v1/sessions/${sid}/messages`, { parentId: 'u1', messages: [{ id: 'x2', role: 'user' }] }, asMid),
      head: await mid.put(`/v1/sessions/${sid}/head`, { nodeId: 'u1' }, asMid),
      state: await mid.patch(`/v1/sessions/${sid}/state`, { topic: 'mine' }, asMid),
      commit: await mid.post(
        `/v1/sessions/${sid}/commits`,
        { commands: [{ key: 'topic', scope: 'thread', merge: 'disjoint', set: 'mine' }] },
        asMid,
      ),
      profile: await mid.post(
        `/v1/sessions/${sid}/commits`,
        { commands: [{ key: 'x', scope: 'profile', merge: 'disjoint', set: 1 }] },
        asMid,
      ),
      decide: await mid.post(`/v1/sessions/${sid}/decide`, { trigger: { type: 'tick' }, proposed: { state: { topic: 'mine' } } }, asMid),
      delete: await mid.delete(`/v1/sessions/${sid}`, asMid),
      create: await mid.post('/v1/sessions', { sessionId: uniqueId('theirs'), agentId }, asMid),
    };

    // Assess: before, every one but the delete went through (the append fed that
    // agent's worker its messages, the head switch changed what it reads next).
    for (const [attempt, response] of Object.entries(attempts)) {
      expect([attempt, response.status, response.body.code]).toEqual([attempt, 403, 'forbidden']);
    }
    expect((await admin.get(`/v1/sessions/${sid}/tree`)).body).toEqual(before.tree);
    expect((await admin.get(`/v1/sessions/${sid}/state`)).body).toEqual(before.state);
    expect((await admin.get('/v1/profiles/bob/state')).body.version).toBe(0);
  });

  it('may not set the userId or agentId of a session, not even to what it is: 403, nothing written; its metadata still', async () => {
    // Prepare: mid's own session of a user, in that user's and mid's lists.
    const sid = uniqueId('mid-owner');
    const user = uniqueId('carol');
    expect((await mid.post('/v1/sessions', { sessionId: sid, agentId: 'mid', userId: user }, asMid)).status).toBe(201);
    const before = (await admin.get(`/v1/sessions/${sid}`)).body;

    // Act
    const refused = [
      await mid.patch(`/v1/sessions/${sid}`, { userId: uniqueId('mallory') }, asMid),
      await mid.patch(`/v1/sessions/${sid}`, { userId: user }, asMid),
      await mid.patch(`/v1/sessions/${sid}`, { userId: null }, asMid),
      await mid.patch(`/v1/sessions/${sid}`, { agentId: 'low' }, asMid),
      await mid.patch(`/v1/sessions/${sid}`, { agentId: 'mid' }, asMid),
      await mid.patch(`/v1/sessions/${sid}`, { agentId: 'side', metadata: { moved: 'yes' } }, asMid),
      // Not even of a session nobody has: the field alone decides.
      await mid.patch(`/v1/sessions/${uniqueId('nobody')}`, { userId: user }, asMid),
    ];
    const after = (await admin.get(`/v1/sessions/${sid}`)).body;
    const metadata = await mid.patch(`/v1/sessions/${sid}`, { metadata: { note: 'mine' } }, asMid);

    // Assess
    expect(refused.map((response) => [response.status, response.body.code])).toEqual(Array(7).fill([403, 'forbidden']));
    expect(after).toEqual(before);
    expect((await admin.get(`/v1/sessions?userId=${user}`)).body.sessions.map((s: { sessionId: string }) => s.sessionId)).toEqual([sid]);
    expect((await admin.get('/v1/sessions?metadata.moved=yes')).body.sessions).toEqual([]);
    expect(metadata.status).toBe(200);
    expect(metadata.body).toMatchObject({ userId: user, agentId: 'mid', metadata: { note: 'mine' } });
  });

  it('writes the profile of the user an unlimited key gave the session, not the one before; and none once given to a sibling', async () => {
    // Prepare: mid's session of one user, where mid wrote that user's profile.
    const sid = uniqueId('mid-profile');
    const [first, second] = [uniqueId('first-user'), uniqueId('second-user')];
    expect((await admin.post('/v1/sessions', { sessionId: sid, agentId: 'mid', userId: first })).status).toBe(201);
    const profileCommit = (value: number) =>
      mid.post(`/v1/sessions/${sid}/commits`, { commands: [{ key: 'n', scope: 'profile', merge: 'disjoint', set: value }] }, asMid);
    expect((await profileCommit(1)).body.profile).toMatchObject({ userId: first, version: 1, state: { n: 1 } });

    // Act: the admin key gives the session to the second user; later to a sibling's agent.
    expect((await admin.patch(`/v1/sessions/${sid}`, { userId: second })).status).toBe(200);
    const toSecond = await profileCommit(2);
    expect((await admin.patch(`/v1/sessions/${sid}`, { agentId: 'side' })).status).toBe(200);
    const asSibling = await profileCommit(3);
    const stateAsSibling = await mid.patch(`/v1/sessions/${sid}/state`, { topic: 'mine' }, asMid);

    // Assess
    expect(toSecond.status).toBe(200);
    expect(toSecond.body.profile).toMatchObject({ userId: second, version: 1, state: { n: 2 } });
    expect((await admin.get(`/v1/profiles/${first}/state`)).body).toMatchObject({ version: 1, state: { n: 1 } });
    expect([asSibling.status, asSibling.body.code, stateAsSibling.status]).toEqual([403, 'forbidden', 403]);
    expect((await admin.get(`/v1/profiles/${second}/state`)).body).toMatchObject({ version: 1, state: { n: 2 } });
  });

  it('may not move the head where it reads another value of a field the key may not write: 403 field_forbidden', async () => {
    // Prepare: a session of top. At u1 top's budget is 1; at a1, below it, 2. b1 under a1 reads the same.
    const sid = uniqueId('budget');
    await admin.post('/v1/sessions', { sessionId: sid, agentId: 'top' });
    await admin.post(`/v1/sessions/${sid}/messages`, { messages: [{ id: 'u1', role: 'user' }] });
    await admin.patch(`/v1/sessions/${sid}/state`, { budget: 1 }, asTop);
    await admin.post(`/v1/sessions/${sid}/messages`, { messages: [{ id: 'a1', role: 'assistant' }] });
    await admin.patch(`/v1/sessions/${sid}/state`, { budget: 2 }, asTop);
    await admin.post(`/v1/sessions/${sid}/messages`, { messages: [{ id: 'b1', role: 'user' }] });
    // mid changes only what it may write, at the head (b1).
    expect((await mid.patch(`/v1/sessions/${sid}/state`, { topic: 'plans' }, asMid)).status).toBe(200);
    const before = await admin.get(`/v1/sessions/${sid}`);

    // Act
    const toU1 = await mid.put(`/v1/sessions/${sid}/head`, { nodeId: 'u1' }, asMid);
    const underU1 = await mid.post(`/v1/sessions/${sid}/messages`, { parentId: 'u1', messages: [{ id: 'x1', role: 'user' }] }, asMid);
    const decideUnderU1 = await mid.post(`/v1/sessions/${sid}/decide`, { parentId: 'u1', trigger: { type: 'tick' } }, asMid);
    const toA1 = await mid.put(`/v1/sessions/${sid}/head`, { nodeId: 'a1' }, asMid);

    // Assess: back to u1 the head would read budget 1 instead of 2 (before: 200 and 201); to a1
    // only the topic differs, which mid may write.
    for (const refused of [toU1, underU1, decideUnderU1]) {
      expect(refused.status, refused.text).toBe(403);
      expect(refused.body).toMatchObject({ code: 'field_forbidden', fields: ['budget'] });
    }
    expect(before.body.head).toBe('b1');
    expect(toA1.status).toBe(200);
    expect((await admin.get(`/v1/sessions/${sid}/state`)).body.state).toEqual({ budget: 2 });
    expect((await admin.get(`/v1/sessions/${sid}/nodes/x1`)).status).toBe(404);
  });

  it('writes the shared document only once an unlimited key grants one of its agents "documents": {"shared": "write"}', async () => {
    // Prepare
    const sid = uniqueId('shared');
    await admin.post('/v1/sessions', { sessionId: sid, agentId: 'mid' });
    const commit = () =>
      mid.post(`/v1/sessions/${sid}/commits`, { commands: [{ key: uniqueId('k'), scope: 'shared', merge: 'disjoint', set: 1 }] }, asMid);
    const sharedBefore = (await admin.get('/v1/shared/state')).body.version;

    // Act
    const ungranted = await commit();
    const selfGranted = await mid.put('/v1/agents/low', { parentId: 'mid', documents: { shared: 'write' } }, asMid);
    const granted = await admin.put('/v1/agents/mid', { parentId: 'top', documents: { shared: 'write' } });
    const allowed = await commit();
    const kept = await mid.put('/v1/agents/mid', { parentId: 'top', config: { role: 'middle' } }, asMid);
    const dropped = await mid.put('/v1/agents/mid', { parentId: 'top', documents: null }, asMid);

    // Assess: before, the first commit answered 200.
    expect(ungranted.status).toBe(403);
    expect(ungranted.body.code).toBe('forbidden');
    expect(selfGranted.status).toBe(403);
    expect((await admin.get('/v1/agents/low')).body.documents).toBeNull();
    expect(granted.status).toBe(200);
    expect(granted.body.documents).toEqual({ shared: 'write' });
    expect(allowed.status, allowed.text).toBe(200);
    expect(allowed.body.shared.version).toBe(sharedBefore + 1);
    expect(kept.status).toBe(200);
    expect(kept.body.documents).toEqual({ shared: 'write' });
    expect(dropped.status).toBe(403);
  });
});
