import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { dynamoDbEndpointOf, issueKey } from '../helpers/admin.js';
import { type ApiClient, apiClient, uniqueId } from '../helpers/api-client.js';
import { type RunningApi, startApi } from '../helpers/e2e.js';

/**
 * Routing (API.md section 13) against `npm start`, with real HTTP workers on loopback: the state
 * decides which agent of a session's hierarchy answers, workers hand decisions on, and the
 * decisions list says who decided each turn and why. The hierarchy of each test:
 *
 *   support (order_id public, note public) ── billing (card: billing alone reads and writes it)
 *                                           ├─ refunds
 *                                           ├─ triage
 *                                           └─ escalation
 */

interface Call {
  agent: string;
  body: any;
}
let workers: Server;
let workerBase: string;
let calls: Call[] = [];
/** What each agent's worker answers; by default a decision that changes nothing. */
let answers: Record<string, (body: any) => unknown> = {};

let api: RunningApi;
let http: ApiClient;
let endpoint: string;

beforeAll(async () => {
  workers = createServer(async (req: IncomingMessage, res) => {
    let raw = '';
    for await (const chunk of req) raw += chunk;
    const agent = decodeURIComponent((req.url ?? '').split('/').at(-1) ?? '');
    const body = JSON.parse(raw);
    calls.push({ agent, body });
    const answer = answers[agent]?.(body) ?? {};
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify(answer));
  });
  await new Promise<void>((resolve) => workers.listen(0, '127.0.0.1', resolve));
  workerBase = `http://127.0.0.1:${(workers.address() as AddressInfo).port}/w`;
  api = await startApi();
  http = api.client;
  endpoint = dynamoDbEndpointOf(api);
});
afterAll(async () => {
  await api?.stop();
  await new Promise((resolve) => workers?.close(resolve));
});
beforeEach(() => {
  calls = [];
  answers = {};
});

/** A fresh hierarchy (ids unique to the test), support's routes as given. */
async function hierarchy(routes: (ids: Ids) => unknown[] = () => []) {
  const ids: Ids = {
    support: uniqueId('support'),
    billing: uniqueId('billing'),
    refunds: uniqueId('refunds'),
    triage: uniqueId('triage'),
    escalation: uniqueId('escalation'),
  };
  const worker = (agent: string) => ({ url: `${workerBase}/${encodeURIComponent(agent)}` });
  const put = async (agentId: string, body: unknown) => expect((await http.put(`/v1/agents/${agentId}`, body)).status).toBe(201);
  await put(ids.support, {
    worker: worker(ids.support),
    stateFields: {
      order_id: { type: 'string', description: 'the order the customer asks about', read: 'public', write: 'public' },
      note: { type: 'string', description: 'a free note', read: 'public', write: 'public' },
    },
  });
  await put(ids.billing, {
    parentId: ids.support,
    worker: worker(ids.billing),
    stateFields: { card: { type: 'string', description: 'the card on file', read: 'private', write: 'private' } },
  });
  for (const agent of [ids.refunds, ids.triage, ids.escalation]) await put(agent, { parentId: ids.support, worker: worker(agent) });
  const withRoutes = await http.put(`/v1/agents/${ids.support}`, {
    worker: worker(ids.support),
    stateFields: {
      order_id: { type: 'string', description: 'the order the customer asks about', read: 'public', write: 'public' },
      note: { type: 'string', description: 'a free note', read: 'public', write: 'public' },
    },
    routes: routes(ids),
  });
  expect(withRoutes.status).toBe(200);
  const sessionId = uniqueId('routed');
  expect((await http.post('/v1/sessions', { sessionId, agentId: ids.support })).status).toBe(201);
  return { ids, sessionId };
}
type Ids = Record<'support' | 'billing' | 'refunds' | 'triage' | 'escalation', string>;

const decide = (sid: string, body: Record<string, unknown> = {}, options = {}) =>
  http.post(`/v1/sessions/${sid}/decide`, { trigger: { type: 'tick' }, ...body }, options);
