import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ApiClient, apiClient, uniqueId } from '../helpers/api-client.js';
import { type RunningApi, startApi } from '../helpers/e2e.js';
import { connectLive, EventFixtures, expectedSignature, type LiveClient, waitFor } from '../helpers/events.js';

/**
 * Change events end to end (API.md section 9): the server as `npm start` runs it, its stream
 * read from DynamoDB Local, webhooks POSTed to receivers on loopback, WebSocket clients.
 */

let api: RunningApi;
let http: ApiClient;
let other: ApiClient;
const fixtures = new EventFixtures(() => api.url);

beforeAll(async () => {
  api = await startApi();
  http = api.client;
  other = apiClient(api.url, 'other-key');
});
afterAll(async () => {
  await fixtures.close();
  await api?.stop();
});

const receiver = (status = 200) => fixtures.receiver(status);
const live = (token: string) => fixtures.live(token);

async function subscribe(client: LiveClient, sessionId: string): Promise<void> {
  client.send({ action: 'subscribe', sessionId });
  await waitFor(`the subscribe ack for ${sessionId}`, () =>
    client.messages.find((message) => message.type === 'subscribed' && message.sessionId === sessionId),
  );
}

async function hook(client: ApiClient, body: Record<string, unknown>): Promise<string> {
  const created = await client.post('/v1/webhooks', body);
  expect(created.status, created.text).toBe(201);
  return created.body.id as string;
}

