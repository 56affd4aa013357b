import { type DynamoDBDocumentClient, QueryCommand } from '@aws-sdk/lib-dynamodb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { session as sessionKey } from '../../functions/store/table/keys.js';
import { defaultTableName } from '../../functions/store/table/table.js';
import { dynamoDbEndpointOf, issueKey, rawTableClient } from '../helpers/admin.js';
import { type ApiClient, apiClient, uniqueId } from '../helpers/api-client.js';
import { type RunningApi, startApi } from '../helpers/e2e.js';
import { EventFixtures, waitFor } from '../helpers/events.js';

/**
 * Erasure of a user (API.md section 12) through `npm start`: from the `202` none of the user's
 * sessions, profile or memory under `users/<userId>` is readable; once `done` (the change hook
 * finishes it, as in AWS) none of it is stored, read raw from DynamoDB Local. Another user, a
 * user whose id begins the same (`u1` and `u10`), and another tenant's user of the same id are
 * untouched; a key limited to agents may not erase; writes racing the erasure leave nothing of
 * before readable, and a write in flight across a `DELETE` of its session leaves nothing of it stored.
 */

let api: RunningApi;
let http: ApiClient;
let other: ApiClient;
let raw: DynamoDBDocumentClient;
let endpoint: string;
const fixtures = new EventFixtures(() => api.url);

beforeAll(async () => {
  api = await startApi({}, { everyCallThroughGate: true });
  http = api.client;
  other = apiClient(api.url, 'other-key');
  endpoint = dynamoDbEndpointOf(api);
  raw = rawTableClient(endpoint);
});
afterAll(async () => {
  await fixtures.close();
  raw?.destroy();
  await api?.stop();
});

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Waits until the erasure is done (the change hook finishes it a moment after the 202). */
async function done(client: ApiClient, erasureId: string): Promise<Record<string, unknown>> {
  for (const deadline = Date.now() + 20_000; Date.now() < deadline; await sleep(25)) {
    const answer = await client.get(`/v1/erasures/${erasureId}`);
    expect(answer.status).toBe(200);
    if (answer.body.status === 'done') return answer.body;
  }
  throw new Error(`erasure ${erasureId} was not done within 20 s`);
}

/** Every item of a partition, read raw. */
async function stored(pk: string): Promise<Array<Record<string, unknown>>> {
  const { Items = [] } = await raw.send(
    new QueryCommand({
      TableName: defaultTableName,
      KeyConditionExpression: 'pk = :pk',
      ExpressionAttributeValues: { ':pk': pk },
      ConsistentRead: true,
    }),
  );
  return Items;
}

/** A session of `userId` with messages and versions. */
async function sessionOf(client: ApiClient, userId: string, prefix: string): Promise<string> {
  const sid = uniqueId(prefix);
  // With metadata: an item of its own beside the session item (session-item.ts), erased with it.
  expect((await client.post('/v1/sessions', { sessionId: sid, userId, metadata: { address: `old ${userId}` } })).status).toBe(201);
  expect(
    (await client.post(`/v1/sessions/${sid}/messages`, { messages: [{ id: 'm1', role: 'user', content: 'my address' }] })).status,
  ).toBe(201);
  expect((await client.patch(`/v1/sessions/${sid}/state`, { secret: `old ${userId}` })).status).toBe(200);
  expect((await client.patch(`/v1/sessions/${sid}/state`, { more: 1 })).status).toBe(200);
  return sid;
}

/** The profile of `userId`, written by a commit in `sid`, a session of that user. */
async function profileOf(client: ApiClient, sid: string, userId: string): Promise<void> {
  const commit = await client.post(`/v1/sessions/${sid}/commits`, {
    commands: [{ key: 'language', scope: 'profile', merge: 'disjoint', set: 'en' }],
  });
  expect(commit.status, JSON.stringify(commit.body)).toBe(200);
  expect((await client.get(`/v1/profiles/${userId}/state`)).body.state).toMatchObject({ language: 'en' });
}

async function remember(client: ApiClient, path: string, value: Record<string, unknown>, embedding?: number[]): Promise<void> {
  const put = await client.put(`/v1/memory/${path}`, { value, ...(embedding ? { embedding } : {}) });
  expect([200, 201]).toContain(put.status);
}

