import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ApiClient, uniqueId } from '../helpers/api-client.js';
import { type RunningApi, startApi } from '../helpers/e2e.js';

let api: RunningApi;
let http: ApiClient;

beforeAll(async () => {
  api = await startApi();
  http = api.client;
});
afterAll(async () => {
  await api?.stop();
});

const statePath = (sid: string, query = '') => `/v1/sessions/${sid}/state${query}`;

describe('state reads and writes', () => {
  it('reads an unknown session as null at version 0', async () => {
    const response = await http.get(statePath(uniqueId('empty')));

    expect(response.status).toBe(200);
    expect(response.body).toMatchObject({ node: 'root', version: 0, state: null, agent: null });
    expect(response.headers.get('etag')).toBe('"0"');
  });

  it('applies PATCH as an RFC 7396 merge patch and PUT as a replacement', async () => {
    // Prepare
    const sid = uniqueId('patch');

    // Act
    const first = await http.patch(statePath(sid), { a: 1, b: { c: 2, d: [1, 2] } });
    const second = await http.request('PATCH', statePath(sid), {
      json: { b: { c: null, e: 'x' }, f: null },
      contentType: 'application/merge-patch+json',
    });
    const replaced = await http.put(statePath(sid), { only: true });
    const read = await http.get(statePath(sid));

    // Assess
    expect(first.body).toMatchObject({ version: 1, prevVersion: 0, changed: true, state: { a: 1, b: { c: 2, d: [1, 2] } } });
    expect(second.status).toBe(200);
    expect(second.body).toMatchObject({ version: 2, prevVersion: 1, changed: true, state: { a: 1, b: { d: [1, 2], e: 'x' } } });
    expect(replaced.body).toMatchObject({ version: 3, state: { only: true } });
    expect(read.body).toMatchObject({ version: 3, state: { only: true }, node: 'root' });
    expect(read.headers.get('etag')).toBe('"3"');
  });

  it('records no version for a write equal to the current state', async () => {
    const sid = uniqueId('noop');
    await http.put(statePath(sid), { b: 1, a: [1, { x: null }] });

    // Same value, keys in another order: JSON equality ignores key order.
    const same = await http.put(statePath(sid), { a: [1, { x: null }], b: 1 });
    const samePatch = await http.patch(statePath(sid), { b: 1 });
    const missingKeyIsNotNull = await http.put(statePath(sid), { a: [1, {}], b: 1 });

    expect(same.body).toMatchObject({ version: 1, prevVersion: 1, changed: false });
    expect(samePatch.body).toMatchObject({ version: 1, changed: false });
    expect(missingKeyIsNotNull.body).toMatchObject({ version: 2, changed: true });
    const history = await http.get(`/v1/sessions/${sid}/versions`);
    expect(history.body.versions.map((v: { version: number }) => v.version)).toEqual([2, 1]);
  });

  it('clears with {} and replaces the whole value with a non-object patch', async () => {
    const sid = uniqueId('clear');
    await http.put(statePath(sid), { a: 1 });

    const cleared = await http.put(statePath(sid), {});
    const scalar = await http.patch(statePath(sid), 42);
    const nulled = await http.patch(statePath(sid), null);

    expect(cleared.body.state).toEqual({});
    expect(scalar.body.state).toBe(42);
    expect(nulled.body).toMatchObject({ state: null, version: 4, changed: true });
  });

  it('answers 412 version_mismatch under a stale If-Match and writes nothing', async () => {
    const sid = uniqueId('ifmatch');
    const first = await http.put(statePath(sid), { n: 1 });
    const etag = first.headers.get('etag') as string;
    await http.patch(statePath(sid), { n: 2 });

    const stale = await http.patch(statePath(sid), { n: 3 }, { headers: { 'if-match': etag } });
    const fresh = await http.patch(statePath(sid), { n: 3 }, { headers: { 'if-match': '"2"' } });

    expect(stale.status).toBe(412);
    expect(stale.headers.get('content-type')).toContain('application/problem+json');
    expect(stale.body).toMatchObject({ code: 'version_mismatch', status: 412, currentVersion: 2 });
    expect(fresh.status).toBe(200);
    expect(fresh.body).toMatchObject({ version: 3, state: { n: 3 } });
    expect((await http.get(statePath(sid))).body.version).toBe(3);
  });

  it('refuses state over 4 MiB with 413 state_too_large and writes nothing', async () => {
    const sid = uniqueId('large');
    await http.put(statePath(sid), { small: true });

    const big = await http.put(statePath(sid), { blob: 'x'.repeat(4 * 1024 * 1024) });
    const grownByPatch = await http.patch(statePath(sid), { blob: 'y'.repeat(3 * 1024 * 1024), more: 'z'.repeat(1024 * 1024) });
    const huge = await http.put(statePath(sid), { blob: 'x'.repeat(5.5 * 1024 * 1024) });

    for (const response of [big, grownByPatch, huge]) {
      expect(response.status).toBe(413);
      expect(response.body).toMatchObject({ code: 'state_too_large', limitBytes: 4194304 });
    }
    expect((await http.get(statePath(sid))).body).toMatchObject({ version: 1, state: { small: true } });
  });

  it('accepts state of exactly the limit', async () => {
    const sid = uniqueId('limit');
    // {"s":"…"} is 8 bytes of JSON around the string.
    const state = { s: 'x'.repeat(4 * 1024 * 1024 - 8) };

    const response = await http.put(statePath(sid), state);

    expect(response.status).toBe(200);
    expect((await http.get(statePath(sid))).body.state.s.length).toBe(4 * 1024 * 1024 - 8);
  });

  it('keeps state verbatim: unicode, big numbers and prototype-looking keys', async () => {
    const sid = uniqueId('verbatim');
    const raw = '{"__proto__":{"polluted":true},"constructor":{"prototype":1},"emoji":"😀 é ∑","n":1e300,"deep":[[[{"a":[]}]]]}';

    const response = await http.request('PUT', statePath(sid), { raw });
    const read = await http.get(statePath(sid));

    expect(response.status).toBe(200);
    expect(read.text).toContain('"__proto__":{"polluted":true}');
    expect(read.body.state.emoji).toBe('😀 é ∑');
    expect(read.body.state.n).toBe(1e300);
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
  });
});