describe('webhooks', () => {
  it('registers, lists, reads and deletes webhooks per tenant, never returning the secret', async () => {
    // Prepare
    const target = await receiver();

    // Act
    const created = await http.post('/v1/webhooks', { url: target.url, secret: 'shh', sessionId: 'only-this' });
    const second = await http.post('/v1/webhooks', { url: target.url });
    const firstPage = await http.get('/v1/webhooks?limit=1');
    const secondPage = await http.get(`/v1/webhooks?limit=1&cursor=${firstPage.body.next}`);
    const theirs = await other.get(`/v1/webhooks/${created.body.id}`);
    const theirDelete = await other.delete(`/v1/webhooks/${created.body.id}`);
    const deleted = await http.delete(`/v1/webhooks/${created.body.id}`);
    const again = await http.delete(`/v1/webhooks/${created.body.id}`);
    await http.delete(`/v1/webhooks/${second.body.id}`);

    // Assess
    expect(created.status).toBe(201);
    expect(created.headers.get('location')).toBe(`/v1/webhooks/${created.body.id}`);
    expect(created.body).toEqual({
      id: expect.any(String),
      url: target.url,
      sessionId: 'only-this',
      hasSecret: true,
      createdAt: expect.any(String),
    });
    expect(created.text).not.toContain('shh');
    expect(second.body).toMatchObject({ sessionId: null, hasSecret: false });
    // Newest first.
    expect(firstPage.body.webhooks.map((webhook: { id: string }) => webhook.id)).toEqual([second.body.id]);
    expect(secondPage.body.webhooks.map((webhook: { id: string }) => webhook.id)).toEqual([created.body.id]);
    expect(theirs.status).toBe(404);
    expect(theirDelete.body).toMatchObject({ status: 404, code: 'not_found' });
    expect(deleted.status).toBe(204);
    expect(again.body).toMatchObject({ status: 404, code: 'not_found' });
  });

  it.each([
    ['ftp://127.0.0.1/hook', 'not http(s)'],
    ['http://example.com/hook', 'http to a host that is not loopback'],
    ['https://user:pw@example.com/hook', 'credentials in the URL'],
    ['not a url', 'not a URL'],
  ])('refuses %s (%s)', async (url) => {
    const answer = await http.post('/v1/webhooks', { url });
    expect(answer.status).toBe(400);
    expect(answer.body).toMatchObject({ code: 'invalid_request', field: 'url' });
  });

  it('refuses unknown members and bad session ids', async () => {
    expect((await http.post('/v1/webhooks', { url: 'https://example.com', events: ['*'] })).body).toMatchObject({
      code: 'invalid_request',
    });
    expect((await http.post('/v1/webhooks', { url: 'https://example.com', sessionId: 'a b' })).body).toMatchObject({
      code: 'invalid_id',
      field: 'sessionId',
    });
  });

  it('delivers one signed event per recorded version, in order, with prev and next, and none for a write that changes nothing', async () => {
    // Prepare
    const sid = uniqueId('events');
    const target = await receiver();
    const webhookId = await hook(http, { url: target.url, secret: 'hook-secret', sessionId: sid });

    // Act
    await http.patch(`/v1/sessions/${sid}/state`, { a: 1 });
    await http.patch(`/v1/sessions/${sid}/state`, { b: 2 }, { headers: { 'x-agent-id': 'planner' } });
    await http.put(`/v1/sessions/${sid}/state`, { c: 3 });
    const noop = await http.put(`/v1/sessions/${sid}/state`, { c: 3 });
    await http.patch(`/v1/sessions/${sid}/state`, { d: 4 });
    // Version 4 follows the no-op; events arrive in version order, so once it is here, an
    // event for the no-op would have been too.
    await waitFor('four events', () => target.accepted().length >= 4);
    await http.delete(`/v1/webhooks/${webhookId}`);

    // Assess
    expect(noop.body.changed).toBe(false);
    const events = target.accepted();
    expect(events.map((event) => event.id)).toEqual([`${sid}:1`, `${sid}:2`, `${sid}:3`, `${sid}:4`]);
    expect(events[0]).toEqual({
      id: `${sid}:1`,
      type: 'state.changed',
      sessionId: sid,
      node: 'root',
      version: 1,
      prevVersion: 0,
      cause: 'patch',
      author: null,
      decisionId: null,
      next: { a: 1 },
      prev: null,
      patch: { a: 1 },
      agent: null,
      occurredAt: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/),
    });
    expect(events[1]).toMatchObject({
      version: 2,
      prevVersion: 1,
      author: 'planner',
      prev: { a: 1 },
      next: { a: 1, b: 2 },
      patch: { b: 2 },
    });
    expect(events[2]).toMatchObject({ version: 3, prevVersion: 2, cause: 'replace', prev: { a: 1, b: 2 }, next: { c: 3 } });
    expect(events[2]?.patch).toEqual({ a: null, b: null, c: 3 });
    expect(events[3]).toMatchObject({ version: 4, prevVersion: 3, prev: { c: 3 }, next: { c: 3, d: 4 } });
    for (const delivery of target.deliveries) {
      expect(delivery.headers['x-agentstate-signature']).toBe(expectedSignature('hook-secret', delivery.raw));
      expect(delivery.headers['x-agentstate-event-id']).toBe(delivery.body.id);
      expect(delivery.headers['content-type']).toBe('application/json');
    }
  });

  it('sends a tenant-wide webhook every session of its tenant and nothing of other tenants', async () => {
    // Prepare
    const [mine, theirs] = [uniqueId('wide'), uniqueId('wide')];
    const target = await receiver();
    const webhookId = await hook(other, { url: target.url });

    // Act
    await http.patch(`/v1/sessions/${theirs}/state`, { from: 'local' });
    await other.patch(`/v1/sessions/${mine}/state`, { from: 'other' });
    await other.patch(`/v1/sessions/${mine}/state`, { more: true });
    await waitFor('the other tenant’s two events', () => target.accepted().filter((event) => event.sessionId === mine).length >= 2);
    await other.delete(`/v1/webhooks/${webhookId}`);

    // Assess
    expect(target.accepted().map((event) => event.id)).toEqual([`${mine}:1`, `${mine}:2`]);
  });

  it('retries a failing endpoint, then dead-letters the event (visible, replayable) without holding up a healthy one', async () => {
    // Prepare: a failing endpoint on one tenant's session, a healthy one on another tenant's.
    const [failingSid, healthySid] = [uniqueId('failing'), uniqueId('healthy')];
    const failing = await receiver(500);
    const healthy = await receiver();
    const failingId = await hook(http, { url: failing.url, secret: 'f', sessionId: failingSid });
    const healthyId = await hook(other, { url: healthy.url, sessionId: healthySid });

    // Act: writes to both, at the same time.
    const started = Date.now();
    await Promise.all([
      http.patch(`/v1/sessions/${failingSid}/state`, { n: 1 }).then(() => http.patch(`/v1/sessions/${failingSid}/state`, { n: 2 })),
      other.patch(`/v1/sessions/${healthySid}/state`, { n: 1 }).then(() => other.patch(`/v1/sessions/${healthySid}/state`, { n: 2 })),
    ]);
    await waitFor('the healthy endpoint’s events', () => healthy.accepted().length >= 2);
    const healthyDone = Date.now() - started;
    const letters = await waitFor('two dead letters', async () => {
      const page = await http.get(`/v1/webhooks/${failingId}/dead-letters`);
      return page.body.deadLetters?.length === 2 ? page.body.deadLetters : null;
    });

    // Assess: the healthy endpoint got its events, in order, at most one failing delivery
    // cycle (3 attempts with backoff, about a second here) after the writes.
    expect(healthy.accepted().map((event) => event.version)).toEqual([1, 2]);
    expect(healthyDone).toBeLessThan(5_000);
    // The failing one was tried 3 times for its first event, each attempt signed and numbered.
    const firstTries = failing.deliveries.filter((delivery) => delivery.body.id === `${failingSid}:1`);
    expect(firstTries.map((delivery) => delivery.headers['x-agentstate-delivery-attempt'])).toEqual(['1', '2', '3']);
    expect(letters.map((letter: { eventId: string }) => letter.eventId)).toEqual([`${failingSid}:1`, `${failingSid}:2`]);
    expect(letters[0]).toMatchObject({
      sessionId: failingSid,
      version: 1,
      attempts: 3,
      lastError: 'HTTP 500',
      event: { id: `${failingSid}:1`, next: { n: 1 }, prev: null },
    });
    // The second was not tried: the first failure opened the endpoint's breaker.
    expect(letters[1]).toMatchObject({
      version: 2,
      attempts: 0,
      lastError: expect.stringMatching(/^not attempted: the endpoint failed a delivery, so its breaker is open until /),
      event: { prev: { n: 1 }, next: { n: 2 } },
    });
    // Another tenant cannot see them.
    expect((await other.get(`/v1/webhooks/${failingId}/dead-letters`)).status).toBe(404);

    // Act: the endpoint still fails; a replay stops at the first failure and keeps both.
    const stillFailing = await http.post(`/v1/webhooks/${failingId}/dead-letters/replay`, {});
    // Then it recovers; the replay delivers both, in version order, with the same ids, and
    // closes the breaker.
    failing.answer(200);
    const replayed = await http.post(`/v1/webhooks/${failingId}/dead-letters/replay`, {});
    const after = await http.get(`/v1/webhooks/${failingId}/dead-letters`);
    // And live deliveries resume.
    await http.patch(`/v1/sessions/${failingSid}/state`, { n: 3 });
    await waitFor('the live event after recovery', () => failing.accepted().some((event) => event.version === 3));

    // Assess
    expect(stillFailing.status).toBe(200);
    expect(stillFailing.body).toEqual({ delivered: 0, failed: { eventId: `${failingSid}:1`, error: 'HTTP 500' }, remaining: true });
    expect(replayed.body).toEqual({ delivered: 2, failed: null, remaining: false });
    expect(after.body.deadLetters).toEqual([]);
    expect(failing.accepted().map((event) => event.id)).toEqual([`${failingSid}:1`, `${failingSid}:2`, `${failingSid}:3`]);
    const replay = failing.deliveries.find((delivery) => delivery.status === 200);
    expect(replay?.headers['x-agentstate-signature']).toBe(expectedSignature('f', replay?.raw ?? ''));

    await http.delete(`/v1/webhooks/${failingId}`);
    await other.delete(`/v1/webhooks/${healthyId}`);
  });

  it('answers 404 for the dead letters of an unknown webhook', async () => {
    expect((await http.get('/v1/webhooks/nope/dead-letters')).body).toMatchObject({ status: 404, code: 'not_found' });
    expect((await http.post('/v1/webhooks/nope/dead-letters/replay', {})).body).toMatchObject({ status: 404, code: 'not_found' });
  });
});