describe('DELETE /v1/users/{userId}', () => {
  it('erases the sessions, profile and memory of the user, readable from the 202, stored until done, and nothing else', async () => {
    // Prepare: u1's three sessions, profile and memory (with a replaced version); u10 beside it;
    // another user of this tenant; the other tenant's u1.
    const user = uniqueId('u1');
    const near = `${user}0`;
    // (Side by side: each session, profile and item its own; the two puts of one item in turn.)
    const [sessions, bystander, nearSession, theirs] = await Promise.all([
      Promise.all([sessionOf(http, user, 'er'), sessionOf(http, user, 'er'), sessionOf(http, user, 'er')]),
      sessionOf(http, 'someone-else', 'by'),
      sessionOf(http, near, 'near'),
      sessionOf(other, user, 'theirs'),
    ]);
    await Promise.all([
      profileOf(http, sessions[0], user),
      profileOf(http, nearSession, near),
      profileOf(other, theirs, user),
      // With embeddings: their codes are kept in pages beside the items (memory-codes.ts), under keys that name the user.
      remember(http, `users/${user}/facts/diet`, { food: 'vegan' }, [0.1, 0.2, 0.3]).then(() =>
        remember(http, `users/${user}/facts/diet`, { food: 'vegetarian' }, [0.3, 0.2, 0.1]),
      ),
      remember(http, `users/${user}/k1`, { a: 1 }, [1, 0, 0]),
      remember(http, `users/${near}/facts/diet`, { food: 'omnivore' }),
      remember(other, `users/${user}/facts/diet`, { food: 'theirs' }),
    ]);
    expect((await stored(`M#local#users/${user}/facts`)).some((item) => String(item.sk).startsWith('V#'))).toBe(true);
    expect((await stored(`S#local#${sessions[0]}`)).some((item) => item.sk === 'SM')).toBe(true);
    // The change hook keeps the replaced version a moment after the put.
    await waitFor('the replaced version kept', async () => {
      const versions = await http.get(`/v1/memory/versions?namespace=users/${user}/facts&key=diet`);
      return versions.body.versions.length === 2 ? true : null;
    });

    // Act
    const erase = await http.delete(`/v1/users/${user}`);

    // Assess: from the 202 on, none of it is readable.
    expect(erase.status).toBe(202);
    const { erasureId } = erase.body;
    expect(erase.headers.get('location')).toBe(`/v1/erasures/${erasureId}`);
    for (const sid of sessions) {
      expect((await http.get(`/v1/sessions/${sid}`)).status).toBe(404);
      expect((await http.get(`/v1/sessions/${sid}/state`)).body).toMatchObject({ state: null, version: 0 });
      expect((await http.get(`/v1/sessions/${sid}/versions/1`)).status).toBe(404);
    }
    expect((await http.get(`/v1/sessions?userId=${user}`)).body.sessions).toEqual([]);
    expect((await http.get(`/v1/profiles/${user}/state`)).body).toMatchObject({ state: null, version: 0 });
    expect((await http.get(`/v1/memory/users/${user}/facts/diet`)).status).toBe(404);
    expect((await http.get(`/v1/memory/users/${user}/k1`)).status).toBe(404);
    expect((await http.post('/v1/memory/search', { namespacePrefix: ['users', user] })).body.items).toEqual([]);
    expect((await http.post('/v1/memory/search', { namespacePrefix: ['users', user], vector: [1, 0, 0] })).body.items).toEqual([]);
    expect((await http.get(`/v1/memory?prefix=users/${user}`)).body.namespaces).toEqual([]);

    const finished = await done(http, erasureId);
    expect(finished).toMatchObject({ erasureId, status: 'done', sessions: 3, memoryItems: 2, documents: 1 });

    // Nothing of it is stored: a session keeps only its delete's fence and the tombstones of its
    // changes (no content, TTL), memory and its history partitions are empty, the profile is gone.
    for (const sid of sessions) {
      const left = await stored(`S#local#${sid}`);
      expect(
        left.every(
          (item) =>
            item.kind === 'x' && Object.keys(item).every((name) => ['pk', 'sk', 'kind', 'createdAt', 'fence', 'expiresAt'].includes(name)),
        ),
      ).toBe(true);
      expect(JSON.stringify(left)).not.toContain('old');
    }
    expect(await stored(`P#local#${user}`)).toEqual([]);
    expect(await stored(`M#local#users/${user}/facts`)).toEqual([]);
    expect(await stored(`M#local#users/${user}`)).toEqual([]);
    expect(await stored(`MH#local#users/${user}/facts#diet`)).toEqual([]);
    const erasureItem = await stored(`E#local#${erasureId}`);
    expect(JSON.stringify(erasureItem)).not.toContain(user);

    // Untouched: the other user, u1's near namesake, the other tenant's u1.
    expect((await http.get(`/v1/sessions/${bystander}/state`)).body).toMatchObject({
      state: { secret: 'old someone-else', more: 1 },
      version: 2,
    });
    expect((await http.get(`/v1/sessions/${nearSession}`)).status).toBe(200);
    expect((await http.get(`/v1/profiles/${near}/state`)).body.state).toMatchObject({ language: 'en' });
    expect((await http.get(`/v1/memory/users/${near}/facts/diet`)).body.value).toEqual({ food: 'omnivore' });
    expect((await other.get(`/v1/sessions/${theirs}/state`)).body.version).toBe(2);
    expect((await other.get(`/v1/profiles/${user}/state`)).body.state).toMatchObject({ language: 'en' });
    expect((await other.get(`/v1/memory/users/${user}/facts/diet`)).body.value).toEqual({ food: 'theirs' });
    // And the other tenant cannot read this tenant's erasure.
    expect((await other.get(`/v1/erasures/${erasureId}`)).status).toBe(404);
  });

  it('erases 100 sessions of the user and none of another user', async () => {
    const user = uniqueId('many');
    const mine = Array.from({ length: 100 }, (_, index) => `${user}-s${index}`);
    const theirs = Array.from({ length: 10 }, (_, index) => `${user}-t${index}`);
    // Made all at once: each its own id, so nothing contends.
    const made = await Promise.all([
      ...mine.map((sid) => http.post('/v1/sessions', { sessionId: sid, userId: user })),
      ...theirs.map((sid) => http.post('/v1/sessions', { sessionId: sid, userId: `${user}-other` })),
    ]);
    expect(made.map((answer) => answer.status)).toEqual(Array(110).fill(201));
    await Promise.all(mine.slice(0, 20).map((sid) => http.patch(`/v1/sessions/${sid}/state`, { n: 1 })));

    const erase = await http.delete(`/v1/users/${user}`);
    expect(erase.status).toBe(202);
    expect(await done(http, erase.body.erasureId)).toMatchObject({ sessions: 100, memoryItems: 0, documents: 0 });

    const gone = await Promise.all(mine.map(async (sid) => (await http.get(`/v1/sessions/${sid}`)).status));
    expect(gone.every((status) => status === 404)).toBe(true);
    const kept = await Promise.all(theirs.map(async (sid) => (await http.get(`/v1/sessions/${sid}`)).status));
    expect(kept.every((status) => status === 200)).toBe(true);
    expect((await http.get(`/v1/sessions?userId=${user}-other&limit=100`)).body.sessions).toHaveLength(10);
    const left = await Promise.all(mine.slice(0, 20).map((sid) => stored(`S#local#${sid}`)));
    for (const items of left) expect(items.every((item) => item.kind === 'x')).toBe(true);
  });

  it('answers 202 and done with zero counts for a user nobody has; a DELETE after done is an erasure of its own', async () => {
    const first = await http.delete(`/v1/users/${uniqueId('nobody')}`);
    expect(first.status).toBe(202);
    expect(await done(http, first.body.erasureId)).toMatchObject({ status: 'done', sessions: 0, memoryItems: 0, documents: 0 });
    const user = uniqueId('twice');
    const a = await http.delete(`/v1/users/${user}`);
    await done(http, a.body.erasureId);
    const b = await http.delete(`/v1/users/${user}`);
    expect(b.status).toBe(202);
    expect(a.body.erasureId).not.toBe(b.body.erasureId);
    expect((await http.get('/v1/erasures/not-an-erasure')).status).toBe(404);
  });

  it('makes one erasure of 50 concurrent DELETEs of the user: every answer names it, everything erased, each thing counted once', async () => {
    // Prepare: three sessions with a profile, and five memory items, of the user.
    const user = uniqueId('fifty');
    const sids = await Promise.all([sessionOf(http, user, 'fifty'), sessionOf(http, user, 'fifty'), sessionOf(http, user, 'fifty')]);
    await Promise.all([
      profileOf(http, sids[0], user),
      ...Array.from({ length: 5 }, (_, index) => remember(http, `users/${user}/notes/n${index}`, { old: index })),
    ]);

    // Act
    const answers = await Promise.all(Array.from({ length: 50 }, () => http.delete(`/v1/users/${user}`)));

    // Assess: all 202 with one erasure id, which counts each thing once.
    expect(answers.map((answer) => answer.status)).toEqual(Array(50).fill(202));
    const ids = new Set(answers.map((answer) => answer.body.erasureId));
    expect(ids.size).toBe(1);
    const [erasureId] = [...ids] as [string];
    for (const sid of sids) expect((await http.get(`/v1/sessions/${sid}`)).status).toBe(404);
    expect(await done(http, erasureId)).toMatchObject({ status: 'done', sessions: 3, memoryItems: 5, documents: 1 });
    for (const sid of sids) expect((await stored(`S#local#${sid}`)).every((item) => item.kind === 'x')).toBe(true);
    expect(await stored(`M#local#users/${user}/notes`)).toEqual([]);
    // Done: the user's next DELETE is an erasure of its own, of nothing.
    const again = await http.delete(`/v1/users/${user}`);
    expect(again.body.erasureId).not.toBe(erasureId);
    expect(await done(http, again.body.erasureId)).toMatchObject({ sessions: 0, memoryItems: 0, documents: 0 });
  });

  it('leaves nothing of before readable to writes that race it', async () => {
    const user = uniqueId('race');
    const [sids] = await Promise.all([
      Promise.all([sessionOf(http, user, 'race'), sessionOf(http, user, 'race')]),
      ...Array.from({ length: 10 }, (_, index) => remember(http, `users/${user}/notes/n${index}`, { old: true })),
    ]);

    // Act: 50 writers on the user's sessions and memory while the erasure runs.
    const writers = Array.from({ length: 50 }, async (_, index) => {
      await sleep(index % 10);
      if (index % 2 === 0) return http.patch(`/v1/sessions/${sids[index % 2] as string}/state`, { [`w${index}`]: true });
      return http.put(`/v1/memory/users/${user}/notes/n${index % 10}`, { value: { fresh: index } });
    });
    const erase = await http.delete(`/v1/users/${user}`);
    const answers = await Promise.all(writers);
    expect(erase.status).toBe(202);
    await done(http, erase.body.erasureId);

    // Assess: no write failed with a 500; whatever is readable now was written after the
    // erasure closed what it overwrote: no state of before, no memory value of before, no
    // history of before.
    expect(answers.every((answer) => answer.status < 500)).toBe(true);
    for (const sid of sids) {
      const state = await http.get(`/v1/sessions/${sid}/state`);
      expect(JSON.stringify(state.body.state ?? null)).not.toContain('old');
      const versions = await http.get(`/v1/sessions/${sid}/versions?limit=100`);
      expect(JSON.stringify(versions.body)).not.toContain('old');
    }
    for (let index = 0; index < 10; index++) {
      const item = await http.get(`/v1/memory/users/${user}/notes/n${index}`);
      if (item.status === 404) continue;
      expect(item.body.value).not.toHaveProperty('old');
      const history = await http.get(`/v1/memory/versions?namespace=users/${user}/notes&key=n${index}`);
      expect(JSON.stringify(history.body.versions)).not.toContain('"old"');
    }
  });
});