describe('versions and time travel', () => {
  it('lists history newest first, paginates, and reads any version', async () => {
    const sid = uniqueId('history');
    for (let n = 1; n <= 5; n++) await http.patch(statePath(sid), { n });

    const page1 = await http.get(`/v1/sessions/${sid}/versions?limit=2`);
    const page2 = await http.get(`/v1/sessions/${sid}/versions?limit=2&cursor=${page1.body.next}`);
    const page3 = await http.get(`/v1/sessions/${sid}/versions?limit=2&cursor=${page2.body.next}`);
    const one = await http.get(`/v1/sessions/${sid}/versions/2`);
    const travelled = await http.get(statePath(sid, '?version=3'));
    const missing = await http.get(`/v1/sessions/${sid}/versions/99`);
    const missingTravel = await http.get(statePath(sid, '?version=99'));

    const numbers = [...page1.body.versions, ...page2.body.versions, ...page3.body.versions].map((v) => v.version);
    expect(numbers).toEqual([5, 4, 3, 2, 1]);
    expect(page3.body.next).toBeUndefined();
    expect(one.body).toMatchObject({ version: 2, node: 'root', prevVersion: 1, cause: 'patch', author: null, state: { n: 2 } });
    expect(travelled.body).toMatchObject({ version: 3, state: { n: 3 } });
    expect(travelled.headers.get('etag')).toBe('"3"');
    expect(missing.status).toBe(404);
    expect(missing.body.code).toBe('version_not_found');
    expect(missingTravel.body.code).toBe('version_not_found');
  });

  it('refuses a version number with a leading zero everywhere, as If-Match does: one rule', async () => {
    const sid = uniqueId('zeros');
    for (let n = 1; n <= 7; n++) await http.patch(statePath(sid), { n });

    // Act
    const travelled = await http.get(statePath(sid, '?version=07'));
    const one = await http.get(`/v1/sessions/${sid}/versions/07`);
    const matched = await http.patch(statePath(sid), { n: 8 }, { headers: { 'if-match': '"07"' } });
    const limited = await http.get(`/v1/sessions/${sid}/versions?limit=02`);
    const plain = await http.get(statePath(sid, '?version=7'));

    // Assess: before, ?version=07, /versions/07 and limit=02 were read as 7, 7 and 2.
    for (const refused of [travelled, one, matched, limited]) {
      expect(refused.status, refused.text).toBe(400);
      expect(refused.body.code).toBe('invalid_request');
    }
    expect(plain.body).toMatchObject({ version: 7, state: { n: 7 } });
  });

  it('refuses a versions cursor of a session deleted since, on the session of the same id after it', async () => {
    // Prepare: a cursor into the first life's history, then the session deleted and written again.
    const sid = uniqueId('lives');
    for (let n = 1; n <= 5; n++) await http.patch(statePath(sid), { life: 1, n });
    const page = await http.get(`/v1/sessions/${sid}/versions?limit=2`);
    expect(page.body.next).toBeDefined();
    expect((await http.delete(`/v1/sessions/${sid}`)).status).toBe(204);
    for (let n = 1; n <= 5; n++) await http.patch(statePath(sid), { life: 2, n });

    // Act
    const stale = await http.get(`/v1/sessions/${sid}/versions?limit=2&cursor=${page.body.next}`);

    // Assess: before, 200 with no versions and no next, as if the history had ended.
    expect(stale.status, stale.text).toBe(400);
    expect(stale.body.code).toBe('invalid_request');
  });

  it('records cause and author', async () => {
    const sid = uniqueId('author');
    await http.patch(statePath(sid), { a: 1 }, { headers: { 'x-agent-id': 'planner' } });
    await http.put(statePath(sid), { a: 2 });

    const versions = (await http.get(`/v1/sessions/${sid}/versions`)).body.versions;

    expect(versions[0]).toMatchObject({ version: 2, cause: 'replace', author: null });
    expect(versions[1]).toMatchObject({ version: 1, cause: 'patch', author: 'planner' });
  });
});