describe('live sync over WebSocket', () => {
  it('refuses a connection without a valid key', async () => {
    await expect(connectLive(`${api.url.replace('http://', 'ws://')}/v1/ws?token=wrong`)).rejects.toMatchObject({ status: 401 });
    await expect(connectLive(`${api.url.replace('http://', 'ws://')}/v1/ws`)).rejects.toMatchObject({ status: 401 });
  });

  it('sends a subscriber its session’s events only, including a write on a branch, and nothing of another tenant', async () => {
    // Prepare: one client per tenant, both following a session id both tenants use.
    const sid = uniqueId('live');
    const unrelated = uniqueId('live-other');
    const mine = await live('dev-key');
    const theirs = await live('other-key');
    await subscribe(mine, sid);
    await subscribe(theirs, sid);

    // Act: a conversation with a branch, a write elsewhere, and the other tenant's own session.
    await http.patch(`/v1/sessions/${sid}/state`, { turns: 0 });
    await http.post(`/v1/sessions/${sid}/messages`, {
      messages: [
        { id: 'u1', role: 'user' },
        { id: 'a1', role: 'assistant' },
      ],
    });
    await http.patch(`/v1/sessions/${sid}/state`, { turns: 1 });
    await http.post(`/v1/sessions/${sid}/messages`, { parentId: 'u1', messages: [{ id: 'a1-retry', role: 'assistant' }] });
    await http.patch(`/v1/sessions/${sid}/state`, { retried: true });
    await http.patch(`/v1/sessions/${unrelated}/state`, { elsewhere: true });
    await other.patch(`/v1/sessions/${sid}/state`, { tenant: 'other' });
    await waitFor('three events of my session', () => mine.events().length >= 3);
    await waitFor('the other tenant’s event', () => theirs.events().length >= 1);
    // Events come in order: once this one is here, anything that leaked would be here too.
    await http.patch(`/v1/sessions/${sid}/state`, { last: true });
    await waitFor('my fourth event', () => mine.events().length >= 4);

    // Assess
    expect(mine.messages[0]).toEqual({ type: 'subscribed', sessionId: sid });
    expect(mine.events().map((event) => [event.version, event.node, event.prevVersion])).toEqual([
      [1, 'root', 0],
      [2, 'a1', 1],
      // The branch starts from u1's state (version 1), not a1's later write.
      [3, 'a1-retry', 1],
      [4, 'a1-retry', 3],
    ]);
    expect(mine.events()[2]).toMatchObject({ prev: { turns: 0 }, next: { turns: 0, retried: true } });
    expect(theirs.events().map((event) => event.next)).toEqual([{ tenant: 'other' }]);
  });

  it('sends a follower of a written session every event after its subscription, into the session’s next life after a delete', async () => {
    // Prepare: a session with history before anyone follows it (the hook looks for no one then).
    const sid = uniqueId('lives');
    await http.patch(`/v1/sessions/${sid}/state`, { before: 1 });
    await http.post(`/v1/sessions/${sid}/messages`, { messages: [{ id: 'u1', role: 'user' }] });
    await http.patch(`/v1/sessions/${sid}/state`, { before: 2 });
    const client = await live('dev-key');

    // Act: follow it, write, delete it, and write its next life.
    await subscribe(client, sid);
    await http.patch(`/v1/sessions/${sid}/state`, { after: 1 });
    expect((await http.delete(`/v1/sessions/${sid}`)).status).toBe(204);
    await http.patch(`/v1/sessions/${sid}/state`, { reborn: true });
    await waitFor('both events after the subscription', () => client.events().length >= 2);
    // Events come in order: once this one is here, anything sent before it would be too.
    await http.patch(`/v1/sessions/${sid}/state`, { last: true });
    await waitFor('the last event', () => client.events().some((event) => event.next?.last === true));

    // Assess: versions made before the subscription may or may not come; each one after does.
    const after = client.events().filter((event) => event.next?.after !== undefined || event.next?.reborn !== undefined);
    expect(after.map((event) => [event.version, event.next])).toEqual([
      [3, { before: 2, after: 1 }],
      [1, { reborn: true }],
      [2, { reborn: true, last: true }],
    ]);
  });

  it('follows a session made but not yet written: it reads as before the follow, and every event comes from its first write on', async () => {
    // Prepare: a session made with POST, nothing written; what every reader of it says.
    const sid = uniqueId('made');
    expect((await http.post('/v1/sessions', { sessionId: sid, metadata: { topic: 'made' } })).status).toBe(201);
    const reads = async () =>
      Promise.all(
        [
          `/v1/sessions/${sid}`,
          `/v1/sessions/${sid}/messages`,
          `/v1/sessions/${sid}/state`,
          `/v1/sessions/${sid}/versions`,
          `/v1/sessions/${sid}/tree`,
        ].map(async (path) => {
          const answer = await http.get(path);
          return [path, answer.status, answer.body];
        }),
      );
    const before = await reads();
    const client = await live('dev-key');

    // Act: follow it (its log's one change is the follow's mark), then write it, copy it, delete it.
    await subscribe(client, sid);
    const followed = await reads();
    const listed = await http.get('/v1/sessions?limit=100');
    await http.post(`/v1/sessions/${sid}/messages`, { messages: [{ id: 'u1', role: 'user' }] });
    await http.patch(`/v1/sessions/${sid}/state`, { n: 1 });
    await waitFor('the first version', () => client.events().some((event) => event.next?.n === 1));
    const copy = await http.post(`/v1/sessions/${sid}/copy`, { sessionId: `${sid}-copy` });
    const copied = await http.get(`/v1/sessions/${sid}-copy/messages`);
    const versions = await http.get(`/v1/sessions/${sid}/versions`);
    const deleted = await http.delete(`/v1/sessions/${sid}`);

    // Assess
    expect(followed).toEqual(before);
    expect(listed.body.sessions.map((session: { sessionId: string }) => session.sessionId)).toContain(sid);
    expect(client.events().map((event) => [event.sessionId, event.version])).toEqual([[sid, 1]]);
    expect(copy.status).toBe(201);
    expect(copied.body.messages.map((message: { id: string }) => message.id)).toEqual(['u1']);
    expect(versions.body.versions.map((version: { version: number }) => version.version)).toEqual([1]);
    expect(deleted.status).toBe(204);
    expect((await http.get(`/v1/sessions/${sid}`)).status).toBe(404);
  });

  it('stops sending after unsubscribe, and answers bad messages with an error', async () => {
    // Prepare
    const sid = uniqueId('unsub');
    const client = await live('dev-key');
    await subscribe(client, sid);
    await http.patch(`/v1/sessions/${sid}/state`, { v: 1 });
    await waitFor('the first event', () => client.events().length === 1);

    // Act
    client.send({ action: 'unsubscribe', sessionId: sid });
    await waitFor('the unsubscribe ack', () => client.messages.find((message) => message.type === 'unsubscribed'));
    await http.patch(`/v1/sessions/${sid}/state`, { v: 2 });
    client.send({ action: 'dance' });
    client.send({ action: 'subscribe', sessionId: 'not valid!' });
    // A subscription made after the write above, to know when its event would have come.
    const marker = uniqueId('marker');
    await subscribe(client, marker);
    await http.patch(`/v1/sessions/${marker}/state`, { m: 1 });
    await waitFor('the marker event', () => client.events().some((event) => event.sessionId === marker));

    // Assess
    expect(
      client
        .events()
        .filter((event) => event.sessionId === sid)
        .map((event) => event.version),
    ).toEqual([1]);
    const errors = client.messages.filter((message) => message.type === 'error');
    expect(errors).toEqual([
      expect.objectContaining({ status: 400, code: 'invalid_request', field: 'action' }),
      expect.objectContaining({ status: 400, code: 'invalid_id', field: 'sessionId' }),
    ]);
  });
});
