import { randomBytes } from 'node:crypto';
import { connect, type Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { adminCli, dynamoDbEndpointOf, issueKey } from '../helpers/admin.js';
import { type ApiClient, apiClient, uniqueId } from '../helpers/api-client.js';
import { type RunningApi, startApi } from '../helpers/e2e.js';
import { EventFixtures, type LiveClient, waitFor } from '../helpers/events.js';

/**
 * Change events under typed fields, end to end (API.md section 7: an agent's view of events
 * shows only its fields): the three-agent hierarchy of typed-fields.test.ts, webhooks and
 * WebSocket subscriptions with and without `agentId`, and a key limited to one agent.
 */

let api: RunningApi;
let http: ApiClient;
const fixtures = new EventFixtures(() => api.url);
const ids = { root: '', billing: '', general: '' };

const everything = ['cardToken', 'internal', 'invoiceDate', 'notes', 'plan', 'topic'];
/** What general may read: the public fields (not billing's cardToken, not root's private internal). */
const generalReads = ['invoiceDate', 'notes', 'plan', 'topic'];
/** What billing may read: the public fields and its own cardToken. */
const billingReads = ['cardToken', 'invoiceDate', 'notes', 'plan', 'topic'];

beforeAll(async () => {
  api = await startApi();
  http = api.client;
  ids.root = uniqueId('root');
  ids.billing = uniqueId('billing');
  ids.general = uniqueId('general');
  const declared = [
    await http.put(`/v1/agents/${ids.root}`, {
      stateFields: {
        plan: { type: 'string', read: 'public', write: 'private' },
        notes: { type: 'json', read: 'public', write: 'public' },
        internal: { type: 'number' },
      },
    }),
    await http.put(`/v1/agents/${ids.billing}`, {
      parentId: ids.root,
      stateFields: {
        cardToken: { type: 'string', read: { agents: [ids.root] }, write: 'private' },
        invoiceDate: { type: 'date', read: 'public', write: { agents: [ids.root] } },
      },
    }),
    await http.put(`/v1/agents/${ids.general}`, {
      parentId: ids.root,
      stateFields: { topic: { type: 'string', read: 'public', write: 'public' } },
    }),
  ];
  for (const response of declared) expect(response.status, response.text).toBe(201);
});
afterAll(async () => {
  await fixtures.close();
  await api?.stop();
});

const as = (agent: string) => ({ headers: { 'x-agent-id': agent } });
const keysOf = (state: unknown) => Object.keys(state as object).sort();

const receiver = () => fixtures.receiver();
const live = (token: string) => fixtures.live(token);

/** Sends a subscribe and waits for its answer (the ack, or an error). */
async function subscribe(client: LiveClient, message: Record<string, unknown>): Promise<any> {
  const before = client.messages.length;
  client.send({ action: 'subscribe', ...message });
  return waitFor(`the answer to ${JSON.stringify(message)}`, () =>
    client.messages.slice(before).find((answer) => answer.type === 'subscribed' || answer.type === 'error'),
  );
}

/** A session of the hierarchy; the writes below record versions 1 (every field) and 2 (topic). */
async function typedSession(): Promise<string> {
  const sid = uniqueId('scoped');
  const created = await http.post('/v1/sessions', { sessionId: sid, agentId: ids.root });
  expect(created.status, created.text).toBe(201);
  return sid;
}

async function writeBoth(sid: string): Promise<void> {
  const seeded = await http.put(`/v1/sessions/${sid}/state`, {
    plan: 'ship it',
    notes: { todo: ['a'] },
    internal: 7,
    cardToken: 'tok_1',
    invoiceDate: '2026-12-01',
    topic: 'billing',
  });
  expect(seeded.status, seeded.text).toBe(200);
  const patched = await http.patch(`/v1/sessions/${sid}/state`, { topic: 'refunds' }, as(ids.general));
  expect(patched.status, patched.text).toBe(200);
}

const createKey = (agents: string[]) => issueKey(dynamoDbEndpointOf(api), { agents });

describe('webhooks with agentId', () => {
  it('sends a sub-agent’s webhook only the fields it may read, and a webhook without agentId everything', async () => {
    // Prepare
    const sid = await typedSession();
    const [whole, general, billing] = [await receiver(), await receiver(), await receiver()];
    const created = await http.post('/v1/webhooks', { url: general.url, sessionId: sid, agentId: ids.general });
    const hooks = [
      created.body.id as string,
      (await http.post('/v1/webhooks', { url: whole.url, sessionId: sid })).body.id as string,
      (await http.post('/v1/webhooks', { url: billing.url, sessionId: sid, agentId: ids.billing })).body.id as string,
    ];

    // Act
    await writeBoth(sid);
    await waitFor('two events at every receiver', () => [whole, general, billing].every((target) => target.accepted().length >= 2));
    const read = await http.get(`/v1/webhooks/${created.body.id}`);
    const listed = await http.get('/v1/webhooks?limit=100');
    for (const id of hooks) await http.delete(`/v1/webhooks/${id}`);

    // Assess: the webhook shows its agent; one without shows none.
    expect(created.status, created.text).toBe(201);
    expect(created.body).toEqual({
      id: expect.any(String),
      url: general.url,
      sessionId: sid,
      agentId: ids.general,
      hasSecret: false,
      createdAt: expect.any(String),
    });
    expect(read.body.agentId).toBe(ids.general);
    expect(listed.body.webhooks.find((webhook: { id: string }) => webhook.id === hooks[1])).not.toHaveProperty('agentId');
    // The same events (ids, versions, config) to each; only next and prev differ.
    for (const target of [whole, general, billing]) {
      expect(target.accepted().map((event) => event.id)).toEqual([`${sid}:1`, `${sid}:2`]);
    }
    const [wholeFirst, wholeSecond] = whole.accepted();
    expect(keysOf(wholeFirst.next)).toEqual(everything);
    expect(wholeSecond).toMatchObject({
      prev: { cardToken: 'tok_1', internal: 7, topic: 'billing' },
      next: { cardToken: 'tok_1', internal: 7, topic: 'refunds' },
    });

    const [generalFirst, generalSecond] = general.accepted();
    expect(generalFirst.prev).toBeNull();
    expect(keysOf(generalFirst.next)).toEqual(generalReads);
    expect(keysOf(generalSecond.prev)).toEqual(generalReads);
    expect(generalSecond.next).toEqual({ plan: 'ship it', notes: { todo: ['a'] }, invoiceDate: '2026-12-01', topic: 'refunds' });
    expect(generalSecond).toMatchObject({ version: 2, prevVersion: 1, author: ids.general, agent: wholeSecond.agent });
    expect(generalSecond).not.toHaveProperty('viewError');
    for (const delivery of general.deliveries) {
      expect(delivery.raw).not.toContain('tok_1');
      expect(delivery.raw).not.toContain('internal');
    }

    expect(keysOf(billing.accepted()[1].next)).toEqual(billingReads);
    expect(billing.deliveries.map((delivery) => delivery.raw).join('')).not.toContain('internal');
  });

  it('refuses a bad agentId', async () => {
    const answer = await http.post('/v1/webhooks', { url: 'https://example.com/hook', agentId: 'not valid!' });
    expect(answer.body).toMatchObject({ status: 400, code: 'invalid_id', field: 'agentId' });
  });
});

describe('WebSocket subscriptions with agentId', () => {
  it('sends a subscriber with agentId only the fields its agent may read, and one without everything', async () => {
    // Prepare
    const sid = await typedSession();
    const scoped = await live('dev-key');
    const whole = await live('dev-key');
    const ack = await subscribe(scoped, { sessionId: sid, agentId: ids.general });
    await subscribe(whole, { sessionId: sid });

    // Act
    await writeBoth(sid);
    await waitFor('two events at each subscriber', () => scoped.events().length >= 2 && whole.events().length >= 2);

    // Assess
    expect(ack).toEqual({ type: 'subscribed', sessionId: sid, agentId: ids.general });
    expect(scoped.events().map((event) => event.id)).toEqual([`${sid}:1`, `${sid}:2`]);
    expect(keysOf(scoped.events()[0].next)).toEqual(generalReads);
    expect(scoped.events()[1]).toMatchObject({ prev: { topic: 'billing' }, next: { topic: 'refunds' } });
    expect(keysOf(scoped.events()[1].prev)).toEqual(generalReads);
    expect(JSON.stringify(scoped.events())).not.toContain('tok_1');
    expect(keysOf(whole.events()[1].next)).toEqual(everything);
  });

  it('refuses a bad agentId', async () => {
    const client = await live('dev-key');
    expect(await subscribe(client, { sessionId: 's1', agentId: 'not valid!' })).toMatchObject({
      type: 'error',
      status: 400,
      code: 'invalid_id',
      field: 'agentId',
    });
  });
});

describe('WebSocket messages', () => {
  it('refuses a member named twice with 400 invalid_json, as HTTP bodies are, subscribing to neither session', async () => {
    // Before, the last one won: {"sessionId":"a","sessionId":"b"} followed b.
    const client = await live('dev-key');
    const [first, second] = [uniqueId('first'), uniqueId('second')];
    const before = client.messages.length;
    client.socket.send(`{"action":"subscribe","sessionId":"${first}","sessionId":"${second}"}`);
    const answer = await waitFor('the answer', () => client.messages[before]);
    expect(answer).toMatchObject({ type: 'error', status: 400, code: 'invalid_json' });
    // Nothing followed: a write to either session sends this connection no event.
    expect(await subscribe(client, { sessionId: uniqueId('marker') })).toMatchObject({ type: 'subscribed' });
    await http.patch(`/v1/sessions/${second}/state`, { n: 1 });
    await http.patch(`/v1/sessions/${first}/state`, { n: 1 });
    await new Promise((resolve) => setTimeout(resolve, 500));
    expect(client.events()).toEqual([]);
  });
});

describe('WebSocket message size', () => {
  it('closes a connection that sends a message over 128 KB with 1009, as API Gateway does', async () => {
    // docs/api.md said such a message got an `error` message; the connection is closed instead.
    const client = await live('dev-key');
    const closed = new Promise<number>((resolve) => client.socket.once('close', (code) => resolve(code)));
    client.socket.send(JSON.stringify({ action: 'subscribe', sessionId: 's1', pad: 'x'.repeat(128 * 1024) }));
    expect(await closed).toBe(1009);
  });

  it('sends its 1009 and then reads the rest of the message, so the close is not lost to a reset', async () => {
    // The server used to drop the connection as soon as it sent its close frame. The client,
    // still sending the message, then met a TCP reset, and a proxy between them (here the
    // contract proxy) could drop the close frame with it: the client saw 1006. That failed a
    // CI run. This client sends past the close frame, straight to the server, and must meet no
    // reset: the server reads what still arrives and ends the connection cleanly.
    const socket = await upgradedSocket(new URL(api.serverUrl), 'dev-key');
    const received: Buffer[] = [];
    const errors: Error[] = [];
    socket.on('data', (chunk: Buffer) => received.push(chunk));
    socket.on('error', (error) => errors.push(error));
    const ended = new Promise<void>((resolve) => socket.once('close', () => resolve()));
    const declared = 256 * 1024;
    // A masked text frame announcing 256 KiB, of which only the first KiB is sent now.
    const header = Buffer.alloc(14);
    header[0] = 0x81;
    header[1] = 0x80 | 127;
    header.writeBigUInt64BE(BigInt(declared), 2);
    randomBytes(4).copy(header, 10);
    socket.write(Buffer.concat([header, Buffer.alloc(1024, 0x20)]));
    const close = await waitFor('the close frame', () => {
      const bytes = Buffer.concat(received);
      return bytes.length >= 4 ? bytes : undefined;
    });
    expect(close[0]).toBe(0x88);
    expect(close.readUInt16BE(2)).toBe(1009);
    // The rest of the message, sent after the close frame, in pieces.
    for (let sent = 1024; sent < declared; sent += 64 * 1024) {
      socket.write(Buffer.alloc(Math.min(64 * 1024, declared - sent), 0x20));
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    socket.end();
    await ended;
    expect(errors.map((error) => (error as NodeJS.ErrnoException).code)).toEqual([]);
  });
});

/** A TCP socket that has completed the WebSocket upgrade, for writing frames by hand. */
async function upgradedSocket(url: URL, token: string): Promise<Socket> {
  // Half-open, so this side may go on writing after the server has ended its own.
  const socket = connect({ port: Number(url.port), host: url.hostname, allowHalfOpen: true });
  await new Promise<void>((resolve, reject) => socket.once('connect', resolve).once('error', reject));
  socket.write(
    [
      `GET /v1/ws?token=${token} HTTP/1.1`,
      `Host: ${url.host}`,
      'Upgrade: websocket',
      'Connection: Upgrade',
      `Sec-WebSocket-Key: ${randomBytes(16).toString('base64')}`,
      'Sec-WebSocket-Version: 13',
      '',
      '',
    ].join('\r\n'),
  );
  const response = await new Promise<string>((resolve) => socket.once('data', (chunk: Buffer) => resolve(chunk.toString('latin1'))));
  if (!response.startsWith('HTTP/1.1 101')) throw new Error(`the upgrade was refused: ${response.split('\r\n')[0]}`);
  return socket;
}

describe('keys limited to some agents', () => {
  it('must register webhooks and subscribe as one of their agents, and then get that agent’s view', async () => {
    // Prepare
    const apiKey = await createKey([ids.general]);
    const limited = apiClient(api.url, apiKey);
    const sid = await typedSession();
    const target = await receiver();

    // Act: webhooks.
    const noAgent = await limited.post('/v1/webhooks', { url: target.url, sessionId: sid }, as(ids.general));
    const nullAgent = await limited.post('/v1/webhooks', { url: target.url, sessionId: sid, agentId: null }, as(ids.general));
    const otherAgent = await limited.post('/v1/webhooks', { url: target.url, sessionId: sid, agentId: ids.billing }, as(ids.general));
    const ownAgent = await limited.post('/v1/webhooks', { url: target.url, sessionId: sid, agentId: ids.general }, as(ids.general));
    // Act: subscriptions.
    const client = await live(apiKey);
    const subscribeNoAgent = await subscribe(client, { sessionId: sid });
    const subscribeOtherAgent = await subscribe(client, { sessionId: sid, agentId: ids.root });
    const subscribeOwnAgent = await subscribe(client, { sessionId: sid, agentId: ids.general });
    await writeBoth(sid);
    await waitFor('two events at the webhook and the subscriber', () => target.accepted().length >= 2 && client.events().length >= 2);
    await http.delete(`/v1/webhooks/${ownAgent.body.id}`);

    // Assess
    for (const refused of [noAgent, nullAgent, otherAgent]) {
      expect(refused.status, refused.text).toBe(403);
      expect(refused.body).toMatchObject({ code: 'forbidden', agents: [ids.general] });
    }
    expect(ownAgent.status, ownAgent.text).toBe(201);
    expect(ownAgent.body.agentId).toBe(ids.general);
    for (const refused of [subscribeNoAgent, subscribeOtherAgent]) {
      expect(refused).toMatchObject({ type: 'error', status: 403, code: 'forbidden', agents: [ids.general] });
    }
    expect(subscribeOwnAgent).toEqual({ type: 'subscribed', sessionId: sid, agentId: ids.general });
    // A namespace subscription that names an agent names one of the key's too (before, any was taken).
    const ownNamespace = ['agents', ids.general];
    expect(await subscribe(client, { namespace: ownNamespace, agentId: ids.root })).toMatchObject({
      type: 'error',
      status: 403,
      code: 'forbidden',
      agents: [ids.general],
    });
    expect(await subscribe(client, { namespace: ownNamespace, agentId: ids.general })).toEqual({
      type: 'subscribed',
      namespace: ownNamespace,
    });
    for (const events of [target.accepted(), client.events()]) {
      expect(events.map((event) => event.version)).toEqual([1, 2]);
      expect(keysOf(events[0].next)).toEqual(generalReads);
      expect(keysOf(events[1].next)).toEqual(generalReads);
    }
    expect(target.deliveries.map((delivery) => delivery.raw).join('')).not.toContain('tok_1');
  });

  it('sees only the webhooks registered as one of its agents', async () => {
    const apiKey = await createKey([ids.general]);
    const limited = apiClient(api.url, apiKey);
    const target = await receiver();
    const tenantWide = await http.post('/v1/webhooks', { url: target.url });
    const own = await limited.post('/v1/webhooks', { url: target.url, agentId: ids.general }, as(ids.general));

    const list = await limited.get('/v1/webhooks?limit=500', as(ids.general));
    const readOther = await limited.get(`/v1/webhooks/${tenantWide.body.id}`, as(ids.general));
    const lettersOther = await limited.get(`/v1/webhooks/${tenantWide.body.id}/dead-letters`, as(ids.general));
    const replayOther = await limited.post(`/v1/webhooks/${tenantWide.body.id}/dead-letters/replay`, {}, as(ids.general));
    const deleteOther = await limited.delete(`/v1/webhooks/${tenantWide.body.id}`, as(ids.general));
    const readOwn = await limited.get(`/v1/webhooks/${own.body.id}`, as(ids.general));
    await http.delete(`/v1/webhooks/${tenantWide.body.id}`);
    await http.delete(`/v1/webhooks/${own.body.id}`);

    const listed = list.body.webhooks.map((webhook: { id: string }) => webhook.id);
    expect(listed).toContain(own.body.id);
    expect(listed).not.toContain(tenantWide.body.id);
    for (const hidden of [readOther, lettersOther, replayOther, deleteOther]) expect(hidden.status, hidden.text).toBe(404);
    expect(readOwn.status).toBe(200);
  });
});

/** Resolves with the close code once the server closes `client`'s socket. */
function closedBy(client: LiveClient): Promise<number> {
  return new Promise((resolve) => {
    if (client.socket.readyState === client.socket.CLOSED) return resolve(-1);
    client.socket.once('close', (code) => resolve(code));
  });
}

describe('a key revoked while its connections are open', () => {
  // The bound docs/security.md states: what an instance knows of a key is at most this old.
  const BOUND_MS = 1_000;

  it('gets no event of a write sent over 1 s after the revoke answered; its subscribe is refused; both connections are closed', async () => {
    // Prepare: a key (through the CLI) with two connections: one follows a session, one
    // nothing yet. A connection of another key follows the same session, for contrast.
    const issued = JSON.parse(await adminCli(dynamoDbEndpointOf(api), 'keys', 'create', '--tenant', 'local', '--json')) as {
      apiKey: string;
      keyId: string;
    };
    const sid = uniqueId('revoked');
    expect((await http.post('/v1/sessions', { sessionId: sid })).status).toBe(201);
    const following = await live(issued.apiKey);
    const idle = await live(issued.apiKey);
    const other = await live(await createKey([]));
    expect(await subscribe(following, { sessionId: sid })).toEqual({ type: 'subscribed', sessionId: sid });
    await subscribe(other, { sessionId: sid });
    const followingClosed = closedBy(following);
    const idleClosed = closedBy(idle);
    // Writes flow the whole time, each logged with when it was sent.
    const sent: Array<{ version: number; at: number }> = [];
    let writing = true;
    const writer = (async () => {
      for (let n = 1; writing; n++) {
        const at = performance.now();
        const written = await http.patch(`/v1/sessions/${sid}/state`, { n });
        expect(written.status, written.text).toBe(200);
        sent.push({ version: written.body.version, at });
      }
    })();
    await waitFor('events at the connection before the revoke', () => following.events().length >= 3);

    // Act: revoke through the CLI; past the bound, the idle connection subscribes.
    await adminCli(dynamoDbEndpointOf(api), 'keys', 'revoke', issued.keyId);
    const revokedAt = performance.now();
    await new Promise((resolve) => setTimeout(resolve, BOUND_MS + 100));
    const refused = await subscribe(idle, { sessionId: sid });
    const codes = await Promise.all([followingClosed, idleClosed]);
    // The other key's connection goes on getting events of writes sent after the bound.
    const past = () => sent.filter((write) => write.at > revokedAt + BOUND_MS).map((write) => write.version);
    await waitFor('three events of writes past the bound at the other connection', () => {
      const later = new Set(past());
      return other.events().filter((event) => later.has(event.version)).length >= 3;
    });
    writing = false;
    await writer;

    // Assess
    const late = new Set(past());
    expect(following.events().filter((event) => late.has(event.version))).toEqual([]);
    expect(refused).toMatchObject({ type: 'error', status: 401, code: 'unauthorized', action: 'subscribe', sessionId: sid });
    expect(codes).toEqual([1008, 1008]);
    expect(idle.events()).toEqual([]);
  });
});

describe('a limited key’s subscription to a session whose agent leaves its subtree', () => {
  it('gets the events as its agent may see them, exactly what its HTTP reads of those versions answer; its writes are refused', async () => {
    // Prepare: planner > mid > child, and elsewhere; child declares a field planner may read
    // and a private one. A key limited to planner follows a session of child's as planner.
    const prefix = uniqueId('moved');
    const [planner, mid, child, elsewhere] = ['planner', 'mid', 'child', 'elsewhere'].map((name) => `${prefix}-${name}`) as [
      string,
      string,
      string,
      string,
    ];
    for (const [agent, body] of [
      [planner, {}],
      [elsewhere, {}],
      [mid, { parentId: planner }],
      [
        child,
        {
          parentId: mid,
          stateFields: {
            note: { type: 'string', read: { agents: [planner] }, write: 'private' },
            secret: { type: 'string', write: 'private' },
          },
        },
      ],
    ] as const) {
      const registered = await http.put(`/v1/agents/${agent}`, body);
      expect(registered.status, registered.text).toBe(201);
    }
    const apiKey = await createKey([planner]);
    const limited = apiClient(api.url, apiKey);
    const sid = uniqueId('moved-session');
    expect((await http.post('/v1/sessions', { sessionId: sid, agentId: child })).status).toBe(201);
    const client = await live(apiKey);
    expect(await subscribe(client, { sessionId: sid, agentId: planner })).toEqual({ type: 'subscribed', sessionId: sid, agentId: planner });
    const write = async (n: number) => {
      const written = await http.patch(`/v1/sessions/${sid}/state`, { note: `n${n}`, secret: `s${n}` }, as(child));
      expect(written.status, written.text).toBe(200);
    };

    // Act: a write, the move of mid out of planner's subtree, a write.
    await write(1);
    expect((await http.put(`/v1/agents/${mid}`, { parentId: elsewhere })).status).toBe(200);
    await write(2);
    await waitFor('two events at the limited key’s connection', () => client.events().length >= 2);
    const reads = await Promise.all([1, 2].map((version) => limited.get(`/v1/sessions/${sid}/state?version=${version}`, as(planner))));
    const refused = await limited.patch(`/v1/sessions/${sid}/state`, { note: 'mine' }, as(planner));

    // Assess: HTTP reads of a session outside the subtree are not refused; they show the
    // acting agent's fields, and the events show the same, before and after the move.
    expect(reads.map((read) => read.status)).toEqual([200, 200]);
    expect(client.events().map((event) => event.next)).toEqual(reads.map((read) => read.body.state));
    expect(client.events().map((event) => event.next)).toEqual([{ note: 'n1' }, { note: 'n2' }]);
    expect(refused.status).toBe(403);
  });
});