describe('Idempotency-Key', () => {
  it('replays the first answer to a retry and writes once', async () => {
    const sid = uniqueId('idem');
    const key = uniqueId('key');

    const first = await http.patch(statePath(sid), { count: 1 }, { headers: { 'idempotency-key': key } });
    const retry = await http.patch(statePath(sid), { count: 1 }, { headers: { 'idempotency-key': key } });
    const reused = await http.patch(statePath(sid), { count: 2 }, { headers: { 'idempotency-key': key } });

    expect(first.status).toBe(200);
    expect(retry.status).toBe(200);
    expect(retry.body).toEqual(first.body);
    expect(retry.headers.get('etag')).toBe(first.headers.get('etag'));
    expect(reused.status).toBe(422);
    expect(reused.body.code).toBe('idempotency_key_reused');
    const otherPrecondition = await http.patch(statePath(sid), { count: 1 }, { headers: { 'idempotency-key': key, 'if-match': '"1"' } });
    expect(otherPrecondition.body.code).toBe('idempotency_key_reused');
    const history = await http.get(`/v1/sessions/${sid}/versions`);
    expect(history.body.versions).toHaveLength(1);
  });

  it('answers 422 to the same key and body sent as another kind of patch, writing nothing', async () => {
    // Prepare: [] as a JSON Patch changes nothing; as a merge patch it replaces the state.
    const sid = uniqueId('idem-type');
    const key = uniqueId('key');
    await http.put(statePath(sid), { kept: true });
    const asOperations = await http.request('PATCH', statePath(sid), {
      raw: '[]',
      contentType: 'application/json-patch+json',
      headers: { 'idempotency-key': key },
    });

    // Act
    const asMergePatch = await http.request('PATCH', statePath(sid), {
      raw: '[]',
      contentType: 'application/merge-patch+json',
      headers: { 'idempotency-key': key },
    });

    // Assess: not the first answer replayed for a request that means something else.
    expect(asOperations.body).toMatchObject({ version: 1, changed: false });
    expect(asMergePatch.status).toBe(422);
    expect(asMergePatch.body.code).toBe('idempotency_key_reused');
    expect(asMergePatch.headers.get('idempotency-replayed')).toBeNull();
    expect((await http.get(statePath(sid))).body).toMatchObject({ version: 1, state: { kept: true } });
  });

  it('does not remember a failed request, so its retry runs', async () => {
    const sid = uniqueId('idem-fail');
    const key = uniqueId('key');
    await http.put(statePath(sid), { v: 1 });

    const failed = await http.put(statePath(sid), { v: 2 }, { headers: { 'idempotency-key': key, 'if-match': '"0"' } });
    const retried = await http.put(statePath(sid), { v: 2 }, { headers: { 'idempotency-key': key, 'if-match': '"1"' } });

    expect(failed.status).toBe(412);
    // Different If-Match is the same request body and path: the key is free again after a failure.
    expect(retried.status).toBe(200);
    expect(retried.body.version).toBe(2);
  });

  it('keeps keys per tenant', async () => {
    const key = uniqueId('key');
    const sid = uniqueId('idem-tenant');

    const mine = await http.put(statePath(sid), { t: 'a' }, { headers: { 'idempotency-key': key } });
    const theirs = await http.put(statePath(sid), { t: 'b' }, { key: 'other-key', headers: { 'idempotency-key': key } });

    expect(mine.status).toBe(200);
    expect(theirs.status).toBe(200);
    expect(theirs.body.state).toEqual({ t: 'b' });
  });
});

