import { createHmac } from 'node:crypto';
import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PutItemCommand, ScanCommand } from '@aws-sdk/client-dynamodb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { localDynamoDbClient } from '../../functions/local/dynamodb-local.js';
import { dynamoDbEndpointOf } from '../helpers/admin.js';
import { type ApiClient, apiClient, uniqueId } from '../helpers/api-client.js';
import { waitFor } from '../helpers/events.js';
import { type StartedServerProcess, startServerProcess } from '../helpers/server.js';

/**
 * What someone who can read the table (a backup, a stolen DynamoDB Local file, a shared
 * machine) or who holds a cursor learns, against `npm start` with its data on disk: no worker or
 * webhook secret (they are sealed with a key kept beside the data, mode 0600), no table key and
 * no tenant from a cursor, and a forged or borrowed cursor is refused. A secret stored in plain
 * text before still works, and is sealed when next written.
 */

const WORKER_SECRET = 'worker-secret-5d1e';
const HOOK_SECRET = 'hook-secret-8c2f';
const KEYS = 'local:dev-key,other:other-key';

let dataDir: string;
let server: StartedServerProcess;
let http: ApiClient;
let worker: Server;
let workerUrl: string;
const calls: Array<{ headers: IncomingHttpHeaders; body: string }> = [];

async function start(): Promise<void> {
  server = await startServerProcess({ env: { AGENTSTATE_DATA: dataDir, AGENTSTATE_API_KEYS: KEYS } });
  http = apiClient(server.url);
}

const endpoint = () => dynamoDbEndpointOf(server);

/** Every item of the table, as DynamoDB's own JSON: what a raw read of the table shows. */
async function rawTable(): Promise<string> {
  const client = localDynamoDbClient(endpoint());
  try {
    const { Items } = await client.send(new ScanCommand({ TableName: 'agentstate', ConsistentRead: true }));
    return JSON.stringify(Items);
  } finally {
    client.destroy();
  }
}

/** True when a worker call was signed with `secret` (the Standard Webhooks signature). */
function signedWith(secret: string, call: { headers: IncomingHttpHeaders; body: string }): boolean {
  const content = `${call.headers['webhook-id']}.${call.headers['webhook-timestamp']}.${call.body}`;
  return call.headers['webhook-signature'] === `v1,${createHmac('sha256', secret).update(content).digest('base64')}`;
}

beforeAll(async () => {
  dataDir = mkdtempSync(join(tmpdir(), 'agentstate-sealed-'));
  worker = createServer(async (request, response) => {
    let body = '';
    for await (const chunk of request) body += chunk;
    calls.push({ headers: request.headers, body });
    response.writeHead(200, { 'content-type': 'application/json' }).end('{}');
  });
  await new Promise<void>((resolve) => worker.listen(0, '127.0.0.1', resolve));
  workerUrl = `http://127.0.0.1:${(worker.address() as AddressInfo).port}/decide`;
  await start();
});

afterAll(async () => {
  await server?.stop();
  await new Promise((resolve) => worker?.close(resolve));
  rmSync(dataDir, { recursive: true, force: true });
});

describe('secrets at rest', () => {
  it('are never in the table, survive a restart, and still sign', async () => {
    // Prepare
    await http.put('/v1/agents/sealed', { worker: { url: workerUrl, secret: WORKER_SECRET } });
    await http.post('/v1/webhooks', { url: 'http://127.0.0.1:9/hook', secret: HOOK_SECRET });
    // Act
    const table = await rawTable();
    await server.stop();
    await start();
    const decided = await http.post(`/v1/sessions/${uniqueId('s')}/decide`, { trigger: { type: 'x' }, agentId: 'sealed' });
    // Assess
    expect(table).not.toContain(WORKER_SECRET);
    expect(table).not.toContain(HOOK_SECRET);
    expect(table).toContain('enc:v1:');
    expect(statSync(join(dataDir, 'agentstate.key')).mode & 0o777).toBe(0o600);
    expect(decided.status).toBe(200);
    expect(signedWith(WORKER_SECRET, calls.at(-1) as never)).toBe(true);
  });

  it('stored in plain text before still work, and are sealed when the agent is written again', async () => {
    // Prepare: an agent item as an older agentstate wrote it, its secret in plain text.
    const client = localDynamoDbClient(endpoint());
    await client.send(
      new PutItemCommand({
        TableName: 'agentstate',
        Item: {
          pk: { S: 'A#local' },
          sk: { S: 'A#legacy' },
          agentId: { S: 'legacy' },
          parentId: { NULL: true },
          worker: { M: { url: { S: workerUrl }, secret: { S: 'legacy-plain-secret' }, timeoutMs: { NULL: true } } },
          config: { S: 'null' },
          createdAt: { S: '2026-01-01T00:00:00.000Z' },
          updatedAt: { S: '2026-01-01T00:00:00.000Z' },
        },
      }),
    );
    client.destroy();
    // Act
    const decided = await http.post(`/v1/sessions/${uniqueId('s')}/decide`, { trigger: { type: 'x' }, agentId: 'legacy' });
    const signed = signedWith('legacy-plain-secret', calls.at(-1) as never);
    await http.put('/v1/agents/legacy', { worker: { url: workerUrl, secret: 'legacy-plain-secret' } });
    // Assess
    expect(decided.status).toBe(200);
    expect(signed).toBe(true);
    expect(await rawTable()).not.toContain('legacy-plain-secret');
  });
});

