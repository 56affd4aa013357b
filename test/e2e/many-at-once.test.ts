import { spawn } from 'node:child_process';
import { AgentStateSaver } from '@agentstate/langgraph';
import type { DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import { emptyCheckpoint, uuid6 } from '@langchain/langgraph-checkpoint';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { dynamoDbEndpointOf, rawTableClient, scanTable } from '../helpers/admin.js';
import { type ApiClient, uniqueId } from '../helpers/api-client.js';
import { type RunningApi, startApi } from '../helpers/e2e.js';

/**
 * The write paths the other files do not already hit with many writers at once, each with 50
 * concurrent requests on the same thing through real HTTP on DynamoDB Local: every request is
 * answered as the contract says, none with 5xx, and what is stored afterwards is what the
 * answers said. Among them 50 turns (messages with a state) on one session, and 60 PATCHes of
 * one session's metadata, each writer within the write path's 15 s budget, and a LangGraph
 * fan-out's 100 `putWrites` of one checkpoint with a core busy: the file runs alone
 * (vitest.config.ts), and these are here rather than in files of their own so that the alone
 * group starts one server for all of them.
 */
let api: RunningApi;
let http: ApiClient;
let raw: DynamoDBDocumentClient;

beforeAll(async () => {
  api = await startApi();
  http = api.client;
  raw = rawTableClient(dynamoDbEndpointOf(api));
});
afterAll(async () => {
  raw?.destroy();
  await api?.stop();
});

const WRITERS = 50;
// The tenant of the default key (test/helpers/e2e.ts).
const TENANT = 'local';
const statuses = (answers: Array<{ status: number }>) => answers.map((answer) => answer.status).sort();
const counted = (answers: Array<{ status: number }>) =>
  Object.fromEntries(
    [...new Set(answers.map((answer) => answer.status))].map((status) => [status, answers.filter((a) => a.status === status).length]),
  );

describe('many writers at once on one thing', () => {
  it('registers 50 agents at once, each listed once, and 50 registrations of one agent leave one of them whole', async () => {
    // Prepare
    const prefix = uniqueId('many-agent');
    const ids = Array.from({ length: WRITERS }, (_, n) => `${prefix}-${n}`);
    const one = `${prefix}-one`;

    // Act
    const distinct = await Promise.all(ids.map((id, n) => http.put(`/v1/agents/${id}`, { config: { n } })));
    const same = await Promise.all(
      Array.from({ length: WRITERS }, (_, n) =>
        http.put(`/v1/agents/${one}`, {
          config: { n, of: 'one' },
          stateFields: { [`f${n}`]: { type: 'number', read: 'public', write: 'public' } },
        }),
      ),
    );

    // Assess: every answer a success, every agent listed, and the one agent exactly one writer's
    // registration. Those of the one agent declare fields, so they land one at a time (the
    // registry's version, docs/architecture.md), each waiting its turn once it lost.
    expect(
      distinct.every((answer) => answer.status === 200 || answer.status === 201),
      JSON.stringify(counted(distinct)),
    ).toBe(true);
    expect(
      same.every((answer) => answer.status === 200 || answer.status === 201),
      JSON.stringify(counted(same)),
    ).toBe(true);
    const listed = await listAgents();
    for (const id of ids) expect(listed.filter((agent) => agent === id)).toHaveLength(1);
    const stored = await http.get(`/v1/agents/${one}`);
    const n = stored.body.config.n as number;
    expect([200, 201]).toContain(same[n]?.status);
    expect(stored.body.config).toEqual({ n, of: 'one' });
    expect(Object.keys(stored.body.stateFields)).toEqual([`f${n}`]);
  });

  it('never lets two moves at once make a cycle: a under b and b under a, 20 times, one of each pair lands', async () => {
    for (let round = 0; round < 20; round += 1) {
      // Prepare: two agents without parents.
      const a = uniqueId('cycle-a');
      const b = uniqueId('cycle-b');
      // (Side by side: agents that declare no fields do not wait for each other.)
      expect(statuses(await Promise.all([http.put(`/v1/agents/${a}`, {}), http.put(`/v1/agents/${b}`, {})]))).toEqual([201, 201]);

      // Act
      const answers = await Promise.all([http.put(`/v1/agents/${a}`, { parentId: b }), http.put(`/v1/agents/${b}`, { parentId: a })]);

      // Assess: one moved, the other refused as a cycle, and the hierarchy is a line.
      expect(answers.map((answer) => answer.status).sort(), answers.map((answer) => answer.text).join('\n')).toEqual([200, 400]);
      expect(answers.find((answer) => answer.status === 400)?.body.field).toBe('parentId');
      const parents = (await Promise.all([http.get(`/v1/agents/${a}`), http.get(`/v1/agents/${b}`)])).map((read) => read.body.parentId);
      expect(parents.filter((parent) => parent === null)).toHaveLength(1);
    }
  });

  it.each([1, 2, 3, 4, 5])('keeps the hierarchy free of cycles under 50 moves at once among 10 agents (round %i)', async (round) => {
    // Prepare: ten agents without parents.
    const prefix = uniqueId(`moves-${round}`);
    const ids = Array.from({ length: 10 }, (_, n) => `${prefix}-${n}`);
    // (Made side by side: agents that declare no fields do not wait for each other.)
    expect(statuses(await Promise.all(ids.map((id) => http.put(`/v1/agents/${id}`, {}))))).toEqual(Array(10).fill(201));

    // Act: each of 50 writers moves one agent under another (a fixed, varied pattern).
    const answers = await Promise.all(
      Array.from({ length: WRITERS }, (_, n) => http.put(`/v1/agents/${ids[n % 10]}`, { parentId: ids[(n * (round + 6) + round) % 10] })),
    );

    // Assess: every answer a move or a refusal the contract names; following parents from any agent ends.
    for (const answer of answers) expect([200, 400, 409], answer.text).toContain(answer.status);
    const read = await Promise.all(ids.map((id) => http.get(`/v1/agents/${id}`)));
    const parentOf = new Map<string, string | null>(ids.map((id, n) => [id, read[n]?.body.parentId]));
    for (const id of ids) {
      const seen = new Set<string>();
      for (let at: string | null | undefined = id; at; at = parentOf.get(at)) {
        expect(seen.has(at), `a cycle through ${at}: ${JSON.stringify([...parentOf])}`).toBe(false);
        seen.add(at);
      }
    }
  });

  it('creates 50 webhooks at once where the limit is 20: exactly 20 made; 50 deletes of one free one place, once', async () => {
    // Prepare: a session of its own, so the hooks subscribe to nothing else.
    const sid = uniqueId('many-hooks');
    const create = (n: number) => http.post('/v1/webhooks', { url: `https://hooks.example.com/${n}`, sessionId: sid });

    // Act
    const created = await Promise.all(Array.from({ length: WRITERS }, (_, n) => create(n)));
    const made = created.filter((answer) => answer.status === 201).map((answer) => answer.body.id as string);
    const target = made[0] as string;
    const deletes = await Promise.all(Array.from({ length: WRITERS }, () => http.delete(`/v1/webhooks/${target}`)));
    const afterDelete = [await create(100), await create(101)];

    // Assess: the limit held at once (docs/api.md: at most 20 a tenant), each refusal says it.
    expect(counted(created)).toEqual({ 201: 20, 400: WRITERS - 20 });
    for (const refused of created.filter((answer) => answer.status === 400))
      expect(refused.body).toMatchObject({ code: 'invalid_request', limit: 20 });
    expect(counted(deletes)).toEqual({ 204: 1, 404: WRITERS - 1 });
    expect(afterDelete.map((answer) => answer.status)).toEqual([201, 400]);
    const listed = (await http.get('/v1/webhooks?limit=100')).body.webhooks as Array<{ id: string }>;
    expect(listed.map((hook) => hook.id).sort()).toEqual([...made.slice(1), afterDelete[0]?.body.id].sort());
    expect((await http.get(`/v1/webhooks/${target}`)).status).toBe(404);
  });

  it('creates one session of 50 racing for the same id: one 201, 49 409 session_exists, the winner’s metadata stored', async () => {
    // Prepare
    const sid = uniqueId('many-create');

    // Act
    const answers = await Promise.all(
      Array.from({ length: WRITERS }, (_, n) => http.post('/v1/sessions', { sessionId: sid, metadata: { n } })),
    );

    // Assess
    expect(counted(answers)).toEqual({ 201: 1, 409: WRITERS - 1 });
    for (const answer of answers.filter((a) => a.status === 409)) expect(answer.body.code).toBe('session_exists');
    const winner = answers.find((answer) => answer.status === 201);
    const stored = await http.get(`/v1/sessions/${sid}`);
    expect(stored.body.metadata).toEqual(winner?.body.metadata);
  });

  it('deletes one session with 50 DELETEs at once: every answer 204 or 404, and it reads as unknown afterwards', async () => {
    // Prepare: a session with a state and messages.
    const sid = uniqueId('many-delete');
    expect((await http.put(`/v1/sessions/${sid}/state`, { n: 1 })).status).toBe(200);
    expect((await http.post(`/v1/sessions/${sid}/messages`, { messages: [{ id: 'u1', role: 'user', content: 'hi' }] })).status).toBe(201);

    // Act
    const answers = await Promise.all(Array.from({ length: WRITERS }, () => http.delete(`/v1/sessions/${sid}`)));

    // Assess
    expect(
      answers.every((answer) => answer.status === 204 || answer.status === 404),
      JSON.stringify(counted(answers)),
    ).toBe(true);
    expect(answers.some((answer) => answer.status === 204)).toBe(true);
    expect((await http.get(`/v1/sessions/${sid}`)).status).toBe(404);
    // A session id never written reads as no state at version 0, and so does this one now.
    const state = await http.get(`/v1/sessions/${sid}/state`);
    expect(state.body).toEqual({ sessionId: sid, node: 'root', version: 0, state: null, agent: null, updatedAt: null });
    expect((await http.get(`/v1/sessions/${sid}/messages`)).status).toBe(404);
    // What the deletes leave in the table is what one delete of the same session leaves: the
    // life's closed fence (no TTL) and the erased places' tombstones (with a TTL).
    const once = uniqueId('one-delete');
    expect((await http.put(`/v1/sessions/${once}/state`, { n: 1 })).status).toBe(200);
    expect((await http.post(`/v1/sessions/${once}/messages`, { messages: [{ id: 'u1', role: 'user', content: 'hi' }] })).status).toBe(201);
    expect((await http.delete(`/v1/sessions/${once}`)).status).toBe(204);
    const shape = (items: Array<Record<string, unknown>>) =>
      items.map((item) => [item.sk, item.kind, item.fence ?? null, 'expiresAt' in item]);
    expect(shape(await itemsOfSession(sid))).toEqual(shape(await itemsOfSession(once)));
    expect((await itemsOfSession(sid)).filter((item) => !('expiresAt' in item))).toHaveLength(1);
    // The fence was due for the retention sweep while held (in case its eraser died), no longer.
    for (const id of [sid, once]) expect((await itemsOfSession(id)).filter((item) => 'dsk' in item)).toEqual([]);
  });

  it('deletes 25 sessions at once: every answer 204, each erased whole, none left due for the sweep', async () => {
    // Prepare: sessions with a state each (their fences fall on most partitions of the sweep's index).
    const sids = Array.from({ length: 25 }, () => uniqueId('many-deleted'));
    const written = await Promise.all(sids.map((sid) => http.put(`/v1/sessions/${sid}/state`, { secret: sid })));
    expect(statuses(written)).toEqual(Array(sids.length).fill(200));

    // Act
    const answers = await Promise.all(sids.map((sid) => http.delete(`/v1/sessions/${sid}`)));
    const left = await Promise.all(sids.map((sid) => itemsOfSession(sid)));

    // Assess: each a tombstone and its closed fence, nothing due.
    expect(statuses(answers)).toEqual(Array(sids.length).fill(204));
    for (const items of left) {
      expect(items.map((item) => [item.kind, item.fence ?? null, 'dsk' in item])).toEqual([
        ['x', null, false],
        ['x', 'closed', false],
      ]);
    }
  });

  // This file runs alone (vitest.config.ts): the 50 switches take the session's write queue one
  // after another, and beside other files on a loaded CI machine a few used up the write path's
  // 15 s budget and answered 409 (tree.test.ts had this test too, in the parallel group, until session 20).
  it('switches the head 50 times at once among 50 branches: all 200, and the head is one of them with its path and its state', async () => {
    // Prepare: 50 branches under one user message, each with a state of its own.
    const sid = uniqueId('many-head');
    expect((await http.post(`/v1/sessions/${sid}/messages`, { messages: [{ id: 'u1', role: 'user', content: 'hi' }] })).status).toBe(201);
    for (let n = 0; n < WRITERS; n += 1) {
      const made = await http.post(`/v1/sessions/${sid}/messages`, {
        parentId: 'u1',
        messages: [{ id: `a${n}`, role: 'assistant', content: `answer ${n}` }],
        replaceState: { branch: `a${n}` },
      });
      expect(made.status).toBe(201);
    }

    // Act
    const answers = await Promise.all(Array.from({ length: WRITERS }, (_, n) => http.put(`/v1/sessions/${sid}/head`, { nodeId: `a${n}` })));

    // Assess
    expect(statuses(answers), JSON.stringify(counted(answers))).toEqual(Array(WRITERS).fill(200));
    const session = await http.get(`/v1/sessions/${sid}`);
    const head = session.body.head as string;
    expect(Array.from({ length: WRITERS }, (_, n) => `a${n}`)).toContain(head);
    const path = await http.get(`/v1/sessions/${sid}/messages`);
    expect(path.body.messages.map((message: { id: string }) => message.id)).toEqual(['u1', head]);
    expect(answers.map((answer) => answer.body.head)).toEqual(Array.from({ length: WRITERS }, (_, n) => `a${n}`));
    expect((await http.get(`/v1/sessions/${sid}/state`)).body).toMatchObject({ node: head, state: { branch: head } });
  });

  it('deletes one memory item with 50 DELETEs at once, beside 50 puts of other keys: every answer as documented, the puts all there', async () => {
    // Prepare
    const ns = `users/${uniqueId('many-mem')}`;
    expect((await http.put(`/v1/memory/${ns}/gone`, { value: { n: 0 } })).status).toBeLessThan(300);

    // Act
    const [deletes, puts] = await Promise.all([
      Promise.all(Array.from({ length: WRITERS }, () => http.delete(`/v1/memory/${ns}/gone`))),
      Promise.all(Array.from({ length: WRITERS }, (_, n) => http.put(`/v1/memory/${ns}/k${n}`, { value: { n } }))),
    ]);

    // Assess
    expect(
      deletes.every((answer) => answer.status === 204 || answer.status === 404),
      JSON.stringify(counted(deletes)),
    ).toBe(true);
    expect(deletes.some((answer) => answer.status === 204)).toBe(true);
    expect(
      puts.every((answer) => answer.status === 200 || answer.status === 201),
      JSON.stringify(counted(puts)),
    ).toBe(true);
    expect((await http.get(`/v1/memory/${ns}/gone`)).status).toBe(404);
    const values = await Promise.all(
      Array.from({ length: WRITERS }, async (_, n) => (await http.get(`/v1/memory/${ns}/k${n}`)).body.value),
    );
    expect(values).toEqual(Array.from({ length: WRITERS }, (_, n) => ({ n })));
  });
});

describe('POST messages with state, many at once', () => {
  it('makes a session with 50 first appends at once and a create racing them: every append 201, every node and key there', async () => {
    // Prepare: nothing of the session exists. Each append reads an empty log and no session
    // item, so each sends its first change as for a session without one; all but one lose the
    // log's place, and the create may make the item between an append's read and its
    // transaction (which then refuses it and the append is made again from the item).
    const sid = uniqueId('first-appends');

    // Act
    const [appends, created] = await Promise.all([
      Promise.all(
        Array.from({ length: WRITERS }, (_, n) =>
          http.post(`/v1/sessions/${sid}/messages`, { messages: [{ id: `m${n}`, role: 'user' }], state: { [`k${n}`]: n } }),
        ),
      ),
      http.post('/v1/sessions', { sessionId: sid, metadata: { made: 'by create' } }),
    ]);

    // Assess
    expect(statuses(appends)).toEqual(Array(WRITERS).fill(201));
    expect([201, 409]).toContain(created.status);
    expect(appends.map((answer) => answer.body.version).sort((a, b) => a - b)).toEqual(Array.from({ length: WRITERS }, (_, n) => n + 1));
    const session = await http.get(`/v1/sessions/${sid}`);
    expect(session.body.version).toBe(WRITERS);
    expect(session.body.metadata).toEqual(created.status === 201 ? { made: 'by create' } : null);
    const state = await http.get(`/v1/sessions/${sid}/state`);
    expect(state.body.state).toEqual(Object.fromEntries(Array.from({ length: WRITERS }, (_, n) => [`k${n}`, n])));
    const nodes = await Promise.all(Array.from({ length: WRITERS }, (_, n) => http.get(`/v1/sessions/${sid}/nodes/m${n}`)));
    expect(statuses(nodes)).toEqual(Array(WRITERS).fill(200));
  });

  it('lands 50 concurrent turns on one session, each a node with its own state version', async () => {
    // Prepare
    const sid = uniqueId('turn-concurrent');
    await http.post(`/v1/sessions/${sid}/messages`, { messages: [{ id: 'q', role: 'user' }], replaceState: { base: true } });
    const writers = Array.from({ length: 50 }, (_, index) => index);

    // Act: every turn branches from q, so each starts from q's state.
    const turns = await Promise.all(
      writers.map((index) =>
        http.post(`/v1/sessions/${sid}/messages`, { parentId: 'q', messages: [{ id: `t${index}`, role: 'user' }], state: { turn: index } }),
      ),
    );
    const states = await Promise.all(writers.map((index) => http.get(`/v1/sessions/${sid}/state?node=t${index}`)));

    // Assess
    expect(turns.map((turn) => turn.status)).toEqual(writers.map(() => 201));
    expect(new Set(turns.map((turn) => turn.body.version)).size).toBe(50);
    expect(states.map((state) => state.body.state)).toEqual(writers.map((index) => ({ base: true, turn: index })));
    expect((await http.get(`/v1/sessions/${sid}`)).body.version).toBe(51);
  });
});

/**
 * A session's metadata limits (docs/api.md, `metadata`: at most 16 KiB of JSON and at most 50
 * top-level string values) hold when many `PATCH /v1/sessions/{sid}` merge into one session at
 * once: every answer `200` or the documented `400`, the stored metadata within the limits, and
 * every key a `200` added is there. The merge is checked on what the session holds at the tip it
 * commits on, so a PATCH that read an older one loses its place and merges again.
 */
describe('metadata merged by many PATCHes at once', () => {
  /** A session without metadata. */
  async function newSession(prefix: string): Promise<string> {
    const sid = uniqueId(prefix);
    expect((await http.post('/v1/sessions', { sessionId: sid })).status).toBe(201);
    return sid;
  }

  it('merges 60 strings at once where a session may hold 50: 50 land, 10 refused, every landed key stored', async () => {
    // Prepare
    const sid = await newSession('meta-strings');
    const keys = Array.from({ length: 60 }, (_, n) => `k${n}`);

    // Act: each PATCH adds a key of its own.
    const answers = await Promise.all(keys.map((key) => http.patch(`/v1/sessions/${sid}`, { metadata: { [key]: `v-${key}` } })));

    // Assess
    expect(counted(answers)).toEqual({ 200: 50, 400: 10 });
    for (const refused of answers.filter((answer) => answer.status === 400))
      expect(refused.body).toMatchObject({ code: 'invalid_request', field: 'metadata' });
    const landed = keys.filter((_, n) => answers[n]?.status === 200);
    const stored = (await http.get(`/v1/sessions/${sid}`)).body.metadata as Record<string, string>;
    expect(stored).toEqual(Object.fromEntries(landed.map((key) => [key, `v-${key}`])));
  });

  it('merges 20 strings of 1 KiB at once where metadata may be 16 KiB of JSON: the 15 that fit land, every landed key stored', async () => {
    // Prepare: how many such keys fit in 16 KiB of JSON (all keys and values the same length).
    const sid = await newSession('meta-size');
    const keys = Array.from({ length: 20 }, (_, n) => `big-${String(n).padStart(2, '0')}`);
    const value = (key: string) => `${key}:`.padEnd(1024, 'x');
    const bytesOf = (count: number) =>
      Buffer.byteLength(JSON.stringify(Object.fromEntries(keys.slice(0, count).map((k) => [k, value(k)]))));
    const fit = keys.filter((_, n) => bytesOf(n + 1) <= 16 * 1024).length;

    // Act
    const answers = await Promise.all(keys.map((key) => http.patch(`/v1/sessions/${sid}`, { metadata: { [key]: value(key) } })));

    // Assess
    expect(fit).toBe(15);
    expect(counted(answers)).toEqual({ 200: fit, 400: keys.length - fit });
    for (const refused of answers.filter((answer) => answer.status === 400))
      expect(refused.body).toMatchObject({ code: 'invalid_request', field: 'metadata' });
    const landed = keys.filter((_, n) => answers[n]?.status === 200);
    const stored = (await http.get(`/v1/sessions/${sid}`)).body.metadata as Record<string, string>;
    expect(stored).toEqual(Object.fromEntries(landed.map((key) => [key, value(key)])));
    expect(Buffer.byteLength(JSON.stringify(stored))).toBeLessThanOrEqual(16 * 1024);
  });
});

/** Every item stored under the session's key, read raw and consistently. */
function itemsOfSession(sessionId: string): Promise<Array<Record<string, unknown>>> {
  return scanTable(raw, `S#${TENANT}#${sessionId}`);
}

/** Every agent id of the tenant, following the list's pages. */
async function listAgents(): Promise<string[]> {
  const ids: string[] = [];
  let cursor: string | undefined;
  do {
    const page = await http.get(`/v1/agents${cursor ? `?cursor=${encodeURIComponent(cursor)}` : ''}`);
    expect(page.status, page.text).toBe(200);
    ids.push(...(page.body.agents as Array<{ agentId: string }>).map((agent) => agent.agentId));
    cursor = page.body.next ?? undefined;
  } while (cursor);
  return ids;
}

/**
 * A LangGraph fan-out (issue 36): a step that sends 100 tasks at once puts their writes at the
 * same moment, 100 `putWrites` of one checkpoint, each a merge patch at its node. The saver
 * sends its writes to a session in turn, and those of one checkpoint that wait together as one
 * merge patch (saver.ts, `writeInTurn`); writers in other processes wait their turn in the
 * session's write queue (core/write/write-retry.ts) instead of racing for every place of the
 * log. Before both, 6 of 100 answered `409 "the session is changing too fast to apply this
 * write"` and the run failed. With a core busy with another process, as a shared machine is.
 */
describe('AgentStateSaver under a fan-out', () => {
  const TASKS = 100;

  it(`keeps all ${TASKS} writes of tasks sent at once, with the machine loaded`, async () => {
    // Prepare: a checkpoint, and a process that keeps a core busy meanwhile.
    const saver = new AgentStateSaver({ baseUrl: api.url, apiKey: 'dev-key', prefix: 'fan' });
    const thread = { configurable: { thread_id: 'fan-out', checkpoint_ns: '' } };
    const checkpoint = emptyCheckpoint();
    checkpoint.id = uuid6(1);
    checkpoint.channel_values = { topic: 'fan' };
    checkpoint.channel_versions = { topic: 1 };
    const config = await saver.put(thread, checkpoint, { source: 'loop', step: 0, parents: {} }, { topic: 1 });
    const burner = spawn(process.execPath, ['-e', 'for (;;) {}'], { stdio: 'ignore' });

    // Act: every task's writes at the same moment, as LangGraph's loop sends a step's.
    const settled = await Promise.allSettled(
      Array.from({ length: TASKS }, (_, task) =>
        saver.putWrites(config, [['results', { task, answer: `answer ${task}` }]], `task-${task}`),
      ),
    ).finally(() => burner.kill('SIGKILL'));

    // Assess: none failed, and the checkpoint holds every task's write.
    expect(
      settled.filter((outcome) => outcome.status === 'rejected').map((outcome) => String((outcome as PromiseRejectedResult).reason)),
    ).toEqual([]);
    const tuple = await saver.getTuple(config);
    expect(tuple?.checkpoint.id).toBe(checkpoint.id);
    const tasks = new Set(tuple?.pendingWrites?.map(([task]) => task));
    expect(tasks.size).toBe(TASKS);
    expect(tuple?.pendingWrites).toContainEqual(['task-42', 'results', { task: 42, answer: 'answer 42' }]);
  }, 120_000);
});
