import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ApiClient, uniqueId } from '../helpers/api-client.js';
import { type RunningApi, startApi } from '../helpers/e2e.js';

/**
 * Blind commits that change only a profile or the shared document (API.md section 8). The
 * shared document is written key by key in one update that numbers its own version
 * (document-store.ts `writeDocument`), a profile in a transaction that also checks the
 * session's user: what a client sees is the same for both, what a read-modify-write of the
 * whole document gave (merge policies, size limit, versions), and concurrent commits to the
 * same document, even to one key of it, all land without losing a member, with versions
 * contiguous and each answered once.
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

const KIB = 1024;
const LIMIT = 256 * KIB;
const set = (key: string, value: unknown, merge: string, scope: string) => ({ key, scope, merge, set: value });
const remove = (key: string, scope: string) => ({ key, scope, merge: 'disjoint', remove: true });
const commit = (sid: string, commands: unknown[]) => http.post(`/v1/sessions/${sid}/commits`, { commands });

/** A session of its own user, to commit a profile (and the shared document) from. */
async function sessionOf(label: string): Promise<{ sid: string; user: string }> {
  const sid = uniqueId(label);
  const user = uniqueId(`${label}-user`);
  expect((await http.post('/v1/sessions', { sessionId: sid, userId: user })).status).toBe(201);
  return { sid, user };
}

const documentPath = (scope: string, user: string) => (scope === 'shared' ? '/v1/shared/state' : `/v1/profiles/${user}/state`);

describe.each(['shared', 'profile'])('a blind commit to the %s document alone', (scope) => {
  it('follows the merge policies key by key, as a read-modify-write of the whole document did', async () => {
    // Prepare: keys of this test's own, in a document other tests may write too.
    const { sid, user } = await sessionOf(`policies-${scope}`);
    const k = (name: string) => `${sid}-${name}`;
    const read = async () => (await http.get(documentPath(scope, user))).body;
    const start = (await read()).version as number;

    // Act and assess, one commit after the other.
    const steps: Array<[unknown[], Record<string, unknown>]> = [
      // Merged into a key that is not there: the object itself.
      [[set(k('a'), { x: 1 }, 'commutative', scope)], { [k('a')]: { x: 1 } }],
      // Into an object: its members are added, or replaced.
      [[set(k('a'), { y: 2, x: 3 }, 'commutative', scope)], { [k('a')]: { x: 3, y: 2 } }],
      // Into a value that is not an object: the object replaces it.
      [[set(k('b'), 'text', 'disjoint', scope)], { [k('a')]: { x: 3, y: 2 }, [k('b')]: 'text' }],
      [[set(k('b'), { z: 1 }, 'commutative', scope)], { [k('a')]: { x: 3, y: 2 }, [k('b')]: { z: 1 } }],
      // A set replaces the whole object: none of its members stays.
      [[set(k('a'), { only: true }, 'disjoint', scope)], { [k('a')]: { only: true }, [k('b')]: { z: 1 } }],
      // Removed, then merged: the merge's object alone.
      [[remove(k('a'), scope)], { [k('b')]: { z: 1 } }],
      [[set(k('a'), { again: 1 }, 'commutative', scope)], { [k('a')]: { again: 1 }, [k('b')]: { z: 1 } }],
      // Members no map may hold (an empty name, __proto__) and what is merged into them later.
      [[set(k('c'), JSON.parse('{"":1,"__proto__":2}'), 'commutative', scope)], {}],
      [[set(k('c'), { d: 4 }, 'commutative', scope)], {}],
      [[set(k('a'), { '': 'empty' }, 'commutative', scope)], { [k('a')]: { again: 1, '': 'empty' } }],
      // Several keys and policies in one batch, folded first: one version.
      [
        [
          set(k('e'), 1, 'disjoint', scope),
          set(k('e'), 2, 'disjoint', scope),
          set(k('f'), { m: 1 }, 'commutative', scope),
          remove(k('b'), scope),
        ],
        { [k('e')]: 2, [k('f')]: { m: 1 } },
      ],
      // Nested values.
      [[set(k('g'), { deep: { list: [1, 'two', null, { three: 3 }] } }, 'commutative', scope)], {}],
    ];
    let version = start;
    for (const [index, [commands, expected]] of steps.entries()) {
      const response = await commit(sid, commands);
      expect(response.status, `step ${index}: ${response.text}`).toBe(200);
      version++;
      const document = response.body[scope];
      expect(document.version, `step ${index}`).toBe(version);
      expect(document.state, `step ${index}`).toMatchObject(expected);
      const stored = await read();
      expect(stored.version).toBe(version);
      expect(stored.state).toEqual(document.state);
    }
    const after = await http.get(documentPath(scope, user));
    expect(after.body.state).not.toHaveProperty(k('b'));
    expect(after.text).toContain(`${JSON.stringify(k('c'))}:{"":1,"__proto__":2,"d":4}`);
    expect(after.body.state[k('g')]).toEqual({ deep: { list: [1, 'two', null, { three: 3 }] } });

    // Numbers as they were sent, in a key merged member by member.
    const exact = await http.request('POST', `/v1/sessions/${sid}/commits`, {
      raw: `{"commands":[{"key":${JSON.stringify(k('n'))},"scope":"${scope}","merge":"commutative","set":{"big":12345678901234567890,"one":1.0}}]}`,
    });
    expect(exact.status, exact.text).toBe(200);
    version++;
    expect((await http.get(documentPath(scope, user))).text).toContain(`${JSON.stringify(k('n'))}:{"big":12345678901234567890,"one":1.0}`);

    // What changes nothing records no version: a key removed that is not there, a value set again.
    const same = await commit(sid, [remove(k('missing'), scope), set(k('e'), 2, 'disjoint', scope)]);
    expect(same.status).toBe(200);
    expect(same.body[scope].version).toBe(version);
    expect((await read()).version).toBe(version);
  });

  it('lands 50 concurrent commutative commits to one key, member by member: all 200, every member there, versions contiguous', async () => {
    // Prepare
    const { sid, user } = await sessionOf(`crowd-${scope}`);
    const key = `${sid}-votes`;
    await commit(sid, [set(key, { seed: true }, 'commutative', scope)]);
    const before = (await http.get(documentPath(scope, user))).body.version as number;
    const writers = 50;

    // Act
    const answers = await Promise.all(
      Array.from({ length: writers }, (_, index) => commit(sid, [set(key, { [`c${index}`]: index }, 'commutative', scope)])),
    );

    // Assess
    expect(answers.filter((answer) => answer.status !== 200).map((answer) => answer.text)).toEqual([]);
    const after = (await http.get(documentPath(scope, user))).body;
    expect(after.version).toBe(before + writers);
    expect(after.state[key]).toEqual({
      seed: true,
      ...Object.fromEntries(Array.from({ length: writers }, (_, index) => [`c${index}`, index])),
    });
    const versions = answers.map((answer) => answer.body[scope].version as number).sort((a, b) => a - b);
    expect(versions).toEqual(Array.from({ length: writers }, (_, index) => before + index + 1));
    // Each answer holds its own member, and the document as of its version.
    for (const [index, answer] of answers.entries()) expect(answer.body[scope].state[key][`c${index}`]).toBe(index);
  });

  it('refuses a commit past 256 KiB with 413 naming the scope, and writes nothing', async () => {
    // Prepare: a document near its limit.
    const { sid, user } = await sessionOf(`limit-${scope}`);
    const fill = scope === 'shared' ? 'x'.repeat(10 * KIB) : 'x'.repeat(200 * KIB);
    await commit(sid, [set(`${sid}-fill`, fill, 'disjoint', scope)]);
    const before = (await http.get(documentPath(scope, user))).body;
    const room = LIMIT - JSON.stringify(before.state).length;

    // Act: one key that alone passes the limit, and one that passes it with what is stored.
    const alone = await commit(sid, [set(`${sid}-alone`, 'y'.repeat(300 * KIB), 'disjoint', scope)]);
    const withStored = await commit(sid, [set(`${sid}-more`, { m: 'y'.repeat(room) }, 'commutative', scope)]);

    // Assess
    for (const response of [alone, withStored]) {
      expect(response.status, response.text).toBe(413);
      expect(response.body).toMatchObject({ code: 'state_too_large', limitBytes: LIMIT, scope });
      expect(response.body.sizeBytes).toBeGreaterThan(LIMIT);
    }
    expect((await http.get(documentPath(scope, user))).body).toEqual(before);
  });
});