const asAgent = (agentId: string) => ({ headers: { 'x-agent-id': agentId } });

describe('routes on a registration', () => {
  it('are stored, returned, and refused with a 400 naming the route when they break a rule', async () => {
    // Prepare
    const { ids } = await hierarchy((ids) => [{ when: { order_id: { $exists: true } }, to: ids.billing }]);
    const base = { worker: { url: `${workerBase}/x` } };

    // Act
    const read = await http.get(`/v1/agents/${ids.support}`);
    const outside = await http.put(`/v1/agents/${ids.billing}`, {
      ...base,
      parentId: ids.support,
      routes: [{ when: { note: 'x' }, to: ids.refunds }],
    });
    const unknownOperator = await http.put(`/v1/agents/${ids.triage}`, {
      ...base,
      parentId: ids.support,
      routes: [{ when: { order_id: { $regex: 'x' } }, to: ids.escalation }],
    });
    const notBelow = await http.put(`/v1/agents/${ids.triage}`, {
      ...base,
      parentId: ids.support,
      routes: [{ when: { note: 'x' }, to: ids.support }],
    });
    const unreadable = await http.put(`/v1/agents/${ids.support}`, {
      ...base,
      routes: [{ when: { card: { $exists: true } }, to: ids.billing }],
    });
    const undeclared = await http.put(`/v1/agents/${ids.support}`, { ...base, routes: [{ when: { nothing_here: 1 }, to: ids.billing }] });
    const empty = await http.put(`/v1/agents/${ids.support}`, { ...base, routes: [{ when: {}, to: ids.billing }] });
    const tooMany = await http.put(`/v1/agents/${ids.support}`, {
      ...base,
      routes: Array.from({ length: 21 }, () => ({ when: { note: 'x' }, to: ids.billing })),
    });

    // Assess
    expect(read.body.routes).toEqual([{ when: { order_id: { $exists: true } }, to: ids.billing }]);
    expect(outside).toMatchObject({ status: 400, body: { code: 'invalid_request', field: 'routes.0.to' } });
    expect(unknownOperator).toMatchObject({ status: 400, body: { code: 'invalid_request', field: 'routes.0.when.order_id' } });
    expect(notBelow).toMatchObject({ status: 400, body: { code: 'invalid_request', field: 'routes.0.to' } });
    // A field it may not read and a field nobody declared are refused alike: the answer does
    // not tell whether `card` exists.
    expect(unreadable).toMatchObject({ status: 400, body: { code: 'invalid_request', field: 'routes.0.when.card' } });
    expect(undeclared).toMatchObject({ status: 400, body: { code: 'invalid_request', field: 'routes.0.when.nothing_here' } });
    expect(unreadable.body.detail.replace('card', 'X')).toBe(undeclared.body.detail.replace('nothing_here', 'X'));
    expect(empty).toMatchObject({ status: 400, body: { field: 'routes.0.when' } });
    expect(tooMany).toMatchObject({ status: 400, body: { field: 'routes', limit: 20 } });
    // Nothing of a refused registration was stored.
    expect((await http.get(`/v1/agents/${ids.support}`)).body.routes).toEqual([{ when: { order_id: { $exists: true } }, to: ids.billing }]);
  });

  it('refuses a move that would take a route target out from under its router', async () => {
    // Prepare
    const { ids } = await hierarchy((ids) => [{ when: { note: 'refund' }, to: ids.refunds }]);

    // Act: refunds moves under billing (still below support), then out to a tree of its own.
    const within = await http.put(`/v1/agents/${ids.refunds}`, { parentId: ids.billing, worker: { url: `${workerBase}/${ids.refunds}` } });
    const out = await http.put(`/v1/agents/${ids.refunds}`, { parentId: null, worker: { url: `${workerBase}/${ids.refunds}` } });

    // Assess
    expect(within.status).toBe(200);
    expect(out).toMatchObject({ status: 400, body: { code: 'invalid_request', field: 'parentId' } });
    expect((await http.get(`/v1/agents/${ids.refunds}`)).body.parentId).toBe(ids.billing);
  });
});

