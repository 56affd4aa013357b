import { randomBytes } from 'node:crypto';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { type ApiClient, apiClient, uniqueId } from '../helpers/api-client.js';
import { type RunningApi, startApi } from '../helpers/e2e.js';

/**
 * Every size and count limit is checked before anything is written (API.md sections 4, 6 and
 * 8), against `npm start` over real HTTP on DynamoDB Local: a valid request answers 200 (or a
 * clear 4xx / 502 naming the limit), never 500, and a refused one leaves the session as it was.
 */

let worker: Server;
let workerUrl: string;
let answer: (request: any) => unknown = () => ({});
let api: RunningApi;
let http: ApiClient;

beforeAll(async () => {
  worker = createServer(async (req: IncomingMessage, res) => {
    let raw = '';
    for await (const chunk of req) raw += chunk;
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify(answer(JSON.parse(raw))));
  });
  await new Promise<void>((resolve) => worker.listen(0, '127.0.0.1', resolve));
  workerUrl = `http://127.0.0.1:${(worker.address() as AddressInfo).port}/decide`;
  api = await startApi();
  http = api.client;
});
afterAll(async () => {
  await api?.stop();
  await new Promise((resolve) => worker?.close(resolve));
});
beforeEach(() => {
  answer = () => ({});
});

const KIB = 1024;
const MIB = KIB * KIB;
const messages = (count: number, prefix: string) =>
  Array.from({ length: count }, (_, index) => ({ role: 'assistant', content: `${prefix} ${index}` }));

async function agentWithWorker(): Promise<string> {
  const agentId = uniqueId('agent');
  const registered = await http.put(`/v1/agents/${agentId}`, { worker: { url: workerUrl } });
  expect(registered.status, registered.text).toBe(201);
  return agentId;
}

/** What a session holds: its version, its head and how many nodes its tree has. */
async function snapshot(sid: string) {
  const [state, tree] = await Promise.all([http.get(`/v1/sessions/${sid}/state`), http.get(`/v1/sessions/${sid}/tree`)]);
  return { version: state.body.version, head: tree.body.head, nodes: tree.body.nodes?.length ?? 0 };
}

describe('agents', () => {
  const fields = (count: number, text: number) =>
    Object.fromEntries(
      Array.from({ length: count }, (_, index) => [
        `f${index}`,
        { type: 'string', description: 'd'.repeat(text), updateRules: 'u'.repeat(text), read: 'public', write: 'public' },
      ]),
    );

  it('refuses stateFields over 128 KiB of JSON with 400 naming the limit, writing nothing, never 500', async () => {
    // Prepare: 200 fields with the longest description and rules each may have (800 KiB in
    // all: a body the API takes, an item DynamoDB does not)
    const agentId = uniqueId('fields');
    const registered = await http.put(`/v1/agents/${agentId}`, { stateFields: fields(2, 10) });
    expect(registered.status, registered.text).toBe(201);

    // Act
    const tooMany = await http.put(`/v1/agents/${agentId}`, { stateFields: fields(200, 2000) });
    const fresh = await http.put(`/v1/agents/${uniqueId('fields')}`, { stateFields: fields(200, 2000) });

    // Assess (before, both answered 500: DynamoDB refused the item's size)
    for (const refused of [tooMany, fresh]) {
      expect(refused.status, refused.text).toBe(400);
      expect(refused.body).toMatchObject({ code: 'invalid_request', field: 'stateFields', limitBytes: 128 * KIB });
    }
    expect(Object.keys((await http.get(`/v1/agents/${agentId}`)).body.stateFields)).toEqual(['f0', 'f1']);
  });

  it('takes stateFields of just under 128 KiB', async () => {
    const response = await http.put(`/v1/agents/${uniqueId('fields')}`, { stateFields: fields(30, 2000) });
    expect(response.status, response.text).toBe(201);
  });

  it('pages the agent list by bytes as well as by count, so a page of 64 KiB configs stays under Lambda’s 6 MB', async () => {
    // Prepare: 110 agents of a tenant of their own, each with a config of 64 KiB (7 MiB in all).
    const lists = apiClient(api.url, 'list-key');
    const config = { blob: 'c'.repeat(64 * KIB - 16) };
    const registered = new Set<string>();
    for (let n = 0; n < 110; n++) {
      const agentId = uniqueId(`wide${n}`);
      const response = await lists.put(`/v1/agents/${agentId}`, { config });
      expect(response.status, response.text).toBe(201);
      registered.add(agentId);
    }

    // Act: every page, 500 at a time.
    const seen: string[] = [];
    const sizes: number[] = [];
    let cursor: string | undefined;
    do {
      const page = await lists.get(`/v1/agents?limit=500${cursor ? `&cursor=${cursor}` : ''}`);
      expect(page.status, page.text.slice(0, 300)).toBe(200);
      sizes.push(Buffer.byteLength(page.text));
      seen.push(...page.body.agents.map((agent: { agentId: string }) => agent.agentId));
      cursor = page.body.next;
    } while (cursor);

    // Assess: before, one page of 7 MiB (a Lambda's answer may hold 6 MB).
    expect(sizes.length).toBeGreaterThan(1);
    for (const size of sizes) expect(size).toBeLessThan(5 * MIB);
    expect(seen.filter((agentId) => registered.has(agentId)).sort()).toEqual([...registered].sort());
    expect(new Set(seen).size).toBe(seen.length);
  });
});

