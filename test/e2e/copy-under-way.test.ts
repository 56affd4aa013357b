import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { session as sessionKey } from '../../functions/store/table/keys.js';
import { adminCli, dynamoDbEndpointOf, rawTableClient, scanTable } from '../helpers/admin.js';
import { type ApiClient, apiClient, uniqueId } from '../helpers/api-client.js';
import { type RunningApi, startApi } from '../helpers/e2e.js';
import { EventFixtures, waitFor } from '../helpers/events.js';

/**
 * What others' requests about an id do while a copy (`POST /v1/sessions/{sid}/copy`, API.md
 * section 12) writes it, before it opens its session. The copy is in every list an erasure
 * walks, so a user's erasure (`DELETE /v1/users/{userId}`) or a whole tenant's (`agentstate
 * tenants erase`) closes and erases it like any session of theirs, however late the copy would
 * have opened; a `DELETE` of the id answers as for an unknown id and leaves the copy be; a
 * WebSocket subscription to the id is answered as for an unknown id, and receives the copy's
 * versions once it opens. Through real HTTP on DynamoDB Local, the copy's own DynamoDB calls
 * made slow (`slowCopy`) so that the others land while it writes.
 */

let api: RunningApi;
let http: ApiClient;
let endpoint: string;
const watching = new EventFixtures(() => api.serverUrl);

beforeAll(async () => {
  api = await startApi({}, { everyCallThroughGate: true });
  http = api.client;
  endpoint = dynamoDbEndpointOf(api);
}, 60_000);
afterAll(async () => {
  await watching.close();
  await api?.stop();
});

/**
 * A path in one state: `turns` appends of 50 messages after the first state. Its copy reads the
 * source's state once, at its start, and then only writes, an append for each, so it goes on
 * whatever happens to the source meanwhile.
 */
async function longSource(client: ApiClient, turns: number, userId?: string): Promise<string> {
  const sid = uniqueId('copy-src');
  if (userId !== undefined) expect((await client.post('/v1/sessions', { sessionId: sid, userId })).status).toBe(201);
  expect((await client.put(`/v1/sessions/${sid}/state`, { topic: 'long' })).status).toBe(200);
  for (let turn = 1; turn <= turns; turn++) {
    const messages = Array.from({ length: 50 }, (_, index) => ({
      id: `m${turn}-${index}`,
      role: index % 2 === 0 ? 'user' : 'assistant',
      content: `turn ${turn}, message ${index}: ${'words '.repeat(20)}`,
    }));
    const appended = await client.post(`/v1/sessions/${sid}/messages`, { messages });
    expect(appended.status, appended.text).toBe(201);
  }
  return sid;
}

/**
 * Makes every DynamoDB call of the copy into `target` 400 ms slower (iam-gate.ts `slow`; the
 * change hook's calls, an erasure's, and the WebSocket API's go on at their pace). Erasing the copy's source costs about
 * what the copy writes, so on DynamoDB Local a copy answers before an erasure of the source is
 * done; made slow, it is still writing when the erasure is done, as a copy of a large session
 * beside an erasure of a user with little else would be.
 */
function slowCopy(tenant: string, target: string): () => void {
  const partition = JSON.stringify(sessionKey({ tenant, sessionId: target }));
  return api.slow(({ fn, body }) => !/hook|websocket/.test(fn) && body.includes(partition), 400);
}

/** Resolves once the copy into `target` (tenant `tenant`) has written `count` changes of its log. */
async function copyHasWritten(tenant: string, target: string, count: number): Promise<void> {
  const raw = rawTableClient(endpoint);
  try {
    await waitFor(
      'the copy to write some of its log',
      async () =>
        (await scanTable(raw, sessionKey({ tenant, sessionId: target }))).filter((item) => String(item.sk).startsWith('V#')).length >=
          count || null,
      60_000,
      20,
    );
  } finally {
    raw.destroy();
  }
}

