import { createHmac } from 'node:crypto';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { type ApiClient, uniqueId } from '../helpers/api-client.js';
import { type RunningApi, startApi } from '../helpers/e2e.js';

/**
 * A real HTTP worker on loopback. Each test scripts its answer; every request it receives is
 * kept with its headers, so tests can assert what agentstate sent.
 */
interface Received {
  body: any;
  raw: string;
  signature: string | undefined;
}
let worker: Server;
let workerUrl: string;
let received: Received[] = [];
let answer: (request: any) => { status?: number; body?: string; delayMs?: number } = () => ({ body: '{}' });

let api: RunningApi;
let http: ApiClient;

const SECRET = 'worker-secret';

beforeAll(async () => {
  worker = createServer(async (req: IncomingMessage, res) => {
    let raw = '';
    for await (const chunk of req) raw += chunk;
    const body = JSON.parse(raw);
    received.push({ body, raw, signature: req.headers['x-agentstate-signature'] as string | undefined });
    const reply = answer(body);
    if (reply.delayMs) await new Promise((resolve) => setTimeout(resolve, reply.delayMs));
    res.writeHead(reply.status ?? 200, { 'content-type': 'application/json' });
    res.end(reply.body ?? '{}');
  });
  await new Promise<void>((resolve) => worker.listen(0, '127.0.0.1', resolve));
  workerUrl = `http://127.0.0.1:${(worker.address() as AddressInfo).port}/decide`;
  api = await startApi();
  http = api.client;
});
afterAll(async () => {
  await api?.stop();
  await new Promise((resolve) => worker?.close(resolve));
});
beforeEach(() => {
  received = [];
  answer = () => ({ body: '{}' });
});

const reply = (value: unknown) => () => ({ body: JSON.stringify(value) });

async function registerAgent(options: { config?: unknown; secret?: string; timeoutMs?: number; url?: string } = {}) {
  const agentId = uniqueId('agent');
  const response = await http.put(`/v1/agents/${agentId}`, {
    worker: {
      url: options.url ?? workerUrl,
      ...(options.secret ? { secret: options.secret } : {}),
      ...(options.timeoutMs ? { timeoutMs: options.timeoutMs } : {}),
    },
    config: options.config ?? { model: 'small' },
  });
  expect(response.status).toBe(201);
  return agentId;
}

async function sessionFor(agentId: string) {
  const sessionId = uniqueId('decide');
  expect((await http.post('/v1/sessions', { sessionId, agentId })).status).toBe(201);
  return sessionId;
}

const decide = (sid: string, body: unknown, options = {}) => http.post(`/v1/sessions/${sid}/decide`, body, options);

describe('agent registry', () => {
  it('registers, reads and lists agents, never returning the secret', async () => {
    const parent = uniqueId('root-agent');
    const child = uniqueId('child-agent');

    const created = await http.put(`/v1/agents/${parent}`, {
      worker: { url: workerUrl, secret: SECRET, timeoutMs: 2000 },
      config: { tone: 'kind' },
    });
    const replaced = await http.put(`/v1/agents/${parent}`, { worker: { url: workerUrl, secret: SECRET }, config: { tone: 'brief' } });
    await http.put(`/v1/agents/${child}`, { parentId: parent, config: null });
    const read = await http.get(`/v1/agents/${parent}`);
    const list = await http.get('/v1/agents?limit=500');

    expect(created.status).toBe(201);
    expect(replaced.status).toBe(200);
    expect(read.body).toMatchObject({
      agentId: parent,
      parentId: null,
      config: { tone: 'brief' },
      worker: { url: workerUrl, hasSecret: true },
    });
    expect(read.body.createdAt).toBe(created.body.createdAt);
    for (const text of [created.text, replaced.text, read.text, list.text]) expect(text).not.toContain(SECRET);
    const ids = list.body.agents.map((agent: { agentId: string }) => agent.agentId);
    expect(ids).toEqual(expect.arrayContaining([parent, child]));
    expect((await http.get(`/v1/agents/${child}`)).body).toMatchObject({ parentId: parent, worker: null });
  });

  it('refuses unknown parents, cycles and bad workers', async () => {
    const a = uniqueId('a');
    const b = uniqueId('b');
    await http.put(`/v1/agents/${a}`, {});
    await http.put(`/v1/agents/${b}`, { parentId: a });

    expect((await http.put(`/v1/agents/${uniqueId('x')}`, { parentId: 'no-such-agent' })).body.code).toBe('agent_not_found');
    expect((await http.put(`/v1/agents/${a}`, { parentId: b })).body.code).toBe('invalid_request');
    expect((await http.put(`/v1/agents/${a}`, { parentId: a })).body.code).toBe('invalid_request');
    expect((await http.put(`/v1/agents/${a}`, { worker: { url: 'ftp://example.com' } })).body.code).toBe('invalid_request');
    expect((await http.put(`/v1/agents/${a}`, { worker: { url: 'http://example.com/decide' } })).body.code).toBe('invalid_request');
    expect((await http.put(`/v1/agents/${a}`, { worker: { url: workerUrl, timeoutMs: 26_000 } })).body.code).toBe('invalid_request');
    expect((await http.put(`/v1/agents/${a}`, { stateFields: { f: { type: 'nope' } } })).body.code).toBe('invalid_request');
    expect((await http.get('/v1/agents/nobody')).status).toBe(404);
    expect((await http.get('/v1/agents/nobody')).body.code).toBe('agent_not_found');
    expect((await http.get(`/v1/agents/${a}`, { key: 'other-key' })).body.code).toBe('agent_not_found');
  });
});

