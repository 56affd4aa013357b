/**
 * A session id that nobody ever wrote has no lifetime to run out (API.md sections 2 and 12):
 * under a deployment's idle lifetime, decisions that fail on such an id leave only provisional
 * changes (a lease and its end, with the table's TTL), and once the idle time has passed a
 * `DELETE` of the id still answers `404 session_not_found` and leaves nothing, and no
 * `session.expired` event is sent for it. A session made with `POST` and never written is a
 * session: it expires, and its expiry is carried out with its event. Real HTTP on the DynamoDB
 * Local `npm start` runs (through the IAM gate and the OpenAPI document), a webhook receiver on
 * loopback, the table read raw; the idle lifetime is 3 s and the test waits it out.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { tableKeys } from '../../functions/store/table/table.js';
import { dynamoDbEndpointOf, issueKey, rawTableClient, scanTable } from '../helpers/admin.js';
import { type ApiClient, apiClient, uniqueId } from '../helpers/api-client.js';
import { type RunningApi, startApi } from '../helpers/e2e.js';
import { EventFixtures, waitFor } from '../helpers/events.js';

/** The deployment's idle lifetime in this file. */
const IDLE_SECONDS = 3;

let api: RunningApi;
let http: ApiClient;
let planner: ApiClient;
let raw: DynamoDBDocumentClient;
let worker: Server;
let workerUrl: string;
const fixtures = new EventFixtures(() => api.url);

beforeAll(async () => {
  // A worker that always fails.
  worker = createServer(async (req, res) => {
    for await (const _chunk of req);
    res.writeHead(500, { 'content-type': 'application/json' }).end('{"error":"boom"}');
  });
  await new Promise<void>((resolve) => worker.listen(0, '127.0.0.1', resolve));
  workerUrl = `http://127.0.0.1:${(worker.address() as AddressInfo).port}/decide`;
  api = await startApi({ AGENTSTATE_SESSION_TTL_DAYS: String(IDLE_SECONDS / 86_400) });
  const endpoint = dynamoDbEndpointOf(api);
  raw = rawTableClient(endpoint);
  http = api.client;
  planner = apiClient(api.url, await issueKey(endpoint, { agents: ['planner'] }));
}, 120_000);

afterAll(async () => {
  raw?.destroy();
  await fixtures.close();
  await api?.stop();
  await new Promise((resolve) => worker?.close(resolve));
});

/** Every item of the table that names one of `ids`, read raw and consistently. */
async function itemsNaming(ids: readonly string[]): Promise<Array<Record<string, unknown>>> {
  return (await scanTable(raw)).filter((item) => ids.some((id) => JSON.stringify(item).includes(id)));
}

describe('a session id never written, under a deployment idle lifetime', () => {
  it('still answers a DELETE with 404 once the idle time has passed after failed decisions, leaves nothing lasting and sends no session.expired', async () => {
    // Prepare: a webhook for every event of the tenant, an agent whose worker fails, the limited
    // key's planner (failing too), and a session made with POST, never written.
    const target = await fixtures.receiver();
    expect((await http.post('/v1/webhooks', { url: target.url })).status).toBe(201);
    const failing = uniqueId('w500');
    for (const agentId of [failing, 'planner']) {
      expect([200, 201]).toContain((await http.put(`/v1/agents/${agentId}`, { worker: { url: workerUrl }, config: {} })).status);
    }
    const tick = { type: 'tick' };
    const byTenant = uniqueId('never');
    const byLimited = uniqueId('never');
    const posted = uniqueId('posted');
    expect((await http.post('/v1/sessions', { sessionId: posted })).status).toBe(201);

    // Act: decisions that fail (twice on one id: a retry), then the idle time passes.
    for (const sid of [byTenant, byTenant, posted]) {
      expect((await http.post(`/v1/sessions/${sid}/decide`, { agentId: failing, trigger: tick })).status).toBe(502);
    }
    const limited = await planner.post(`/v1/sessions/${byLimited}/decide`, { trigger: tick }, { headers: { 'x-agent-id': 'planner' } });
    expect(limited.status).toBe(502);
    await new Promise((resolve) => setTimeout(resolve, IDLE_SECONDS * 1000 + 1_000));
    const never = [byTenant, byLimited];
    const reads = await Promise.all([...never, posted].map((sid) => http.get(`/v1/sessions/${sid}`)));
    const listed = (await http.get('/v1/sessions?limit=500')).body.sessions.map((s: { sessionId: string }) => s.sessionId);
    const deletes = await Promise.all(never.map((sid) => http.delete(`/v1/sessions/${sid}`)));
    const left = await itemsNaming(never);

    // Assess: read as never written, not deletable, and nothing lasting names them.
    expect(reads.map((read) => read.status)).toEqual([404, 404, 404]);
    expect(listed.filter((sid: string) => [...never, posted].includes(sid))).toEqual([]);
    expect(deletes.map((deleted) => [deleted.status, deleted.body?.code])).toEqual([
      [404, 'session_not_found'],
      [404, 'session_not_found'],
    ]);
    const lasting = left.filter((item) => item[tableKeys.timeToLive] === undefined).map((item) => `${item.pk} ${item.sk} ${item.kind}`);
    expect(lasting).toEqual([]);

    // Act: a write to each id starts it; the posted session's expiry is carried out by its write.
    for (const sid of [...never, posted]) {
      const written = await http.put(`/v1/sessions/${sid}/state`, { fresh: true });
      expect(written.status).toBe(200);
      expect(written.body).toMatchObject({ version: 1 });
    }

    // Assess: each id's first version is an event, and only the posted session expired (its
    // event comes before its version's, in the session's order; so would any of the others').
    const events = await waitFor(
      'the first version of each id and the posted session’s expiry',
      () => {
        const received = target.accepted();
        const seen = (type: string, sid: string) => received.some((event) => event.type === type && event.sessionId === sid);
        const all = [...never, posted].every((sid) => seen('state.changed', sid)) && seen('session.expired', posted);
        return all ? received : null;
      },
      30_000,
    );
    const expired = events.filter((event) => event.type === 'session.expired').map((event) => event.sessionId);
    expect(expired.filter((sid: string) => [...never, posted].includes(sid))).toEqual([posted]);
  }, 120_000);
});