/** What anyone reads of `id`: the session, its state, its messages, and whether a list shows it. */
async function readable(client: ApiClient, id: string, userId?: string) {
  const [session, state, messages, list] = await Promise.all([
    client.get(`/v1/sessions/${id}`),
    client.get(`/v1/sessions/${id}/state`),
    client.get(`/v1/sessions/${id}/messages?limit=5`),
    client.get(userId === undefined ? `/v1/sessions?prefix=${encodeURIComponent(id)}` : `/v1/sessions?userId=${userId}`),
  ]);
  return {
    session: session.status,
    state: { state: state.body.state, version: state.body.version },
    messages: messages.status,
    listed: list.body.sessions.map((listed: { sessionId: string }) => listed.sessionId),
  };
}

const unknown = { session: 404, state: { state: null, version: 0 }, messages: 404, listed: [] };

describe("a copy of a user's session that opens after the user's erasure is done", () => {
  it('is closed by the erasure all the same: it never opens, and nothing of it is readable or listed', async () => {
    // Prepare: a long source of the user, in one state.
    const user = uniqueId('copy-user');
    const from = await longSource(http, 8, user);
    const target = uniqueId('copy-late');
    const fast = slowCopy('local', target);

    // Act: the user's erasure starts once the copy has written some of its log, and is done
    // (its last pass over the user's list behind it) before the copy answers.
    let copied: Awaited<ReturnType<ApiClient['post']>> | undefined;
    const copying = http.post(`/v1/sessions/${from}/copy`, { sessionId: target }).then((answer) => {
      copied = answer;
      return answer;
    });
    await copyHasWritten('local', target, 2);
    const erase = await http.delete(`/v1/users/${user}`);
    const erasure = await waitFor(
      'the erasure to be done',
      async () => {
        const answer = await http.get(`/v1/erasures/${erase.body.erasureId}`);
        return answer.body.status === 'done' ? answer.body : null;
      },
      60_000,
      50,
    );
    const openedBeforeDone = (copied as { status: number } | undefined)?.status === 201;
    // The interleaving is made (the erasure done, the copy not open): the rest of the copy at its pace.
    fast();
    const answer = await copying;
    const after = await readable(http, target, user);

    // Assess: the interleaving wanted (the copy had not opened when the erasure was done); the
    // copy was closed under it (409), and the id reads as unknown, listed nowhere.
    expect(erase.status).toBe(202);
    expect(openedBeforeDone, 'the copy opened before the erasure was done: slow it more').toBe(false);
    expect(erasure).toMatchObject({ status: 'done', sessions: 2 });
    expect(answer.status, answer.text).toBe(409);
    expect(after).toEqual(unknown);
  }, 240_000);
});

describe("a copy under way while its tenant's data is erased", () => {
  it('is erased with the tenant: it never opens, and nothing of it is readable', async () => {
    // Prepare: a long source of the tenant `other`, in one state.
    const other = apiClient(api.url, 'other-key');
    const from = await longSource(other, 8);
    const target = uniqueId('copy-tenant');
    const fast = slowCopy('other', target);

    // Act: the tenant is erased (its keys kept, the server's own) while the copy writes.
    let copied: Awaited<ReturnType<ApiClient['post']>> | undefined;
    const copying = other.post(`/v1/sessions/${from}/copy`, { sessionId: target }).then((answer) => {
      copied = answer;
      return answer;
    });
    await copyHasWritten('other', target, 2);
    const erased = JSON.parse(await adminCli(endpoint, 'tenants', 'erase', 'other', '--confirm', 'other', '--keep-keys', '--json'));
    const openedBeforeDone = (copied as { status: number } | undefined)?.status === 201;
    // The interleaving is made (the tenant erased, the copy not open): the rest of the copy at its pace.
    fast();
    const answer = await copying;
    const after = await readable(other, target);
    const raw = rawTableClient(endpoint);
    const left = await scanTable(raw, sessionKey({ tenant: 'other', sessionId: target }));
    raw.destroy();

    // Assess: the copy had not opened when the erasure was done, was closed under it, and its
    // log is a deleted session's (tombstones and the fence), its session item gone.
    expect(openedBeforeDone, 'the copy opened before the tenant was erased: slow it more').toBe(false);
    expect(erased).toMatchObject({ tenant: 'other', status: 'done', sessions: 2 });
    expect(answer.status, answer.text).toBe(409);
    expect(after).toEqual(unknown);
    // (An index put the copy sent just before the erasure closed it may land after the erase; the
    // copy deletes it when its claim then fails on the fence: straggler-index.test.ts holds that.)
    expect(left.filter((item) => String(item.sk).startsWith('V#') && item.kind !== 'x')).toEqual([]);
    expect(left.filter((item) => item.sk === 'S')).toEqual([]);
  }, 240_000);
});

