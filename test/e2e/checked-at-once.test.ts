import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ApiClient, type ApiResponse, uniqueId } from '../helpers/api-client.js';
import { type RunningApi, startApi } from '../helpers/e2e.js';

/**
 * Rules a write checks by reading first and writing after, each hit by 50 requests at once
 * through real HTTP on DynamoDB Local: one Idempotency-Key on every kind of write the other
 * files do not race (tree.test.ts's idempotency tests have state PATCHes, appends and
 * decisions), create-only and versioned memory puts, retention's pruner beside writes that
 * branch. Every answer is one the contract names, and what is stored afterwards (read back)
 * keeps the rule, whichever way the race went. The registry's rules at once:
 * agent-hierarchy-rules.test.ts.
 */
let api: RunningApi;
let http: ApiClient;

beforeAll(async () => {
  // Retention prunes at most once a second per session here (a minute by default), so that its
  // runs fall among the writes that race them.
  api = await startApi({ AGENTSTATE_PRUNE_INTERVAL_SECONDS: '1' });
  http = api.client;
});
afterAll(async () => {
  await api?.stop();
});

const WRITERS = 50;
const counted = (answers: Array<{ status: number }>) =>
  Object.fromEntries(
    [...new Set(answers.map((answer) => answer.status))].map((status) => [status, answers.filter((a) => a.status === status).length]),
  );

/** What a client sees of an answer: status, body text, the version's ETag. */
const seen = (response: ApiResponse) => ({ status: response.status, text: response.text, etag: response.headers.get('etag') });

interface KeyedWrite {
  /** Makes what the write needs. */
  before?: (id: string) => Promise<void>;
  /** The request (method, path, body, content type). */
  prepare(id: string): Promise<{ method: string; path: string; body: unknown; contentType?: string }>;
  /** Reads back what the write stored: once, not twice. */
  stored(id: string): Promise<void>;
}

/** A session `sid` with a message `u1` and the state `{items: []}` (version 1). */
async function sessionWithState(sid: string): Promise<void> {
  expect((await http.post(`/v1/sessions/${sid}/messages`, { messages: [{ id: 'u1', role: 'user', content: 'hi' }] })).status).toBe(201);
  expect((await http.put(`/v1/sessions/${sid}/state`, { items: [] })).status).toBe(200);
}
const versionsOf = async (sid: string) => (await http.get(`/v1/sessions/${sid}/versions?limit=500`)).body.versions as unknown[];