describe('concurrency', () => {
  it('loses no update among 25 concurrent writers and keeps versions contiguous', async () => {
    // Prepare
    const sid = uniqueId('race');
    const writers = 25;

    // Act
    const responses = await Promise.all(
      Array.from({ length: writers }, (_, index) => http.patch(statePath(sid), { [`writer${index}`]: index })),
    );

    // Assess
    expect(responses.map((response) => response.status)).toEqual(Array(writers).fill(200));
    const final = await http.get(statePath(sid));
    expect(Object.keys(final.body.state)).toHaveLength(writers);
    expect(final.body.version).toBe(writers);
    const versions = responses.map((response) => response.body.version).sort((a, b) => a - b);
    expect(versions).toEqual(Array.from({ length: writers }, (_, index) => index + 1));
    const history = await http.get(`/v1/sessions/${sid}/versions?limit=100`);
    expect(history.body.versions.map((v: { version: number }) => v.version)).toEqual(
      Array.from({ length: writers }, (_, index) => writers - index),
    );
    // Each version builds on the one before it: a chain with no gaps.
    for (const version of history.body.versions) expect(version.prevVersion).toBe(version.version - 1);
  });

  it('lets exactly one of several If-Match writers on the same version win', async () => {
    const sid = uniqueId('race-ifmatch');
    await http.put(statePath(sid), { winner: null });

    const responses = await Promise.all(
      Array.from({ length: 8 }, (_, index) => http.put(statePath(sid), { winner: index }, { headers: { 'if-match': '"1"' } })),
    );

    const statuses = responses.map((response) => response.status).sort();
    expect(statuses.filter((status) => status === 200)).toHaveLength(1);
    expect(statuses.filter((status) => status === 412)).toHaveLength(7);
    expect((await http.get(statePath(sid))).body.version).toBe(2);
  });
});

// From turn.test.ts, a file of its own before, which started a server as this one does: its
// tests on this file's, each on a session of its own.
/**
 * An append that carries the new head's state (API.md section 3): the messages and the
 * version written together, all or nothing, in one request. (50 such turns on one session at
 * once are in many-at-once.test.ts, which runs alone.)
 */
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

// From commits.test.ts, a file of its own before, which started a server as this one does: its
// tests on this file's, each on sessions, users and keys of its own (its shared-document keys are
// unique ids, read by key).
const commit = (sid: string, body: unknown, options = {}) => http.post(`/v1/sessions/${sid}/commits`, body, options);
const set = (key: string, value: unknown, merge = 'disjoint', scope = 'thread') => ({ key, scope, merge, set: value });
const remove = (key: string, merge = 'disjoint', scope = 'thread') => ({ key, scope, merge, remove: true });