describe('a DELETE of the id while a copy writes it', () => {
  it('answers as for an unknown id and leaves the copy be: it opens whole', async () => {
    // Prepare
    const from = await longSource(http, 4);
    const target = uniqueId('copy-deleted');
    const fast = slowCopy('local', target);

    // Act: the id is deleted while the copy writes it.
    const copying = http.post(`/v1/sessions/${from}/copy`, { sessionId: target });
    await copyHasWritten('local', target, 2);
    const deleted = await http.delete(`/v1/sessions/${target}`);
    // The interleaving is made (the DELETE answered while the copy writes): the rest of the copy at its pace.
    fast();
    const answer = await copying;
    const session = await http.get(`/v1/sessions/${target}`);

    // Assess: the DELETE found no session (the copy reads as unknown until it opens), and the copy is whole.
    expect(deleted.status, deleted.text).toBe(404);
    expect(answer.status, answer.text).toBe(201);
    expect(session.body).toMatchObject({ head: 'm4-49', version: 1 });
  }, 120_000);
});

describe('a WebSocket subscription to the id while a copy writes it', () => {
  it('is answered as for an unknown id, and receives the versions of the copy once it opens', async () => {
    // Prepare: a source of four states (the copy's versions 1 to 4) and a last turn without one
    // (so the copy's last append is the change that opens it, session-copy.ts), and a live connection.
    const from = uniqueId('copy-states');
    expect((await http.put(`/v1/sessions/${from}/state`, { turn: 0 })).status).toBe(200);
    for (let turn = 1; turn <= 4; turn++) {
      const messages = Array.from({ length: 50 }, (_, index) => ({ id: `m${turn}-${index}`, role: 'user', content: `message ${index}` }));
      const state = turn <= 3 ? { state: { turn } } : {};
      expect((await http.post(`/v1/sessions/${from}/messages`, { messages, ...state })).status).toBe(201);
    }
    const target = uniqueId('copy-followed');
    const fast = slowCopy('local', target);
    const live = await watching.live('dev-key');

    // Act: the subscription is sent once the copy has written its four versions, before it opens.
    let copied = false;
    const copying = http.post(`/v1/sessions/${from}/copy`, { sessionId: target }).finally(() => {
      copied = true;
    });
    await copyHasWritten('local', target, 4);
    live.send({ action: 'subscribe', sessionId: target });
    const answered = await waitFor('the answer to the subscription', () =>
      live.messages.find((message) => message.type !== 'state.changed'),
    );
    const underWay = !copied;
    // The interleaving is made (the subscription answered while the copy writes): the rest of the copy at its pace.
    fast();
    const answer = await copying;
    const events = await waitFor('the events of the copy', () => (live.events().length >= 4 ? live.events() : null), 30_000);

    // Assess: subscribed while the copy was under way (it answered later), then each version of
    // the copy, in order (each written before the subscription: its opening releases them).
    expect(answered).toEqual({ type: 'subscribed', sessionId: target });
    expect(underWay).toBe(true);
    expect(answer.status, answer.text).toBe(201);
    expect(answer.body).toMatchObject({ head: 'm4-49', version: 4 });
    expect(events.map((event) => [event.sessionId, event.version, event.next])).toEqual(
      Array.from({ length: 4 }, (_, index) => [target, index + 1, { turn: index }]),
    );
  }, 120_000);
});
