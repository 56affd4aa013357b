import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import {
  type AgentStateClient,
  AgentStateError,
  CodecError,
  createClient,
  createWorker,
  type DecisionRequest,
  SchemaMismatchError,
  toNodeHandler,
} from '@agentstate/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { dynamoDbEndpointOf, issueKey } from '../helpers/admin.js';
import { type RunningApi, startApi } from '../helpers/e2e.js';
import { eventually, type FaultyProxy, startFaultyProxy, uniqueId } from './support.js';

/**
 * The client against the server as `npm start` runs it: every route, its errors, and the
 * transport (idempotency keys, retries, timeouts, abort) through a proxy that misbehaves.
 */

let api: RunningApi;
let client: AgentStateClient;
let proxy: FaultyProxy;
const servers: Server[] = [];

beforeAll(async () => {
  api = await startApi();
  client = createClient({ baseUrl: api.url, apiKey: 'dev-key' });
  proxy = await startFaultyProxy(api.url);
});
afterAll(async () => {
  client?.close();
  await proxy?.close();
  await Promise.all(servers.map((server) => new Promise((resolve) => server.close(resolve))));
  await api?.stop();
});

/** A client that talks through the proxy, with quick retries. */
function viaProxy(options: Parameters<typeof createClient>[0] extends infer O ? Partial<O> : never = {}): AgentStateClient {
  return createClient({ baseUrl: proxy.url, apiKey: 'dev-key', retry: { attempts: 4, baseDelayMs: 10, maxDelayMs: 50 }, ...options });
}

