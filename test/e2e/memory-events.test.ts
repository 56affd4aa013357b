import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { dynamoDbEndpointOf, issueKey } from '../helpers/admin.js';
import { type ApiClient, uniqueId } from '../helpers/api-client.js';
import { type RunningApi, startApi } from '../helpers/e2e.js';
import { EventFixtures, waitFor } from '../helpers/events.js';

/**
 * `memory.changed` events end to end (API.md section 10): puts and deletes of memory items,
 * read from DynamoDB Local's stream by the change hook and POSTed to webhooks on loopback.
 */

let api: RunningApi;
let http: ApiClient;
const fixtures = new EventFixtures(() => api.url);

beforeAll(async () => {
  api = await startApi();
  http = api.client;
});
afterAll(async () => {
  await fixtures.close();
  await api?.stop();
});

const itemPath = (namespace: string[], key: string) => `/v1/memory/${[...namespace, key].join('/')}`;

async function hook(body: Record<string, unknown>): Promise<string> {
  const created = await http.post('/v1/webhooks', body);
  expect(created.status, created.text).toBe(201);
  return created.body.id as string;
}

describe('memory.changed', () => {
  it('sends every put and delete, in version order, with next and prev, signed, to webhooks without a session', async () => {
    // Prepare
    const [tenantWide, forSession] = [await fixtures.receiver(), await fixtures.receiver()];
    const ids = [
      await hook({ url: tenantWide.url, secret: 'whsec_c2VjcmV0LXNlY3JldC1zZWNyZXQ=' }),
      await hook({ url: forSession.url, sessionId: 's1' }),
    ];
    const ns = ['events', uniqueId('e')];

    // Act
    await http.put(itemPath(ns, 'k'), { value: { step: 1 } }, { headers: { 'x-agent-id': 'writer' } });
    await http.put(itemPath(ns, 'k'), { value: { step: 2 } });
    await http.delete(itemPath(ns, 'k'), { headers: { 'x-agent-id': 'cleaner' } });
    const again = await http.put(itemPath(ns, 'k'), { value: { step: 'again' } });
    const events = await waitFor('four memory events', () => {
      const mine = tenantWide.accepted().filter((event) => event.type === 'memory.changed' && event.namespace[1] === ns[1]);
      return mine.length === 4 ? mine : null;
    });

    // Assess
    expect(events.map((event) => [event.cause, event.version, event.prevVersion, event.next, event.prev, event.patch])).toEqual([
      ['put', 1, 0, { step: 1 }, null, { step: 1 }],
      ['put', 2, 1, { step: 2 }, { step: 1 }, { step: 2 }],
      ['delete', 3, 2, null, { step: 2 }, null],
      ['put', 1, 0, { step: 'again' }, null, { step: 'again' }],
    ]);
    expect(events[0]).toMatchObject({ namespace: ns, key: 'k', author: 'writer' });
    expect(events[2].author).toBe('cleaner');
    expect(new Set(events.map((event) => event.id)).size).toBe(4);
    expect(events[3].createdAt).toBe(again.body.createdAt);
    const delivery = tenantWide.deliveries.find((entry) => entry.body.id === events[0].id);
    expect(delivery?.headers['webhook-id']).toBe(events[0].id);
    expect(String(delivery?.headers['webhook-signature'])).toMatch(/^v1,/);
    expect(forSession.accepted().filter((event) => event.type === 'memory.changed')).toEqual([]);
    for (const id of ids) await http.delete(`/v1/webhooks/${id}`);
  });

  it('leaves out next and prev past 64 KiB together, keeping the patch (truncated)', async () => {
    // Prepare
    const target = await fixtures.receiver();
    const id = await hook({ url: target.url });
    const ns = ['large', uniqueId('l')];
    const notes = 'n'.repeat(40 * 1024);

    // Act
    await http.put(itemPath(ns, 'k'), { value: { notes, step: 1 } });
    await http.put(itemPath(ns, 'k'), { value: { notes, step: 2 } });
    const events = await waitFor('two memory events', () => {
      const mine = target.accepted().filter((event) => event.type === 'memory.changed' && event.namespace[1] === ns[1]);
      return mine.length === 2 ? mine : null;
    });

    // Assess
    expect(events[0]).toMatchObject({ version: 1, next: { notes, step: 1 }, prev: null });
    expect(events[0].truncated).toBeUndefined();
    expect(events[1]).toMatchObject({ version: 2, patch: { step: 2 }, truncated: true });
    expect(events[1]).not.toHaveProperty('next');
    expect(events[1]).not.toHaveProperty('prev');
    await http.delete(`/v1/webhooks/${id}`);
  });

  it('sends a webhook registered as an agent only the namespaces that agent may read', async () => {
    const [own, other] = [uniqueId('own'), uniqueId('other')];
    const target = await fixtures.receiver();
    const id = await hook({ url: target.url, agentId: own });

    await http.put(itemPath(['agents', other], 'k'), { value: { secret: true } });
    await http.put(itemPath(['users', own], 'k'), { value: { tenantWide: true } });
    await http.put(itemPath(['agents', own], 'k'), { value: { mine: true } });
    await http.put(itemPath(['shared', own], 'k'), { value: { everyone: true } });
    const seen = await waitFor('the agent’s two events', () => {
      const events = target.accepted().filter((event) => event.type === 'memory.changed');
      return events.length >= 2 ? events : null;
    });
    await new Promise((wake) => setTimeout(wake, 500));

    // Two items, so two lanes: each lane keeps its order, but nothing orders one lane against another.
    const namespaces = target.accepted().map((event) => event.namespace as string[]);
    expect(namespaces.toSorted((a, b) => a.join('/').localeCompare(b.join('/')))).toEqual([
      ['agents', own],
      ['shared', own],
    ]);
    expect(seen.find((event) => event.namespace[0] === 'agents')?.next).toEqual({ mine: true });
    await http.delete(`/v1/webhooks/${id}`);
  });

  it('dead-letters a memory event a webhook keeps refusing, replayable like any other', async () => {
    const target = await fixtures.receiver(500);
    const id = await hook({ url: target.url });
    const ns = ['letters', uniqueId('l')];

    await http.put(itemPath(ns, 'k'), { value: { a: 1 } });
    const letters = await waitFor('the dead letter', async () => {
      const response = await http.get(`/v1/webhooks/${id}/dead-letters`);
      const mine = response.body.deadLetters?.filter(
        (letter: { event: { namespace?: string[] } }) => letter.event.namespace?.[1] === ns[1],
      );
      return mine?.length === 1 ? mine : null;
    });
    target.answer(200);
    const replayed = await http.post(`/v1/webhooks/${id}/dead-letters/replay`, {});

    expect(letters[0].event).toMatchObject({ type: 'memory.changed', namespace: ns, key: 'k', version: 1 });
    expect(replayed.status, replayed.text).toBe(200);
    expect(target.accepted().some((event) => event.id === letters[0].eventId)).toBe(true);
    await http.delete(`/v1/webhooks/${id}`);
  });

  it('sends a WebSocket subscribed to a namespace its events and those under it, once each, until it unsubscribes', async () => {
    // Prepare
    const root = uniqueId('live');
    const client = await fixtures.live('dev-key');
    const patches = await fixtures.live('dev-key');
    client.send({ action: 'subscribe', namespace: [root] });
    client.send({ action: 'subscribe', namespace: [root, 'deep'] });
    patches.send({ action: 'subscribe', namespace: [root], mode: 'patch' });
    const acks = await waitFor('the namespace acks', () => {
      const found = [...client.messages, ...patches.messages].filter((message) => message.type === 'subscribed');
      return found.length === 3 ? found : null;
    });

    // Act
    await http.put(itemPath([root, 'deep', 'er'], 'k'), { value: { n: 1 } });
    await http.put(itemPath([`${root}x`], 'k'), { value: { n: 2 } });
    await http.put(itemPath([root], 'k'), { value: { n: 3 } });
    await waitFor('two events', () => client.messages.filter((message) => message.type === 'memory.changed').length === 2 || null);
    client.send({ action: 'unsubscribe', namespace: [root] });
    client.send({ action: 'unsubscribe', namespace: [root, 'deep'] });
    await waitFor('the unsubscribe acks', () => client.messages.filter((message) => message.type === 'unsubscribed').length === 2 || null);
    await http.put(itemPath([root, 'deep'], 'k'), { value: { n: 4 } });
    const patched = await waitFor('three patch-mode events', () => {
      const received = patches.messages.filter((message) => message.type === 'memory.changed');
      return received.length === 3 ? received : null;
    });
    await new Promise((wake) => setTimeout(wake, 300));

    // Assess
    expect(acks.map((ack) => ack.namespace)).toEqual(expect.arrayContaining([[root], [root, 'deep']]));
    expect(acks.find((ack) => ack.mode === 'patch')?.namespace).toEqual([root]);
    const events = client.messages.filter((message) => message.type === 'memory.changed');
    // Events keep version order per item; different items may arrive in either order.
    const byValue = (list: Array<{ next?: { n: number }; patch?: { n: number } }>) =>
      list.map((event) => (event.next ?? event.patch)?.n).sort();
    expect(byValue(events)).toEqual([1, 3]);
    expect(events.find((event) => event.next.n === 1)?.namespace).toEqual([root, 'deep', 'er']);
    expect(byValue(patched)).toEqual([1, 3, 4]);
    expect(patched.every((event) => !('next' in event) && !('prev' in event))).toBe(true);
  });

  it('refuses a namespace subscription that is malformed, naming what it refused', async () => {
    const client = await fixtures.live('dev-key');

    client.send({ action: 'subscribe', namespace: ['ok', 'bad id'] });
    client.send({ action: 'subscribe', namespace: Array.from({ length: 9 }, (_, index) => `n${index}`) });
    client.send({ action: 'subscribe', namespace: 'users/u1' });
    client.send({ action: 'subscribe', namespace: ['users'], sessionId: 's1' });
    client.send({ action: 'subscribe', namespace: ['users'], mode: 'diff' });
    const errors = await waitFor('five refusals', () => {
      const found = client.messages.filter((message) => message.type === 'error');
      return found.length === 5 ? found : null;
    });

    expect(errors.map((error) => [error.code, error.status])).toEqual([
      ['invalid_id', 400],
      ['invalid_request', 400],
      ['invalid_request', 400],
      ['invalid_request', 400],
      ['invalid_request', 400],
    ]);
    expect(errors[4].namespace).toEqual(['users']);
    expect(errors[0]).not.toHaveProperty('namespace');
    expect(client.messages.some((message) => message.type === 'subscribed')).toBe(false);
  });

  it('lets a key limited to an agent follow only its own namespaces', async () => {
    // Prepare
    const own = uniqueId('own');
    const client = await fixtures.live(await issueKey(dynamoDbEndpointOf(api), { agents: [own] }));

    // Act
    client.send({ action: 'subscribe', namespace: ['agents', 'someone-else'] });
    const refused = await waitFor('the refusal', () => client.messages.find((message) => message.type === 'error'));
    client.send({ action: 'subscribe', namespace: ['agents', own] });
    const accepted = await waitFor('the ack', () => client.messages.find((message) => message.type === 'subscribed'));

    await http.put(itemPath(['agents', own, 'notes'], 'k'), { value: { mine: true } });
    const event = await waitFor('its event', () => client.messages.find((message) => message.type === 'memory.changed'));

    // Assess
    expect(refused).toMatchObject({ code: 'forbidden', namespace: ['agents', 'someone-else'] });
    expect(accepted.namespace).toEqual(['agents', own]);
    expect(event).toMatchObject({ namespace: ['agents', own, 'notes'], next: { mine: true } });
  });
});
