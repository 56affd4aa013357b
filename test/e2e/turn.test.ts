import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ApiClient, uniqueId } from '../helpers/api-client.js';
import { type RunningApi, startApi } from '../helpers/e2e.js';

/**
 * An append that carries the new head's state (API.md section 3): the messages and the
 * version written together, all or nothing, in one request. (50 such turns on one session at
 * once are in many-at-once.test.ts, which runs alone.)
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

const MiB = 1024 * 1024;

describe('POST messages with state', () => {
  it('appends the messages and records the new head state in one request, the parent left as it was', async () => {
    // Prepare
    const sid = uniqueId('turn');
    await http.put(`/v1/sessions/${sid}/state`, { topic: 'trips', notes: { a: 1, b: 2 } });

    // Act: a merge patch on the state the head starts with (its parent's).
    const turn = await http.post(`/v1/sessions/${sid}/messages`, {
      messages: [
        { id: 'u1', role: 'user', content: 'Lisbon?' },
        { id: 'a1', role: 'assistant', content: 'Yes' },
      ],
      state: { destination: 'Lisbon', notes: { b: null } },
    });
    const head = await http.get(`/v1/sessions/${sid}/state`);
    const atRoot = await http.get(`/v1/sessions/${sid}/state?node=root`);
    const version = await http.get(`/v1/sessions/${sid}/versions/2`);

    // Assess
    expect(turn.status).toBe(201);
    expect(turn.body).toMatchObject({
      head: 'a1',
      version: 2,
      changed: true,
      state: { topic: 'trips', notes: { a: 1 }, destination: 'Lisbon' },
    });
    expect(turn.body.nodes.map((node: { id: string; stateVersion: number }) => [node.id, node.stateVersion])).toEqual([
      ['u1', 1],
      ['a1', 2],
    ]);
    expect(head.body).toMatchObject({ node: 'a1', version: 2, state: { topic: 'trips', notes: { a: 1 }, destination: 'Lisbon' } });
    expect(atRoot.body).toMatchObject({ version: 1, state: { topic: 'trips', notes: { a: 1, b: 2 } } });
    expect(version.body).toMatchObject({ node: 'a1', prevVersion: 1, cause: 'patch' });
  });

  it('replaces the state with replaceState, under a named parent, and records nothing when it does not change', async () => {
    // Prepare
    const sid = uniqueId('turn-replace');
    await http.post(`/v1/sessions/${sid}/messages`, { messages: [{ id: 'q', role: 'user' }], replaceState: { step: 1, keep: true } });

    // Act: a branch under root, its state whole; then a message that keeps the state as it is.
    const branch = await http.post(`/v1/sessions/${sid}/messages`, {
      parentId: 'root',
      messages: [{ id: 'q2', role: 'user' }],
      replaceState: { step: 2 },
    });
    const same = await http.post(`/v1/sessions/${sid}/messages`, { messages: [{ id: 'r2', role: 'assistant' }], state: { step: 2 } });
    const versions = await http.get(`/v1/sessions/${sid}/versions`);

    // Assess
    expect(branch.body).toMatchObject({ head: 'q2', version: 2, changed: true, state: { step: 2 } });
    expect(same.body).toMatchObject({ head: 'r2', version: 2, changed: false, state: { step: 2 } });
    expect((await http.get(`/v1/sessions/${sid}/state?node=q`)).body).toMatchObject({ version: 1, state: { step: 1, keep: true } });
    expect(versions.body.versions.map((one: { version: number; cause: string }) => [one.version, one.cause])).toEqual([
      [2, 'replace'],
      [1, 'replace'],
    ]);
  });

  it('writes nothing when If-Match names another version of the parent state: 412, no node, no version', async () => {
    // Prepare
    const sid = uniqueId('turn-if-match');
    await http.put(`/v1/sessions/${sid}/state`, { n: 1 });
    await http.patch(`/v1/sessions/${sid}/state`, { n: 2 });

    // Act
    const stale = await http.post(
      `/v1/sessions/${sid}/messages`,
      { messages: [{ id: 'late', role: 'user' }], state: { n: 3 } },
      { headers: { 'if-match': '"1"' } },
    );
    const fresh = await http.post(
      `/v1/sessions/${sid}/messages`,
      { messages: [{ id: 'now', role: 'user' }], state: { n: 3 } },
      { headers: { 'if-match': '"2"' } },
    );

    // Assess
    expect(stale.status).toBe(412);
    expect(stale.body).toMatchObject({ code: 'version_mismatch', currentVersion: 2 });
    expect((await http.get(`/v1/sessions/${sid}/nodes/late`)).status).toBe(404);
    expect(fresh.status).toBe(201);
    expect(fresh.body).toMatchObject({ head: 'now', version: 3, state: { n: 3 } });
    expect((await http.get(`/v1/sessions/${sid}`)).body).toMatchObject({ head: 'now', version: 3 });
  });

  it('refuses state with replaceState (400), an over-limit state (413 state_too_large) and writes nothing', async () => {
    // Prepare
    const sid = uniqueId('turn-refused');
    const big = 'x'.repeat(4 * MiB);

    // Act
    const both = await http.post(`/v1/sessions/${sid}/messages`, { messages: [{ id: 'm', role: 'user' }], state: {}, replaceState: {} });
    const tooLarge = await http.post(`/v1/sessions/${sid}/messages`, { messages: [{ id: 'm', role: 'user' }], replaceState: { big } });
    // Up to the state's limit plus the messages' is a body the route reads.
    const fits = await http.post(`/v1/sessions/${sid}/messages`, {
      messages: Array.from({ length: 4 }, (_, index) => ({ id: `m${index}`, role: 'user', content: 'y'.repeat(250 * 1024) })),
      replaceState: { big: 'z'.repeat(4 * MiB - 100) },
    });

    // Assess
    expect(both.status).toBe(400);
    expect(both.body.code).toBe('invalid_request');
    expect(tooLarge.status).toBe(413);
    expect(tooLarge.body).toMatchObject({ code: 'state_too_large', limitBytes: 4 * MiB });
    expect(fits.status).toBe(201);
    expect(fits.body).toMatchObject({ head: 'm3', version: 1, changed: true });
  });
});