describe('commits', () => {
  it('takes a 200 KiB thread key and a 200 KiB run key in one commit', async () => {
    const sid = uniqueId('commit-big');

    const response = await http.post(`/v1/sessions/${sid}/commits`, {
      runId: 'r1',
      commands: [
        { key: 'doc', scope: 'thread', merge: 'disjoint', set: 'a'.repeat(200 * KIB) },
        { key: 'doc', scope: 'run', merge: 'disjoint', set: 'b'.repeat(200 * KIB) },
      ],
    });

    expect(response.status, response.text).toBe(200);
    expect((await http.get(`/v1/sessions/${sid}/runs/r1/state`)).body.state.doc).toHaveLength(200 * KIB);
  });

  it('takes four 240 KiB sets of one key (the last one wins)', async () => {
    const sid = uniqueId('commit-sets');

    const response = await http.post(`/v1/sessions/${sid}/commits`, {
      commands: ['a', 'b', 'c', 'd'].map((letter) => ({ key: 'k', scope: 'thread', merge: 'disjoint', set: letter.repeat(240 * KIB) })),
    });

    expect(response.status, response.text).toBe(200);
    expect(response.body.state.k).toBe('d'.repeat(240 * KIB));
  });

  it('refuses run, profile and shared documents over their limit with 413 naming the scope, writing nothing', async () => {
    // Prepare
    const sid = uniqueId('commit-docs');
    await http.post('/v1/sessions', { sessionId: sid, userId: uniqueId('user') });

    // Act
    const response = await http.post(`/v1/sessions/${sid}/commits`, {
      runId: 'r1',
      commands: [
        { key: 'a', scope: 'thread', merge: 'disjoint', set: 1 },
        { key: 'big', scope: 'profile', merge: 'disjoint', set: 'p'.repeat(300 * KIB) },
      ],
    });

    // Assess
    expect(response.status, response.text).toBe(413);
    expect(response.body).toMatchObject({ code: 'state_too_large', scope: 'profile' });
    expect((await snapshot(sid)).version).toBe(0);
  });
});

