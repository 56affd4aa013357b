import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { performance } from 'node:perf_hooks';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { adminCli, dynamoDbEndpointOf } from '../helpers/admin.js';
import { type ApiClient, type ApiResponse, apiClient, uniqueId } from '../helpers/api-client.js';
import { type RunningApi, startApi } from '../helpers/e2e.js';

/**
 * The access boundaries of docs/security.md with 50 requests at once on the far side of a
 * change that moves them: a key revoked, an agent moved out of a limited key's subtree, a
 * field's write access or type changed. Each writer sends one request after another and logs
 * when it sent each and what came back; what the change answered is the line. Requests sent
 * after it must be held to the new rule; what is stored afterwards must be what the answers
 * said; no answer is a 5xx.
 */
let api: RunningApi;
let http: ApiClient;
let endpoint: string;

beforeAll(async () => {
  api = await startApi();
  http = api.client;
  endpoint = dynamoDbEndpointOf(api);
});
afterAll(async () => {
  await api?.stop();
});

const WRITERS = 50;
// Each test runs 50 writers through a change: up to 13 s alone; the five took 86 s together beside
// another file and a busy core. Room for a slower machine.
const timeout = 120_000;

interface Sent {
  writer: number;
  seq: number;
  sentAt: number;
  answeredAt: number;
  status: number;
  body: any;
}

/**
 * Runs `WRITERS` writers, each sending `send(writer, seq)` one after the other, until each has
 * sent `after` requests past the moment `line()` returns (null while the change has not
 * answered). Every request is logged.
 */
async function writers(
  log: Sent[],
  send: (writer: number, seq: number) => Promise<ApiResponse>,
  line: () => number | null,
  after = 2,
): Promise<void> {
  await Promise.all(
    Array.from({ length: WRITERS }, async (_, writer) => {
      let past = 0;
      for (let seq = 1; past < after; seq += 1) {
        const sentAt = performance.now();
        const at = line();
        if (at !== null && sentAt > at) past += 1;
        const answer = await send(writer, seq);
        log.push({ writer, seq, sentAt, answeredAt: performance.now(), status: answer.status, body: answer.body });
        // Wait for the change while it has not come: the writers keep sending meanwhile.
        if (seq > 400) throw new Error(`writer ${writer} sent 400 requests and the change never answered`);
      }
    }),
  );
}

/**
 * A write the tenant's key makes while 50 others contend for the same thing: under a heavy
 * load it may wait out the write path's retry budget (`409 conflict` with `attempts`, docs/api.md
 * "Limits"), and a client sends it again.
 */
async function landed(write: () => Promise<ApiResponse>): Promise<ApiResponse> {
  for (let attempt = 1; ; attempt += 1) {
    const answer = await write();
    if (answer.status !== 409 || answer.body.attempts === undefined || attempt === 3) return answer;
  }
}

/** Every answer 200, but for one that waited out the retry budget (409 with `attempts`, nothing written); at least one 200. */
function expectLandedOrOutwaited(answers: readonly ApiResponse[]): void {
  const statuses = answers.map((answer) => (answer.status === 409 && answer.body.attempts !== undefined ? 'outwaited' : answer.status));
  expect(
    statuses.every((status) => status === 200 || status === 'outwaited'),
    JSON.stringify(statuses),
  ).toBe(true);
  expect(statuses).toContain(200);
}

const counted = (log: readonly Pick<Sent, 'status'>[]) =>
  Object.fromEntries([...new Set(log.map((sent) => sent.status))].map((status) => [status, log.filter((s) => s.status === status).length]));

/** Resolves once `n` requests of the log have been answered (the writers are under way). */
async function answered(log: () => number, n: number): Promise<void> {
  while (log() < n) await new Promise((resolve) => setTimeout(resolve, 10));
}