describe('every route', () => {
  it('health', async () => {
    expect(await client.health()).toEqual({ ok: true });
  });

  it('sessions: create, read, list, iterate, delete', async () => {
    // Prepare
    const sid = uniqueId('sessions');

    // Act
    const created = await client.sessions.create({ sessionId: sid, userId: 'u-1', metadata: { channel: 'web' } });
    const read = await client.sessions.get(sid);
    const page = await client.sessions.list({ limit: 500 });
    // The list may take a moment to show a new session (docs/api.md §2).
    const all = await eventually('the session in the list', async () => {
      const ids: string[] = [];
      for await (const session of client.sessions.iterate({ limit: 2 })) ids.push(session.sessionId);
      return ids.includes(sid) && ids;
    });
    const taken = await client.sessions.create({ sessionId: sid }).catch((error: unknown) => error);
    await client.sessions.delete(sid);
    const gone = await client.sessions.get(sid).catch((error: unknown) => error);

    // Assess
    expect(created).toMatchObject({ sessionId: sid, agentId: null, userId: 'u-1', metadata: { channel: 'web' }, head: 'root', version: 0 });
    expect(read).toEqual(created);
    expect(Array.isArray(page.sessions)).toBe(true);
    expect(all).toContain(sid);
    expect(taken).toMatchObject({ name: 'AgentStateError', code: 'session_exists', status: 409, sessionId: sid });
    expect(gone).toMatchObject({ code: 'session_not_found', status: 404 });
  });

  it('messages, nodes, tree and head', async () => {
    const sid = uniqueId('tree');

    const appended = await client.messages.append(sid, {
      messages: [
        { id: 'u1', role: 'user', content: 'Plan a trip' },
        { id: 'a1', role: 'assistant', content: 'Where to?' },
      ],
    });
    const branch = await client.messages.append(sid, {
      parentId: 'u1',
      messages: [{ id: 'a2', role: 'assistant', content: 'Which city?' }],
    });
    const path = await client.messages.path(sid, { node: 'a1' });
    const newest = await client.messages.path(sid, { node: 'a1', last: 1 });
    const node = await client.tree.node(sid, 'a1');
    const tree = await client.tree.get(sid);
    const previews = await client.tree.get(sid, { preview: true });
    const head = await client.tree.setHead(sid, 'a1');

    expect(appended).toEqual({
      nodes: [expect.objectContaining({ id: 'u1', parentId: 'root', depth: 1 }), expect.objectContaining({ id: 'a1', parentId: 'u1' })],
      head: 'a1',
    });
    expect(branch.head).toBe('a2');
    expect(newest).toEqual({
      messages: [{ id: 'a1', role: 'assistant', content: 'Where to?', parentId: 'u1' }],
      ancestry: ['a1'],
      omitted: 1,
    });
    expect(path).toEqual({
      messages: [
        { id: 'u1', role: 'user', content: 'Plan a trip', parentId: 'root' },
        { id: 'a1', role: 'assistant', content: 'Where to?', parentId: 'u1' },
      ],
      ancestry: ['root', 'u1', 'a1'],
    });
    expect(node).toEqual({ id: 'a1', parentId: 'u1', depth: 2, role: 'assistant', stateVersion: 0, createdAt: expect.any(String) });
    expect(tree.head).toBe('a2');
    expect(tree.nodes.map((each) => each.id)).toEqual(['root', 'u1', 'a1', 'a2']);
    expect(tree.nodes[1]).not.toHaveProperty('preview');
    expect(previews.nodes.map((each) => each.preview)).toEqual([null, 'Plan a trip', 'Where to?', 'Which city?']);
    expect(head).toEqual({ head: 'a1' });
  });

  it('copies a session: a path, or the whole tree', async () => {
    const sid = uniqueId('copy');
    await client.messages.append(sid, { messages: [{ id: 'u1', role: 'user', content: 'Plan a trip' }] });
    await client.state.replace(sid, { city: 'Lisbon' });
    await client.messages.append(sid, { parentId: 'u1', messages: [{ id: 'a2', role: 'assistant', content: 'Porto?' }] });

    const path = await client.sessions.copy(sid, { node: 'u1', metadata: { from: sid } });
    const whole = await client.sessions.copy(sid, { tree: true });

    expect(path).toMatchObject({ head: 'u1', version: 1, metadata: { from: sid } });
    expect((await client.state.get(path.sessionId)).state).toEqual({ city: 'Lisbon' });
    expect((await client.tree.get(whole.sessionId)).nodes.map((each) => each.id)).toEqual(['root', 'u1', 'a2']);
    expect(whole.head).toBe('a2');
  });

  it('finds sessions by the start of their id', async () => {
    const stem = uniqueId('prefix');
    for (const suffix of ['a', 'b']) await client.sessions.create({ sessionId: `${stem}-${suffix}` });
    await client.sessions.create({ sessionId: uniqueId('elsewhere') });

    const found = await eventually('both sessions under the prefix', async () => {
      const ids: string[] = [];
      for await (const session of client.sessions.iterate({ prefix: stem, limit: 50 })) ids.push(session.sessionId);
      return ids.length === 2 ? ids : null;
    });

    expect([...found].sort()).toEqual([`${stem}-a`, `${stem}-b`]);
  });

  it('decisions: routes on an agent, and who decided each turn, listed and iterated', async () => {
    // Prepare: a router whose route hands a decision to the agent below once `urgent` is set.
    const router = uniqueId('router');
    const below = uniqueId('below');
    await client.agents.put(router, {});
    await client.agents.put(below, { parentId: router });
    const { agent } = await client.agents.put(router, { routes: [{ when: { urgent: true }, to: below }] });
    const sid = uniqueId('decisions');
    await client.sessions.create({ sessionId: sid, agentId: router });

    // Act
    await client.decide(sid, { decisionId: 'calm', trigger: { type: 'tick' }, proposed: { state: { urgent: false } } });
    await client.decide(sid, { decisionId: 'urgent', trigger: { type: 'tick' }, proposed: { state: { urgent: true } } });
    await client.decide(sid, { decisionId: 'routed', trigger: { type: 'tick' } });
    const page = await client.decisions.list(sid, { limit: 2 });
    const all: string[] = [];
    for await (const decision of client.decisions.iterate(sid)) all.push(`${decision.decisionId}:${decision.agentId}`);

    // Assess
    expect(agent.routes).toEqual([{ when: { urgent: true }, to: below }]);
    expect(page.decisions.map((decision) => decision.decisionId)).toEqual(['routed', 'urgent']);
    expect(page.decisions[0]).toMatchObject({
      agentId: below,
      routedFrom: router,
      routing: [{ from: router, to: below, via: 'route', index: 0 }],
    });
    expect(page.next).toEqual(expect.any(String));
    expect(all).toEqual([`routed:${below}`, `urgent:${router}`, `calm:${router}`]);
  });

  it('state and versions: patch, replace, If-Match, time travel, history', async () => {
    const sid = uniqueId('state');

    const first = await client.state.patch(sid, { model: 'fast', turns: 0 });
    const second = await client.state.replace(sid, { turns: 1 }, { ifMatch: 1, agentId: 'planner' });
    const stale = await client.state.patch(sid, { turns: 9 }, { ifMatch: 1 }).catch((error: unknown) => error);
    const unchanged = await client.state.patch(sid, { turns: 1 });
    const now = await client.state.get(sid);
    const then = await client.state.get(sid, { version: 1 });
    const ghost = await client.state.get(uniqueId('ghost'));
    const history = await client.versions.list(sid);
    const everyVersion: number[] = [];
    for await (const version of client.versions.iterate(sid, { limit: 1 })) everyVersion.push(version.version);
    const one = await client.versions.get(sid, 2);

    expect(first).toEqual({ sessionId: sid, node: 'root', version: 1, prevVersion: 0, state: { model: 'fast', turns: 0 }, changed: true });
    expect(second).toMatchObject({ version: 2, prevVersion: 1, state: { turns: 1 }, changed: true });
    expect(stale).toBeInstanceOf(AgentStateError);
    expect(stale).toMatchObject({ code: 'version_mismatch', status: 412, currentVersion: 2 });
    expect(unchanged).toMatchObject({ version: 2, changed: false });
    expect(now).toEqual({ sessionId: sid, node: 'root', version: 2, state: { turns: 1 }, agent: null, updatedAt: expect.any(String) });
    expect(then.state).toEqual({ model: 'fast', turns: 0 });
    expect(ghost).toMatchObject({ version: 0, state: null, updatedAt: null });
    expect(history.versions.map((version) => [version.version, version.cause, version.author])).toEqual([
      [2, 'replace', 'planner'],
      [1, 'patch', null],
    ]);
    expect(everyVersion).toEqual([2, 1]);
    expect(one).toMatchObject({ version: 2, node: 'root', prevVersion: 1, cause: 'replace', author: 'planner', state: { turns: 1 } });
  });

  it('agents and decide with a module worker', async () => {
    const agentId = uniqueId('counter');
    const sid = uniqueId('decide');

    const created = await client.agents.put(agentId, { worker: { url: 'module:examples/worker.ts' }, config: { model: 'small-fast' } });
    const replaced = await client.agents.put(agentId, {
      worker: { url: 'module:examples/worker.ts', secret: 'never-shown' },
      config: { model: 'small-fast' },
    });
    const read = await client.agents.get(agentId);
    const listed: string[] = [];
    for await (const agent of client.agents.iterate({ limit: 1 })) listed.push(agent.agentId);
    await client.sessions.create({ sessionId: sid, agentId });
    const start = await client.decide(sid, { trigger: { type: 'session.start' } });
    const turn = await client.decide(sid, {
      decisionId: `${sid}-d2`,
      trigger: { type: 'client.messages', messages: [{ id: 'q1', role: 'user', content: 'hi' }] },
    });
    const again = await client.decide(sid, {
      decisionId: `${sid}-d2`,
      trigger: { type: 'client.messages', messages: [{ id: 'q1', role: 'user', content: 'hi' }] },
    });
    const missing = await client.agents.get(uniqueId('nobody')).catch((error: unknown) => error);

    expect(created).toMatchObject({
      created: true,
      agent: { agentId, worker: { url: 'module:examples/worker.ts', hasSecret: false }, config: { model: 'small-fast' } },
    });
    expect(replaced).toMatchObject({ created: false, agent: { worker: { hasSecret: true } } });
    expect(JSON.stringify(read)).not.toContain('never-shown');
    expect(listed).toContain(agentId);
    expect(start).toMatchObject({ decision: { state: { turns: 0 } }, state: { turns: 0 }, version: 1, changed: true });
    expect(turn).toMatchObject({ decisionId: `${sid}-d2`, state: { turns: 1 }, version: 2, changed: true });
    expect(again).toEqual(turn);
    expect(missing).toMatchObject({ code: 'agent_not_found', status: 404 });
  });

  it('commits, runs, profiles and the shared document', async () => {
    const sid = uniqueId('commits');
    await client.sessions.create({ sessionId: sid, userId: 'commit-user' });

    const result = await client.commits.commit(sid, {
      runId: 'run-7',
      commands: [
        { key: 'plan', scope: 'thread', merge: 'disjoint', set: { step: 2 } },
        { key: 'votes', scope: 'run', merge: 'commutative', set: { 'tool-a': 1 } },
        { key: 'lang', scope: 'profile', merge: 'exclusive', set: 'fr' },
      ],
    });
    const exclusive = await client.commits
      .commit(sid, {
        commands: [
          { key: 'x', scope: 'thread', merge: 'exclusive', set: 1 },
          { key: 'x', scope: 'thread', merge: 'exclusive', set: 2 },
        ],
      })
      .catch((error: unknown) => error);
    const run = await client.commits.run(sid, 'run-7');
    const profile = await client.commits.profile('commit-user');
    const shared = await client.commits.shared();

    expect(result).toMatchObject({
      sessionId: sid,
      version: 1,
      changed: true,
      state: { plan: { step: 2 } },
      run: { runId: 'run-7', version: 1 },
      profile: { userId: 'commit-user', version: 1 },
    });
    expect(exclusive).toMatchObject({ code: 'exclusive_conflict', status: 409, key: 'x', scope: 'thread' });
    expect(run).toMatchObject({ sessionId: sid, runId: 'run-7', version: 1, state: { votes: { 'tool-a': 1 } } });
    expect(profile).toMatchObject({ userId: 'commit-user', state: { lang: 'fr' } });
    expect(shared).toHaveProperty('version');
  });

  it('webhooks: create, list, read, dead letters, replay, delete', async () => {
    const hook = await client.webhooks.create({ url: 'http://127.0.0.1:9/hook', secret: 'never-shown', sessionId: uniqueId('quiet') });
    const page = await client.webhooks.list({ limit: 500 });
    const read = await client.webhooks.get(hook.id);
    const letters = await client.webhooks.deadLetters(hook.id);
    const replayed = await client.webhooks.replay(hook.id, { limit: 5 });
    await client.webhooks.delete(hook.id);
    const gone = await client.webhooks.get(hook.id).catch((error: unknown) => error);

    expect(hook).toMatchObject({ id: expect.any(String), hasSecret: true });
    expect(page.webhooks.map((each) => each.id)).toContain(hook.id);
    expect(read).toEqual(hook);
    expect(letters).toEqual({ deadLetters: [] });
    expect(replayed).toEqual({ delivered: 0, failed: null, remaining: false });
    expect(gone).toMatchObject({ code: 'not_found', status: 404 });
  });
});