const keyedWrites: Array<[string, KeyedWrite]> = [
  [
    'PUT state',
    {
      before: sessionWithState,
      prepare: async (sid) => ({ method: 'PUT', path: `/v1/sessions/${sid}/state`, body: { items: [1] } }),
      stored: async (sid) => expect(await versionsOf(sid)).toHaveLength(2),
    },
  ],
  [
    'PATCH state with a JSON Patch that appends',
    {
      before: sessionWithState,
      prepare: async (sid) => ({
        method: 'PATCH',
        path: `/v1/sessions/${sid}/state`,
        body: [{ op: 'add', path: '/items/-', value: 'once' }],
        contentType: 'application/json-patch+json',
      }),
      stored: async (sid) => {
        expect((await http.get(`/v1/sessions/${sid}/state`)).body.state).toEqual({ items: ['once'] });
        expect(await versionsOf(sid)).toHaveLength(2);
      },
    },
  ],
  [
    'POST commits',
    {
      before: sessionWithState,
      prepare: async (sid) => ({
        method: 'POST',
        path: `/v1/sessions/${sid}/commits`,
        body: { runId: 'r1', commands: [{ key: 'seen', scope: 'run', merge: 'disjoint', set: ['once'] }] },
      }),
      stored: async (sid) => {
        expect((await http.get(`/v1/sessions/${sid}/runs/r1/state`)).body).toMatchObject({ version: 1, state: { seen: ['once'] } });
      },
    },
  ],
  [
    'POST sessions',
    {
      prepare: async (sid) => ({ method: 'POST', path: '/v1/sessions', body: { sessionId: sid, metadata: { made: 'once' } } }),
      stored: async (sid) => expect((await http.get(`/v1/sessions/${sid}`)).body.metadata).toEqual({ made: 'once' }),
    },
  ],
  [
    'PATCH a session',
    {
      before: sessionWithState,
      prepare: async (sid) => ({ method: 'PATCH', path: `/v1/sessions/${sid}`, body: { metadata: { patched: 'once' } } }),
      stored: async (sid) => expect((await http.get(`/v1/sessions/${sid}`)).body.metadata).toEqual({ patched: 'once' }),
    },
  ],
  [
    'PUT head',
    {
      prepare: async (sid) => {
        await sessionWithState(sid);
        expect((await http.post(`/v1/sessions/${sid}/messages`, { messages: [{ id: 'a1', role: 'assistant' }] })).status).toBe(201);
        return { method: 'PUT', path: `/v1/sessions/${sid}/head`, body: { nodeId: 'u1' } };
      },
      stored: async (sid) => expect((await http.get(`/v1/sessions/${sid}`)).body.head).toBe('u1'),
    },
  ],
  [
    'PUT a note',
    {
      before: sessionWithState,
      prepare: async (sid) => ({ method: 'PUT', path: `/v1/sessions/${sid}/nodes/u1/notes/n1`, body: { once: true } }),
      stored: async (sid) => {
        const tree = await http.get(`/v1/sessions/${sid}/tree?notes=1`);
        expect(JSON.stringify(tree.body)).toContain('"once":true');
      },
    },
  ],
  [
    'POST copy',
    {
      before: sessionWithState,
      prepare: async (sid) => ({ method: 'POST', path: `/v1/sessions/${sid}/copy`, body: { sessionId: `${sid}-copy` } }),
      stored: async (sid) => {
        expect((await http.get(`/v1/sessions/${sid}-copy/messages`)).body.messages).toHaveLength(1);
        expect(await versionsOf(`${sid}-copy`)).toHaveLength(1);
      },
    },
  ],
  [
    'PUT an agent',
    {
      prepare: async (id) => ({ method: 'PUT', path: `/v1/agents/${id}`, body: { config: { once: true } } }),
      stored: async (id) => expect((await http.get(`/v1/agents/${id}`)).body.config).toEqual({ once: true }),
    },
  ],
  [
    'POST webhooks',
    {
      prepare: async (id) => ({ method: 'POST', path: '/v1/webhooks', body: { url: `https://hooks.example.com/${id}`, sessionId: id } }),
      stored: async (id) => {
        const hooks = (await http.get('/v1/webhooks?limit=100')).body.webhooks as Array<{ url: string }>;
        expect(hooks.filter((hook) => hook.url.endsWith(id))).toHaveLength(1);
        // Free its place: the tenant has 20.
        for (const hook of hooks as Array<{ id: string; url: string }>)
          if (hook.url.endsWith(id)) expect((await http.delete(`/v1/webhooks/${hook.id}`)).status).toBe(204);
      },
    },
  ],
  [
    'PUT a memory item',
    {
      prepare: async (id) => ({ method: 'PUT', path: `/v1/memory/users/${id}/k`, body: { value: { once: true } } }),
      stored: async (id) => {
        expect((await http.get(`/v1/memory/users/${id}/k`)).body).toMatchObject({ version: 1, value: { once: true } });
        const history = await http.get(`/v1/memory/versions?namespace=users/${id}&key=k`);
        expect(history.body.versions).toHaveLength(1);
      },
    },
  ],
];

describe('create-only and versioned memory puts at once', () => {
  it('creates a memory item once of 50 puts with If-None-Match: *, and moves it once of 50 with one If-Match', async () => {
    // Prepare
    const path = `/v1/memory/users/${uniqueId('create-once')}/k`;

    // Act
    const creates = await Promise.all(
      Array.from({ length: WRITERS }, (_, n) => http.put(path, { value: { n } }, { headers: { 'if-none-match': '*' } })),
    );
    const made = creates.find((answer) => answer.status === 201);
    const moves = await Promise.all(
      Array.from({ length: WRITERS }, (_, n) => http.put(path, { value: { moved: n } }, { headers: { 'if-match': '"1"' } })),
    );

    // Assess: one of each landed, the others 412; the item is the mover's at version 2, with one
    // version before it.
    expect(counted(creates)).toEqual({ 201: 1, 412: WRITERS - 1 });
    expect(counted(moves)).toEqual({ 200: 1, 412: WRITERS - 1 });
    const mover = moves.find((answer) => answer.status === 200);
    const item = await http.get(path);
    expect(item.body).toMatchObject({ version: 2, value: mover?.body.value });
    expect(made?.body.value).toHaveProperty('n');
    const ns = path.split('/').slice(3, -1).join('/');
    const history = await http.get(`/v1/memory/versions?namespace=${ns}&key=k`);
    expect(history.body.versions.map((version: { version: number }) => version.version)).toEqual([2, 1]);
  });
});

