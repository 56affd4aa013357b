import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ApiClient, type ApiResponse, apiClient } from '../helpers/api-client.js';
import { type StartedServerProcess, startServerProcess } from '../helpers/server.js';

/**
 * `npm start` as the README runs it: its data on disk (DynamoDB Local with `-dbPath`, SQLite),
 * where DynamoDB Local writes an item about ten times slower than in memory (a BatchWriteItem of
 * 25 items: 0.75-1.1 s against 80 ms) and takes the writes one at a time. Bursts of blind
 * writers at once, through real HTTP, with a core kept busy by another process: every write
 * answers 200 and is there afterwards. Before, 50 PATCHes after an append of 50 messages each
 * put that append's 50-item node index again, and all 50 answered 503 (the SDK's 3 s bound ran
 * out while DynamoDB Local worked through 100 BatchWriteItems); 100 PATCHes of a session raced
 * for every place outside the write queue and 62 answered 409. The times are the server's own
 * budgets (15 s a write); nothing here is timed. It runs alone (vitest.config.ts), after the others.
 */

let dataDir: string;
let server: StartedServerProcess;
let http: ApiClient;
let burner: ChildProcess;

beforeAll(async () => {
  dataDir = mkdtempSync(join(tmpdir(), 'agentstate-on-disk-'));
  server = await startServerProcess({
    env: { AGENTSTATE_DATA: dataDir, AGENTSTATE_API_KEYS: 'local:dev-key', AGENTSTATE_ACCESS_LOG: 'off' },
  });
  http = apiClient(server.url);
  // Another tenant's work on the same machine.
  burner = spawn(process.execPath, ['-e', 'for (;;) {}'], { stdio: 'ignore' });
}, 60_000);
afterAll(async () => {
  burner?.kill('SIGKILL');
  await server?.stop();
  rmSync(dataDir, { recursive: true, force: true });
});

const BURST_MS = 180_000;
const range = (count: number) => Array.from({ length: count }, (_, index) => index);

function statuses(answers: ApiResponse[]): Record<number, number> {
  const counts: Record<number, number> = {};
  for (const answer of answers) counts[answer.status] = (counts[answer.status] ?? 0) + 1;
  return counts;
}

/** A session whose last change is an append of `messages` messages: the next write owes their node index. */
async function sessionWithMessages(sessionId: string, messages: number): Promise<void> {
  const appended = await http.post(`/v1/sessions/${sessionId}/messages`, {
    messages: range(messages).map((index) => ({ id: `m${index}`, role: 'user', content: `message ${index}` })),
  });
  expect(appended.status, appended.text).toBe(201);
}

async function versionsOf(sessionId: string): Promise<number[]> {
  const listed = await http.get(`/v1/sessions/${sessionId}/versions?limit=200`);
  expect(listed.status, listed.text).toBe(200);
  return (listed.body.versions as Array<{ version: number }>).map((item) => item.version).sort((a, b) => a - b);
}

