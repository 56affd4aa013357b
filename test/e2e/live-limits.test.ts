import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { uniqueId } from '../helpers/api-client.js';
import { type RunningApi, startApi } from '../helpers/e2e.js';
import { EventFixtures, type LiveClient, waitFor } from '../helpers/events.js';

/**
 * A WebSocket connection follows at most 100 sessions and at most 100 memory namespaces
 * (functions/core/fanout/live.ts MAX_SUBSCRIPTIONS): the 101st is refused with `400 invalid_request`
 * naming the limit, following again what it follows already is not a new place, leaving frees
 * one, and the limit is the connection's own, not the key's. Sent at once, 150 subscriptions
 * leave exactly 100 followed, each of which then gets its session's events (the local server
 * answers one connection's messages in order; test/integration/live-places.test.ts runs them
 * side by side, as API Gateway's Lambda invocations do).
 */
const LIMIT = 100;
let api: RunningApi;
const fixtures = new EventFixtures(() => api.url);

beforeAll(async () => {
  api = await startApi();
});
afterAll(async () => {
  await fixtures.close();
  await api?.stop();
});

/** Sends the messages at once and waits for one answer to each (an ack or an error), in order. */
async function answers(client: LiveClient, messages: Array<Record<string, unknown>>): Promise<any[]> {
  const before = client.messages.length;
  for (const message of messages) client.send(message);
  return waitFor(`${messages.length} answers`, () => {
    const got = client.messages.slice(before).filter((answer) => ['subscribed', 'unsubscribed', 'error'].includes(answer.type));
    return got.length >= messages.length ? got : null;
  });
}

/**
 * A connection that follows as many as it may, by what it follows: the first test of each kind
 * leaves one there (it follows 100 again at its end), and the second starts from it rather than
 * subscribing 100 again (a test run alone makes its own).
 */
const followingAll = new Map<string, LiveClient>();

const session = (index: number) => ({ action: 'subscribe', sessionId: `followed-${index}` });
const namespace = (index: number) => ({ action: 'subscribe', namespace: ['followed', `n${index}`] });

describe.each([
  ['sessions', session, { action: 'unsubscribe', sessionId: 'followed-7' }],
  ['namespaces', namespace, { action: 'unsubscribe', namespace: ['followed', 'n7'] }],
] as const)('a connection following %s', (what, subscribe, leaveOne) => {
  it(`follows ${LIMIT}, refuses one more with 400 naming the limit, and takes it once it left another`, async () => {
    // Prepare: one connection follows as many as it may.
    const client = await fixtures.live('dev-key');
    const acks = await answers(
      client,
      Array.from({ length: LIMIT }, (_, index) => subscribe(index)),
    );
    expect(acks.map((ack) => ack.type)).toEqual(Array(LIMIT).fill('subscribed'));

    // Act: one more; one it follows already; then leave one and try the refused one again.
    const [refused, again] = await answers(client, [subscribe(LIMIT), subscribe(3)]);
    const [left] = await answers(client, [leaveOne]);
    const [taken] = await answers(client, [subscribe(LIMIT)]);

    // Assess
    expect(refused).toMatchObject({ type: 'error', status: 400, code: 'invalid_request', limit: LIMIT });
    expect(refused.detail).toContain(`at most ${LIMIT} ${what}`);
    expect(again).toMatchObject({ type: 'subscribed' });
    expect(left).toMatchObject({ type: 'unsubscribed' });
    expect(taken).toMatchObject({ type: 'subscribed' });
    followingAll.set(what, client);
  });

  it('counts per connection: another connection of the same key starts with none', async () => {
    // Prepare: a connection that follows 100 (the first test's, or one made now).
    let full = followingAll.get(what);
    if (!full) {
      full = await fixtures.live('dev-key');
      await answers(
        full,
        Array.from({ length: LIMIT }, (_, index) => subscribe(index)),
      );
    }

    // Act
    const other = await fixtures.live('dev-key');
    const [ack] = await answers(other, [subscribe(LIMIT + 1)]);
    const [refused] = await answers(full, [subscribe(LIMIT + 1)]);

    // Assess
    expect(ack).toMatchObject({ type: 'subscribed' });
    expect(refused).toMatchObject({ type: 'error', code: 'invalid_request', limit: LIMIT });
  });
});

describe('a connection sent 150 subscriptions at once', () => {
  it(`follows exactly ${LIMIT}, refuses the rest, and every session it said it follows sends it its events`, async () => {
    // Prepare
    const client = await fixtures.live('dev-key');
    const prefix = uniqueId('at-once');
    const ids = Array.from({ length: 150 }, (_, n) => `${prefix}-${n}`);

    // Act: the subscriptions at once, then one write to each of the 150 sessions, the refused
    // ones first.
    const acks = await answers(
      client,
      ids.map((sessionId) => ({ action: 'subscribe', sessionId })),
    );
    const followed = acks.filter((ack) => ack.type === 'subscribed').map((ack) => ack.sessionId as string);
    const write = (sessionId: string) => api.client.put(`/v1/sessions/${sessionId}/state`, { sessionId });
    const writes = await Promise.all(ids.filter((id) => !followed.includes(id)).map(write));
    writes.push(...(await Promise.all(followed.map(write))));

    // Assess: 100 followed, 50 refused naming the limit; an event of each followed session, and
    // none of a refused one (written before them, an event of theirs would have come by then).
    expect(followed).toHaveLength(LIMIT);
    for (const refused of acks.filter((ack) => ack.type !== 'subscribed'))
      expect(refused).toMatchObject({ type: 'error', status: 400, code: 'invalid_request', limit: LIMIT });
    expect(writes.every((write) => write.status === 200)).toBe(true);
    const sessionsOfEvents = () => new Set(client.events().map((event) => event.sessionId as string));
    await waitFor(`events of all ${LIMIT} followed sessions`, () => followed.every((id) => sessionsOfEvents().has(id)));
    expect([...sessionsOfEvents()].sort()).toEqual([...followed].sort());
  });
});