describe('a decision routed by the state', () => {
  it('goes to the session agent until the condition holds, then to the route target, which alone sees its private field', async () => {
    // Prepare
    const { ids, sessionId } = await hierarchy((ids) => [
      { when: { note: 'escalate' }, to: ids.escalation },
      { when: { order_id: { $exists: true } }, to: ids.billing },
    ]);
    answers[ids.billing] = (body) => ({
      state: { ...body.state, card: 'visa-4242' },
      messages: [{ role: 'assistant', content: 'billed' }],
    });

    // Act
    const before = await decide(sessionId);
    const patched = await http.patch(`/v1/sessions/${sessionId}/state`, { order_id: 'o-7' });
    const routed = await decide(sessionId, { decisionId: 'd-routed' });
    const again = await decide(sessionId);

    // Assess: first support itself, with no routing.
    expect(before.status).toBe(200);
    expect(patched.status).toBe(200);
    expect(calls.map((call) => call.agent)).toEqual([ids.support, ids.billing, ids.billing]);
    expect(calls[0]?.body).toMatchObject({ agent_id: ids.support, routed_from: null, routing: [] });
    // Then billing, told who routed it and why, with the state as billing reads it.
    expect(calls[1]?.body).toMatchObject({
      agent_id: ids.billing,
      routed_from: ids.support,
      routing: [{ from: ids.support, to: ids.billing, via: 'route', index: 1 }],
      state: { order_id: 'o-7' },
    });
    expect(calls[2]?.body.state).toEqual({ order_id: 'o-7', card: 'visa-4242' });
    // The caller decided as support: neither the answer nor its state show billing's card.
    expect(routed.status).toBe(200);
    expect(routed.body.state).toEqual({ order_id: 'o-7' });
    expect(JSON.stringify(routed.body)).not.toContain('visa-4242');
    expect((await http.get(`/v1/sessions/${sessionId}/state`, asAgent(ids.support))).body.state).toEqual({ order_id: 'o-7' });
    expect((await http.get(`/v1/sessions/${sessionId}/state`, asAgent(ids.billing))).body.state).toEqual({
      order_id: 'o-7',
      card: 'visa-4242',
    });
    // The version's author is the agent that decided.
    const version = await http.get(`/v1/sessions/${sessionId}/versions/${routed.body.version}`, asAgent(ids.billing));
    expect(version.body).toMatchObject({ cause: 'decide', author: ids.billing, decisionId: 'd-routed' });
    expect(again.status).toBe(200);
  });

  it('follows the routes of the agent a route led to, up to three hops', async () => {
    // Prepare: support → triage → escalation, each on the note.
    const { ids, sessionId } = await hierarchy((ids) => [{ when: { note: { $in: ['urgent', 'very urgent'] } }, to: ids.triage }]);
    const worker = (agent: string) => ({ url: `${workerBase}/${agent}` });
    expect((await http.put(`/v1/agents/${ids.escalation}`, { parentId: ids.triage, worker: worker(ids.escalation) })).status).toBe(200);
    expect(
      (
        await http.put(`/v1/agents/${ids.triage}`, {
          parentId: ids.support,
          worker: worker(ids.triage),
          routes: [{ when: { note: 'very urgent' }, to: ids.escalation }],
        })
      ).status,
    ).toBe(200);
    await http.patch(`/v1/sessions/${sessionId}/state`, { note: 'urgent' });

    // Act
    const urgent = await decide(sessionId);
    await http.patch(`/v1/sessions/${sessionId}/state`, { note: 'very urgent' });
    const veryUrgent = await decide(sessionId);

    // Assess
    expect(urgent.status).toBe(200);
    expect(veryUrgent.status).toBe(200);
    expect(calls.map((call) => call.agent)).toEqual([ids.triage, ids.escalation]);
    expect(calls[1]?.body.routing).toEqual([
      { from: ids.support, to: ids.triage, via: 'route', index: 0 },
      { from: ids.triage, to: ids.escalation, via: 'route', index: 0 },
    ]);
    expect(calls[1]?.body.routed_from).toBe(ids.support);
  });
});