describe('npm start with its data on disk, bursts of blind writers, a core busy', () => {
  it(
    '50 PATCHes of a session after an append of 50 messages: all 200, every key in its metadata',
    async () => {
      await sessionWithMessages('patched-50', 50);

      const answers = await Promise.all(
        range(50).map((index) => http.patch('/v1/sessions/patched-50', { metadata: { [`k${index}`]: index } })),
      );

      expect(statuses(answers)).toEqual({ 200: 50 });
      const { metadata } = (await http.get('/v1/sessions/patched-50')).body;
      expect(Object.keys(metadata).sort()).toEqual(
        range(50)
          .map((index) => `k${index}`)
          .sort(),
      );
    },
    BURST_MS,
  );

  it(
    '100 PATCHes of a session: all 200, every key in its metadata',
    async () => {
      await sessionWithMessages('patched-100', 1);

      const answers = await Promise.all(
        range(100).map((index) => http.patch('/v1/sessions/patched-100', { metadata: { [`k${index}`]: index } })),
      );

      expect(statuses(answers)).toEqual({ 200: 100 });
      const { metadata } = (await http.get('/v1/sessions/patched-100')).body;
      expect(Object.keys(metadata)).toHaveLength(100);
    },
    BURST_MS,
  );

  it(
    '50 state PATCHes after an append of 50 messages: all 200, every key there, versions 1..50',
    async () => {
      await sessionWithMessages('state-50', 50);

      const answers = await Promise.all(range(50).map((index) => http.patch('/v1/sessions/state-50/state', { [`k${index}`]: index })));

      expect(statuses(answers)).toEqual({ 200: 50 });
      const { state } = (await http.get('/v1/sessions/state-50/state')).body;
      expect(Object.keys(state)).toHaveLength(50);
      expect(await versionsOf('state-50')).toEqual(range(50).map((index) => index + 1));
    },
    BURST_MS,
  );

  it(
    '100 commits to one thread: all 200, every key there, versions 1..100',
    async () => {
      expect((await http.post('/v1/sessions', { sessionId: 'thread' })).status).toBe(201);

      const answers = await Promise.all(
        range(100).map((index) =>
          http.post('/v1/sessions/thread/commits', {
            commands: [{ key: `k${index}`, scope: 'thread', merge: 'commutative', set: { by: index } }],
          }),
        ),
      );

      expect(statuses(answers)).toEqual({ 200: 100 });
      const { state } = (await http.get('/v1/sessions/thread/state')).body;
      expect(Object.keys(state)).toHaveLength(100);
      expect(await versionsOf('thread')).toEqual(range(100).map((index) => index + 1));
    },
    BURST_MS,
  );

  it(
    '100 commits to the shared document, one from each of 100 sessions: all 200, every key there',
    async () => {
      // Made 20 at a time: each its own id, so nothing contends, and DynamoDB Local on disk works
      // through 20 creates well within the SDK's 3 s bound: 1.3-1.4 s for the 100, against 2.1-3.2 s
      // one after another (a scratch measure on this file's server, a core busy).
      for (let first = 0; first < 100; first += 20) {
        const made = await Promise.all(range(20).map((index) => http.post('/v1/sessions', { sessionId: `shared-${first + index}` })));
        expect(statuses(made)).toEqual({ 201: 20 });
      }
      const before = (await http.get('/v1/shared/state')).body;

      const answers = await Promise.all(
        range(100).map((index) =>
          http.post(`/v1/sessions/shared-${index}/commits`, {
            commands: [{ key: `k${index}`, scope: 'shared', merge: 'commutative', set: { by: index } }],
          }),
        ),
      );

      expect(statuses(answers)).toEqual({ 200: 100 });
      const shared = (await http.get('/v1/shared/state')).body;
      for (const index of range(100)) expect(shared.state, `k${index}`).toHaveProperty(`k${index}`);
      expect(shared.version).toBe((before.version ?? 0) + 100);
    },
    BURST_MS,
  );

  it(
    'a mix at once after an append of 50 messages: 25 PATCHes of the session, 25 of its state, 25 thread commits, 25 shared commits, all 200 and there',
    async () => {
      await sessionWithMessages('mix', 50);
      const before = (await http.get('/v1/shared/state')).body;
      const writes = [
        (index: number) => http.patch('/v1/sessions/mix', { metadata: { [`k${index}`]: index } }),
        (index: number) => http.patch('/v1/sessions/mix/state', { [`p${index}`]: index }),
        (index: number) =>
          http.post('/v1/sessions/mix/commits', {
            commands: [{ key: `t${index}`, scope: 'thread', merge: 'commutative', set: { by: index } }],
          }),
        (index: number) =>
          http.post('/v1/sessions/mix/commits', {
            commands: [{ key: `mix${index}`, scope: 'shared', merge: 'commutative', set: { by: index } }],
          }),
      ];

      const answers = await Promise.all(range(100).map((index) => (writes[index % 4] as (index: number) => Promise<ApiResponse>)(index)));

      expect(statuses(answers)).toEqual({ 200: 100 });
      const session = (await http.get('/v1/sessions/mix')).body;
      const { state } = (await http.get('/v1/sessions/mix/state')).body;
      const shared = (await http.get('/v1/shared/state')).body;
      for (const index of range(100)) {
        const kind = index % 4;
        if (kind === 0) expect(session.metadata, `k${index}`).toHaveProperty(`k${index}`);
        if (kind === 1) expect(state, `p${index}`).toHaveProperty(`p${index}`);
        if (kind === 2) expect(state, `t${index}`).toHaveProperty(`t${index}`);
        if (kind === 3) expect(shared.state, `mix${index}`).toHaveProperty(`mix${index}`);
      }
      expect(shared.version).toBe((before.version ?? 0) + 25);
      // The state's 50 writes, each its own version.
      expect(await versionsOf('mix')).toEqual(range(50).map((index) => index + 1));
    },
    BURST_MS,
  );
});