describe('decide', () => {
  it('takes a worker answer of 150 messages, or refuses it with 502 naming the limit, never 500', async () => {
    // Prepare
    const sid = uniqueId('decide-150');
    const agentId = await agentWithWorker();
    answer = () => ({ messages: messages(150, 'reply') });

    // Act
    const response = await http.post(`/v1/sessions/${sid}/decide`, { agentId, trigger: { type: 'tick' } });

    // Assess
    expect(response.status, response.text).toBe(502);
    expect(response.body).toMatchObject({ code: 'worker_failed', limit: 'messages' });
    expect(response.body.detail).toMatch(/150 messages/);
    expect(await snapshot(sid)).toMatchObject({ version: 0, nodes: 0 });
  });

  it('refuses 60 replies to a 45-message trigger with 502 naming the limit, writing neither', async () => {
    // Prepare
    const sid = uniqueId('decide-105');
    const agentId = await agentWithWorker();
    answer = () => ({ messages: messages(60, 'reply') });

    // Act
    const response = await http.post(`/v1/sessions/${sid}/decide`, {
      agentId,
      trigger: { type: 'client.messages', messages: messages(45, 'asked').map((message) => ({ ...message, role: 'user' })) },
    });

    // Assess
    expect(response.status, response.text).toBe(502);
    expect(response.body).toMatchObject({ code: 'worker_failed', limit: 'messages' });
    expect(await snapshot(sid)).toMatchObject({ version: 0, nodes: 0 });
  });

  it('takes as many messages as the limit allows, trigger and answer together', async () => {
    const sid = uniqueId('decide-max');
    const agentId = await agentWithWorker();
    answer = () => ({ messages: messages(40, 'reply'), state: { done: true } });

    const response = await http.post(`/v1/sessions/${sid}/decide`, {
      agentId,
      trigger: { type: 'client.messages', messages: messages(50, 'asked').map((message) => ({ ...message, role: 'user' })) },
    });

    expect(response.status, response.text).toBe(200);
    expect(await snapshot(sid)).toMatchObject({ version: 1, nodes: 91 });
  });

  it('refuses a worker answer whose messages pass the bytes one commit may carry with 502', async () => {
    // Prepare: 20 messages of 230 KiB: 4.6 MB, more than one atomic write takes.
    const sid = uniqueId('decide-bytes');
    const agentId = await agentWithWorker();
    answer = () => ({
      messages: Array.from({ length: 20 }, (_, index) => ({ role: 'assistant', content: `${index}`.padEnd(230 * KIB, 'x') })),
    });

    // Act
    const response = await http.post(`/v1/sessions/${sid}/decide`, { agentId, trigger: { type: 'tick' } });

    // Assess
    expect(response.status, response.text).toBe(502);
    expect(response.body).toMatchObject({ code: 'worker_failed' });
    expect(await snapshot(sid)).toMatchObject({ version: 0, nodes: 0 });
  });

  it('blames the caller for its own oversize proposed.state when there is no worker: 413 state_too_large', async () => {
    const sid = uniqueId('decide-proposed');

    const response = await http.post(`/v1/sessions/${sid}/decide`, {
      trigger: { type: 'tick' },
      proposed: { state: { blob: 'x'.repeat(4 * KIB * KIB + 10) } },
    });

    expect(response.status, response.text).toBe(413);
    expect(response.body).toMatchObject({ code: 'state_too_large', limitBytes: 4 * KIB * KIB });
    expect(response.body.detail).not.toMatch(/worker/);
    expect(await snapshot(sid)).toMatchObject({ version: 0 });
  });

  it('blames the caller for proposed messages that are not messages: 400 invalid_request', async () => {
    const response = await http.post(`/v1/sessions/${uniqueId('decide-proposed-bad')}/decide`, {
      trigger: { type: 'tick' },
      proposed: { messages: [{ content: 'no role' }] },
    });

    expect(response.status, response.text).toBe(400);
    expect(response.body).toMatchObject({ code: 'invalid_request' });
  });
});