describe('errors', () => {
  it('are AgentStateErrors with the problem document: code, status, detail and its extra members', async () => {
    const sid = uniqueId('errors');
    await client.messages.append(sid, { messages: [{ id: 'm1', role: 'user' }] });

    const error = await client.tree.node(sid, 'a9').catch((thrown: unknown) => thrown);

    expect(error).toBeInstanceOf(AgentStateError);
    expect(error).toBeInstanceOf(Error);
    expect(error).toMatchObject({ code: 'node_not_found', status: 404, detail: 'node a9 does not exist', nodeId: 'a9' });
    expect((error as AgentStateError).problem).toMatchObject({ type: expect.stringContaining('node-not-found'), title: 'Node not found' });
    expect(AgentStateError.is(error, 'node_not_found')).toBe(true);
    expect(AgentStateError.is(error, 'node_')).toBe(true);
  });

  it('refuse a bad key (401) and hide other tenants (404)', async () => {
    const sid = uniqueId('tenant');
    await client.state.patch(sid, { mine: true });

    const unauthorized = await createClient({ baseUrl: api.url, apiKey: 'wrong' })
      .sessions.get(sid)
      .catch((error: unknown) => error);
    const hidden = await createClient({ baseUrl: api.url, apiKey: 'other-key' })
      .sessions.get(sid)
      .catch((error: unknown) => error);

    expect(unauthorized).toMatchObject({ code: 'unauthorized', status: 401 });
    expect(hidden).toMatchObject({ code: 'session_not_found', status: 404 });
  });

  it('carry validation details', async () => {
    const error = await client.sessions.create({ sessionId: 'not an id' }).catch((thrown: unknown) => thrown);
    expect(error).toMatchObject({ code: 'invalid_id', status: 400, field: 'sessionId' });
  });
});