describe('DELETE /v1/sessions/{sid} while a write puts the index its change owes', () => {
  it('leaves none of the deleted session stored: the write takes back the index it put under the closed life', async () => {
    // Prepare: a message the log has not moved past yet; a state write (another function than
    // the append's, so it owes that message's index and puts it before its claim) whose put of
    // that index (with the message's preview) is held at the IAM gate 1.5 s.
    const sid = uniqueId('straggler');
    const secret = `my address, ${sid}`;
    expect((await http.post(`/v1/sessions/${sid}/messages`, { messages: [{ id: 'm1', role: 'user', content: secret }] })).status).toBe(201);
    const partition = JSON.stringify(sessionKey({ tenant: 'local', sessionId: sid }));
    let arrivedAt = 0;
    let arrived!: () => void;
    const arrival = new Promise<void>((resolve) => {
      arrived = resolve;
    });
    const stop = api.slow(({ operation, body }) => {
      if (arrivedAt > 0 || operation !== 'BatchWriteItem' || !body.includes(partition) || !body.includes('"preview"')) return false;
      arrivedAt = Date.now();
      arrived();
      return true;
    }, 1_500);

    // Act: the session is deleted while the put is held; then it lands, and the write's claim fails on the fence.
    const straggler = http.patch(`/v1/sessions/${sid}/state`, { late: true });
    await arrival;
    const deleted = await http.delete(`/v1/sessions/${sid}`);
    const deletedAfter = Date.now() - arrivedAt;
    const written = await straggler;
    stop();

    // Assess: the interleaving wanted (the 204 before the put landed); the write went on in the
    // next life (the state function, under its own role), and nothing of the old one is stored.
    expect(deleted.status).toBe(204);
    expect(deletedAfter, 'the DELETE took longer than the put was held: hold it longer').toBeLessThan(1_500);
    expect(written.status, written.text).toBe(200);
    expect(written.body).toMatchObject({ version: 1, state: { late: true } });
    expect(JSON.stringify(await stored(sessionKey({ tenant: 'local', sessionId: sid })))).not.toContain(secret);
  });
});

