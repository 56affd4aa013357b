import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ApiClient, type ApiResponse, uniqueId } from '../helpers/api-client.js';
import { type RunningApi, startApi } from '../helpers/e2e.js';

/**
 * `Idempotency-Key` on the writes of a session's log (issue 33): the answer is kept in the change
 * the write makes, so the key's claim is its only write. Many retries of one request at once all
 * get the one answer, and the request writes once; a key is the tenant's own.
 */

let api: RunningApi;
let http: ApiClient;

beforeAll(async () => {
  api = await startApi();
  http = api.client;
});
afterAll(async () => {
  await api?.stop();
});

/** What a client sees of an answer: status, body text, the version's ETag. */
const seen = (response: ApiResponse) => ({ status: response.status, text: response.text, etag: response.headers.get('etag') });

describe('many retries of one request at once', () => {
  it.each([
    ['PATCH state', 'PATCH', 'state', { turn: 1 }],
    ['POST messages', 'POST', 'messages', { messages: [{ role: 'user', content: 'once' }] }],
    ['POST decide', 'POST', 'decide', { trigger: { type: 'tick' }, proposed: { state: { decided: 1 } } }],
  ])(
    '%s: 100 concurrent requests under one key all get the first answer, and it writes once',
    async (_name, method, route, body) => {
      // Prepare
      const sid = uniqueId('idem-many');
      await http.put(`/v1/sessions/${sid}/state`, { before: true });
      const headers = { 'idempotency-key': uniqueId('key') };

      // Act
      const answers = await Promise.all(
        Array.from({ length: 100 }, () => http.request(method, `/v1/sessions/${sid}/${route}`, { json: body, headers })),
      );

      // Assess: one answer, given once and replayed 99 times.
      const first = answers.find((answer) => answer.headers.get('idempotency-replayed') === null) as ApiResponse;
      expect(first.status, first.text).toBeLessThan(300);
      expect(answers.filter((answer) => answer.headers.get('idempotency-replayed') === 'true')).toHaveLength(99);
      for (const answer of answers) expect(seen(answer)).toEqual(seen(first));
      // One write: one version after the first (an append with no state records none), one message at most.
      const versions = (await http.get(`/v1/sessions/${sid}/versions`)).body.versions;
      expect(versions).toHaveLength(route === 'messages' ? 1 : 2);
      const messages = (await http.get(`/v1/sessions/${sid}/messages`)).body.messages;
      expect(messages).toHaveLength(route === 'messages' ? 1 : 0);
    },
    60_000,
  );
});

describe('a retry long after', () => {
  it('replays the first answer after other writes moved the session on, and a different request under the key is 422', async () => {
    // Prepare: a keyed write, then 60 more changes (more than a tip read brings along).
    const sid = uniqueId('idem-later');
    const key = uniqueId('key');
    const first = await http.patch(`/v1/sessions/${sid}/state`, { step: 'first' }, { headers: { 'idempotency-key': key } });
    for (let index = 0; index < 30; index++) {
      await http.post(`/v1/sessions/${sid}/messages`, { messages: [{ role: 'user', content: `m${index}` }] });
      await http.patch(`/v1/sessions/${sid}/state`, { step: index });
    }

    // Act
    const retry = await http.patch(`/v1/sessions/${sid}/state`, { step: 'first' }, { headers: { 'idempotency-key': key } });
    const other = await http.patch(`/v1/sessions/${sid}/state`, { step: 'other' }, { headers: { 'idempotency-key': key } });
    const elsewhere = await http.patch(
      `/v1/sessions/${uniqueId('idem-else')}/state`,
      { step: 'first' },
      { headers: { 'idempotency-key': key } },
    );

    // Assess
    expect(first.status).toBe(200);
    expect(retry.headers.get('idempotency-replayed')).toBe('true');
    expect(seen(retry)).toEqual(seen(first));
    expect(other.status).toBe(422);
    expect(other.body.code).toBe('idempotency_key_reused');
    expect(elsewhere.status).toBe(422);
    expect((await http.get(`/v1/sessions/${sid}/state`)).body).toMatchObject({ version: 31, state: { step: 29 } });
  });
});

describe('boundaries', () => {
  it("never replays another tenant's answer: the same key and session id in two tenants are two requests", async () => {
    // Prepare: tenant `local` writes under a key.
    const sid = uniqueId('idem-tenants');
    const key = uniqueId('key');
    const mine = await http.post(
      `/v1/sessions/${sid}/messages`,
      { messages: [{ role: 'user', content: 'mine' }] },
      { headers: { 'idempotency-key': key } },
    );

    // Act: tenant `other` sends the very same request, then both retry.
    const theirs = await http.post(
      `/v1/sessions/${sid}/messages`,
      { messages: [{ role: 'user', content: 'mine' }] },
      { key: 'other-key', headers: { 'idempotency-key': key } },
    );
    const theirRetry = await http.post(
      `/v1/sessions/${sid}/messages`,
      { messages: [{ role: 'user', content: 'mine' }] },
      { key: 'other-key', headers: { 'idempotency-key': key } },
    );
    const myRetry = await http.post(
      `/v1/sessions/${sid}/messages`,
      { messages: [{ role: 'user', content: 'mine' }] },
      { headers: { 'idempotency-key': key } },
    );

    // Assess: each tenant ran its own request once and gets its own answer back.
    expect(mine.status).toBe(201);
    expect(theirs.status).toBe(201);
    expect(theirs.headers.get('idempotency-replayed')).toBeNull();
    expect(theirs.body.head).not.toBe(mine.body.head);
    expect(seen(theirRetry)).toEqual(seen(theirs));
    expect(seen(myRetry)).toEqual(seen(mine));
    expect((await http.get(`/v1/sessions/${sid}/messages`)).body.messages).toHaveLength(1);
    expect((await http.get(`/v1/sessions/${sid}/messages`, { key: 'other-key' })).body.messages).toHaveLength(1);
  });
});