describe('a limited key revoked while 50 requests use it', { timeout }, () => {
  it('refuses every request sent after the revocation answered, 401 with nothing written; what was acknowledged is stored', async () => {
    // Prepare: a key limited to planner, issued by the admin CLI as a newcomer would.
    const planner = uniqueId('rv-planner');
    expect((await http.put(`/v1/agents/${planner}`, {})).status).toBe(201);
    const issued = JSON.parse(await adminCli(endpoint, 'keys', 'create', '--tenant', 'local', '--agents', planner, '--json')) as {
      apiKey: string;
      keyId: string;
    };
    const limited = apiClient(api.url, issued.apiKey);
    const as = { headers: { 'x-agent-id': planner } };
    const prefix = uniqueId('rv');
    const shared = `${prefix}-shared`;
    expect((await http.post('/v1/sessions', { sessionId: shared, agentId: planner })).status).toBe(201);
    // Three kinds of write: the state of a session of its own, an append to one session all
    // share, a memory item of its own under its agent's namespace.
    const send = (writer: number, seq: number) => {
      if (writer % 3 === 0) return limited.patch(`/v1/sessions/${prefix}-${writer}/state`, { seq }, as);
      if (writer % 3 === 1)
        return limited.post(`/v1/sessions/${shared}/messages`, { messages: [{ role: 'user', content: `${writer}:${seq}` }] }, as);
      return limited.put(`/v1/memory/agents/${planner}/${prefix}/w${writer}`, { value: { seq } }, as);
    };
    let revokedAt: number | null = null;
    const log: Sent[] = [];

    // Act: the writers run; once 100 requests have been answered, the CLI revokes the key.
    const revoke = (async () => {
      await answered(() => log.length, 100);
      await adminCli(endpoint, 'keys', 'revoke', issued.keyId);
      revokedAt = performance.now();
    })();
    await Promise.all([writers(log, send, () => revokedAt), revoke]);

    // Assess: no 5xx; every request sent after the revocation answered is 401.
    expect(
      log.every((sent) => sent.status < 500),
      JSON.stringify(counted(log)),
    ).toBe(true);
    const after = log.filter((sent) => sent.sentAt > (revokedAt as number));
    expect(after.length).toBeGreaterThanOrEqual(WRITERS * 2);
    expect(counted(after)).toEqual({ 401: after.length });
    const before = log.filter((sent) => sent.sentAt <= (revokedAt as number));
    expect(before.some((sent) => sent.status === 200 || sent.status === 201)).toBe(true);
    // What is stored: each writer's last acknowledged write, nothing of a refused one.
    const acknowledged = (writer: number) => log.filter((sent) => sent.writer === writer && sent.status < 300);
    const lastAck = (writer: number) => Math.max(0, ...acknowledged(writer).map((sent) => sent.seq));
    for (let writer = 0; writer < WRITERS; writer += 3) {
      const state = await http.get(`/v1/sessions/${prefix}-${writer}/state`);
      expect(state.body.state ?? { seq: 0 }, `writer ${writer}`).toEqual({ seq: lastAck(writer) });
    }
    const path = await http.get(`/v1/sessions/${shared}/messages`);
    const appended = (path.body.messages as Array<{ content: string }>).map((message) => message.content).sort();
    const appendedAcks = log
      .filter((sent) => sent.writer % 3 === 1 && sent.status < 300)
      .map((sent) => `${sent.writer}:${sent.seq}`)
      .sort();
    expect(appended).toEqual(appendedAcks);
    for (let writer = 2; writer < WRITERS; writer += 3) {
      const item = await http.get(`/v1/memory/agents/${planner}/${prefix}/w${writer}`);
      if (lastAck(writer) === 0) expect(item.status).toBe(404);
      else expect(item.body.value, `writer ${writer}`).toEqual({ seq: lastAck(writer) });
    }
  });
});

