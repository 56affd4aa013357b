import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { session as sessionKey } from '../../functions/store/table/keys.js';
import { tableKeys } from '../../functions/store/table/table.js';
import { dynamoDbEndpointOf, rawTableClient, scanTable } from '../helpers/admin.js';
import { type ApiClient, apiClient, uniqueId } from '../helpers/api-client.js';
import { type RunningApi, startApi } from '../helpers/e2e.js';
import { EventFixtures, waitFor } from '../helpers/events.js';
import { type StartedServerProcess, startServerProcess } from '../helpers/server.js';

/**
 * A copy (`POST /v1/sessions/{sid}/copy`, API.md section 12) is all or nothing to everyone
 * else: while it is written, its id reads as unknown and is in no list; once it answers, the
 * whole copy is there. A copy whose process is killed midway leaves nothing readable, sends no
 * change event, and what it wrote carries a TTL on its session item. Through real HTTP.
 */

let api: RunningApi;
let http: ApiClient;
const watching = new EventFixtures(() => api.serverUrl);

beforeAll(async () => {
  api = await startApi({}, { everyCallThroughGate: true });
  http = api.client;
}, 60_000);
afterAll(async () => {
  await watching.close();
  await api?.stop();
});

/** A path of `turns` appends of 50 messages, each with a state of its own: the copy is as many appends. */
async function longSource(client: ApiClient, turns: number, userId?: string): Promise<string> {
  const sid = uniqueId('copy-long');
  if (userId !== undefined) expect((await client.post('/v1/sessions', { sessionId: sid, userId })).status).toBe(201);
  expect((await client.put(`/v1/sessions/${sid}/state`, { turn: 0 })).status).toBe(200);
  for (let turn = 1; turn <= turns; turn++) {
    const messages = Array.from({ length: 50 }, (_, index) => ({
      id: `m${turn}-${index}`,
      role: index % 2 === 0 ? 'user' : 'assistant',
      content: `turn ${turn}, message ${index}: ${'words '.repeat(20)}`,
    }));
    const appended = await client.post(`/v1/sessions/${sid}/messages`, { messages, state: { turn } });
    expect(appended.status, appended.text).toBe(201);
  }
  return sid;
}

/** What a reader sees of `id`: each read's status and what it says. */
async function look(client: ApiClient, id: string) {
  const [session, state, messages, tree, nodes, list] = await Promise.all([
    client.get(`/v1/sessions/${id}`),
    client.get(`/v1/sessions/${id}/state`),
    client.get(`/v1/sessions/${id}/messages?limit=1000`),
    client.get(`/v1/sessions/${id}/tree`),
    client.get(`/v1/sessions/${id}/nodes?limit=5`),
    client.get(`/v1/sessions?prefix=${encodeURIComponent(id)}`),
  ]);
  return {
    session: session.status === 200 ? { head: session.body.head, version: session.body.version } : session.status,
    state: { state: state.body.state, version: state.body.version },
    messages: messages.status === 200 ? messages.body.messages.length : messages.status,
    tree: tree.status === 200 ? tree.body.nodes.length : tree.status,
    nodes: nodes.status === 200 ? nodes.body.nodes.map((node: { id: string }) => node.id) : nodes.status,
    listed: list.body.sessions.some((listed: { sessionId: string }) => listed.sessionId === id),
  };
}

const unknown = { session: 404, state: { state: null, version: 0 }, messages: 404, tree: 404, nodes: 404, listed: false };

