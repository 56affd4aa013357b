import { createServer } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ApiClient, uniqueId } from '../helpers/api-client.js';
import { type RunningApi, startApi } from '../helpers/e2e.js';
import { EventFixtures, type LiveClient, waitFor } from '../helpers/events.js';

/**
 * Every event fits every channel (API.md section 9), against `npm start`: large states leave
 * `next` and `prev` out (`truncated: true`) and keep the merge patch while it fits; a webhook
 * that never answers gets every event as a dead letter, whatever its size; a WebSocket
 * subscriber may ask for `"mode": "patch"`.
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

/** A port on loopback that accepts nothing: bound, then closed again. */
async function deadPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise((resolve) => server.close(resolve));
  return port;
}

async function subscribe(client: LiveClient, message: Record<string, unknown>): Promise<void> {
  client.send({ action: 'subscribe', ...message });
  await waitFor(`the subscribe ack for ${String(message.sessionId)}`, () =>
    client.messages.find((received) => received.type === 'subscribed' && received.sessionId === message.sessionId),
  );
}

const KIB = 1024;

describe('events of large states', () => {
  it('dead-letters both events of two 200 KiB writes for a dead webhook, without their states', async () => {
    // Prepare
    const sid = uniqueId('dead-big');
    const port = await deadPort();
    const created = await http.post('/v1/webhooks', { url: `http://127.0.0.1:${port}/hook`, sessionId: sid });
    expect(created.status, created.text).toBe(201);

    // Act
    expect((await http.put(`/v1/sessions/${sid}/state`, { doc: 'a'.repeat(200 * KIB) })).status).toBe(200);
    expect((await http.put(`/v1/sessions/${sid}/state`, { doc: 'b'.repeat(200 * KIB) })).status).toBe(200);
    const letters = await waitFor(
      'two dead letters',
      async () => {
        const page = await http.get(`/v1/webhooks/${created.body.id}/dead-letters`);
        return page.body.deadLetters?.length === 2 ? page.body.deadLetters : null;
      },
      30_000,
    );

    // Assess
    expect(letters.map((letter: { eventId: string }) => letter.eventId)).toEqual([`${sid}:1`, `${sid}:2`]);
    for (const letter of letters) {
      expect(letter.event).toMatchObject({ truncated: true, sessionId: sid });
      expect(letter.event).not.toHaveProperty('next');
      expect(letter.event).not.toHaveProperty('prev');
      // The patch (the whole new 200 KiB document) alone passes 64 KiB.
      expect(letter.event).not.toHaveProperty('patch');
    }
  });

  it('delivers a small change to a large state as its patch, and states under 64 KiB whole', async () => {
    // Prepare
    const sid = uniqueId('patch-big');
    const target = await fixtures.receiver();
    await http.post('/v1/webhooks', { url: target.url, sessionId: sid });

    // Act
    await http.put(`/v1/sessions/${sid}/state`, { doc: 'x'.repeat(40 * KIB), turn: 1 });
    await http.patch(`/v1/sessions/${sid}/state`, { turn: 2 });
    await http.put(`/v1/sessions/${sid}/state`, { small: true });
    const events = await waitFor('three events', () => (target.accepted().length >= 3 ? target.accepted() : null));

    // Assess: version 2 carries 80 KiB of states, so only its patch; version 3 about 40 KiB, so all.
    expect(events[0]).toMatchObject({ version: 1, prev: null, patch: { turn: 1 } });
    expect(events[0].next.doc).toHaveLength(40 * KIB);
    expect(events[1]).toMatchObject({ version: 2, truncated: true, patch: { turn: 2 } });
    expect(events[1]).not.toHaveProperty('next');
    expect(events[2]).toMatchObject({ version: 3, next: { small: true }, patch: { doc: null, turn: null, small: true } });
    expect(events[2].truncated).toBeUndefined();
  });

  it('sends a "mode": "patch" subscriber events without next and prev, and a plain one whole', async () => {
    // Prepare
    const sid = uniqueId('ws-mode');
    const patchMode = await fixtures.live('dev-key');
    const fullMode = await fixtures.live('dev-key');
    await subscribe(patchMode, { sessionId: sid, mode: 'patch' });
    await subscribe(fullMode, { sessionId: sid });

    // Act
    await http.put(`/v1/sessions/${sid}/state`, { a: 1, b: { c: 2 } });
    await http.patch(`/v1/sessions/${sid}/state`, { b: { c: 3 } });
    const [patches, wholes] = await Promise.all(
      [patchMode, fullMode].map((client) =>
        waitFor('two events', () => {
          const events = client.messages.filter((message) => message.type === 'state.changed');
          return events.length >= 2 ? events : null;
        }),
      ),
    );

    // Assess
    expect(patchMode.messages.find((message) => message.type === 'subscribed')).toMatchObject({ mode: 'patch' });
    expect(patches?.map((event) => event.patch)).toEqual([{ a: 1, b: { c: 2 } }, { b: { c: 3 } }]);
    for (const event of patches ?? []) {
      expect(event).not.toHaveProperty('next');
      expect(event).not.toHaveProperty('prev');
      expect(event.truncated).toBeUndefined();
    }
    expect(wholes?.[1]).toMatchObject({ next: { a: 1, b: { c: 3 } }, prev: { a: 1, b: { c: 2 } }, patch: { b: { c: 3 } } });
  });

  it('refuses a mode that is not "full" or "patch"', async () => {
    const client = await fixtures.live('dev-key');

    client.send({ action: 'subscribe', sessionId: uniqueId('bad-mode'), mode: 'diff' });
    const error = await waitFor('an error', () => client.messages.find((message) => message.type === 'error'));

    expect(error).toMatchObject({ code: 'invalid_request', field: 'mode' });
  });
});
