import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ApiClient, apiClient, uniqueId } from '../helpers/api-client.js';
import { type RunningApi, startApi } from '../helpers/e2e.js';
import { EventFixtures, type LiveClient, waitFor } from '../helpers/events.js';

/**
 * Change events of commits' documents end to end (API.md sections 8 and 9): a commit that
 * changes a run, profile or shared document sends one `run.changed`, `profile.changed` or
 * `shared.changed` event per document version, carrying `prev` and `next`, to the webhooks and
 * live followers of the session that made the commit.
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

async function hook(client: ApiClient, body: Record<string, unknown>): Promise<string> {
  const created = await client.post('/v1/webhooks', body);
  expect(created.status, created.text).toBe(201);
  return created.body.id as string;
}

async function follow(sessionId: string): Promise<LiveClient> {
  const client = await fixtures.live('dev-key');
  client.send({ action: 'subscribe', sessionId });
  await waitFor(`the subscribe ack for ${sessionId}`, () => client.messages.find((message) => message.type === 'subscribed'));
  return client;
}

const set = (scope: string, key: string, value: unknown, merge = 'disjoint') => ({ key, scope, merge, set: value });

async function commit(client: ApiClient, sid: string, body: Record<string, unknown>) {
  const response = await client.post(`/v1/sessions/${sid}/commits`, body);
  expect(response.status, response.text).toBe(200);
  return response.body;
}

const summary = (event: any) => ({ id: event.id, type: event.type, version: event.version, prev: event.prev, next: event.next });

describe('events of commit scopes', () => {
  it('sends one event per changed scope, with prev and next, to the webhooks and live followers of the session', async () => {
    // Prepare
    const sid = uniqueId('scopes');
    const user = uniqueId('user');
    await http.post('/v1/sessions', { sessionId: sid, userId: user });
    const target = await receiver();
    await hook(http, { url: target.url, sessionId: sid });
    const live = await follow(sid);

    // Act
    const first = await commit(http, sid, {
      runId: 'r1',
      commands: [set('thread', 'topic', 'tea'), set('run', 'step', 1), set('profile', 'lang', 'en'), set('shared', 'mode', sid)],
    });
    // The run and profile change; the thread and shared documents get their stored values again.
    const second = await commit(http, sid, {
      runId: 'r1',
      commands: [set('thread', 'topic', 'tea'), set('run', 'step', 2), set('profile', 'lang', 'fr'), set('shared', 'mode', sid)],
    });

    // Assess
    const sharedVersion = first.shared.version as number;
    expect(second).toMatchObject({
      changed: false,
      version: 1,
      run: { version: 2 },
      profile: { version: 2 },
      shared: { version: sharedVersion },
    });
    const expected = [
      { id: `${sid}:1`, type: 'state.changed', version: 1, prev: null, next: { topic: 'tea' } },
      { id: `run/${sid}/r1/1`, type: 'run.changed', version: 1, prev: null, next: { step: 1 } },
      { id: `run/${sid}/r1/2`, type: 'run.changed', version: 2, prev: { step: 1 }, next: { step: 2 } },
      { id: `profile/${user}/1`, type: 'profile.changed', version: 1, prev: null, next: { lang: 'en' } },
      { id: `profile/${user}/2`, type: 'profile.changed', version: 2, prev: { lang: 'en' }, next: { lang: 'fr' } },
      {
        id: `shared/${sharedVersion}`,
        type: 'shared.changed',
        version: sharedVersion,
        prev: sharedVersion === 1 ? null : expect.any(Object),
        next: expect.objectContaining({ mode: sid }),
      },
    ];
    const delivered = await waitFor('six events at the webhook', () => (target.accepted().length >= 6 ? target.accepted() : null));
    const received = await waitFor('six events on the WebSocket', () => {
      const events = live.messages.filter((message) => /\.changed$/.test(String(message.type)));
      return events.length >= 6 ? events : null;
    });
    for (const events of [delivered, received]) {
      // Streams are independent of each other; within each, versions come in order.
      const byId = [...events].sort((a, b) => expected.findIndex((e) => e.id === a.id) - expected.findIndex((e) => e.id === b.id));
      expect(byId.map(summary)).toEqual(expected);
      expect(events.filter((event) => event.type === 'run.changed').map((event) => event.version)).toEqual([1, 2]);
      expect(events.filter((event) => event.type === 'profile.changed').map((event) => event.version)).toEqual([1, 2]);
    }
    expect(delivered.find((event) => event.type === 'run.changed')).toEqual({
      id: `run/${sid}/r1/1`,
      type: 'run.changed',
      scope: 'run',
      sessionId: sid,
      runId: 'r1',
      version: 1,
      prevVersion: 0,
      cause: 'commit',
      author: null,
      next: { step: 1 },
      prev: null,
      patch: { step: 1 },
      occurredAt: expect.any(String),
    });
    expect(delivered.find((event) => event.type === 'profile.changed')).toMatchObject({
      scope: 'profile',
      userId: user,
      sessionId: sid,
      prevVersion: 0,
    });
    const profileDelivery = target.deliveries.find((delivery) => delivery.body.type === 'profile.changed');
    expect(profileDelivery?.headers['x-agentstate-event-id']).toBe(`profile/${user}/1`);
  });

  it("sends a profile change to the webhooks of the session that made it, not to the user's other sessions", async () => {
    // Prepare
    const user = uniqueId('user');
    const writer = uniqueId('writer');
    const bystander = uniqueId('bystander');
    await http.post('/v1/sessions', { sessionId: writer, userId: user });
    await http.post('/v1/sessions', { sessionId: bystander, userId: user });
    const writerHook = await receiver();
    const bystanderHook = await receiver();
    await hook(http, { url: writerHook.url, sessionId: writer });
    await hook(http, { url: bystanderHook.url, sessionId: bystander });

    // Act
    await commit(http, writer, { commands: [set('profile', 'theme', 'dark')] });
    await waitFor('the profile event at the writer', () => writerHook.accepted().find((event) => event.type === 'profile.changed'));
    // A later event of the bystander's own: the batch with the profile event is done by then.
    await http.put(`/v1/sessions/${bystander}/state`, { mine: true });
    await waitFor('the bystander its own event', () => bystanderHook.accepted().find((event) => event.type === 'state.changed'));

    // Assess
    expect(bystanderHook.accepted().map((event) => event.type)).toEqual(['state.changed']);
    const profile = await http.get(`/v1/profiles/${user}/state`);
    expect(profile.body).toMatchObject({ version: 1, state: { theme: 'dark' } });
  });

  it('sends one event per version of concurrent commits to one shared key, in order, each prev the next before it', async () => {
    // Prepare: commits that change the shared document alone are written key by key, blind (API.md section 8).
    const sid = uniqueId('crowd-events');
    await http.post('/v1/sessions', { sessionId: sid, userId: uniqueId('user') });
    const target = await receiver();
    await hook(http, { url: target.url, sessionId: sid });
    const key = `votes-${sid}`;
    const before = (await http.get('/v1/shared/state')).body.version as number;
    const writers = 20;

    // Act
    await Promise.all(
      Array.from({ length: writers }, (_, index) =>
        commit(http, sid, { commands: [set('shared', key, { [`c${index}`]: index }, 'commutative')] }),
      ),
    );

    // Assess
    const events = await waitFor('an event per version', () => (target.accepted().length >= writers ? target.accepted() : null));
    expect(events.map((event) => [event.type, event.version, event.prevVersion])).toEqual(
      Array.from({ length: writers }, (_, index) => ['shared.changed', before + index + 1, before + index]),
    );
    for (const [index, event] of events.entries()) {
      if (index > 0) expect(event.prev).toEqual(events[index - 1].next);
      // Each version adds one member, its commit's own.
      const added = Object.keys(event.next[key]).filter((member) => !(member in (event.prev?.[key] ?? {})));
      expect(added).toHaveLength(1);
      expect(event.patch).toEqual({ [key]: { [added[0] as string]: event.next[key][added[0] as string] } });
    }
    expect(Object.keys(events[writers - 1].next[key])).toHaveLength(writers);
  });

  it("never sends a tenant's shared or profile events to another tenant", async () => {
    // Prepare
    const theirs = await receiver();
    await hook(other, { url: theirs.url });
    const sid = uniqueId('isolated');
    await http.post('/v1/sessions', { sessionId: sid, userId: 'same-user-id' });
    const ours = await receiver();
    await hook(http, { url: ours.url, sessionId: sid });

    // Act
    await commit(http, sid, { commands: [set('shared', 'secret', sid), set('profile', 'secret', sid)] });
    await waitFor('our two events', () => (ours.accepted().length >= 2 ? ours.accepted() : null));
    const theirSession = uniqueId('theirs');
    await other.post('/v1/sessions', { sessionId: theirSession, userId: 'same-user-id' });
    await commit(other, theirSession, { commands: [set('profile', 'own', true)] });
    const theirEvents = await waitFor('their own profile event', () =>
      theirs.accepted().some((event) => event.type === 'profile.changed') ? theirs.accepted() : null,
    );

    // Assess
    expect(
      ours
        .accepted()
        .map((event) => event.type)
        .sort(),
    ).toEqual(['profile.changed', 'shared.changed']);
    expect(JSON.stringify(theirEvents)).not.toContain(sid);
    expect(theirEvents.filter((event) => event.type === 'profile.changed')).toEqual([
      expect.objectContaining({ id: 'profile/same-user-id/1', sessionId: theirSession, prev: null, next: { own: true } }),
    ]);
  });

  it('dead-letters a document event that a webhook did not take, apart from thread events, and replays it', async () => {
    // Prepare
    const sid = uniqueId('dead-doc');
    const failing = await receiver(500);
    const webhookId = await hook(http, { url: failing.url, sessionId: sid });

    // Act: thread version 1 and run version 1 share a session and a version number.
    await commit(http, sid, { runId: 'r1', commands: [set('thread', 'a', 1), set('run', 'b', 1)] });
    const letters = await waitFor(
      'two dead letters',
      async () => {
        const page = await http.get(`/v1/webhooks/${webhookId}/dead-letters`);
        return page.body.deadLetters?.length === 2 ? page.body.deadLetters : null;
      },
      20_000,
    );
    failing.answer(200);
    const replayed = await http.post(`/v1/webhooks/${webhookId}/dead-letters/replay`, {});

    // Assess
    expect(letters.map((letter: any) => [letter.eventId, letter.version, letter.event.type])).toEqual([
      [`${sid}:1`, 1, 'state.changed'],
      [`run/${sid}/r1/1`, 1, 'run.changed'],
    ]);
    expect(replayed.body).toMatchObject({ delivered: 2, failed: null, remaining: false });
    expect(failing.accepted().map((event) => event.id)).toEqual([`${sid}:1`, `run/${sid}/r1/1`]);
    expect((await http.get(`/v1/webhooks/${webhookId}/dead-letters`)).body.deadLetters).toEqual([]);
  });
});