describe('decide, the sizes one commit carries', () => {
  const bigMessages = (count: number, kib: number) =>
    Array.from({ length: count }, (_, index) => ({ role: 'user', content: `${index}`.padEnd(kib * KIB, 'm') }));

  // DynamoDB Local takes a transaction of any size; DynamoDB refuses one over 4 MB. A trigger
  // is an append, held to what one append carries, so trigger and answer stay far inside it.
  it('refuses a trigger whose messages pass what one append carries with 413 naming the limit, writing nothing', async () => {
    // Prepare: 17 messages of 240 KiB, each within the message limit, 4.1 MB together.
    const sid = uniqueId('decide-trigger-bytes');

    // Act
    const response = await http.post(`/v1/sessions/${sid}/decide`, {
      trigger: { type: 'client.messages', messages: bigMessages(17, 240) },
    });

    // Assess
    expect(response.status).toBe(413);
    expect(response.body).toMatchObject({ code: 'payload_too_large', limitBytes: 1024 * KIB, field: 'trigger.messages' });
    expect(await snapshot(sid)).toMatchObject({ version: 0, nodes: 0 });
  });

  it('holds an append to the same limit', async () => {
    const sid = uniqueId('append-bytes');

    const response = await http.post(`/v1/sessions/${sid}/messages`, { messages: bigMessages(6, 180) });

    expect(response.status).toBe(413);
    expect(response.body).toMatchObject({ code: 'payload_too_large' });
    expect((await snapshot(sid)).nodes).toBe(0);
  });

  it('refuses a worker answer that replaces the agent config with more than the registry takes: 502 naming the limit', async () => {
    // Prepare: a config of 200 KiB; the registry takes 64 KiB.
    const sid = uniqueId('decide-agent-bytes');
    const agentId = await agentWithWorker();
    answer = () => ({ agent: { prompt: 'p'.repeat(200 * KIB) }, state: { done: true } });

    // Act
    const response = await http.post(`/v1/sessions/${sid}/decide`, { agentId, trigger: { type: 'tick' } });

    // Assess
    expect(response.status).toBe(502);
    expect(response.body).toMatchObject({ code: 'worker_failed', limit: 'agent', limitBytes: 64 * KIB });
    expect(await snapshot(sid)).toMatchObject({ version: 0 });
  });

  it('takes a worker answer at every limit at once: 64 KiB of config, 180 KiB of messages, a 4 MiB state', async () => {
    const sid = uniqueId('decide-all-limits');
    const agentId = await agentWithWorker();
    answer = () => ({
      agent: { prompt: 'p'.repeat(63 * KIB) },
      messages: [{ role: 'assistant', content: 'r'.repeat(180 * KIB) }],
      state: { blob: 's'.repeat(4 * KIB * KIB - 64) },
    });

    const response = await http.post(`/v1/sessions/${sid}/decide`, { agentId, trigger: { type: 'tick' } });
    const replayed = await http.post(`/v1/sessions/${sid}/decide`, {
      agentId,
      decisionId: response.body.decisionId,
      trigger: { type: 'tick' },
    });

    expect(response.status).toBe(200);
    expect(await snapshot(sid)).toMatchObject({ version: 1, nodes: 2 });
    expect(replayed.status).toBe(200);
    expect(replayed.body.version).toBe(1);
    expect(replayed.body.agent.prompt).toHaveLength(63 * KIB);
  });
});

describe('messages that do not compress: one change of the log holds them', () => {
  // Random base64 compresses to about three quarters: three 240 KiB messages are 720 KiB of JSON,
  // within what an append takes (1 MiB), and about 540 KB stored, over one item's 400 KB.
  const incompressible = (count: number, kib: number, role = 'user') =>
    Array.from({ length: count }, () => ({
      role,
      content: randomBytes(kib * KIB)
        .toString('base64')
        .slice(0, kib * KIB),
    }));
  const storedChangeLimit = 400 * KIB - KIB;

  it('refuses an append whose messages fit the append limit but not one change with 413 naming them, writing nothing', async () => {
    // Prepare: a session with one message.
    const sid = uniqueId('append-incompressible');
    expect((await http.post(`/v1/sessions/${sid}/messages`, { messages: messages(1, 'first') })).status).toBe(201);
    const before = await snapshot(sid);

    // Act
    const response = await http.post(`/v1/sessions/${sid}/messages`, { messages: incompressible(3, 240) });
    const compressible = await http.post(`/v1/sessions/${sid}/messages`, {
      messages: Array.from({ length: 5 }, (_, index) => ({ role: 'user', content: `${index}`.padEnd(200 * KIB, 'words ') })),
    });

    // Assess: the same bytes of text that compresses fit; what cannot be stored is a 413, never a 500.
    expect(response.status, response.text).toBe(413);
    expect(response.body).toMatchObject({ code: 'payload_too_large', field: 'messages', limitBytes: storedChangeLimit });
    expect(response.body.sizeBytes).toBeGreaterThan(storedChangeLimit);
    expect(compressible.status, compressible.text).toBe(201);
    expect((await snapshot(sid)).nodes).toBe(before.nodes + 5);
  });

  it("blames the trigger's messages for a decision that cannot be stored (413), and the worker when it added messages (502)", async () => {
    // Prepare
    const agentId = await agentWithWorker();
    const bySession = uniqueId('decide-incompressible');
    const byWorker = uniqueId('decide-incompressible-reply');

    // Act: a trigger too large to store with a worker that adds nothing; then a trigger that
    // fits alone with a worker whose answer cannot be stored with it; then that session decides again.
    answer = () => ({ state: { seen: true } });
    const triggered = await http.post(`/v1/sessions/${bySession}/decide`, {
      agentId,
      trigger: { type: 'client.messages', messages: incompressible(3, 240) },
    });
    answer = () => ({ messages: incompressible(1, 240, 'assistant') });
    const answered = await http.post(`/v1/sessions/${byWorker}/decide`, {
      agentId,
      trigger: { type: 'client.messages', messages: incompressible(2, 240) },
    });
    const refused = await snapshot(byWorker);
    answer = () => ({ messages: messages(1, 'short'), state: { ok: true } });
    const after = await http.post(`/v1/sessions/${byWorker}/decide`, { agentId, trigger: { type: 'tick' } });

    // Assess: nothing written by either refusal, and the lease of the second was let go.
    expect(triggered.status, triggered.text).toBe(413);
    expect(triggered.body).toMatchObject({ code: 'payload_too_large', field: 'trigger.messages', limitBytes: storedChangeLimit });
    expect(await snapshot(bySession)).toMatchObject({ version: 0, nodes: 0 });
    expect(answered.status, answered.text).toBe(502);
    expect(answered.body).toMatchObject({ code: 'worker_failed', fieldError: 'payload_too_large', limitBytes: storedChangeLimit });
    expect(refused).toMatchObject({ version: 0, nodes: 0 });
    expect(after.status, after.text).toBe(200);
    // The root and the reply.
    expect(await snapshot(byWorker)).toMatchObject({ version: 1, nodes: 2 });
  });
});