describe('merge policies within one batch', () => {
  it('disjoint: the later command replaces', async () => {
    const sid = uniqueId('disjoint');
    const response = await commit(sid, { commands: [set('plan', { a: 1 }), set('plan', { b: 2 }), set('other', 1)] });

    expect(response.status).toBe(200);
    expect(response.body).toMatchObject({ version: 1, changed: true, state: { plan: { b: 2 }, other: 1 } });
    const version = await http.get(`/v1/sessions/${sid}/versions/1`);
    expect(version.body).toMatchObject({ cause: 'commit', state: { plan: { b: 2 }, other: 1 } });
  });

  it('commutative: objects shallow-merge, also with the stored value; other values replace', async () => {
    const sid = uniqueId('commutative');
    await http.put(`/v1/sessions/${sid}/state`, { counts: { x: 1, y: 1 }, tag: 'old' });

    const response = await commit(sid, {
      commands: [set('counts', { y: 2 }, 'commutative'), set('counts', { z: 3 }, 'commutative'), set('tag', 'new', 'commutative')],
    });

    expect(response.body.state).toEqual({ counts: { x: 1, y: 2, z: 3 }, tag: 'new' });
  });

  it('exclusive: a second set rejects the whole batch and writes nothing; a remove is not a second set', async () => {
    const sid = uniqueId('exclusive');
    await http.put(`/v1/sessions/${sid}/state`, { owner: 'nobody' });

    const rejected = await commit(sid, {
      commands: [set('note', 'kept?'), set('owner', 'a', 'exclusive'), set('owner', 'b', 'exclusive')],
    });
    const accepted = await commit(sid, { commands: [set('owner', 'a', 'exclusive'), remove('owner', 'exclusive')] });
    const otherScope = await commit(sid, {
      commands: [set('owner', 'x', 'exclusive'), set('owner', 'y', 'exclusive', 'run')],
      runId: 'run-1',
    });

    expect(rejected.status).toBe(409);
    expect(rejected.body).toMatchObject({ code: 'exclusive_conflict', key: 'owner' });
    expect(accepted.status).toBe(200);
    expect(accepted.body.state).toEqual({});
    // The same key in another scope is another slot.
    expect(otherScope.status).toBe(200);
    expect(otherScope.body.state).toEqual({ owner: 'x' });
    expect(otherScope.body.run).toMatchObject({ runId: 'run-1', version: 1, state: { owner: 'y' } });
    const history = await http.get(`/v1/sessions/${sid}/versions`);
    expect(history.body.versions.map((v: { state: unknown }) => v.state)).toEqual([{ owner: 'x' }, {}, { owner: 'nobody' }]);
  });

  it('remove deletes a key; removing a missing key changes nothing', async () => {
    const sid = uniqueId('remove');
    await commit(sid, { commands: [set('a', 1), set('b', 2)] });

    const removed = await commit(sid, { commands: [remove('a')] });
    const again = await commit(sid, { commands: [remove('a')] });

    expect(removed.body).toMatchObject({ version: 2, state: { b: 2 }, changed: true });
    expect(again.body).toMatchObject({ version: 2, changed: false });
  });
});