describe('a key limited to planner while the agent it works on leaves its subtree', { timeout }, () => {
  it('writes nothing in that agent’s session or registration once one of 50 moves at once answered', async () => {
    // Prepare: planner > mid > child, and elsewhere beside planner; a session of child's.
    const prefix = uniqueId('mv');
    const [planner, mid, child, elsewhere] = ['planner', 'mid', 'child', 'elsewhere'].map((name) => `${prefix}-${name}`) as [
      string,
      string,
      string,
      string,
    ];
    for (const [agent, parentId] of [
      [planner, null],
      [elsewhere, null],
      [mid, planner],
      [child, mid],
    ] as const) {
      expect((await http.put(`/v1/agents/${agent}`, { parentId })).status).toBe(201);
    }
    const key = JSON.parse(await adminCli(endpoint, 'keys', 'create', '--tenant', 'local', '--agents', planner, '--json')) as {
      apiKey: string;
    };
    const limited = apiClient(api.url, key.apiKey);
    const as = { headers: { 'x-agent-id': planner } };
    const sid = `${prefix}-session`;
    expect((await http.post('/v1/sessions', { sessionId: sid, agentId: child })).status).toBe(201);
    // Half the writers write the session's state, half child's registration (its config).
    const send = (writer: number, seq: number) =>
      writer % 2 === 0
        ? limited.patch(`/v1/sessions/${sid}/state`, { [`w${writer}`]: seq }, as)
        : limited.put(`/v1/agents/${child}`, { parentId: mid, config: { writer, seq } }, as);
    let movedAt: number | null = null;
    let marker: { version: number; config: ApiResponse } | undefined;
    const log: Sent[] = [];

    // Act: once 100 requests have been answered, 50 registrations at once move mid under
    // elsewhere. The moment the first answers, the tenant's key writes a marker into the state
    // and into child's config: a limited write that lands after the move answered would be
    // above the marker's version, or would replace its config.
    const move = (async () => {
      await answered(() => log.length, 100);
      const moves = await Promise.all(
        Array.from({ length: WRITERS }, () =>
          http.put(`/v1/agents/${mid}`, { parentId: elsewhere }).then(async (answer) => {
            if (answer.status === 200 && movedAt === null) {
              movedAt = performance.now();
              const [state, config] = await Promise.all([
                landed(() => http.patch(`/v1/sessions/${sid}/state`, { marker: true })),
                landed(() => http.put(`/v1/agents/${child}`, { parentId: mid, config: { marker: true } })),
              ]);
              expect(state.status).toBe(200);
              marker = { version: state.body.version as number, config };
            }
            return answer;
          }),
        ),
      );
      return moves;
    })();
    const [, moves] = await Promise.all([writers(log, send, () => movedAt), move]);

    // Assess: every move answered 200; no 5xx; every limited request sent after the first move
    // answered is 403, and none landed after the marker.
    expectLandedOrOutwaited(moves);
    expect(
      log.every((sent) => sent.status < 500),
      JSON.stringify(counted(log)),
    ).toBe(true);
    const after = log.filter((sent) => sent.sentAt > (movedAt as number));
    expect(counted(after)).toEqual({ 403: after.length });
    const { version, config } = marker as { version: number; config: ApiResponse };
    expect(config.status).toBe(200);
    const stateAfter = log.filter((sent) => sent.writer % 2 === 0 && sent.status === 200 && (sent.body.version as number) > version);
    expect(
      stateAfter.map((sent) => ({ writer: sent.writer, version: sent.body.version, sentBeforeMove: (movedAt as number) - sent.sentAt })),
    ).toEqual([]);
    expect((await http.get(`/v1/agents/${child}`)).body.config).toEqual({ marker: true });
    // What is stored: each state writer's last acknowledged value.
    const stored = (await http.get(`/v1/sessions/${sid}/state`)).body.state as Record<string, number>;
    for (let writer = 0; writer < WRITERS; writer += 2) {
      const acks = log.filter((sent) => sent.writer === writer && sent.status === 200).map((sent) => sent.seq);
      expect(stored[`w${writer}`], `writer ${writer}`).toBe(acks.length === 0 ? undefined : Math.max(...acks));
    }
  });
});

