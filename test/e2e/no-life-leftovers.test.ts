/**
 * A failed request on a session id that was never written leaves nothing that outlives a
 * bounded TTL (API.md section 12, lifetime: what a session stores stays bounded by what it
 * keeps, and nothing outlives its session). A decision takes its lease before it calls its
 * worker, as a change of the log: on an id nobody wrote, a decision that then fails (its worker
 * answers 500, times out, answers over a limit; no worker and a bad `proposed`; a key limited to
 * the agent) leaves that lease and its end where no lifetime, list or delete of a session
 * reaches (a `DELETE` of the id answers 404). Real HTTP on the DynamoDB Local `npm start` runs,
 * through the IAM gate and the OpenAPI document; the table read raw.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { tableKeys } from '../../functions/store/table/table.js';
import { dynamoDbEndpointOf, issueKey, rawTableClient, scanTable } from '../helpers/admin.js';
import { type ApiClient, apiClient, uniqueId } from '../helpers/api-client.js';
import { type RunningApi, startApi } from '../helpers/e2e.js';

let api: RunningApi;
let http: ApiClient;
let planner: ApiClient;
let raw: DynamoDBDocumentClient;
let worker: Server;
let workerUrl: string;

/** What the worker answers, by the agent it serves (the last part of its URL). */
const answers = new Map<string, { status?: number; body?: string; delayMs?: number }>();

beforeAll(async () => {
  worker = createServer(async (req, res) => {
    for await (const _chunk of req);
    const reply = answers.get(String(req.url).split('/').at(-1) ?? '') ?? {};
    if (reply.delayMs) await new Promise((resolve) => setTimeout(resolve, reply.delayMs));
    if (res.destroyed) return;
    res.writeHead(reply.status ?? 200, { 'content-type': 'application/json' });
    res.end(reply.body ?? '{}');
  });
  await new Promise<void>((resolve) => worker.listen(0, '127.0.0.1', resolve));
  workerUrl = `http://127.0.0.1:${(worker.address() as AddressInfo).port}/decide`;
  api = await startApi();
  const endpoint = dynamoDbEndpointOf(api);
  raw = rawTableClient(endpoint);
  http = api.client;
  planner = apiClient(api.url, await issueKey(endpoint, { agents: ['planner'] }));
}, 120_000);

afterAll(async () => {
  raw?.destroy();
  await api?.stop();
  await new Promise((resolve) => worker?.close(resolve));
});

/** Every item of the table, read raw and consistently. */
function scan(): Promise<Array<Record<string, unknown>>> {
  return scanTable(raw);
}

/** The items that name one of `ids` anywhere (their keys, an index's keys, any attribute). */
const naming = (items: Array<Record<string, unknown>>, ids: readonly string[]) =>
  items.filter((item) => ids.some((id) => JSON.stringify(item).includes(id)));

async function agent(agentId: string, answer: { status?: number; body?: string; delayMs?: number } | null, timeoutMs?: number) {
  const registered = await http.put(`/v1/agents/${agentId}`, {
    ...(answer ? { worker: { url: `${workerUrl}/${agentId}`, ...(timeoutMs ? { timeoutMs } : {}) } } : {}),
    config: {},
  });
  expect([200, 201]).toContain(registered.status);
  if (answer) answers.set(agentId, answer);
}