describe('scopes', () => {
  it('keeps a run document per run, readable on its own', async () => {
    const sid = uniqueId('runs');
    await commit(sid, { runId: 'r1', commands: [set('step', 1, 'disjoint', 'run'), set('log', { a: true }, 'commutative', 'run')] });
    await commit(sid, { runId: 'r1', commands: [set('log', { b: true }, 'commutative', 'run')] });
    await commit(sid, { runId: 'r2', commands: [set('step', 9, 'disjoint', 'run')] });

    const r1 = await http.get(`/v1/sessions/${sid}/runs/r1/state`);
    const r2 = await http.get(`/v1/sessions/${sid}/runs/r2/state`);
    const none = await http.get(`/v1/sessions/${sid}/runs/r3/state`);

    expect(r1.body).toMatchObject({ sessionId: sid, runId: 'r1', version: 2, state: { step: 1, log: { a: true, b: true } } });
    expect(r2.body).toMatchObject({ version: 1, state: { step: 9 } });
    expect(none.body).toMatchObject({ version: 0, state: null });
    expect((await http.get(`/v1/sessions/${sid}`)).body.version).toBe(0);
  });

  it("shares a profile across one user's sessions, and hides it from another tenant", async () => {
    const user = uniqueId('user');
    const first = uniqueId('p1');
    const second = uniqueId('p2');
    await http.post('/v1/sessions', { sessionId: first, userId: user });
    await http.post('/v1/sessions', { sessionId: second, userId: user });

    await commit(first, { commands: [set('language', 'fr', 'disjoint', 'profile')] });
    const fromSecond = await commit(second, { commands: [set('seen', { [second]: true }, 'commutative', 'profile')] });
    const profile = await http.get(`/v1/profiles/${user}/state`);
    const otherTenant = await http.get(`/v1/profiles/${user}/state`, { key: 'other-key' });
    const noUser = await commit(uniqueId('anonymous'), { commands: [set('x', 1, 'disjoint', 'profile')] });

    expect(fromSecond.body.profile).toMatchObject({ userId: user, version: 2, state: { language: 'fr', seen: { [second]: true } } });
    expect(profile.body).toMatchObject({ userId: user, version: 2, state: { language: 'fr' } });
    expect(otherTenant.body).toMatchObject({ version: 0, state: null });
    expect(noUser.status).toBe(400);
  });

  it('shows the shared document to every session of the tenant and to no other tenant', async () => {
    const key = uniqueId('setting');
    await commit(uniqueId('s1'), { commands: [set(key, 'on', 'disjoint', 'shared')] });

    const shared = await http.get('/v1/shared/state');
    const otherTenant = await http.get('/v1/shared/state', { key: 'other-key' });

    expect(shared.body.state[key]).toBe('on');
    expect(otherTenant.body.state?.[key]).toBeUndefined();
  });

  it('refuses thread keys on a state that is not an object', async () => {
    const sid = uniqueId('scalar');
    await http.put(`/v1/sessions/${sid}/state`, 42);

    const response = await commit(sid, { commands: [set('a', 1)] });

    expect(response.status).toBe(409);
    expect(response.body.detail).toContain('not an object');
  });
});