describe('50 decisions of a limited key whose workers answer after the agent left its subtree', { timeout }, () => {
  let worker: Server;
  let release: () => void = () => {};
  let asked = 0;
  afterAll(async () => {
    release();
    await new Promise((resolve) => worker?.close(resolve));
  });

  it('refuses each with 403 and writes nothing: the key is checked again once the worker answered', async () => {
    // Prepare: a worker that holds every request until the test lets it answer.
    const held = new Promise<void>((resolve) => (release = resolve));
    worker = createServer(async (req, res) => {
      for await (const _ of req);
      asked += 1;
      await held;
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ state: { decided: true }, messages: [{ role: 'assistant', content: 'done' }] }));
    });
    await new Promise<void>((resolve) => worker.listen(0, '127.0.0.1', resolve));
    const url = `http://127.0.0.1:${(worker.address() as AddressInfo).port}/decide`;
    const prefix = uniqueId('dc');
    const [planner, mid, child, elsewhere] = ['planner', 'mid', 'child', 'elsewhere'].map((name) => `${prefix}-${name}`) as [
      string,
      string,
      string,
      string,
    ];
    for (const [agent, body] of [
      [planner, { worker: { url, timeoutMs: 25_000 } }],
      [elsewhere, {}],
      [mid, { parentId: planner }],
      [child, { parentId: mid }],
    ] as const) {
      expect((await http.put(`/v1/agents/${agent}`, body)).status).toBe(201);
    }
    const key = JSON.parse(await adminCli(endpoint, 'keys', 'create', '--tenant', 'local', '--agents', planner, '--json')) as {
      apiKey: string;
    };
    const limited = apiClient(api.url, key.apiKey);
    const sessions = Array.from({ length: WRITERS }, (_, n) => `${prefix}-${n}`);
    // Made side by side: each its own id and list entries, nothing contends.
    const created = await Promise.all(sessions.map((sid) => http.post('/v1/sessions', { sessionId: sid, agentId: child })));
    expect(counted(created)).toEqual({ 201: WRITERS });

    // Act: 50 decisions at once, one a session of child's, as planner (whose worker decides);
    // once every worker call is held,
    // mid moves under elsewhere, and then the workers answer.
    const decisions = Promise.all(
      sessions.map((sid) =>
        limited.post(`/v1/sessions/${sid}/decide`, { trigger: { type: 'user' } }, { headers: { 'x-agent-id': planner } }),
      ),
    );
    // Every worker call held (or, should the decisions end first, what they answered).
    let ended = false;
    void decisions.finally(() => (ended = true));
    while (asked < WRITERS && !ended) await new Promise((resolve) => setTimeout(resolve, 20));
    expect(ended ? counted(await decisions) : asked).toBe(WRITERS);
    const moved = await http.put(`/v1/agents/${mid}`, { parentId: elsewhere });
    release();
    const answers = await decisions;

    // Assess: every decision refused, and no session holds a message or a version.
    expect(moved.status).toBe(200);
    expect(counted(answers)).toEqual({ 403: WRITERS });
    expect(answers.every((answer) => answer.body.code === 'forbidden')).toBe(true);
    const after = await Promise.all(
      sessions.map(async (sid) => [
        (await http.get(`/v1/sessions/${sid}/messages`)).body,
        (await http.get(`/v1/sessions/${sid}/state`)).body,
      ]),
    );
    for (const [path, state] of after) {
      expect(path.messages).toEqual([]);
      expect(state.state).toBeNull();
    }
  });
});

describe('a field’s write access taken away while 50 writes of it run', { timeout }, () => {
  it('lands no write of an agent that may no longer write it once the change answered', async () => {
    // Prepare: owner declares f, writable by every agent of its hierarchy; sub is below it,
    // and a key limited to sub writes f in a session of owner's.
    const prefix = uniqueId('acl');
    const [owner, sub] = [`${prefix}-owner`, `${prefix}-sub`];
    const declare = (write: 'public' | 'private') => ({ stateFields: { f: { type: 'number', read: 'public', write } } });
    expect((await http.put(`/v1/agents/${owner}`, declare('public'))).status).toBe(201);
    expect((await http.put(`/v1/agents/${sub}`, { parentId: owner })).status).toBe(201);
    const key = JSON.parse(await adminCli(endpoint, 'keys', 'create', '--tenant', 'local', '--agents', sub, '--json')) as {
      apiKey: string;
    };
    const limited = apiClient(api.url, key.apiKey);
    const sid = `${prefix}-session`;
    expect((await http.post('/v1/sessions', { sessionId: sid, agentId: owner })).status).toBe(201);
    const send = (writer: number, seq: number) =>
      limited.patch(`/v1/sessions/${sid}/state`, { f: writer * 1000 + seq }, { headers: { 'x-agent-id': sub } });
    let changedAt: number | null = null;
    let marker: number | undefined;
    const log: Sent[] = [];

    // Act: once 100 writes have been answered, owner's registration makes f private to it;
    // the moment it answers, owner writes f = -1.
    const change = (async () => {
      await answered(() => log.length, 100);
      const answer = await http.put(`/v1/agents/${owner}`, declare('private'));
      changedAt = performance.now();
      const written = await landed(() => http.patch(`/v1/sessions/${sid}/state`, { f: -1 }, { headers: { 'x-agent-id': owner } }));
      expect(written.status).toBe(200);
      marker = written.body.version as number;
      return answer;
    })();
    const [, changed] = await Promise.all([writers(log, send, () => changedAt), change]);

    // Assess
    expect(changed.status).toBe(200);
    expect(
      log.every((sent) => sent.status < 500),
      JSON.stringify(counted(log)),
    ).toBe(true);
    const after = log.filter((sent) => sent.sentAt > (changedAt as number));
    expect(counted(after)).toEqual({ 403: after.length });
    expect(after.every((sent) => sent.body.code === 'field_forbidden')).toBe(true);
    const landedAfter = log.filter((sent) => sent.status === 200 && (sent.body.version as number) > (marker as number));
    expect(landedAfter.map((sent) => ({ writer: sent.writer, version: sent.body.version }))).toEqual([]);
    expect((await http.get(`/v1/sessions/${sid}/state`)).body.state).toEqual({ f: -1 });
  });
});