describe('decide with typed fields: the merged state is held to the limit', () => {
  let owner: string;
  let child: string;

  let quiet: string;

  beforeAll(async () => {
    owner = uniqueId('owner');
    child = uniqueId('child');
    quiet = uniqueId('quiet');
    const registered = [
      await http.put(`/v1/agents/${owner}`, {
        stateFields: { hidden: { type: 'string' }, open: { type: 'string', read: 'public', write: 'public' } },
      }),
      await http.put(`/v1/agents/${child}`, { parentId: owner, worker: { url: workerUrl } }),
      // No worker: its decisions are what the caller proposes.
      await http.put(`/v1/agents/${quiet}`, { parentId: owner }),
    ];
    for (const response of registered) expect(response.status, response.text).toBe(201);
  });

  /** A session of the owner's hierarchy whose hidden field holds 3 MiB. */
  async function sessionWithHiddenBulk(): Promise<string> {
    const sid = uniqueId('typed-bulk');
    await http.post('/v1/sessions', { sessionId: sid, agentId: owner });
    const seeded = await http.put(`/v1/sessions/${sid}/state`, { hidden: 'h'.repeat(3 * MIB), open: 'small' });
    expect(seeded.status, seeded.text).toBe(200);
    return sid;
  }

  it("refuses a worker's state that fits alone but not merged with the fields it cannot see: 502 naming the limit", async () => {
    // Prepare
    const sid = await sessionWithHiddenBulk();
    answer = (request) => {
      expect(request.state).not.toHaveProperty('hidden');
      return { state: { open: 'o'.repeat(2 * MIB) } };
    };

    // Act
    const response = await http.post(`/v1/sessions/${sid}/decide`, { agentId: child, trigger: { type: 'tick' } });

    // Assess
    expect(response.status).toBe(502);
    expect(response.body).toMatchObject({ code: 'worker_failed', fieldError: 'state_too_large', limitBytes: 4 * MIB });
    expect((await snapshot(sid)).version).toBe(1);
  });

  it('refuses the same for a caller proposing it without a worker: 413 state_too_large', async () => {
    const sid = await sessionWithHiddenBulk();

    const response = await http.post(`/v1/sessions/${sid}/decide`, {
      agentId: quiet,
      trigger: { type: 'tick' },
      proposed: { state: { open: 'o'.repeat(2 * MIB) } },
    });

    expect(response.status).toBe(413);
    expect(response.body).toMatchObject({ code: 'state_too_large', limitBytes: 4 * MIB });
    expect((await snapshot(sid)).version).toBe(1);
  });
});

