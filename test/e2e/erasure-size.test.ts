import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ApiClient, uniqueId } from '../helpers/api-client.js';
import { type RunningApi, startApi } from '../helpers/e2e.js';

/**
 * Erasure of a user larger than one request may close (API.md section 12, docs/api.md §2b),
 * through `npm start` with the change hook and the IAM gate, and a `DELETE` that waits for no
 * time at all (`AGENTSTATE_ERASURE_WAIT_MS=0`): it answers `409 conflict` with the erasure's
 * id while the change hook closes, the erasure goes on by itself, and the `DELETE` sent again
 * joins it and answers `202` once everything is closed; from that `202` nothing of the user is
 * readable, and once `done` the counts are those of what there was.
 */

let api: RunningApi;
let http: ApiClient;

beforeAll(async () => {
  api = await startApi({ AGENTSTATE_ERASURE_WAIT_MS: '0' });
  http = api.client;
});
afterAll(async () => {
  await api?.stop();
});

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe('DELETE /v1/users/{userId} of a user larger than its wait', () => {
  it('answers 409 with the erasure while the change hook closes, then 202 when sent again, and all is unreadable from it', async () => {
    // Prepare: 30 sessions with a version each, a profile, 120 memory items in three namespaces.
    const user = uniqueId('big');
    const sids = Array.from({ length: 30 }, (_, index) => `${user}-s${index}`);
    await Promise.all(
      sids.map(async (sid) => {
        expect((await http.post('/v1/sessions', { sessionId: sid, userId: user, metadata: { plan: user } })).status).toBe(201);
        expect((await http.patch(`/v1/sessions/${sid}/state`, { secret: 'old' })).status).toBe(200);
      }),
    );
    const commit = await http.post(`/v1/sessions/${sids[0]}/commits`, {
      commands: [{ key: 'language', scope: 'profile', merge: 'disjoint', set: 'en' }],
    });
    expect(commit.status).toBe(200);
    const paths = Array.from({ length: 120 }, (_, index) => `users/${user}/n${index % 3}/k${index}`);
    for (let start = 0; start < paths.length; start += 20) {
      const puts = await Promise.all(
        paths.slice(start, start + 20).map((path) => http.put(`/v1/memory/${path}`, { value: { old: true } })),
      );
      expect(puts.every((put) => put.status === 201)).toBe(true);
    }

    // Act: the DELETE, then the same DELETE again until it answers 202.
    const first = await http.delete(`/v1/users/${user}`);
    let again = first;
    for (let attempt = 0; again.status === 409 && attempt < 300; attempt++) {
      await sleep(100);
      again = await http.delete(`/v1/users/${user}`);
    }

    // Assess: 409 naming the erasure, then 202 naming the same one.
    expect(first.status).toBe(409);
    expect(first.body).toMatchObject({ code: 'conflict', erasureId: expect.any(String) });
    expect(again.status).toBe(202);
    expect(again.body.erasureId).toBe(first.body.erasureId);
    // From the 202 on, none of it is readable.
    const reads = await Promise.all(sids.map((sid) => http.get(`/v1/sessions/${sid}`)));
    expect(reads.map((read) => read.status)).toEqual(sids.map(() => 404));
    expect((await http.get(`/v1/sessions/${sids[1]}/state`)).body).toMatchObject({ state: null, version: 0 });
    expect((await http.get(`/v1/sessions?userId=${user}&limit=100`)).body.sessions).toEqual([]);
    expect((await http.get(`/v1/sessions?metadata.plan=${user}&limit=100`)).body.sessions).toEqual([]);
    expect((await http.get(`/v1/profiles/${user}/state`)).body).toMatchObject({ state: null, version: 0 });
    const items = await Promise.all(paths.slice(0, 30).map((path) => http.get(`/v1/memory/${path}`)));
    expect(items.map((item) => item.status)).toEqual(items.map(() => 404));
    expect((await http.post('/v1/memory/search', { namespacePrefix: ['users', user] })).body.items).toEqual([]);
    expect((await http.get(`/v1/memory?prefix=users/${user}`)).body.namespaces).toEqual([]);
    // Done, with the counts of what there was.
    let erasure = (await http.get(`/v1/erasures/${first.body.erasureId}`)).body;
    for (let attempt = 0; erasure.status !== 'done' && attempt < 300; attempt++) {
      await sleep(100);
      erasure = (await http.get(`/v1/erasures/${first.body.erasureId}`)).body;
    }
    expect(erasure).toMatchObject({ status: 'done', sessions: 30, memoryItems: 120, documents: 1 });
  });
});