describe('the transport', () => {
  it('sends a fresh Idempotency-Key per write, and replays instead of writing twice when an answer is lost', async () => {
    // Prepare: the server does the first PATCH but its answer never arrives.
    const through = viaProxy();
    const sid = uniqueId('lost');
    proxy.seen.length = 0;
    proxy.plan('lose-answer');

    // Act
    const result = await through.state.patch(sid, { n: 1 });
    const other = await through.state.patch(sid, { m: 2 });
    const history = await client.versions.list(sid);

    // Assess: two attempts of the first write under one key, a different key for the second.
    const keys = proxy.seen.map((request) => request.headers['idempotency-key']);
    expect(keys).toHaveLength(3);
    expect(keys[0]).toMatch(/^[0-9a-f-]{36}$/);
    expect(keys[1]).toBe(keys[0]);
    expect(keys[2]).not.toBe(keys[0]);
    expect(result).toMatchObject({ version: 1, state: { n: 1 } });
    expect(other).toMatchObject({ version: 2 });
    expect(history.versions.map((version) => version.version)).toEqual([2, 1]);
  });

  it('uses a given Idempotency-Key, so a repeat across clients writes once', async () => {
    const sid = uniqueId('own-key');
    const first = await client.messages.append(sid, { messages: [{ role: 'user', content: 'hi' }] }, { idempotencyKey: `${sid}-turn-1` });
    const repeat = await createClient({ baseUrl: api.url, apiKey: 'dev-key' }).messages.append(
      sid,
      { messages: [{ role: 'user', content: 'hi' }] },
      { idempotencyKey: `${sid}-turn-1` },
    );
    const reused = await client.messages
      .append(sid, { messages: [{ role: 'user', content: 'other' }] }, { idempotencyKey: `${sid}-turn-1` })
      .catch((error: unknown) => error);

    expect(repeat).toEqual(first);
    expect(reused).toMatchObject({ code: 'idempotency_key_reused', status: 422 });
    expect((await client.tree.get(sid)).nodes).toHaveLength(2);
  });

  it('exposes raw requests, with the status, headers and whether the answer is a replay', async () => {
    const sid = uniqueId('raw');
    const send = () =>
      client.request<{ version: number }>(
        { method: 'PUT', path: `/v1/sessions/${sid}/state`, body: { a: 1 } },
        { idempotencyKey: `${sid}-put` },
      );

    const first = await send();
    const second = await send();

    expect(first).toMatchObject({ status: 200, replayed: false, body: { version: 1 } });
    expect(first.headers.get('etag')).toBe('"1"');
    expect(second).toMatchObject({ status: 200, replayed: true, body: { version: 1 } });
  });

  it('retries 503 and 429 (honouring Retry-After) with the same key, then succeeds', async () => {
    const through = viaProxy();
    const sid = uniqueId('retry');
    proxy.seen.length = 0;
    proxy.plan({ status: 503, code: 'unavailable' }, { status: 429, code: 'throttled', retryAfter: '0' });

    const result = await through.state.replace(sid, { ok: true });

    expect(result).toMatchObject({ version: 1, state: { ok: true } });
    expect(proxy.seen).toHaveLength(3);
    expect(new Set(proxy.seen.map((request) => request.headers['idempotency-key'])).size).toBe(1);
  });

  it('erases a user in one call: sends the DELETE again while the server answers that the erasure is still closing', async () => {
    // Prepare: a user with sessions, and the server's "still closing" answer twice (the 409 a
    // user larger than the DELETE's wait gets, with the erasure's id) before it is let through.
    const user = uniqueId('erased');
    const sids = [`${user}-a`, `${user}-b`];
    for (const sid of sids) await client.sessions.create({ sessionId: sid, userId: user });
    const through = viaProxy();
    proxy.seen.length = 0;
    const closing = { status: 409, code: 'conflict', extras: { erasureId: 'still-closing' } };
    proxy.plan(closing, closing);

    // Act
    const { erasureId } = await through.users.erase(user);

    // Assess: three DELETEs, the last one answered by the server; the user's sessions are gone.
    expect(proxy.seen.map((request) => request.method)).toEqual(['DELETE', 'DELETE', 'DELETE']);
    expect((await client.erasures.get(erasureId)).status).toMatch(/^(running|done)$/);
    for (const sid of sids) await expect(client.sessions.get(sid)).rejects.toMatchObject({ code: 'session_not_found' });
  });

  it('does not send the DELETE of an erasure again after a conflict that names no erasure', async () => {
    const through = viaProxy();
    proxy.seen.length = 0;
    proxy.plan({ status: 409, code: 'conflict' });
    await expect(through.users.erase(uniqueId('other'))).rejects.toMatchObject({ code: 'conflict' });
    expect(proxy.seen).toHaveLength(1);
  });

  it('retries network errors of reads', async () => {
    const through = viaProxy();
    proxy.plan('reset', 'reset');
    expect(await through.health()).toEqual({ ok: true });
  });

  it('gives up after its attempts with the last error', async () => {
    const through = viaProxy({ retry: { attempts: 2, baseDelayMs: 1, maxDelayMs: 1 } });
    proxy.plan({ status: 503, code: 'unavailable' }, { status: 503, code: 'unavailable' });
    await expect(through.health()).rejects.toMatchObject({ code: 'unavailable', status: 503 });
  });

  it('does not retry what a retry cannot fix', async () => {
    const through = viaProxy();
    proxy.seen.length = 0;
    await expect(through.state.patch(uniqueId('bad'), { a: 1 }, { node: 'no such node' })).rejects.toMatchObject({ code: 'invalid_id' });
    expect(proxy.seen).toHaveLength(1);
  });

  it('does not resend a write without an Idempotency-Key after a lost answer', async () => {
    const through = viaProxy();
    const sid = uniqueId('unkeyed');
    proxy.seen.length = 0;
    proxy.plan('lose-answer');

    await expect(through.state.patch(sid, { a: 1 }, { idempotencyKey: false })).rejects.toMatchObject({ code: 'network_error', status: 0 });
    expect(proxy.seen).toHaveLength(1);
    expect(proxy.seen[0]?.headers['idempotency-key']).toBeUndefined();
  });

  it('times out each attempt', async () => {
    const through = viaProxy({ timeoutMs: 150, retry: false });
    proxy.plan('hang');
    await expect(through.health()).rejects.toMatchObject({ name: 'AgentStateError', code: 'timeout', status: 0 });
  });

  it('stops at an AbortSignal, also while backing off', async () => {
    const through = viaProxy({ retry: { attempts: 5, baseDelayMs: 5_000, maxDelayMs: 5_000 } });
    // Several faults queued: a late request of an earlier test must not use up the only one.
    proxy.plan('hang', 'hang', 'hang');
    const inFlight = new AbortController();
    const pending = through.health({ signal: inFlight.signal });
    setTimeout(() => inFlight.abort(), 50);
    await expect(pending).rejects.toMatchObject({ name: 'AbortError' });

    const unavailable = { status: 503, code: 'unavailable' } as const;
    proxy.plan(unavailable, unavailable, unavailable);
    const backingOff = AbortSignal.timeout(100);
    const started = Date.now();
    await expect(through.health({ signal: backingOff })).rejects.toMatchObject({ name: 'TimeoutError' });
    expect(Date.now() - started).toBeLessThan(2_000);
    proxy.plan();
  });
});