describe('answers past what one answer may carry (Lambda’s 6 MB, the same on npm start)', () => {
  it('refuses the path to a node whose messages pass it with 413 naming the limit, and answers a shorter path whole', async () => {
    // Prepare: 32 messages of 240 KiB (8 appends of 4, each within an append's 1 MiB and, being
    // text that compresses, one change of the log): about 7.7 MB of messages on one path.
    const sid = uniqueId('long-path');
    const text = (n: number) => `${n} ${'a long pasted document, line after line. '.repeat(6000)}`.slice(0, 240 * KIB);
    let last = '';
    for (let append = 0; append < 8; append++) {
      const written = await http.post(`/v1/sessions/${sid}/messages`, {
        messages: Array.from({ length: 4 }, (_, index) => ({ role: 'user', content: text(append * 4 + index) })),
      });
      expect(written.status, written.text).toBe(201);
      if (append === 3) last = written.body.head;
    }

    // Act
    const whole = await http.get(`/v1/sessions/${sid}/messages`);
    const half = await http.get(`/v1/sessions/${sid}/messages?node=${last}`);

    // Assess: the whole path is refused with the limit and the size it would have had; the first
    // 16 messages (about 3.8 MB) come whole.
    expect(whole.status, whole.text.slice(0, 300)).toBe(413);
    expect(whole.body).toMatchObject({ code: 'payload_too_large' });
    expect(whole.body.limitBytes).toBeLessThanOrEqual(6 * MIB);
    expect(whole.body.sizeBytes).toBeGreaterThan(whole.body.limitBytes);
    expect(half.status).toBe(200);
    expect(half.body.messages.map((message: { content: string }) => message.content)).toEqual(
      Array.from({ length: 16 }, (_, index) => text(index)),
    );
  });

  it('reads that path whole in parts with last, newest first, each continuing at the parent of the part before', async () => {
    // Prepare: the same shape of path, 32 messages of 240 KiB.
    const sid = uniqueId('parts');
    const text = (n: number) => `${n} ${'a long pasted document, line after line. '.repeat(6000)}`.slice(0, 240 * KIB);
    for (let append = 0; append < 8; append++) {
      const written = await http.post(`/v1/sessions/${sid}/messages`, {
        messages: Array.from({ length: 4 }, (_, index) => ({
          id: `m${append * 4 + index}`,
          role: 'user',
          content: text(append * 4 + index),
        })),
      });
      expect(written.status, written.text).toBe(201);
    }

    // Act: parts of 12 messages (about 2.9 MB each) until nothing is omitted.
    const parts: Array<{ messages: Array<{ id: string; content: string; parentId: string }>; ancestry: string[]; omitted: number }> = [];
    let query = '';
    for (;;) {
      const part = await http.get(`/v1/sessions/${sid}/messages?last=12${query}`);
      expect(part.status, part.text.slice(0, 300)).toBe(200);
      parts.push(part.body);
      if (part.body.omitted === 0) break;
      query = `&node=${part.body.messages[0].parentId}`;
    }

    // Assess: 12, 12 and 8 messages, each part after the one before; together the whole path.
    expect(parts.map((part) => [part.messages.length, part.omitted])).toEqual([
      [12, 20],
      [12, 8],
      [8, 0],
    ]);
    expect(parts[0]?.ancestry).toEqual(Array.from({ length: 12 }, (_, index) => `m${20 + index}`));
    expect(parts[2]?.ancestry).toEqual(['root', ...Array.from({ length: 8 }, (_, index) => `m${index}`)]);
    const whole = parts.reverse().flatMap((part) => part.messages);
    expect(whole.map((message) => message.content)).toEqual(Array.from({ length: 32 }, (_, index) => text(index)));
  });

  it('refuses a last that is not an integer from 1 to 10000 with 400, and answers root with nothing omitted', async () => {
    const sid = uniqueId('last');
    expect((await http.post(`/v1/sessions/${sid}/messages`, { messages: messages(2, 'm') })).status).toBe(201);
    for (const last of ['0', '-1', '1.5', 'x', '07', '10001', '']) {
      const answer = await http.get(`/v1/sessions/${sid}/messages?last=${last}`);
      expect(answer.status, `last=${last}`).toBe(400);
      expect(answer.body).toMatchObject({ code: 'invalid_request', field: 'last' });
    }
    expect((await http.get(`/v1/sessions/${sid}/messages?last=10000`)).body).toMatchObject({
      ancestry: [expect.any(String), expect.any(String), expect.any(String)],
      omitted: 0,
    });
    expect((await http.get(`/v1/sessions/${sid}/messages?node=root&last=5`)).body).toEqual({
      messages: [],
      ancestry: ['root'],
      omitted: 0,
    });
  });
});