describe('one Idempotency-Key sent 50 times at once', () => {
  it.each(keyedWrites)('%s: one runs, 49 get its answer replayed, and it is stored once', async (_name, write) => {
    // Prepare
    const id = uniqueId('keyed');
    await write.before?.(id);
    const { method, path, body, contentType } = await write.prepare(id);
    const headers = { 'idempotency-key': uniqueId('key') };

    // Act
    const answers = await Promise.all(
      Array.from({ length: WRITERS }, () => http.request(method, path, { json: body, headers, ...(contentType ? { contentType } : {}) })),
    );

    // Assess: one answer, given once and replayed 49 times; what it wrote is there once.
    const first = answers.filter((answer) => answer.headers.get('idempotency-replayed') === null);
    expect(first, JSON.stringify(counted(answers))).toHaveLength(1);
    expect(first[0]?.status, first[0]?.text).toBeLessThan(300);
    for (const answer of answers) expect(seen(answer)).toEqual(seen(first[0] as ApiResponse));
    await write.stored(id);
  });
});

describe('retention pruning while 50 writers branch and write', () => {
  it('keeps every version a node points at: each node reads what it read when its writer last looked', async () => {
    // Prepare: a session that keeps one version besides what nodes and the head point at.
    const sid = uniqueId('prune-race');
    expect((await http.post(`/v1/sessions/${sid}/messages`, { messages: [{ id: 'u0', role: 'user', content: 'hi' }] })).status).toBe(201);
    expect((await http.patch(`/v1/sessions/${sid}/state`, { at: 'u0' })).status).toBe(200);
    expect((await http.patch(`/v1/sessions/${sid}`, { retention: { keepVersions: 1 } })).status).toBe(200);
    const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
    /** What each node read when its writer last looked: nothing else moves its pointer. */
    const read = new Map<string, { version: number; state: unknown }>();
    const look = async (node: string) => {
      const view = await http.get(`/v1/sessions/${sid}/state?node=${node}`);
      expect(view.status, view.text).toBe(200);
      read.set(node, { version: view.body.version, state: view.body.state });
    };
    const ok = (answer: ApiResponse) => expect(answer.status, answer.text).toBeLessThan(300);

    // Act: 50 writers, started 100 ms apart (prune runs every second all along), each at a node
    // of its own: made with a state (its first version), written again (the first now has no
    // node), a child made under it (pointing at the second), written a third time (the second
    // now has only the child).
    await Promise.all(
      Array.from({ length: WRITERS }, async (_, n) => {
        await sleep(n * 100);
        const own = `w${n}`;
        const child = `w${n}-child`;
        const made = await http.post(`/v1/sessions/${sid}/messages`, {
          parentId: 'u0',
          messages: [{ id: own, role: 'assistant' }],
          state: { [own]: 1 },
        });
        ok(made);
        ok(await http.patch(`/v1/sessions/${sid}/state?node=${own}`, { [own]: 2 }));
        ok(await http.post(`/v1/sessions/${sid}/messages`, { parentId: own, messages: [{ id: child, role: 'user' }] }));
        ok(await http.patch(`/v1/sessions/${sid}/state?node=${own}`, { [own]: 3 }));
        await look(child);
        await look(own);
      }),
    );
    // Runs after the last write, until the versions below the window that nothing points at are gone.
    for (let attempt = 0; attempt < 100; attempt++) {
      const list = await http.get(`/v1/sessions/${sid}/versions?limit=500`);
      if (list.body.pruned && list.body.versions.length <= 2 * WRITERS + 3) break;
      await sleep(200);
    }

    // Assess: pruning ran, and every node reads what it read; its version reads too. The 200
    // reads go side by side (nothing writes any more), then are checked in the writers' order.
    const list = await http.get(`/v1/sessions/${sid}/versions?limit=500`);
    expect(list.body.pruned, 'pruning ran').toBeDefined();
    const reread = await Promise.all(
      [...read].map(async ([node, before]) => {
        const [now, version] = await Promise.all([
          http.get(`/v1/sessions/${sid}/state?node=${node}`),
          http.get(`/v1/sessions/${sid}/versions/${before.version}`),
        ]);
        return { node, before, now, version };
      }),
    );
    for (const { node, before, now, version } of reread) {
      expect({ node, status: now.status, version: now.body.version, state: now.body.state }).toEqual({ node, status: 200, ...before });
      expect(version.status).toBe(200);
    }
    // What is kept is bounded by the nodes: each writer's second and third versions, the
    // window, the first state.
    expect(list.body.versions.length).toBeLessThanOrEqual(2 * WRITERS + 3);
  }, 60_000);
});