describe('handoffs', () => {
  it('passes the same decision to another agent of the hierarchy, which decides', async () => {
    // Prepare
    const { ids, sessionId } = await hierarchy();
    answers[ids.support] = () => ({ handoff: { agentId: ids.refunds, reason: 'a refund' } });
    answers[ids.refunds] = (body) => ({ state: { ...body.state, note: 'refunded' } });

    // Act
    const result = await decide(sessionId, { decisionId: 'd-handoff' });

    // Assess
    expect(result.status).toBe(200);
    expect(result.body.state).toEqual({ note: 'refunded' });
    expect(calls.map((call) => call.agent)).toEqual([ids.support, ids.refunds]);
    expect(calls[1]?.body).toMatchObject({
      agent_id: ids.refunds,
      routed_from: ids.support,
      routing: [{ from: ids.support, to: ids.refunds, via: 'handoff', reason: 'a refund' }],
      decision_id: 'd-handoff',
    });
    const version = await http.get(`/v1/sessions/${sessionId}/versions/${result.body.version}`);
    expect(version.body.author).toBe(ids.refunds);
  });

  it('refuses a loop, a fourth hop, an agent outside the hierarchy and a handoff with a state, writing nothing and freeing the lease', async () => {
    // Prepare
    const { ids, sessionId } = await hierarchy();
    const outsider = uniqueId('outsider');
    expect((await http.put(`/v1/agents/${outsider}`, { worker: { url: `${workerBase}/${outsider}` } })).status).toBe(201);
    const handTo = (agentId: string) => () => ({ handoff: { agentId } });
    const tree = async () => (await http.get(`/v1/sessions/${sessionId}/tree`)).body;
    const before = await tree();
    const cases: Array<[string, () => void, RegExp]> = [
      [
        'loop',
        () => {
          answers[ids.support] = handTo(ids.billing);
          answers[ids.billing] = handTo(ids.support);
        },
        /loop/,
      ],
      [
        'fourth hop',
        () => {
          answers[ids.support] = handTo(ids.billing);
          answers[ids.billing] = handTo(ids.refunds);
          answers[ids.refunds] = handTo(ids.triage);
          answers[ids.triage] = handTo(ids.escalation);
        },
        /at most 3 hops/,
      ],
      ['outside', () => (answers[ids.support] = handTo(outsider)), /not an agent of this session's hierarchy/],
      [
        'with a state',
        () => (answers[ids.support] = () => ({ handoff: { agentId: ids.billing }, state: { note: 'x' } })),
        /carries nothing else/,
      ],
    ];

    for (const [label, script, detail] of cases) {
      answers = {};
      script();
      // Act
      const refused = await decide(sessionId, { trigger: { type: 'client.messages', messages: [{ role: 'user', content: label }] } });
      // Assess
      expect(refused.status, label).toBe(502);
      expect(refused.body.code, label).toBe('worker_failed');
      expect(refused.body.detail, label).toMatch(detail);
      expect(await tree(), label).toEqual(before);
    }
    expect(calls.some((call) => call.agent === outsider)).toBe(false);
    // The lease was freed each time: a decision right after goes through.
    answers = {};
    expect((await decide(sessionId)).status).toBe(200);
  });
});

describe('who decided', () => {
  it('lists decisions newest first with who decided and why, in pages with sealed cursors, and replays a decision as first answered', async () => {
    // Prepare
    const { ids, sessionId } = await hierarchy((ids) => [{ when: { order_id: { $exists: true } }, to: ids.billing }]);
    answers[ids.support] = () => ({ handoff: { agentId: ids.refunds, reason: 'refund' } });
    answers[ids.billing] = (body) => ({ state: { ...body.state, card: 'mc-5555' } });
    const first = await decide(sessionId, { decisionId: 'd1' });
    await http.patch(`/v1/sessions/${sessionId}/state`, { order_id: 'o-1' });
    const second = await decide(sessionId, { decisionId: 'd2' });
    const called = calls.length;

    // Act
    const list = await http.get(`/v1/sessions/${sessionId}/decisions`);
    const page1 = await http.get(`/v1/sessions/${sessionId}/decisions?limit=1`);
    const page2 = await http.get(`/v1/sessions/${sessionId}/decisions?limit=1&cursor=${encodeURIComponent(page1.body.next)}`);
    const tampered = await http.get(
      `/v1/sessions/${sessionId}/decisions?cursor=${encodeURIComponent(`${page1.body.next.slice(0, -3)}${page1.body.next.endsWith('abc') ? 'abd' : 'abc'}`)}`,
    );
    const otherSession = await http.get(`/v1/sessions/${uniqueId('elsewhere')}/decisions?cursor=${encodeURIComponent(page1.body.next)}`);
    const unknown = await http.get(`/v1/sessions/${uniqueId('nobody')}/decisions`);
    const replayed = await decide(sessionId, { decisionId: 'd2' });

    // Assess
    expect(first.status).toBe(200);
    expect(list.status).toBe(200);
    expect(list.body.decisions).toEqual([
      {
        decisionId: 'd2',
        agentId: ids.billing,
        routedFrom: ids.support,
        routing: [{ from: ids.support, to: ids.billing, via: 'route', index: 0 }],
        version: second.body.version,
        createdAt: expect.any(String),
      },
      {
        decisionId: 'd1',
        agentId: ids.refunds,
        routedFrom: ids.support,
        routing: [{ from: ids.support, to: ids.refunds, via: 'handoff', reason: 'refund' }],
        version: first.body.version,
        createdAt: expect.any(String),
      },
    ]);
    expect(list.body.next).toBeUndefined();
    expect(page1.body.decisions.map((decision: any) => decision.decisionId)).toEqual(['d2']);
    expect(page2.body.decisions.map((decision: any) => decision.decisionId)).toEqual(['d1']);
    expect(page2.body.next).toBeUndefined();
    expect(tampered).toMatchObject({ status: 400, body: { code: 'invalid_request' } });
    expect(otherSession).toMatchObject({ status: 400, body: { code: 'invalid_request' } });
    expect(unknown).toMatchObject({ status: 404, body: { code: 'session_not_found' } });
    // A replay answers as the first time, without calling a worker, and shows no card.
    expect(replayed.status).toBe(200);
    expect(replayed.body).toEqual(second.body);
    expect(JSON.stringify(replayed.body)).not.toContain('mc-5555');
    expect(calls.length).toBe(called);
  });
});

describe('a key limited to the session agent', () => {
  it('decides in a session whose routes hand the decision to another agent, whose worker runs with its own view', async () => {
    // Prepare
    const { ids, sessionId } = await hierarchy((ids) => [{ when: { order_id: { $exists: true } }, to: ids.billing }]);
    const limited = apiClient(api.url, await issueKey(endpoint, { agents: [ids.support] }));
    await http.patch(`/v1/sessions/${sessionId}/state`, { order_id: 'o-9' }, asAgent(ids.billing));
    await http.patch(`/v1/sessions/${sessionId}/state`, { card: 'amex-0005' }, asAgent(ids.billing));

    // Act
    const result = await limited.post(`/v1/sessions/${sessionId}/decide`, { trigger: { type: 'tick' } }, asAgent(ids.support));

    // Assess
    expect(result.status).toBe(200);
    expect(calls.map((call) => call.agent)).toEqual([ids.billing]);
    expect(calls[0]?.body.state).toEqual({ order_id: 'o-9', card: 'amex-0005' });
    expect(JSON.stringify(result.body)).not.toContain('amex-0005');
  });
});