describe('a field’s type changed while 50 writes of it run', { timeout }, () => {
  const ROUNDS = 10;
  it(`holds every write sent after the change answered to the new type; one under way may land the old type's value, which reads 409 until a write replaces it (${ROUNDS} rounds)`, async () => {
    // Prepare: owner declares g as any JSON; 50 sessions of owner hold g = 0.
    const prefix = uniqueId('retype');
    const owner = `${prefix}-owner`;
    const declare = (type: 'json' | 'number') => ({ stateFields: { g: { type, read: 'public', write: 'public' } } });
    expect((await http.put(`/v1/agents/${owner}`, declare('json'))).status).toBe(201);
    const sessions = Array.from({ length: WRITERS }, (_, n) => `${prefix}-${n}`);
    // Made side by side: each its own id and list entries, nothing contends.
    const created = await Promise.all(sessions.map((sid) => http.post('/v1/sessions', { sessionId: sid, agentId: owner })));
    expect(counted(created)).toEqual({ 201: WRITERS });
    const outcomes: Array<{ change: number; text: number; numbers: Record<number, number>; unreadable: string[]; later?: number }> = [];
    const raced: Array<{ read: ApiResponse; repair: ApiResponse; after: ApiResponse }> = [];
    // How long the change took last: the string is sent late in that, when the change has
    // checked some sessions already (before it, the change sees it and is refused).
    let took = 200;

    for (let round = 0; round < ROUNDS; round += 1) {
      expect((await http.put(`/v1/agents/${owner}`, declare('json'))).status).toBe(200);
      const reset = await Promise.all(sessions.map((sid) => http.put(`/v1/sessions/${sid}/state`, { g: 0 })));
      expect(counted(reset)).toEqual({ 200: WRITERS });

      // Act: g becomes a number while 49 sessions get another number and one a string.
      const texted = sessions[round % WRITERS] as string;
      const started = performance.now();
      const [change, text, ...numbers] = (await Promise.all([
        http.put(`/v1/agents/${owner}`, declare('number')).then((answer) => {
          took = Math.max(50, performance.now() - started);
          return answer;
        }),
        new Promise((resolve) => setTimeout(resolve, took * (0.6 + Math.random() * 0.5))).then(() =>
          http.patch(`/v1/sessions/${texted}/state`, { g: `text ${round}` }),
        ),
        ...sessions.filter((sid) => sid !== texted).map((sid, n) => http.patch(`/v1/sessions/${sid}/state`, { g: n + 1 })),
      ])) as ApiResponse[];
      const later = change?.status === 200 ? await http.patch(`/v1/sessions/${texted}/state`, { g: 'sent after' }) : undefined;
      const reads = await Promise.all(sessions.map((sid) => http.get(`/v1/sessions/${sid}/state`)));
      outcomes.push({
        change: change?.status as number,
        text: text?.status as number,
        numbers: counted(numbers),
        unreadable: sessions.filter((_, n) => reads[n]?.status !== 200),
        ...(later ? { later: later.status } : {}),
      });
      if (change?.status === 200 && text?.status === 200) {
        const repair = await http.patch(`/v1/sessions/${texted}/state`, { g: 7 });
        raced.push({ read: reads[round % WRITERS] as ApiResponse, repair, after: await http.get(`/v1/sessions/${texted}/state`) });
      }
    }

    // Assess: the change and the string in either order (409 and 200, or 200 and 422), or the
    // string under way while the change checked (both 200: docs/api.md, "Typed fields"); every
    // number written; a string sent after the change answered 422; only a raced session
    // unreadable, with 409 naming g, and a write of g makes it read again.
    const all = JSON.stringify(outcomes);
    for (const outcome of outcomes) {
      expect(
        [
          [409, 200],
          [200, 422],
          [200, 200],
        ],
        all,
      ).toContainEqual([outcome.change, outcome.text]);
      expect(outcome.numbers, all).toEqual({ 200: WRITERS - 1 });
      if (outcome.change === 200) expect(outcome.later, all).toBe(422);
      expect(outcome.unreadable, all).toHaveLength(outcome.change === 200 && outcome.text === 200 ? 1 : 0);
    }
    for (const { read, repair, after } of raced) {
      expect(read.status).toBe(409);
      expect(read.body).toMatchObject({ code: 'conflict', fields: [{ field: 'g' }] });
      expect(repair.status).toBe(200);
      expect(after.body.state).toEqual({ g: 7 });
    }
  });
});