describe('DELETE /v1/users/{userId} while 50 writers make things of the user', () => {
  it('erases every session and memory item made before it was sent, from the 202 on, and stores none of them once done', async () => {
    // Prepare: 50 writers, spread over 200 ms, each making a session of the user or a memory
    // item in a namespace of the user's of its own; the DELETE goes out once 10 have answered.
    const user = uniqueId('made');
    let tenAnswered: () => void = () => {};
    const ten = new Promise<void>((resolve) => {
      tenAnswered = resolve;
    });
    let answeredSoFar = 0;
    let deleteSent = false;
    const writers = Array.from({ length: 50 }, async (_, n) => {
      await sleep(n * 4);
      const answer =
        n % 2 === 0
          ? await http.post('/v1/sessions', { sessionId: `${user}-s${n}`, userId: user, metadata: { made: 'before' } })
          : await http.put(`/v1/memory/users/${user}/n${n}/k`, { value: { made: 'before' } });
      const beforeDelete = !deleteSent;
      if (++answeredSoFar === 10) tenAnswered();
      return { n, status: answer.status, beforeDelete };
    });
    await ten;

    // Act
    deleteSent = true;
    const erase = await http.delete(`/v1/users/${user}`);
    const answers = await Promise.all(writers);

    // Assess: every write landed; none answered before the DELETE went out is readable.
    expect(erase.status, erase.text).toBe(202);
    expect(
      answers.every((answer) => answer.status === 200 || answer.status === 201),
      JSON.stringify(answers),
    ).toBe(true);
    const before = answers.filter((answer) => answer.beforeDelete);
    expect(before.length).toBeGreaterThanOrEqual(10);
    const sessionsBefore = before.filter((answer) => answer.n % 2 === 0).map((answer) => `${user}-s${answer.n}`);
    const itemsBefore = before.filter((answer) => answer.n % 2 === 1).map((answer) => `users/${user}/n${answer.n}`);
    for (const sid of sessionsBefore) expect((await http.get(`/v1/sessions/${sid}`)).status).toBe(404);
    for (const ns of itemsBefore) expect((await http.get(`/v1/memory/${ns}/k`)).status).toBe(404);
    const listed = (await http.get(`/v1/sessions?userId=${user}&limit=100`)).body.sessions as Array<{ sessionId: string }>;
    for (const session of listed) expect(sessionsBefore).not.toContain(session.sessionId);
    const found = (await http.post('/v1/memory/search', { namespacePrefix: ['users', user] })).body.items as Array<{
      namespace: string[];
    }>;
    for (const item of found) expect(itemsBefore).not.toContain(item.namespace.join('/'));

    // Once done, each of them is stored no more: a session keeps its fence and tombstones only,
    // a namespace nothing; the erasure counted at least them.
    const finished = await done(http, erase.body.erasureId);
    expect(finished.sessions as number).toBeGreaterThanOrEqual(sessionsBefore.length);
    expect(finished.memoryItems as number).toBeGreaterThanOrEqual(itemsBefore.length);
    for (const sid of sessionsBefore) {
      const left = await stored(`S#local#${sid}`);
      expect(
        left.every(
          (item) =>
            item.kind === 'x' && Object.keys(item).every((name) => ['pk', 'sk', 'kind', 'createdAt', 'fence', 'expiresAt'].includes(name)),
        ),
        JSON.stringify(left),
      ).toBe(true);
    }
    for (const ns of itemsBefore) {
      expect(await stored(`M#local#${ns}`)).toEqual([]);
      expect(await stored(`MH#local#${ns}#k`)).toEqual([]);
    }
  });
});

