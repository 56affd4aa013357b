import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { dynamoDbEndpointOf, issueKey } from '../helpers/admin.js';
import { type ApiClient, apiClient } from '../helpers/api-client.js';
import { EventFixtures, waitFor } from '../helpers/events.js';
import { type ServerProcess, startServerProcess } from '../helpers/server.js';

/**
 * `npm start` keeps its DynamoDB Local running (issue 17, item 8): when java dies (here
 * SIGKILL, as a crash or the OOM killer would), `/health` answers `503 unavailable` until it is
 * back, the server restarts it on the same data and port and says so, and then everything
 * works again: what was written before reads back, writes succeed, and change events flow.
 * A key the admin CLI put in the table is looked up in that table on every request: while it
 * cannot be reached, that lookup answers `503 unavailable` too, never a bare 500.
 */

let dataDir: string;
let server: ServerProcess;
let http: ApiClient;
const fixtures = new EventFixtures(() => server.url);

beforeAll(async () => {
  dataDir = mkdtempSync(join(tmpdir(), 'agentstate-supervised-'));
  server = await startServerProcess({ env: { AGENTSTATE_DATA: dataDir, AGENTSTATE_API_KEYS: 'local:dev-key' } });
  http = apiClient(server.url);
}, 60_000);
afterAll(async () => {
  await fixtures.close();
  await server?.stop();
  rmSync(dataDir, { recursive: true, force: true });
});

describe('DynamoDB Local that dies under npm start', () => {
  it('is restarted on the same data, /health reports it meanwhile, and the server says so', async () => {
    // Prepare: a state, and a webhook on the session.
    const receiver = await fixtures.receiver();
    expect((await http.post('/v1/webhooks', { url: receiver.url, sessionId: 'kept' })).status).toBe(201);
    expect((await http.put('/v1/sessions/kept/state', { before: true })).status).toBe(200);
    await waitFor('the first event', () => receiver.accepted().length === 1 || null);
    // Issued into the table (not AGENTSTATE_API_KEYS): its lookup needs DynamoDB.
    const fromTable = apiClient(server.url, await issueKey(dynamoDbEndpointOf(server)));
    const healthyBefore = await fetch(`${server.url}/health`);
    const javaPid = server.javaPid() as number;

    // Act: java dies.
    process.kill(javaPid, 'SIGKILL');
    const whileDown = await waitFor('a 503 from /health', async () => {
      const answer = await fetch(`${server.url}/health`);
      return answer.status === 503 ? answer : null;
    });
    const problem = await whileDown.json();
    const keyLookupWhileDown = await fromTable.get('/v1/sessions/kept/state');
    await waitFor('/health to answer 200 again', async () => (await fetch(`${server.url}/health`)).status === 200 || null, 60_000, 200);

    // Assess
    expect(healthyBefore.status).toBe(200);
    expect(problem).toMatchObject({ code: 'unavailable', status: 503 });
    expect(keyLookupWhileDown.status).toBe(503);
    expect(keyLookupWhileDown.body).toMatchObject({ code: 'unavailable' });
    expect(server.output()).toMatch(/DynamoDB Local exited unexpectedly \(SIGKILL\); restarting it on the same data/);
    expect(server.output()).toMatch(/DynamoDB Local is back on port \d+ \(java pid \d+\)/);
    const read = await http.get('/v1/sessions/kept/state');
    expect(read.body).toMatchObject({ version: 1, state: { before: true } });
    expect((await fromTable.get('/v1/sessions/kept/state')).status).toBe(200);
    const written = await http.patch('/v1/sessions/kept/state', { after: true });
    expect(written.body).toMatchObject({ version: 2, state: { before: true, after: true } });
    const events = await waitFor('the event of the write after the restart', () =>
      receiver.accepted().length >= 2 ? receiver.accepted() : null,
    );
    expect(events.map((event: { version: number }) => event.version)).toEqual([1, 2]);
  }, 120_000);
});