describe('the worker helper, called by agentstate', () => {
  async function serveWorker(secret: string): Promise<{ url: string; requests: DecisionRequest[] }> {
    const requests: DecisionRequest[] = [];
    const worker = createWorker(
      (request) => {
        requests.push(request);
        const turns = (request.state as { turns?: number } | null)?.turns ?? 0;
        return { state: { turns: turns + 1 }, messages: [{ role: 'assistant', content: `turn ${turns + 1}` }] };
      },
      { secret },
    );
    const server = createServer(toNodeHandler(worker));
    servers.push(server);
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/decide`, requests };
  }

  it('verifies the real signature and answers the decision', async () => {
    const worker = await serveWorker('worker-secret');
    const agentId = uniqueId('signed');
    await client.agents.put(agentId, { worker: { url: worker.url, secret: 'worker-secret' } });

    const decided = await client.decide(uniqueId('signed'), {
      agentId,
      trigger: { type: 'client.messages', messages: [{ role: 'user', content: 'hi' }] },
    });

    expect(decided).toMatchObject({ state: { turns: 1 }, version: 1, changed: true });
    expect(worker.requests).toHaveLength(1);
    expect(worker.requests[0]).toMatchObject({
      agent_id: agentId,
      trigger: { type: 'client.messages' },
      messages: [{ role: 'user', content: 'hi' }],
    });
  });

  it('hands the worker decoded values and stores what it answers encoded, as a session handle reads and writes them', async () => {
    // Prepare: a session whose state holds a Date and a Map, written through a session handle,
    // and a worker that moves the Date a day on and counts the Map.
    const seen: unknown[] = [];
    const worker = createWorker<{ due: Date; tags: Map<string, number> }>(
      (request) => {
        seen.push(request.state);
        const due = new Date(request.state.due.getTime() + 86_400_000);
        return { state: { due, tags: new Map([...request.state.tags, ['seen', request.state.tags.size]]) } };
      },
      { secret: 'rich-secret' },
    );
    const server = createServer(toNodeHandler(worker));
    servers.push(server);
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const agentId = uniqueId('rich');
    await client.agents.put(agentId, {
      worker: { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/decide`, secret: 'rich-secret' },
    });
    const sid = uniqueId('rich');
    const handle = client.session<{ due: Date; tags: Map<string, number> }>(sid);
    await handle.replaceState({ due: new Date('2026-01-01T00:00:00.000Z'), tags: new Map([['a', 1]]) });

    // Act
    await client.decide(sid, { agentId, trigger: { type: 'tick' } });

    // Assess: the worker got real values, and a reader of the session gets the worker's.
    expect(seen).toEqual([{ due: new Date('2026-01-01T00:00:00.000Z'), tags: new Map([['a', 1]]) }]);
    expect(await handle.getState()).toEqual({
      due: new Date('2026-01-02T00:00:00.000Z'),
      tags: new Map([
        ['a', 1],
        ['seen', 1],
      ]),
    });
    expect((await client.state.get(sid)).state).toEqual({
      due: { $as: 'Date', $v: '2026-01-02T00:00:00.000Z' },
      tags: {
        $as: 'Map',
        $v: [
          ['a', 1],
          ['seen', 1],
        ],
      },
    });
  });

  it('refuses a request signed with another secret (401), so the decision fails and writes nothing', async () => {
    const worker = await serveWorker('worker-secret');
    const agentId = uniqueId('mis-signed');
    const sid = uniqueId('mis-signed');
    await client.agents.put(agentId, { worker: { url: worker.url, secret: 'not-the-secret' } });

    const failed = await client.decide(sid, { agentId, trigger: { type: 'session.start' } }).catch((error: unknown) => error);

    expect(failed).toMatchObject({ code: 'worker_failed', status: 502 });
    expect(failed instanceof AgentStateError && failed.detail).toContain('401');
    expect(worker.requests).toHaveLength(0);
    expect((await client.state.get(sid)).version).toBe(0);
  });
});