describe('DELETE /v1/users/{userId} after a PATCH of a session’s userId', () => {
  const listed = async (userId: string) =>
    (await http.get(`/v1/sessions?userId=${userId}&limit=500`)).body.sessions.map((session: { sessionId: string }) => session.sessionId);

  it('erases the session with its new user, not its old one', async () => {
    // Prepare: a session written as the old user's, then given to the new user.
    const [oldUser, newUser] = [uniqueId('was'), uniqueId('now')];
    const sid = await sessionOf(http, oldUser, 'given');
    expect((await http.patch(`/v1/sessions/${sid}`, { userId: newUser })).status).toBe(200);

    // Act: the old user's erasure, then the new user's.
    const eraseOld = await http.delete(`/v1/users/${oldUser}`);
    const afterOld = await http.get(`/v1/sessions/${sid}/state`);
    const oldDone = await done(http, eraseOld.body.erasureId);
    const stillThere = await http.get(`/v1/sessions/${sid}`);
    const eraseNew = await http.delete(`/v1/users/${newUser}`);
    const afterNew = await http.get(`/v1/sessions/${sid}`);
    const newDone = await done(http, eraseNew.body.erasureId);

    // Assess
    expect(eraseOld.status).toBe(202);
    expect(afterOld.body).toMatchObject({ state: { secret: `old ${oldUser}`, more: 1 }, version: 2 });
    expect(oldDone).toMatchObject({ sessions: 0 });
    expect(stillThere.body).toMatchObject({ sessionId: sid, userId: newUser, version: 2 });
    expect(eraseNew.status).toBe(202);
    expect(afterNew.status).toBe(404);
    expect(newDone).toMatchObject({ sessions: 1 });
    expect(JSON.stringify(await stored(`S#local#${sid}`))).not.toContain('old');
  });

  it('leaves no session of the erased user readable when PATCHes to another user race it: each is moved (200) or erased (404)', async () => {
    // Prepare: twelve sessions of the user.
    const [user, elsewhere] = [uniqueId('racing'), uniqueId('elsewhere')];
    const sids = await Promise.all(Array.from({ length: 12 }, () => sessionOf(http, user, 'moving')));

    // Act: each session given to another user while the erasure runs: its closing begins once
    // the list index has caught up with it (about a second after the DELETE), so the PATCHes
    // are spread over the moments around that.
    const patches = sids.map(async (sid, index) => {
      await sleep(600 + index * 80);
      return http.patch(`/v1/sessions/${sid}`, { userId: elsewhere });
    });
    const erase = await http.delete(`/v1/users/${user}`);
    const answers = await Promise.all(patches);
    const afterAnswers = await Promise.all(sids.map((sid) => http.get(`/v1/sessions/${sid}`)));
    const finished = await done(http, erase.body.erasureId);

    // Assess: a PATCH that answered 200 moved its session out of the erasure's reach; one that
    // answered 404 found it erased. No session reads as the erased user's, now or once done.
    expect(erase.status).toBe(202);
    expect(answers.map((answer) => answer.status).every((status) => status === 200 || status === 404)).toBe(true);
    const moved = sids.filter((_, index) => answers[index]?.status === 200);
    for (const [index, sid] of sids.entries()) {
      const now = await http.get(`/v1/sessions/${sid}`);
      if (moved.includes(sid)) {
        expect(afterAnswers[index]?.body).toMatchObject({ userId: elsewhere });
        expect(now.body).toMatchObject({ userId: elsewhere, version: 2 });
      } else {
        expect([afterAnswers[index]?.status, now.status]).toEqual([404, 404]);
      }
    }
    expect(finished).toMatchObject({ sessions: sids.length - moved.length });
    expect(await listed(user)).toEqual([]);
    expect((await listed(elsewhere)).sort()).toEqual([...moved].sort());
  });

  it('erases a session given to the user before the DELETE, and keeps one given to the user once the erasure began, as one made then', async () => {
    // Prepare: a session given to the user before the erasure; another user's session.
    const [user, other] = [uniqueId('target'), uniqueId('other')];
    const [before, later] = await Promise.all([sessionOf(http, other, 'before'), sessionOf(http, other, 'later')]);
    expect((await http.patch(`/v1/sessions/${before}`, { userId: user })).status).toBe(200);

    // Act: the erasure; while it waits for the list index to catch up with it (a second), the
    // other session is given to the user, and so is in the user's list when the erasure reads it.
    const erasing = http.delete(`/v1/users/${user}`);
    await sleep(300);
    const given = await http.patch(`/v1/sessions/${later}`, { userId: user });
    const erase = await erasing;
    const finished = await done(http, erase.body.erasureId);

    // Assess
    expect(erase.status).toBe(202);
    expect(given.status).toBe(200);
    expect((await http.get(`/v1/sessions/${before}`)).status).toBe(404);
    expect(finished).toMatchObject({ sessions: 1 });
    expect((await http.get(`/v1/sessions/${later}`)).body).toMatchObject({ userId: user, version: 2 });
    expect(await listed(user)).toEqual([later]);
  });
});