describe('a copy while it is written', () => {
  it('reads as unknown to every reader until it answers, then whole, and then sends the events of its versions', async () => {
    // Prepare: a path of 600 messages in 12 states, and a webhook on the copy's id.
    const from = await longSource(http, 12);
    const target = uniqueId('copy-watched');
    const receiver = await watching.receiver();
    expect((await http.post('/v1/webhooks', { url: receiver.url, sessionId: target })).status).toBe(201);

    // Act: readers look at the target id over and over while the copy runs.
    let answered = false;
    const copying = http.post(`/v1/sessions/${from}/copy`, { sessionId: target }).finally(() => {
      answered = true;
    });
    const seen: Array<Awaited<ReturnType<typeof look>>> = [];
    while (!answered) seen.push(await look(http, target));
    const copied = await copying;
    const whole = await look(http, target);

    // Assess: each look is the unknown id or the whole copy, nothing between.
    expect(copied.status, copied.text).toBe(201);
    expect(whole).toEqual({
      session: { head: 'm12-49', version: 13 },
      state: { state: { turn: 12 }, version: 13 },
      messages: 600,
      tree: 601,
      nodes: ['m9-9', 'm9-8', 'm9-7', 'm9-6', 'm9-5'],
      listed: true,
    });
    const events = await waitFor('the events of the copy', () => (receiver.accepted().length >= 13 ? receiver.accepted() : null), 30_000);
    expect(events.map((event) => [event.sessionId, event.version, event.next])).toEqual(
      Array.from({ length: 13 }, (_, index) => [target, index + 1, { turn: index }]),
    );
    // A look's six reads run at once, so one look may straddle the opening: each read on its own
    // is the unknown id's answer or the whole copy's, never a part of the copy.
    expect(seen.length).toBeGreaterThanOrEqual(3);
    const between = seen.flatMap((one) =>
      (Object.keys(unknown) as Array<keyof typeof unknown>)
        .filter((read) => ![unknown[read], whole[read]].some((either) => JSON.stringify(either) === JSON.stringify(one[read])))
        .map((read) => ({ read, saw: one[read] })),
    );
    expect(between).toEqual([]);
  }, 120_000);
});

describe("a copy of a user's session while the user is erased", () => {
  it('is erased with the user: nothing of it is readable or listed afterwards', async () => {
    // Prepare: a long source of the user.
    const user = uniqueId('copy-user');
    const from = await longSource(http, 12, user);
    const target = uniqueId('copy-erased');
    const raw = rawTableClient(dynamoDbEndpointOf(api));

    // Act: the user's erasure starts once the copy has written some of its log.
    const copying = http.post(`/v1/sessions/${from}/copy`, { sessionId: target });
    await waitFor(
      'the copy to write some of its log',
      async () =>
        (await scanTable(raw, sessionKey({ tenant: 'local', sessionId: target }))).filter((item) => String(item.sk).startsWith('V#'))
          .length >= 3 || null,
      60_000,
      20,
    );
    const erase = await http.delete(`/v1/users/${user}`);
    const copied = await copying;
    const erasure = await waitFor(
      'the erasure to be done',
      async () => {
        const answer = await http.get(`/v1/erasures/${erase.body.erasureId}`);
        return answer.body.status === 'done' ? answer.body : null;
      },
      30_000,
      100,
    );
    const after = await look(http, target);
    const usersList = await http.get(`/v1/sessions?userId=${user}`);
    raw.destroy();

    // Assess: the copy was closed midway (409) or opened just before the erasure closed it (201);
    // either way nothing of it is left.
    expect(erase.status).toBe(202);
    expect([201, 409], copied.text).toContain(copied.status);
    expect(erasure).toMatchObject({ status: 'done' });
    expect(after).toEqual(unknown);
    expect(usersList.body.sessions).toEqual([]);
  }, 120_000);
});