// From memory.test.ts, a file of its own before, which started a server and a client as this one
// does: its tests on this file's, each in namespaces of its own.
/**
 * `client.memory(namespace)`: memory items with the codec and schema-checked values, against
 * the server as `npm start` runs it (DynamoDB Local, its stream, the change hook).
 */
const Fact = z.object({ topic: z.string(), score: z.number(), seen: z.date().optional() });
type Fact = z.infer<typeof Fact>;

describe('client.memory(namespace)', () => {
  it('puts and gets values the codec carries, stored as tagged JSON, with versions and expiry', async () => {
    // Prepare
    const namespace = ['users', uniqueId('u'), 'facts'];
    const facts = client.memory(namespace);
    const seen = new Date('2026-05-01T10:00:00.000Z');

    // Act
    const first = await facts.put('diet', { food: 'vegan', seen, tags: new Set(['a']), big: 10n ** 20n, $odd: 1 });
    const second = await facts.put('diet', { food: 'vegetarian', seen }, { ttlSeconds: 3600 });
    const read = await facts.get('diet');
    const raw = await client.memoryItems.get(namespace, 'diet');

    // Assess
    expect(first).toMatchObject({ created: true, version: 1, namespace, key: 'diet' });
    expect(first.value).toEqual({ food: 'vegan', seen, tags: new Set(['a']), big: 10n ** 20n, $odd: 1 });
    expect(second).toMatchObject({ created: false, version: 2 });
    expect(read?.value).toEqual({ food: 'vegetarian', seen });
    expect(read?.value.seen).toBeInstanceOf(Date);
    // An expiry is kept in whole seconds (DynamoDB's TTL attribute).
    expect(Date.parse(read?.expiresAt ?? '') - Date.parse(read?.updatedAt ?? '')).toBeGreaterThan(3_599_000);
    expect(Date.parse(read?.expiresAt ?? '') - Date.parse(read?.updatedAt ?? '')).toBeLessThanOrEqual(3_600_000);
    expect(raw.value).toEqual({ food: 'vegetarian', seen: { $as: 'Date', $v: '2026-05-01T10:00:00.000Z' } });
  });

  it('reads a missing or deleted item as null, and honours If-Match and If-None-Match', async () => {
    // Prepare
    const notes = client.memory([uniqueId('notes')]);
    await notes.put('n', { text: 'one' });

    // Act
    const stale = await notes.put('n', { text: 'stale' }, { ifMatch: 7 }).catch((error: unknown) => error);
    const taken = await notes.put('n', { text: 'again' }, { ifNoneMatch: '*' }).catch((error: unknown) => error);
    const guarded = await notes.put('n', { text: 'two' }, { ifMatch: 1 });
    const refusedDelete = await notes.delete('n', { ifMatch: 1 }).catch((error: unknown) => error);
    await notes.delete('n', { ifMatch: 2 });
    await notes.delete('n');

    // Assess
    expect(stale).toMatchObject({ code: 'version_mismatch', status: 412, currentVersion: 1 });
    expect(taken).toMatchObject({ code: 'version_mismatch', currentVersion: 1 });
    expect(guarded.version).toBe(2);
    expect(refusedDelete).toMatchObject({ code: 'version_mismatch', currentVersion: 2 });
    expect(refusedDelete).toBeInstanceOf(AgentStateError);
    expect(await notes.get('n')).toBeNull();
    expect(await notes.get('never')).toBeNull();
  });

  it('checks values against the schema: a bad write sends nothing, a stored value that no longer fits throws', async () => {
    // Prepare
    const namespace = [uniqueId('typed')];
    const facts = client.memory<Fact>(namespace, { schema: Fact });
    await client.memoryItems.put(namespace, 'old', { value: { topic: 'x', score: 'high' } });

    // Act
    const badWrite = await facts.put('k', { topic: 'x', score: 'high' } as unknown as Fact).catch((error: unknown) => error);
    const nothing = await client.memoryItems.get(namespace, 'k').catch((error: unknown) => error);
    const badRead = await facts.get('old').catch((error: unknown) => error);
    const good = await facts.put('k', { topic: 'travel', score: 0.5 });

    // Assess
    expect(badWrite).toBeInstanceOf(SchemaMismatchError);
    expect(badWrite).toMatchObject({ phase: 'write', key: `${namespace[0]}/k` });
    expect(nothing).toMatchObject({ code: 'not_found' });
    expect(badRead).toBeInstanceOf(SchemaMismatchError);
    expect(badRead).toMatchObject({ phase: 'read', value: { topic: 'x', score: 'high' } });
    expect(good).toMatchObject({ version: 1, value: { topic: 'travel', score: 0.5 } });
  });

  it('refuses what is no object of fields, and item calls on the root, before sending anything', async () => {
    const root = client.memory([]);
    const some = client.memory([uniqueId('refuse')]);

    await expect(some.put('k', new Map([['a', 1]]) as never)).rejects.toBeInstanceOf(CodecError);
    await expect(some.put('k', { run: () => 1 } as never)).rejects.toBeInstanceOf(CodecError);
    await expect(root.get('k')).rejects.toBeInstanceOf(TypeError);
    expect(() => client.memory(Array.from({ length: 9 }, (_, index) => `n${index}`))).toThrow(TypeError);
    expect(await some.list()).toEqual({ namespaces: [] });
  });

  it('searches this namespace and those below it with filters over decoded values, newest first, page by page', async () => {
    // Prepare
    const user = client.memory(['users', uniqueId('search')]);
    const seen = new Date('2026-01-02T03:04:05.000Z');
    await user.child('facts').put('a', { topic: 'travel', score: 0.2, seen });
    await user.child('facts').put('b', { topic: 'travel', score: 0.9 });
    await user.child('notes').put('c', { topic: 'food', score: 0.7, $kind: 'note' });
    await user.child('notes', 'deep').put('d', { topic: 'travel', score: 0.6 });

    // Act
    const travel = await eventually('the four items searchable', async () => {
      const page = await user.search({ filter: { topic: 'travel', score: { $gte: 0.5 } } });
      return page.items.length === 2 ? page : null;
    });
    const byDate = await user.search({ filter: { seen } });
    const byDollar = await user.search({ filter: { $kind: 'note' } });
    const all: string[] = [];
    for await (const item of user.iterate({ limit: 1 })) all.push(item.key);
    const namespaces = await eventually('the namespace list', async () => {
      const list = await user.list();
      return list.namespaces.length === 3 ? list : null;
    });
    const cut = await user.list({ maxDepth: 3 });

    // Assess
    expect(travel.items.map((item) => item.key)).toEqual(['d', 'b']);
    expect(byDate.items.map((item) => item.key)).toEqual(['a']);
    expect(byDate.items[0]?.value.seen).toEqual(seen);
    expect(byDollar.items.map((item) => [item.key, item.value.$kind])).toEqual([['c', 'note']]);
    expect(all).toEqual(['d', 'c', 'b', 'a']);
    expect(namespaces.namespaces).toEqual([
      [...user.namespace, 'facts'],
      [...user.namespace, 'notes'],
      [...user.namespace, 'notes', 'deep'],
    ]);
    expect(cut.namespaces).toEqual([
      [...user.namespace, 'facts'],
      [...user.namespace, 'notes'],
    ]);
  });

  it('passes a filter the API refuses through to its 400, and lists an item’s versions decoded', async () => {
    const notes = client.memory([uniqueId('versions')]);
    await notes.put('k', { step: 1, at: new Date(0) });
    await notes.put('k', { step: 2, at: new Date(1) });

    const refused = await notes.search({ filter: { step: { $regex: '.*' } } as never }).catch((error: unknown) => error);
    const versions = await eventually('the replaced version kept', async () => {
      const page = await notes.versions('k');
      return page.versions.length === 2 ? page : null;
    });

    expect(refused).toMatchObject({ code: 'invalid_request', status: 400, field: 'filter.step' });
    expect(versions.versions.map((item) => [item.version, item.value])).toEqual([
      [2, { step: 2, at: new Date(1) }],
      [1, { step: 1, at: new Date(0) }],
    ]);
  });

  it('holds a key limited to an agent to its own namespaces: others read as absent, writes are refused', async () => {
    // Prepare
    const [own, other] = [uniqueId('own'), uniqueId('other')];
    await client.memory(['agents', other]).put('k', { secret: true });
    const limited = createClient({ baseUrl: api.url, apiKey: await limitedKey(own), agentId: own });

    // Act
    const foreign = await limited.memory(['agents', other]).get('k');
    const write = await limited
      .memory(['agents', other])
      .put('k', { taken: true })
      .catch((error: unknown) => error);
    const mine = await limited.memory(['agents', own]).put('k', { mine: true });

    // Assess
    expect(foreign).toBeNull();
    expect(write).toMatchObject({ code: 'forbidden', status: 403 });
    expect((await client.memory(['agents', other]).get('k'))?.value).toEqual({ secret: true });
    expect(mine.version).toBe(1);
  });
});

const limitedKey = (agent: string) => issueKey(dynamoDbEndpointOf(api), { agents: [agent] });