describe('a failed request on a session id never written', () => {
  it('leaves no item without a TTL after a decision that fails, in any way, for a tenant key and a limited key', async () => {
    // Prepare: agents whose workers fail each in its own way, one without a worker, and the
    // limited key's planner, whose worker fails too.
    const failing = uniqueId('w500');
    const slow = uniqueId('wslow');
    const wordy = uniqueId('wlimit');
    const silent = uniqueId('wnone');
    await agent(failing, { status: 500, body: '{"error":"boom"}' });
    await agent(slow, { delayMs: 1_500 }, 300);
    await agent(wordy, { body: JSON.stringify({ notes: 'x'.repeat(300 * 1024) }) });
    await agent(silent, null);
    await agent('planner', { status: 500 });
    const tick = { type: 'tick' };
    const cases: Array<{ name: string; run: (sid: string) => ReturnType<ApiClient['post']>; status: number }> = [
      { name: 'worker 500', run: (sid) => http.post(`/v1/sessions/${sid}/decide`, { agentId: failing, trigger: tick }), status: 502 },
      {
        name: 'worker 500, named, with a message and an Idempotency-Key',
        run: (sid) =>
          http.post(
            `/v1/sessions/${sid}/decide`,
            { agentId: failing, decisionId: `d-${sid}`, trigger: { type: 'client.messages', messages: [{ role: 'user', content: 'hi' }] } },
            { headers: { 'idempotency-key': `k-${sid}` } },
          ),
        status: 502,
      },
      { name: 'worker timeout', run: (sid) => http.post(`/v1/sessions/${sid}/decide`, { agentId: slow, trigger: tick }), status: 504 },
      {
        name: 'worker over a limit',
        run: (sid) => http.post(`/v1/sessions/${sid}/decide`, { agentId: wordy, trigger: tick }),
        status: 502,
      },
      {
        name: 'no worker, a bad proposed',
        run: (sid) => http.post(`/v1/sessions/${sid}/decide`, { agentId: silent, trigger: tick, proposed: { state: 5, messages: 'x' } }),
        status: 400,
      },
      {
        name: 'a parent it names is unknown (found after the lease)',
        run: (sid) => http.post(`/v1/sessions/${sid}/decide`, { agentId: failing, parentId: 'nope', trigger: tick }),
        status: 404,
      },
      {
        name: 'a limited key, worker 500',
        run: (sid) => planner.post(`/v1/sessions/${sid}/decide`, { trigger: tick }, { headers: { 'x-agent-id': 'planner' } }),
        status: 502,
      },
    ];
    const before = Math.floor(Date.now() / 1000);

    // Act: each case on an id of its own, twice (a retry after the failure).
    const ids: string[] = [];
    for (const { name, run, status } of cases) {
      const sid = uniqueId('never');
      ids.push(sid);
      for (let attempt = 0; attempt < 2; attempt++) expect((await run(sid)).status, name).toBe(status);
    }

    // Assess: the ids read as never written and cannot be deleted (404), as before; whatever
    // the failures left names them only with a TTL, within a day of now.
    for (const sid of ids) {
      expect((await http.get(`/v1/sessions/${sid}`)).status).toBe(404);
      expect((await http.get('/v1/sessions?limit=100')).body.sessions.map((s: { sessionId: string }) => s.sessionId)).not.toContain(sid);
    }
    const left = naming(await scan(), ids);
    const lasting = left.filter((item) => item[tableKeys.timeToLive] === undefined).map((item) => `${item.pk} ${item.sk} ${item.kind}`);
    expect(lasting).toEqual([]);
    for (const item of left) expect(Number(item[tableKeys.timeToLive])).toBeLessThanOrEqual(before + 8 * 24 * 60 * 60);
    for (const sid of ids) expect((await http.delete(`/v1/sessions/${sid}`)).status).toBe(404);
  }, 120_000);

  it('leaves nothing after any other write that fails on it: a state write, an append, a head switch, a PATCH, commits, a note, copies, decisions refused before their lease', async () => {
    // Prepare: a written session to copy from, and an agent whose worker would answer.
    const source = uniqueId('source');
    expect((await http.post(`/v1/sessions/${source}/messages`, { messages: [{ id: 'm1', role: 'user', content: 'hi' }] })).status).toBe(
      201,
    );
    const answering = uniqueId('wok');
    await agent(answering, {});
    const taken = uniqueId('taken');
    expect((await http.post('/v1/sessions', { sessionId: taken })).status).toBe(201);
    const ids: string[] = [];
    const fresh = () => {
      const sid = uniqueId('never');
      ids.push(sid);
      return sid;
    };
    const ifMatch = { headers: { 'if-match': '"3"' } };
    const thread = (expectedVersion?: number) => ({
      commands: [{ key: 'k', scope: 'thread', merge: 'disjoint', set: 1 }],
      ...(expectedVersion === undefined ? {} : { expectedVersion }),
    });

    // Act
    const statuses = {
      stateIfMatch: (await http.put(`/v1/sessions/${fresh()}/state`, { a: 1 }, ifMatch)).status,
      patchIfMatch: (await http.patch(`/v1/sessions/${fresh()}/state`, { a: 1 }, ifMatch)).status,
      appendUnknownParent: (
        await http.post(`/v1/sessions/${fresh()}/messages`, { parentId: 'nope', messages: [{ role: 'user', content: 'x' }] })
      ).status,
      appendIfMatch: (await http.post(`/v1/sessions/${fresh()}/messages`, { messages: [{ role: 'user', content: 'x' }] }, ifMatch)).status,
      head: (await http.put(`/v1/sessions/${fresh()}/head`, { nodeId: 'nope' })).status,
      patchSession: (await http.patch(`/v1/sessions/${fresh()}`, { metadata: { a: 'b' } })).status,
      commitExpected: (await http.post(`/v1/sessions/${fresh()}/commits`, thread(3))).status,
      commitUnknownNode: (await http.post(`/v1/sessions/${fresh()}/commits?node=nope`, thread())).status,
      profileWithoutUser: (
        await http.post(`/v1/sessions/${fresh()}/commits`, { commands: [{ key: 'tz', scope: 'profile', merge: 'disjoint', set: 'x' }] })
      ).status,
      note: (await http.put(`/v1/sessions/${fresh()}/nodes/root/notes/k`, { a: 1 })).status,
      copyOfNever: (await http.post(`/v1/sessions/${fresh()}/copy`, { sessionId: fresh() })).status,
      copyUnknownNode: (await http.post(`/v1/sessions/${source}/copy`, { sessionId: fresh(), node: 'nope' })).status,
      copyOntoTaken: (await http.post(`/v1/sessions/${source}/copy`, { sessionId: taken })).status,
      decideUnknownAgent: (await http.post(`/v1/sessions/${fresh()}/decide`, { agentId: uniqueId('nobody'), trigger: { type: 'tick' } }))
        .status,
      limitedAsAnother: (
        await planner.post(`/v1/sessions/${fresh()}/decide`, { trigger: { type: 'tick' } }, { headers: { 'x-agent-id': answering } })
      ).status,
    };

    // Assess: each was refused, and nothing names the ids without a TTL (nothing at all, in fact).
    for (const [name, status] of Object.entries(statuses)) expect(status, name).toBeGreaterThanOrEqual(400);
    for (const [name, status] of Object.entries(statuses)) expect(status, name).toBeLessThan(500);
    const left = naming(await scan(), ids).map((item) => `${item.pk} ${item.sk} ${item.kind} ${item[tableKeys.timeToLive]}`);
    expect(left).toEqual([]);
    for (const sid of ids) expect((await http.get(`/v1/sessions/${sid}`)).status).toBe(404);
  }, 120_000);
});