describe('a copy closed right after it opened', () => {
  it('answers 409 conflict, not 404, when a DELETE of the id lands between its opening and its answer', async () => {
    // Prepare: a short source, and the copy's reads of its own session item held back 2 s, so
    // that the DELETE lands after the copy opened and before the copy reads what it opened.
    const from = await longSource(http, 1);
    const target = uniqueId('copy-deleted');
    // (The session item is read with its metadata item, in one Query of `S` to `SM`: session-read.ts.)
    const held = api.slow(
      (call) => call.fn === 'tree' && call.operation === 'Query' && call.body.includes(target) && call.body.includes(':metadata'),
      2_000,
    );

    // Act: the DELETE as soon as the copy reads as whole.
    const copying = http.post(`/v1/sessions/${from}/copy`, { sessionId: target });
    await waitFor('the copy to open', async () => ((await http.get(`/v1/sessions/${target}`)).status === 200 ? true : null), 30_000, 20);
    const deleted = await http.delete(`/v1/sessions/${target}`);
    const copied = await copying;
    held();

    // Assess: the copy answers as for a session closed while it was made (API.md section 12),
    // not 404, which would say the source is unknown; the source is untouched, the copy gone.
    expect(deleted.status).toBe(204);
    expect(copied.status, copied.text).toBe(409);
    expect(copied.body.code).toBe('conflict');
    expect((await http.get(`/v1/sessions/${target}`)).status).toBe(404);
    expect((await http.get(`/v1/sessions/${from}`)).status).toBe(200);
  }, 60_000);
});

describe('a copy whose server is killed midway', () => {
  let dataDir: string;
  let server: StartedServerProcess | undefined;
  const fixtures = new EventFixtures(() => server?.url ?? '');

  beforeAll(() => {
    dataDir = mkdtempSync(join(tmpdir(), 'agentstate-copy-kill-'));
  });
  afterAll(async () => {
    await fixtures.close();
    await server?.stop();
    rmSync(dataDir, { recursive: true, force: true });
  });

  const start = () => startServerProcess({ env: { AGENTSTATE_DATA: dataDir, AGENTSTATE_API_KEYS: 'local:dev-key' } });

  it('leaves nothing readable, sends no event of it, and gives its session item a TTL', async () => {
    // Prepare: a long source on disk, and a webhook on the copy's id (and on a session written after).
    server = await start();
    let client = apiClient(server.url);
    const from = await longSource(client, 16);
    const target = uniqueId('copy-killed');
    const later = uniqueId('after-kill');
    const receiver = await fixtures.receiver();
    for (const sessionId of [target, later]) {
      expect((await client.post('/v1/webhooks', { url: receiver.url, sessionId })).status).toBe(201);
    }
    const raw = rawTableClient(dynamoDbEndpointOf(server));

    // Act: the copy runs until some of its changes are in the table, then the server and its
    // DynamoDB Local are killed (SIGKILL) and started again on the same data.
    const copying = client.post(`/v1/sessions/${from}/copy`, { sessionId: target }).catch(() => null);
    await waitFor(
      'the copy to write some of its log',
      async () =>
        (await scanTable(raw, sessionKey({ tenant: 'local', sessionId: target }))).filter((item) => String(item.sk).startsWith('V#'))
          .length >= 4 || null,
      60_000,
      20,
    );
    // Long enough for the changes written so far to reach the change hook and the receiver.
    await new Promise((wake) => setTimeout(wake, 1500));
    server.child.kill('SIGKILL');
    process.kill(server.javaPid(), 'SIGKILL');
    await server.exited;
    await copying;
    raw.destroy();
    server = await start();
    client = apiClient(server.url);
    const after = await look(client, target);
    // A write the change hook sends an event of, after which the copy's would have come.
    expect((await client.put(`/v1/sessions/${later}/state`, { after: true })).status).toBe(200);
    await waitFor(
      'the event of the write after the restart',
      () => receiver.accepted().some((event) => event.sessionId === later) || null,
      30_000,
    );
    const items = await scanTable(rawTableClient(dynamoDbEndpointOf(server)), sessionKey({ tenant: 'local', sessionId: target }));

    // Assess
    expect(after).toEqual(unknown);
    expect(receiver.accepted().filter((event) => event.sessionId === target)).toEqual([]);
    const sessionItem = items.find((item) => item.sk === 'S');
    expect(typeof sessionItem?.[tableKeys.timeToLive]).toBe('number');
  }, 240_000);
});