describe('cursors', () => {
  it('reveal no table key and no tenant', async () => {
    // Prepare: two agents, so that a page of one has a next page.
    await http.put(`/v1/agents/${uniqueId('a')}`, {});
    await http.put(`/v1/agents/${uniqueId('a')}`, {});
    // Act
    const page = await http.get('/v1/agents?limit=1');
    const decoded = Buffer.from(page.body.next, 'base64url').toString('latin1');
    // Assess
    expect(page.body.next).toMatch(/^[A-Za-z0-9_-]+$/);
    // What the raw key in base64 showed; whole words, which random bytes do not spell by chance.
    for (const revealing of ['A#local', 'local', '"pk"', '"sk"']) expect(decoded).not.toContain(revealing);
  });

  it('are refused when tampered with, used by another tenant, or used on another list', async () => {
    // Prepare
    const sid = uniqueId('lineage');
    const otherSid = uniqueId('lineage');
    for (let turn = 0; turn < 3; turn++) {
      await http.patch(`/v1/sessions/${sid}/state`, { turn });
      await http.patch(`/v1/sessions/${otherSid}/state`, { turn });
    }
    const agents = (await http.get('/v1/agents?limit=1')).body.next as string;
    const lineage = (await http.get(`/v1/sessions/${sid}/versions?node=root&limit=1`)).body.next as string;
    const history = (await http.get(`/v1/sessions/${sid}/versions?limit=1`)).body.next as string;
    const flipped = (cursor: string) => `${cursor.slice(0, 10)}${cursor[10] === 'A' ? 'B' : 'A'}${cursor.slice(11)}`;
    // Act
    const answers = [
      await http.get(`/v1/agents?limit=1&cursor=${flipped(agents)}`),
      await http.get(`/v1/agents?limit=1&cursor=${agents}`, { key: 'other-key' }),
      await http.get(`/v1/webhooks?limit=1&cursor=${agents}`),
      await http.get(`/v1/sessions/${sid}/versions?node=root&limit=1&cursor=${flipped(lineage)}`),
      await http.get(`/v1/sessions/${otherSid}/versions?node=root&limit=1&cursor=${lineage}`),
      await http.get(`/v1/sessions/${sid}/versions?limit=1&cursor=${flipped(history)}`),
      await http.get(`/v1/sessions?limit=1&cursor=${history}`),
    ];
    // Assess
    for (const answer of answers) {
      expect(answer.status).toBe(400);
      expect(answer.body).toMatchObject({ code: 'invalid_request', field: 'cursor' });
    }
    expect((await http.get(`/v1/agents?limit=1&cursor=${agents}`)).status).toBe(200);
  });

  it('of memory searches and namespace lists show no namespace, and open only for their search and tenant', async () => {
    // Prepare: three items in two namespaces, the same names in the other tenant.
    const root = uniqueId('mem');
    for (const [namespace, key] of [
      ['notes', 'a'],
      ['notes', 'b'],
      ['facts', 'c'],
    ]) {
      for (const tenantKey of ['dev-key', 'other-key']) {
        const answer = await http.put(`/v1/memory/${root}/${namespace}/${key}`, { value: { kind: 'note' } }, { key: tenantKey });
        expect(answer.status).toBe(201);
      }
    }
    // The namespace list (and so a search's span) follows the writes a moment later.
    await waitFor('both namespaces listed', async () => (await http.get(`/v1/memory?prefix=${root}`)).body.namespaces?.length === 2);
    const search = await http.post('/v1/memory/search', { namespacePrefix: [root], limit: 1 });
    const namespaces = await http.get(`/v1/memory?prefix=${root}&limit=1`);
    const searchCursor = search.body.next as string;
    const listCursor = namespaces.body.next as string;
    // Act
    const answers = [
      await http.post('/v1/memory/search', { namespacePrefix: [root], limit: 1, cursor: searchCursor }, { key: 'other-key' }),
      await http.post('/v1/memory/search', { namespacePrefix: [root], filter: { kind: 'x' }, limit: 1, cursor: searchCursor }),
      await http.post('/v1/memory/search', { namespacePrefix: [root], limit: 1, cursor: listCursor }),
      await http.get(`/v1/memory?prefix=${root}&limit=1&cursor=${listCursor}`, { key: 'other-key' }),
      await http.get(`/v1/memory?prefix=${root}&limit=1&cursor=${searchCursor}`),
    ];
    // Assess
    for (const cursor of [searchCursor, listCursor]) {
      expect(cursor).toMatch(/^[A-Za-z0-9_-]+$/);
      const decoded = Buffer.from(cursor, 'base64url').toString('latin1');
      for (const revealing of [root, 'notes', 'facts', 'local']) expect(decoded).not.toContain(revealing);
    }
    for (const answer of answers) {
      expect(answer.status).toBe(400);
      expect(answer.body).toMatchObject({ code: 'invalid_request', field: 'cursor' });
    }
    const next = await http.post('/v1/memory/search', { namespacePrefix: [root], limit: 1, cursor: searchCursor });
    expect(next.status).toBe(200);
    expect(next.body.items).toHaveLength(1);
    expect((await http.get(`/v1/memory?prefix=${root}&limit=1&cursor=${listCursor}`)).status).toBe(200);
  });
});