describe('decide', () => {
  it('hands the worker every field of the DecisionRequest, signed', async () => {
    // Prepare
    const agentId = await registerAgent({ secret: SECRET, config: { model: 'small' } });
    const sid = await sessionFor(agentId);
    await http.put(`/v1/sessions/${sid}/state`, { notes: ['earlier'] });

    // Act
    const response = await decide(sid, {
      decisionId: 'd-fields',
      turnId: 'turn-1',
      trigger: { type: 'client.messages', messages: [{ id: 'u1', role: 'user', content: 'hello' }], extra: true },
      proposed: { hint: 1 },
    });

    // Assess
    expect(response.status).toBe(200);
    expect(received).toHaveLength(1);
    const { body, raw, signature } = received[0] as Received;
    expect(signature).toBe(`sha256=${createHmac('sha256', SECRET).update(raw).digest('hex')}`);
    expect(body).toEqual({
      session_id: sid,
      decision_id: 'd-fields',
      agent_id: agentId,
      // Nobody routed this decision (API.md section 13): the session's agent decides.
      routed_from: null,
      routing: [],
      turn_id: 'turn-1',
      trigger: { type: 'client.messages', messages: [{ id: 'u1', role: 'user', content: 'hello' }], extra: true },
      proposed: { hint: 1 },
      state: { notes: ['earlier'] },
      agent: { model: 'small' },
      messages: [{ id: 'u1', role: 'user', content: 'hello', parentId: 'root' }],
      ancestry: ['root', 'u1'],
      attempts: 1,
      version: 1,
      head: 'u1',
      profile: null,
      shared: null,
    });
  });

  it('shows the worker the profile of the user and the agent a PATCH gave the session, not those it had', async () => {
    // Prepare: a session of one user and agent; each user has a profile; the session is given to the other user and agent.
    const [before, after] = [await registerAgent({ config: { who: 'before' } }), await registerAgent({ config: { who: 'after' } })];
    const [oldUser, newUser] = [uniqueId('old-user'), uniqueId('new-user')];
    const sid = uniqueId('decide');
    expect((await http.post('/v1/sessions', { sessionId: sid, agentId: before, userId: oldUser })).status).toBe(201);
    for (const [user, language] of [
      [oldUser, 'fr'],
      [newUser, 'en'],
    ] as const) {
      const other = uniqueId('profile-of');
      await http.post('/v1/sessions', { sessionId: other, userId: user });
      const commit = await http.post(`/v1/sessions/${other}/commits`, {
        commands: [{ key: 'language', scope: 'profile', merge: 'disjoint', set: language }],
      });
      expect(commit.status).toBe(200);
    }
    expect((await http.patch(`/v1/sessions/${sid}`, { userId: newUser, agentId: after })).status).toBe(200);

    // Act
    const response = await decide(sid, { trigger: { type: 'tick' } });

    // Assess
    expect(response.status, JSON.stringify(response.body)).toBe(200);
    expect(received).toHaveLength(1);
    expect((received[0] as Received).body).toMatchObject({ agent_id: after, agent: { who: 'after' }, profile: { language: 'en' } });
  });

  it.each([
    ['a value overwrites', { a: 1 }, { state: { b: 2 } }, { b: 2 }, true],
    ['{} clears', { a: 1 }, { state: {} }, {}, true],
    ['omitted keeps', { a: 1 }, {}, { a: 1 }, false],
    ['null keeps', { a: 1 }, { state: null }, { a: 1 }, false],
    ['an equal value records no version', { a: 1, b: [1] }, { state: { b: [1], a: 1 } }, { a: 1, b: [1] }, false],
  ])('applies the answer: %s', async (_case, before, workerAnswer, expected, changed) => {
    const agentId = await registerAgent();
    const sid = await sessionFor(agentId);
    await http.put(`/v1/sessions/${sid}/state`, before);
    answer = reply(workerAnswer);

    const response = await decide(sid, { trigger: { type: 'tick' } });

    expect(response.status).toBe(200);
    expect(response.body).toMatchObject({ decision: workerAnswer, state: expected, changed, version: changed ? 2 : 1, head: 'root' });
    expect(typeof response.body.decisionId).toBe('string');
    expect((await http.get(`/v1/sessions/${sid}/state`)).body).toMatchObject({ state: expected, version: changed ? 2 : 1 });
  });

  it('versions the agent config: the registered one first, then what the worker sets', async () => {
    const agentId = await registerAgent({ config: { model: 'small' } });
    const sid = await sessionFor(agentId);

    answer = reply({ state: { turns: 0 } });
    const first = await decide(sid, { trigger: { type: 'session.start' } });
    answer = reply({ agent: { model: 'large' } });
    const second = await decide(sid, { trigger: { type: 'upgrade' } });
    answer = reply({});
    await decide(sid, { trigger: { type: 'tick' } });

    expect(first.body).toMatchObject({ version: 1, changed: true, agent: { model: 'small' }, state: { turns: 0 } });
    expect(second.body).toMatchObject({ version: 2, changed: true, agent: { model: 'large' }, state: { turns: 0 } });
    expect((received[2] as Received).body.agent).toEqual({ model: 'large' });
    const v1 = await http.get(`/v1/sessions/${sid}/versions/1`);
    const v2 = await http.get(`/v1/sessions/${sid}/versions/2`);
    expect(v1.body).toMatchObject({ cause: 'decide', author: agentId, agent: { model: 'small' }, decisionId: first.body.decisionId });
    expect(v2.body).toMatchObject({ cause: 'decide', agent: { model: 'large' }, state: { turns: 0 } });
    expect((await http.get(`/v1/sessions/${sid}/state`)).body.agent).toEqual({ model: 'large' });
  });

  it("appends the worker's messages under the head and anchors the new state there, atomically", async () => {
    const agentId = await registerAgent();
    const sid = await sessionFor(agentId);
    answer = reply({
      state: { replied: true },
      messages: [
        { role: 'assistant', content: 'hi!' },
        { id: 'tool-1', role: 'tool' },
      ],
    });

    const response = await decide(sid, { trigger: { type: 'client.messages', messages: [{ id: 'q', role: 'user' }] } });
    const tree = await http.get(`/v1/sessions/${sid}/tree`);

    expect(response.body).toMatchObject({ head: 'tool-1', version: 1, changed: true });
    const byId = Object.fromEntries(tree.body.nodes.map((node: { id: string }) => [node.id, node]));
    expect(byId.q).toMatchObject({ parentId: 'root', stateVersion: 0 });
    expect(byId['tool-1']).toMatchObject({ role: 'tool', stateVersion: 1 });
    const assistant = tree.body.nodes.find((node: { role: string }) => node.role === 'assistant');
    expect(assistant).toMatchObject({ parentId: 'q', stateVersion: 0 });
    expect(tree.body.head).toBe('tool-1');
    expect((await http.get(`/v1/sessions/${sid}/versions/1`)).body).toMatchObject({ node: 'tool-1', prevVersion: 0 });
  });

  it('runs a fork with parentId and shows the worker the state at the fork point', async () => {
    const agentId = await registerAgent();
    const sid = await sessionFor(agentId);
    answer = (request) => ({ body: JSON.stringify({ state: { turns: ((request.state?.turns as number) ?? 0) + 1, last: request.head } }) });
    await decide(sid, { trigger: { type: 'client.messages', messages: [{ id: 'u1', role: 'user' }] } });
    await decide(sid, { trigger: { type: 'client.messages', messages: [{ id: 'u2', role: 'user' }] } });

    // Edit u2: a new user message under u1, the parent of the message being replaced.
    const fork = await decide(sid, { parentId: 'u1', trigger: { type: 'client.messages', messages: [{ id: 'u2-edit', role: 'user' }] } });

    expect((received[2] as Received).body).toMatchObject({
      state: { turns: 1, last: 'u1' },
      version: 1,
      head: 'u2-edit',
      ancestry: ['root', 'u1', 'u2-edit'],
    });
    expect(fork.body).toMatchObject({ state: { turns: 2, last: 'u2-edit' }, version: 3, head: 'u2-edit' });
    expect((await http.get(`/v1/sessions/${sid}/state?node=u2`)).body.state).toEqual({ turns: 2, last: 'u2' });
  });

  it('edits the first message: a fork under the root, with parentId "root", sees the state as it was there', async () => {
    // Before: 400 invalid_id ("parentId must not be the reserved id root"), though an append
    // takes parentId root and the root is the parent of every first message.
    const agentId = await registerAgent();
    const sid = await sessionFor(agentId);
    answer = (request) => ({ body: JSON.stringify({ state: { turns: ((request.state?.turns as number) ?? 0) + 1 } }) });
    await decide(sid, { trigger: { type: 'client.messages', messages: [{ id: 'first', role: 'user' }] } });

    const edit = await decide(sid, {
      parentId: 'root',
      trigger: { type: 'client.messages', messages: [{ id: 'first-edit', role: 'user' }] },
    });

    expect(edit.status).toBe(200);
    expect((received.at(-1) as Received).body).toMatchObject({ state: null, version: 0, ancestry: ['root', 'first-edit'] });
    expect(edit.body).toMatchObject({ state: { turns: 1 }, version: 2, head: 'first-edit' });
    expect((await http.get(`/v1/sessions/${sid}/nodes/first-edit`)).body).toMatchObject({ parentId: 'root', depth: 1 });
  });

  it('shows a worker registered with messages {"last": N} only the last N messages, and says how many it left out', async () => {
    // Prepare: an agent that is shown its last 3 messages, and a conversation of 6 with a fork.
    const agentId = uniqueId('agent');
    const registered = await http.put(`/v1/agents/${agentId}`, { worker: { url: workerUrl, messages: { last: 3 } } });
    const sid = await sessionFor(agentId);
    const chain = Array.from({ length: 6 }, (_, index) => ({ id: `c${index}`, role: index % 2 ? 'assistant' : 'user', n: index }));
    expect((await http.post(`/v1/sessions/${sid}/messages`, { messages: chain })).status).toBe(201);
    answer = reply({ messages: [{ role: 'assistant', n: 7 }] });

    // Act: a turn at the head, a fork under c1, and a registration that asks for more than 10000.
    await decide(sid, { trigger: { type: 'client.messages', messages: [{ id: 'q', role: 'user', n: 6 }] } });
    await decide(sid, { parentId: 'c1', trigger: { type: 'client.messages', messages: [{ id: 'f', role: 'user', n: 2 }] } });
    const tooMany = await http.put(`/v1/agents/${uniqueId('agent')}`, { worker: { url: workerUrl, messages: { last: 10_001 } } });

    // Assess
    expect(registered.status).toBe(201);
    expect(registered.body.worker).toMatchObject({ messages: { last: 3 } });
    const [atHead, atFork] = received.map((entry) => entry.body);
    expect(atHead).toMatchObject({ ancestry: ['c4', 'c5', 'q'], messages_omitted: 4 });
    expect(atHead.messages.map((message: { n: number }) => message.n)).toEqual([4, 5, 6]);
    // A path no longer than N is whole: its ancestry starts at the root.
    expect(atFork).toMatchObject({ ancestry: ['root', 'c0', 'c1', 'f'], messages_omitted: 0 });
    expect(tooMany).toMatchObject({ status: 400, body: { code: 'invalid_request' } });
    // The path itself is whole: only the worker's view was cut.
    expect((await http.get(`/v1/sessions/${sid}/messages`)).body.ancestry).toEqual(['root', 'c0', 'c1', 'f', expect.any(String)]);
  });

  it('shows a worker every message by default, with no messages_omitted', async () => {
    const agentId = await registerAgent();
    const sid = await sessionFor(agentId);
    const chain = Array.from({ length: 4 }, (_, index) => ({ id: `d${index}`, role: 'user' }));
    await http.post(`/v1/sessions/${sid}/messages`, { messages: chain });
    answer = reply({});

    await decide(sid, { trigger: { type: 'tick' } });

    expect((received[0] as Received).body.ancestry).toEqual(['root', 'd0', 'd1', 'd2', 'd3']);
    expect((received[0] as Received).body).not.toHaveProperty('messages_omitted');
  });

  it('replays a decision id without calling the worker again', async () => {
    const agentId = await registerAgent();
    const sid = await sessionFor(agentId);
    answer = reply({ state: { once: true }, messages: [{ role: 'assistant' }] });

    const first = await decide(sid, { decisionId: 'same', trigger: { type: 'client.messages', messages: [{ role: 'user' }] } });
    const again = await decide(sid, { decisionId: 'same', trigger: { type: 'client.messages', messages: [{ role: 'user' }] } });

    expect(received).toHaveLength(1);
    expect(again.status).toBe(200);
    expect(again.body).toEqual(first.body);
    expect((await http.get(`/v1/sessions/${sid}/tree`)).body.nodes).toHaveLength(3);
  });

  it('runs one decision at a time per session: a concurrent one gets 409 decision_in_progress', async () => {
    const agentId = await registerAgent();
    const sid = await sessionFor(agentId);
    answer = () => ({ body: '{"state":{"slow":true}}', delayMs: 800 });

    const slow = decide(sid, { trigger: { type: 'tick' } });
    await new Promise((resolve) => setTimeout(resolve, 200));
    const concurrent = await decide(sid, { trigger: { type: 'tick' } });
    const otherSession = await decide(await sessionFor(agentId), { trigger: { type: 'tick' } });

    expect(concurrent.status).toBe(409);
    expect(concurrent.body.code).toBe('decision_in_progress');
    expect(otherSession.status).toBe(200);
    expect((await slow).status).toBe(200);
    answer = reply({});
    expect((await decide(sid, { trigger: { type: 'tick' } })).status).toBe(200);
  });

  it.each([
    ['an error status', () => ({ status: 500, body: '{"error":"boom"}' }), 502, 'worker_failed'],
    ['a body that is not JSON', () => ({ body: 'not json' }), 502, 'worker_failed'],
    ['JSON that is not an object', () => ({ body: '[1,2]' }), 502, 'worker_failed'],
    ['messages without a role', () => ({ body: '{"messages":[{"content":"x"}]}' }), 502, 'worker_failed'],
    // Before, these two were the caller's 409 node_exists, for a fault of the worker's answer.
    ['messages that repeat an id', () => ({ body: '{"messages":[{"id":"m1","role":"a"},{"id":"m1","role":"a"}]}' }), 502, 'worker_failed'],
    ["a message with the id of the trigger's", () => ({ body: '{"messages":[{"id":"kept-out","role":"a"}]}' }), 502, 'worker_failed'],
    ['no answer in time', () => ({ body: '{"state":{"late":true}}', delayMs: 1500 }), 504, 'worker_timeout'],
  ])('answers %s with an error, writes nothing and frees the lease', async (_case, behaviour, status, code) => {
    const agentId = await registerAgent({ timeoutMs: 500 });
    const sid = await sessionFor(agentId);
    answer = behaviour;

    const failed = await decide(sid, {
      decisionId: 'may-fail',
      trigger: { type: 'client.messages', messages: [{ id: 'kept-out', role: 'user' }] },
    });

    expect(failed.status).toBe(status);
    expect(failed.headers.get('content-type')).toContain('application/problem+json');
    expect(failed.body.code).toBe(code);
    const session = await http.get(`/v1/sessions/${sid}`);
    expect(session.body).toMatchObject({ version: 0, head: 'root' });
    expect((await http.get(`/v1/sessions/${sid}/nodes/kept-out`)).status).toBe(404);
    // The lease is free and the same decision id runs again, as its second attempt.
    answer = reply({ state: { ok: true } });
    await new Promise((resolve) => setTimeout(resolve, 1100));
    const retried = await decide(sid, {
      decisionId: 'may-fail',
      trigger: { type: 'client.messages', messages: [{ id: 'kept-out', role: 'user' }] },
    });
    expect(retried.status).toBe(200);
    expect((received.at(-1) as Received).body.attempts).toBe(2);
  });

  it('without a worker, the decision is what the request proposed', async () => {
    const agentId = uniqueId('no-worker');
    await http.put(`/v1/agents/${agentId}`, { config: { mode: 'manual' } });
    const sid = await sessionFor(agentId);

    const response = await decide(sid, { trigger: { type: 'manual' }, proposed: { state: { chosen: 'b' } } });
    const none = await decide(uniqueId('no-agent'), { trigger: { type: 'manual' } });

    expect(received).toHaveLength(0);
    expect(response.body).toMatchObject({
      decision: { state: { chosen: 'b' } },
      state: { chosen: 'b' },
      agent: { mode: 'manual' },
      changed: true,
      version: 1,
    });
    expect(none.body).toMatchObject({ decision: {}, state: null, agent: null, changed: false, version: 0 });
  });

  it('answers a trigger message whose id is taken under another parent as an append does, writing nothing', async () => {
    // Prepare: a conversation m1 → m2.
    const sid = uniqueId('trigger-ids');
    await http.post(`/v1/sessions/${sid}/messages`, {
      messages: [
        { id: 'm1', role: 'user' },
        { id: 'm2', role: 'assistant' },
      ],
    });
    const before = await http.get(`/v1/sessions/${sid}/tree`);

    // Act: a decision whose trigger sends m2 again, under the root.
    const response = await decide(sid, {
      parentId: 'root',
      trigger: { type: 'client.messages', messages: [{ id: 'm2', role: 'user' }] },
      proposed: { state: { touched: true } },
    });

    // Assess: the caller's conflict, as for POST messages (API.md: the trigger's messages are
    // appended by section 3's rules); nothing written.
    expect(response.status).toBe(409);
    expect(response.body).toMatchObject({ code: 'node_exists' });
    expect((await http.get(`/v1/sessions/${sid}/tree`)).body).toEqual(before.body);
    expect((await http.get(`/v1/sessions/${sid}/state`)).body).toMatchObject({ state: null, version: 0 });
  });

  it("refuses proposed messages that take the id of the trigger's, keeping the tree whole", async () => {
    // Before: 200, and a second node q1 hung under the first (its own parent in the tree).
    const sid = uniqueId('no-worker-ids');
    const response = await decide(sid, {
      trigger: { type: 'client.messages', messages: [{ id: 'q1', role: 'user' }] },
      proposed: { messages: [{ id: 'q1', role: 'assistant' }] },
    });

    expect(response.status).toBe(400);
    expect(response.body).toMatchObject({ code: 'invalid_request', field: 'proposed' });
    expect((await http.get(`/v1/sessions/${sid}/nodes/q1`)).status).toBe(404);
    expect((await http.get(`/v1/sessions/${sid}`)).status).toBe(404);
  });

  it('calls a module worker (the example) for local development', async () => {
    const agentId = uniqueId('module');
    await http.put(`/v1/agents/${agentId}`, { worker: { url: 'module:examples/worker.ts' } });
    const sid = await sessionFor(agentId);

    const start = await decide(sid, { trigger: { type: 'session.start' } });
    const turn = await decide(sid, { trigger: { type: 'client.messages', messages: [{ role: 'user', content: 'hi' }] } });

    expect(start.body).toMatchObject({ state: { turns: 0 }, agent: { model: 'small-fast' }, version: 1 });
    expect(turn.body).toMatchObject({ state: { turns: 1 }, version: 2 });
    const path = await http.get(`/v1/sessions/${sid}/messages`);
    expect(path.body.messages.map((message: { role: string }) => message.role)).toEqual(['user', 'assistant']);
  });

  it('refuses bad decide requests with clear errors', async () => {
    const sid = uniqueId('bad-decide');
    expect((await decide(sid, {})).body.code).toBe('invalid_request');
    expect((await decide(sid, { trigger: { type: '' } })).body.code).toBe('invalid_request');
    expect((await decide(sid, { trigger: { type: 'x' }, agentId: 'no-such-agent' })).body.code).toBe('agent_not_found');
    expect((await decide(sid, { trigger: { type: 'x' }, decisionId: 'bad id' })).body.code).toBe('invalid_id');
    expect((await decide(sid, { trigger: { type: 'client.messages', messages: [] } })).body.code).toBe('invalid_request');
    expect((await decide(sid, { trigger: { type: 'client.messages', messages: [{ role: 'user' }] }, parentId: 'nope' })).body.code).toBe(
      'node_not_found',
    );
    expect((await http.get(`/v1/sessions/${sid}`)).status).toBe(404);
  });
});