describe('concurrent commits that together would pass a document’s limit', () => {
  it('keeps the profile within 256 KiB: each commit lands whole or answers 413, none 500, versions contiguous', async () => {
    // Prepare: a profile at about 150 KiB; 30 writers each add 10 KiB, of which about 10 fit.
    const { sid, user } = await sessionOf('near-limit');
    await commit(sid, [set('fill', 'x'.repeat(150 * KIB), 'disjoint', 'profile')]);
    const writers = 30;

    // Act
    const answers = await Promise.all(
      Array.from({ length: writers }, (_, index) => commit(sid, [set(`k${index}`, { v: 'y'.repeat(10 * KIB) }, 'commutative', 'profile')])),
    );

    // Assess
    const statuses = answers.map((answer) => answer.status);
    expect(statuses.filter((status) => status !== 200 && status !== 413)).toEqual([]);
    const landed = answers.flatMap((answer, index) => (answer.status === 200 ? [index] : []));
    expect(landed.length).toBeGreaterThan(0);
    expect(landed.length).toBeLessThan(writers);
    for (const answer of answers)
      if (answer.status === 413) expect(answer.body).toMatchObject({ code: 'state_too_large', scope: 'profile' });
    const profile = (await http.get(`/v1/profiles/${user}/state`)).body;
    expect(Buffer.byteLength(JSON.stringify(profile.state))).toBeLessThanOrEqual(LIMIT);
    expect(profile.version).toBe(1 + landed.length);
    expect(Object.keys(profile.state).sort()).toEqual(['fill', ...landed.map((index) => `k${index}`)].sort());
    const versions = landed.map((index) => answers[index]?.body.profile.version as number).sort((a, b) => a - b);
    expect(versions).toEqual(Array.from({ length: landed.length }, (_, index) => index + 2));
  });
});