describe('atomicity and concurrency', () => {
  it('fails a batch spanning thread and profile as a whole', async () => {
    const user = uniqueId('user');
    const sid = uniqueId('atomic');
    await http.post('/v1/sessions', { sessionId: sid, userId: user });
    await commit(sid, { commands: [set('t', 1), set('p', 1, 'disjoint', 'profile')] });

    const stale = await commit(sid, { expectedVersion: 0, commands: [set('t', 2), set('p', 2, 'disjoint', 'profile')] });
    const staleProfileOnly = await commit(sid, { expectedVersion: 0, commands: [set('p', 3, 'disjoint', 'profile')] });

    expect(stale.status).toBe(412);
    expect(stale.body).toMatchObject({ code: 'version_mismatch', currentVersion: 1 });
    expect(staleProfileOnly.status).toBe(412);
    expect((await http.get(`/v1/sessions/${sid}/state`)).body.state).toEqual({ t: 1 });
    expect((await http.get(`/v1/profiles/${user}/state`)).body).toMatchObject({ version: 1, state: { p: 1 } });
  });

  it('loses nothing when many clients commit commutatively to one key at once', async () => {
    const sid = uniqueId('crowd');
    const user = uniqueId('user');
    await http.post('/v1/sessions', { sessionId: sid, userId: user });
    // DynamoDB Local runs contending transactions about a second each (real DynamoDB takes
    // milliseconds), so ten clients keep this test well inside the server's retry budget.
    const clients = 10;

    const responses = await Promise.all(
      Array.from({ length: clients }, (_, index) =>
        commit(sid, {
          runId: 'r',
          commands: [
            set('votes', { [`c${index}`]: index }, 'commutative'),
            set('votes', { [`c${index}`]: index }, 'commutative', 'profile'),
            set('votes', { [`c${index}`]: index }, 'commutative', 'run'),
          ],
        }),
      ),
    );

    expect(responses.filter((response) => response.status !== 200).map((response) => response.body)).toEqual([]);
    const thread = await http.get(`/v1/sessions/${sid}/state`);
    const profile = await http.get(`/v1/profiles/${user}/state`);
    const run = await http.get(`/v1/sessions/${sid}/runs/r/state`);
    for (const document of [thread.body, profile.body, run.body]) {
      expect(Object.keys(document.state.votes)).toHaveLength(clients);
      expect(document.version).toBe(clients);
    }
  });

  it('answers bad batches with clear errors and writes nothing', async () => {
    const sid = uniqueId('bad-commit');
    expect((await commit(sid, { commands: [] })).body.code).toBe('invalid_request');
    expect((await commit(sid, { commands: [{ key: 'a', scope: 'thread', merge: 'disjoint' }] })).body.code).toBe('invalid_request');
    expect((await commit(sid, { commands: [{ key: 'a', scope: 'thread', merge: 'disjoint', set: 1, remove: true }] })).body.code).toBe(
      'invalid_request',
    );
    expect((await commit(sid, { commands: [{ key: 'a', scope: 'galaxy', merge: 'disjoint', set: 1 }] })).body.code).toBe('invalid_request');
    expect((await commit(sid, { commands: [set('a', 1, 'disjoint', 'run')] })).body.code).toBe('invalid_request');
    expect((await commit(sid, { commands: [set('a', 1), set('a', 2, 'exclusive')] })).body.code).toBe('invalid_request');
    expect((await commit(sid, { commands: [set('a', 1, 'disjoint', 'run')], runId: 'bad id' })).body.code).toBe('invalid_id');
    expect((await http.get(`/v1/sessions/${sid}`)).status).toBe(404);
  });

  it('refuses a scope grown past its limit with 413 state_too_large naming the scope, and writes nothing', async () => {
    // Prepare: two keys that each fit, but not together: the thread holds 4 MiB, a run 256 KiB.
    const sid = uniqueId('large-commit');
    await commit(sid, { runId: 'r1', commands: [set('small', true), set('small', true, 'disjoint', 'run')] });
    const halfThread = 'x'.repeat(2 * 1024 * 1024 + 1024);
    const halfRun = 'x'.repeat(150 * 1024);

    // Act
    const thread = await commit(sid, { commands: [set('a', halfThread), set('b', halfThread)] });
    const run = await commit(sid, { runId: 'r1', commands: [set('a', halfRun, 'disjoint', 'run'), set('b', halfRun, 'disjoint', 'run')] });

    // Assess: the same answer as a state write over the limit, with the scope that broke it.
    for (const [response, scope, limitBytes] of [
      [thread, 'thread', 4194304],
      [run, 'run', 262144],
    ] as const) {
      expect(response.status).toBe(413);
      expect(response.body).toMatchObject({ code: 'state_too_large', limitBytes, scope });
      expect(response.body.sizeBytes).toBeGreaterThan(limitBytes);
    }
    expect((await http.get(`/v1/sessions/${sid}/state`)).body).toMatchObject({ version: 1, state: { small: true } });
    expect((await http.get(`/v1/sessions/${sid}/runs/r1/state`)).body).toMatchObject({ version: 1, state: { small: true } });
  });
});

describe('decide carries profile and shared', () => {
  it("passes the user's profile and the tenant's shared document to the worker", async () => {
    // A worker that answers with the context it was given.
    const worker = createServer(async (req, res) => {
      let raw = '';
      for await (const chunk of req) raw += chunk;
      const request = JSON.parse(raw);
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ context: { profile: request.profile, shared: request.shared } }));
    });
    await new Promise<void>((resolve) => worker.listen(0, '127.0.0.1', resolve));
    try {
      const agentId = uniqueId('echo');
      const url = `http://127.0.0.1:${(worker.address() as AddressInfo).port}/`;
      await http.put(`/v1/agents/${agentId}`, { worker: { url } });
      const user = uniqueId('user');
      const sid = uniqueId('decide-docs');
      await http.post('/v1/sessions', { sessionId: sid, userId: user, agentId });
      await commit(sid, { commands: [set('tone', 'warm', 'disjoint', 'profile'), set('beta', true, 'disjoint', 'shared')] });

      const decided = await http.post(`/v1/sessions/${sid}/decide`, { trigger: { type: 'tick' } });

      expect(decided.status).toBe(200);
      expect(decided.body.decision.context.profile).toEqual({ tone: 'warm' });
      expect(decided.body.decision.context.shared).toMatchObject({ beta: true });
    } finally {
      await new Promise((resolve) => worker.close(resolve));
    }
  });
});