describe('the user.erased event', () => {
  it('goes to the tenant’s webhooks without a session, once the erasure is done; not to another tenant’s, nor a session’s', async () => {
    // Prepare
    const [tenantWide, sessionOnly, theirs] = [await fixtures.receiver(), await fixtures.receiver(), await fixtures.receiver()];
    const user = uniqueId('evt');
    const sid = await sessionOf(http, user, 'evt');
    const hooks = [
      await http.post('/v1/webhooks', { url: tenantWide.url, secret: 'shh' }),
      await http.post('/v1/webhooks', { url: sessionOnly.url, sessionId: sid }),
      await other.post('/v1/webhooks', { url: theirs.url }),
    ];
    expect(hooks.map((hook) => hook.status)).toEqual([201, 201, 201]);

    // Act
    const { erasureId } = (await http.delete(`/v1/users/${user}`)).body;
    await done(http, erasureId);

    // Assess
    const event = await waitFor('user.erased', () => tenantWide.accepted().find((body) => body.type === 'user.erased'));
    expect(event).toEqual({
      id: `erased/${erasureId}`,
      type: 'user.erased',
      sessionId: '',
      erasureId,
      userId: user,
      sessions: 1,
      memoryItems: 0,
      documents: 0,
      occurredAt: expect.any(String),
    });
    await sleep(500);
    expect(sessionOnly.accepted().filter((body) => body.type === 'user.erased')).toEqual([]);
    expect(theirs.accepted().filter((body) => body.type === 'user.erased')).toEqual([]);
  });
});

describe('a key limited to agents', () => {
  it('may not erase a user nor read an erasure: 403, nothing erased', async () => {
    const limited = apiClient(api.url, await issueKey(endpoint, { agents: ['planner'] }));
    const user = uniqueId('kept');
    const sid = await sessionOf(http, user, 'kept');
    const { erasureId } = (await http.delete(`/v1/users/${uniqueId('nobody')}`)).body;

    const refused = await limited.delete(`/v1/users/${user}`, { headers: { 'x-agent-id': 'planner' } });
    expect(refused.status).toBe(403);
    expect(refused.body.code).toBe('forbidden');
    expect((await limited.get(`/v1/erasures/${erasureId}`, { headers: { 'x-agent-id': 'planner' } })).status).toBe(403);
    expect((await http.get(`/v1/sessions/${sid}/state`)).body.version).toBe(2);
  });
});
