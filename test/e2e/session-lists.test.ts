import { createClient } from '@agentstate/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ApiClient, uniqueId } from '../helpers/api-client.js';
import { type RunningApi, startApi } from '../helpers/e2e.js';

/**
 * `GET /v1/sessions?userId=`, `?agentId=`, `?metadata.<key>=` (API.md section 2) over HTTP: a
 * session is in every list it belongs to as soon as its creation answered, lists are newest
 * first and page exactly, a tenant never sees another's, and a malformed filter is a 400.
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

const idsOf = (response: { body: { sessions: Array<{ sessionId: string }> } }) =>
  response.body.sessions.map((session) => session.sessionId);

describe('the sessions list filters', () => {
  it('list a user’s, an agent’s and a metadata string’s sessions at once after creation, newest first, and nothing else', async () => {
    // Prepare: a user with three sessions (two of one agent), another user, another tenant with the same ids.
    const user = uniqueId('user');
    const agent = uniqueId('agent');
    const channel = uniqueId('channel');
    const [a, b, c, d] = ['a', 'b', 'c', 'd'].map((name) => uniqueId(`f-${name}`)) as [string, string, string, string];
    const made = [
      await http.post('/v1/sessions', { sessionId: a, userId: user, agentId: agent, metadata: { channel, tier: 'pro', n: 7 } }),
      await http.post('/v1/sessions', { sessionId: b, userId: user, metadata: { channel: `${channel}-x`, 'a.b c': 'dotted key' } }),
      await http.post('/v1/sessions', { sessionId: c, userId: user, agentId: agent, metadata: { channel } }),
      await http.post('/v1/sessions', { sessionId: d, userId: `${user}-2`, agentId: `${agent}-2`, metadata: { tier: 'pro' } }),
      await http.post('/v1/sessions', { sessionId: a, userId: user, agentId: agent, metadata: { channel } }, { key: 'other-key' }),
    ];

    // Act: each list read right after the creations answered.
    const byUser = await http.get(`/v1/sessions?userId=${user}`);
    const byAgent = await http.get(`/v1/sessions?agentId=${agent}`);
    const byChannel = await http.get(`/v1/sessions?metadata.channel=${channel}`);
    const byDottedKey = await http.get(`/v1/sessions?${new URLSearchParams({ 'metadata.a.b c': 'dotted key' })}`);
    const byNumber = await http.get(`/v1/sessions?userId=${user}&limit=1`);
    const notString = await http.get('/v1/sessions?metadata.n=7');
    const otherTenant = await http.get(`/v1/sessions?userId=${user}`, { key: 'other-key' });

    // Assess
    expect(made.map((response) => response.status)).toEqual([201, 201, 201, 201, 201]);
    expect(idsOf(byUser)).toEqual([c, b, a]);
    expect(byUser.body.sessions[2]).toEqual({
      sessionId: a,
      agentId: agent,
      userId: user,
      metadata: { channel, tier: 'pro', n: 7 },
      createdAt: made[0]?.body.createdAt,
      updatedAt: made[0]?.body.updatedAt,
      // Its lifetime (API.md section 12): none by default.
      ttlSeconds: null,
      expiresAt: null,
      retention: null,
    });
    expect(idsOf(byAgent)).toEqual([c, a]);
    expect(idsOf(byChannel)).toEqual([c, a]);
    expect(idsOf(byDottedKey)).toEqual([b]);
    expect(idsOf(byNumber)).toEqual([c]);
    expect(byNumber.body.next).toEqual(expect.any(String));
    expect(idsOf(notString).filter((id) => id === a)).toEqual([]);
    expect(idsOf(otherTenant)).toEqual([a]);
  });

  it('page exactly through many sessions, every one once, and leave a deleted one out', async () => {
    // Prepare: 30 sessions of one agent, 3 of them written (moved to the top by their first write).
    const agent = uniqueId('many');
    const ids = Array.from({ length: 30 }, (_, n) => `${agent}-${String(n).padStart(2, '0')}`);
    for (const sessionId of ids) await http.post('/v1/sessions', { sessionId, agentId: agent, metadata: { batch: agent } });
    await http.delete(`/v1/sessions/${ids[5]}`);

    // Act
    const pages: string[][] = [];
    let next: string | undefined;
    do {
      const page = await http.get(`/v1/sessions?agentId=${agent}&limit=8${next ? `&cursor=${next}` : ''}`);
      expect(page.status).toBe(200);
      pages.push(idsOf(page));
      next = page.body.next;
    } while (next && pages.length < 20);
    const client = createClient({ baseUrl: api.url, apiKey: 'dev-key' });
    const viaClient = await client.sessions.list({ metadata: { batch: agent }, limit: 500 });

    // Assess
    const expected = [...ids].reverse().filter((id) => id !== ids[5]);
    expect(pages.flat()).toEqual(expected);
    expect(pages.map((page) => page.length)).toEqual([8, 8, 8, 5]);
    expect(viaClient.sessions.map((session) => session.sessionId)).toEqual(expected);
  });

  it('refuse a malformed filter, two filters, a filter sent twice, a cursor of another list, and metadata with too many strings', async () => {
    const someone = uniqueId('someone');
    for (const n of [1, 2]) await http.post('/v1/sessions', { sessionId: `${someone}-${n}`, userId: someone });
    const own = await http.get(`/v1/sessions?userId=${someone}&limit=1`);
    const tooMany = Object.fromEntries(Array.from({ length: 51 }, (_, n) => [`k${n}`, 'v']));
    const answers = [
      await http.get('/v1/sessions?userId=a%2Fb'),
      await http.get('/v1/sessions?agentId='),
      await http.get('/v1/sessions?userId=a&agentId=b'),
      await http.get('/v1/sessions?userId=a&userId=b'),
      await http.get('/v1/sessions?metadata.k=a&metadata.k=b'),
      await http.get('/v1/sessions?metadata=x'),
      await http.get('/v1/sessions?metadataX=x'),
      await http.post('/v1/sessions', { sessionId: uniqueId('strings'), metadata: tooMany }),
    ];
    const fifty = await http.post('/v1/sessions', {
      sessionId: uniqueId('fifty'),
      metadata: { ...Object.fromEntries(Object.entries(tooMany).slice(0, 50)), counted: 1, nested: { s: 'x' } },
    });

    expect(answers.map((response) => [response.status, response.body.code])).toEqual([
      [400, 'invalid_id'],
      [400, 'invalid_id'],
      [400, 'invalid_request'],
      [400, 'invalid_request'],
      [400, 'invalid_request'],
      [400, 'invalid_request'],
      [400, 'invalid_request'],
      [400, 'invalid_request'],
    ]);
    expect(fifty.status).toBe(201);
    expect(own.status).toBe(200);
    expect(own.body.next).toEqual(expect.any(String));
    for (const other of ['?userId=other&', '?agentId=other&', '?metadata.k=v&', '?']) {
      expect((await http.get(`/v1/sessions${other}cursor=${own.body.next}`)).status).toBe(400);
    }
    expect((await http.get(`/v1/sessions?userId=${someone}&cursor=${own.body.next}`)).status).toBe(200);
  });
});

describe('PATCH /v1/sessions/{sid} of many metadata strings at once', () => {
  const strings = (prefix: string, from: number, to: number, value: string | null = 'v') =>
    Object.fromEntries(Array.from({ length: to - from }, (_, n) => [`${prefix}${from + n}`, value]));
  const listed = async (key: string, value = 'v') => idsOf(await http.get(`/v1/sessions?metadata.${key}=${value}&limit=100`));

  it('swaps up to 90 lists in one PATCH, refuses more with 400 and nothing written, and takes the same change in two', async () => {
    // Prepare: a session of a user, with 50 metadata strings (a0..a49): 51 lists besides the tenant's.
    const sid = uniqueId('relist');
    const [user, otherUser] = [uniqueId('u'), uniqueId('u')];
    expect((await http.post('/v1/sessions', { sessionId: sid, userId: user, metadata: strings('a', 0, 50) })).status).toBe(201);

    // Act 1: out of 39 strings' lists, into 39 others', and to another user: 90 lists touched, the most one PATCH may.
    const atLimit = await http.patch(`/v1/sessions/${sid}`, {
      userId: otherUser,
      metadata: { ...strings('a', 0, 39, null), ...strings('b', 0, 39) },
    });
    // Act 2: every string for another (101 lists touched), then the same in two PATCHes.
    const tooMany = await http.patch(`/v1/sessions/${sid}`, {
      metadata: { ...strings('a', 39, 50, null), ...strings('b', 0, 39, null), ...strings('c', 0, 50) },
    });
    const afterRefusal = await http.get(`/v1/sessions/${sid}`);
    const [inA45, inB3, inC7] = [await listed('a45'), await listed('b3'), await listed('c7')];
    const firstHalf = await http.patch(`/v1/sessions/${sid}`, {
      metadata: { ...strings('a', 39, 50, null), ...strings('b', 0, 39, null) },
    });
    const secondHalf = await http.patch(`/v1/sessions/${sid}`, { metadata: strings('c', 0, 50) });

    // Assess
    expect(atLimit.status).toBe(200);
    expect(atLimit.body.metadata).toEqual({ ...strings('a', 39, 50), ...strings('b', 0, 39) });
    expect(tooMany.status).toBe(400);
    expect(tooMany.body).toMatchObject({ code: 'invalid_request', field: 'metadata' });
    expect(afterRefusal.body.metadata).toEqual(atLimit.body.metadata);
    expect([inA45, inB3, inC7]).toEqual([[sid], [sid], []]);
    expect([firstHalf.status, secondHalf.status]).toEqual([200, 200]);
    expect(secondHalf.body.metadata).toEqual(strings('c', 0, 50));
    expect([await listed('a45'), await listed('b3'), await listed('c7'), await listed('a3')]).toEqual([[], [], [sid], []]);
    expect(idsOf(await http.get(`/v1/sessions?userId=${otherUser}`))).toEqual([sid]);
  });
});

describe('PATCH /v1/sessions/{sid} of userId and agentId', () => {
  /** Every session id of a list, walked page by page with its cursor. */
  async function walk(query: string, limit = 2): Promise<string[]> {
    const ids: string[] = [];
    let next: string | undefined;
    for (let pages = 0; pages < 100; pages++) {
      const page = await http.get(`/v1/sessions?${query}&limit=${limit}${next ? `&cursor=${next}` : ''}`);
      expect(page.status).toBe(200);
      ids.push(...idsOf(page));
      next = page.body.next;
      if (!next) return ids;
    }
    throw new Error(`the list ${query} did not end`);
  }

  it('moves the session to the lists of its new user and agent at once, out of the old ones (also mid-walk), and null takes it out', async () => {
    // Prepare: five sessions of one user and agent; the walk of the user's list stopped after its first page.
    const [oldUser, newUser, oldAgent, newAgent] = ['u-old', 'u-new', 'a-old', 'a-new'].map(uniqueId) as [string, string, string, string];
    const ids = Array.from({ length: 5 }, (_, n) => `${oldUser}-s${n}`);
    for (const sessionId of ids) {
      expect((await http.post('/v1/sessions', { sessionId, userId: oldUser, agentId: oldAgent, metadata: { tier: 'pro' } })).status).toBe(
        201,
      );
    }
    const moved = ids[1] as string;
    const firstPage = await http.get(`/v1/sessions?userId=${oldUser}&limit=2`);
    expect(idsOf(firstPage)).toEqual([ids[4], ids[3]]);

    // Act
    const patched = await http.patch(`/v1/sessions/${moved}`, { userId: newUser, agentId: newAgent, metadata: { tier: 'free' } });
    const restOfWalk: string[] = [];
    let next: string | undefined = firstPage.body.next;
    while (next) {
      const page = await http.get(`/v1/sessions?userId=${oldUser}&limit=2&cursor=${next}`);
      restOfWalk.push(...idsOf(page));
      next = page.body.next;
    }

    // Assess: the answer, the session, and every list right after the 200.
    expect(patched.status, JSON.stringify(patched.body)).toBe(200);
    expect(patched.body).toMatchObject({ sessionId: moved, userId: newUser, agentId: newAgent, metadata: { tier: 'free' } });
    expect((await http.get(`/v1/sessions/${moved}`)).body).toMatchObject({ userId: newUser, agentId: newAgent });
    expect(restOfWalk).toEqual([ids[2], ids[0]]);
    expect(await walk(`userId=${oldUser}`)).toEqual([ids[4], ids[3], ids[2], ids[0]]);
    expect(await walk(`agentId=${oldAgent}`)).toEqual([ids[4], ids[3], ids[2], ids[0]]);
    expect(await walk(`userId=${newUser}`)).toEqual([moved]);
    expect(await walk(`agentId=${newAgent}`)).toEqual([moved]);
    expect((await walk('metadata.tier=free', 50)).filter((id) => id.startsWith(oldUser))).toEqual([moved]);
    expect((await walk('metadata.tier=pro', 50)).filter((id) => id.startsWith(oldUser))).toEqual([ids[4], ids[3], ids[2], ids[0]]);

    // Act: null clears each; the session stays in the tenant's list.
    const cleared = await http.patch(`/v1/sessions/${moved}`, { userId: null, agentId: null });
    expect(cleared.status).toBe(200);
    expect(cleared.body).toMatchObject({ userId: null, agentId: null, metadata: { tier: 'free' } });
    expect(await walk(`userId=${newUser}`)).toEqual([]);
    expect(await walk(`agentId=${newAgent}`)).toEqual([]);
    expect(idsOf(await http.get(`/v1/sessions?prefix=${moved}`))).toEqual([moved]);

    // And back, through the TypeScript client: listed again under a user it had before.
    const client = createClient({ baseUrl: api.url, apiKey: 'dev-key' });
    expect(await client.sessions.update(moved, { userId: oldUser, agentId: oldAgent })).toMatchObject({
      userId: oldUser,
      agentId: oldAgent,
    });
    expect(await walk(`userId=${oldUser}`)).toEqual([moved, ids[4], ids[3], ids[2], ids[0]]);
  });

  it('refuses bad input naming the field, and answers 404 for an unknown session or another tenant’s, nothing written', async () => {
    const sessionId = uniqueId('bad');
    expect((await http.post('/v1/sessions', { sessionId, userId: 'kept-user', agentId: 'kept-agent' })).status).toBe(201);
    const answers = await Promise.all(
      [{ userId: 'a/b' }, { agentId: '' }, { userId: 7 }, { agentId: { id: 'x' } }, { userId: 'x'.repeat(129) }, { userID: 'x' }].map(
        (body) => http.patch(`/v1/sessions/${sessionId}`, body),
      ),
    );
    expect(answers.map((answer) => [answer.status, answer.body.code, answer.body.field])).toEqual([
      [400, 'invalid_id', 'userId'],
      [400, 'invalid_id', 'agentId'],
      [400, 'invalid_id', 'userId'],
      [400, 'invalid_id', 'agentId'],
      [400, 'invalid_id', 'userId'],
      [400, 'invalid_request', undefined],
    ]);
    expect(answers[5]?.body.detail).toContain('userID');
    expect((await http.patch(`/v1/sessions/${uniqueId('nobody')}`, { userId: 'u' })).body.code).toBe('session_not_found');
    expect((await http.patch(`/v1/sessions/${sessionId}`, { userId: 'u' }, { key: 'other-key' })).status).toBe(404);
    expect((await http.get(`/v1/sessions/${sessionId}`)).body).toMatchObject({ userId: 'kept-user', agentId: 'kept-agent', version: 0 });
  });

  it('takes 50 concurrent PATCHes of one session, of its user, agent and metadata: all 200, nothing lost, listed under exactly its final user and agent', async () => {
    // Prepare
    const base = uniqueId('race');
    const sessionId = `${base}-s`;
    const users = Array.from({ length: 5 }, (_, n) => `${base}-u${n}`);
    const agents = Array.from({ length: 3 }, (_, n) => `${base}-a${n}`);
    const channels = Array.from({ length: 4 }, (_, n) => `${base}-c${n}`);
    expect((await http.post('/v1/sessions', { sessionId, userId: users[0], agentId: agents[0] })).status).toBe(201);

    // Act: each PATCH adds a key of its own; some change the user, some the agent, some a listed string.
    const answers = await Promise.all(
      Array.from({ length: 50 }, (_, n) =>
        http.patch(`/v1/sessions/${sessionId}`, {
          metadata: { [`k${n}`]: n, ...(n % 4 === 3 ? { channel: channels[n % channels.length] } : {}) },
          ...(n % 3 === 0 ? { userId: users[n % users.length] } : {}),
          ...(n % 5 === 1 ? { agentId: agents[n % agents.length] } : {}),
        }),
      ),
    );

    // Assess
    expect(answers.map((answer) => answer.status)).toEqual(Array(50).fill(200));
    const session = (await http.get(`/v1/sessions/${sessionId}`)).body;
    expect(Object.keys(session.metadata).filter((key) => key.startsWith('k'))).toHaveLength(50);
    const listed = async (query: string) => (await walk(query, 50)).includes(sessionId);
    for (const user of users) expect(await listed(`userId=${user}`), user).toBe(user === session.userId);
    for (const agent of agents) expect(await listed(`agentId=${agent}`), agent).toBe(agent === session.agentId);
    for (const channel of channels) expect(await listed(`metadata.channel=${channel}`), channel).toBe(channel === session.metadata.channel);
  });
});
