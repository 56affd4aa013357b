import { DescribeTableCommand, type DynamoDBClient, PutItemCommand, UpdateItemCommand } from '@aws-sdk/client-dynamodb';
import { DynamoDBStreamsClient } from '@aws-sdk/client-dynamodb-streams';
import type { DynamoDBStreamEvent } from 'aws-lambda';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { StreamPoller } from '../../functions/local/stream-poller.js';
import { ApiKeyStore, hashApiKey } from '../../functions/store/access/api-keys.js';
import { DynamoDbLiveStore } from '../../functions/store/events/live-store.js';
import { changeRecordFilters, recordedVersionOf } from '../../functions/store/events/stream-images.js';
import { DynamoDbWebhookStore } from '../../functions/store/events/webhook-store.js';
import { createStores } from '../../functions/store/index.js';
import { LOG_ITEM_KIND } from '../../functions/store/table/item-kinds.js';
import { TableClient } from '../../functions/store/table/table-client.js';
import { type WebSocketEvent, handler as webSocketHandler } from '../../functions/ws/handler.js';
import { createTestTable, dynamoEndpoint, testDynamoDbClient } from '../helpers/dynamodb.js';
import { waitFor } from '../helpers/events.js';

/** The event stores, the WebSocket handler and the stream poller against a real DynamoDB Local. */
let tableName: string;
let client: DynamoDBClient;

beforeAll(async () => {
  tableName = await createTestTable('events');
  client = testDynamoDbClient();
  // The WebSocket handler builds its dependencies from the environment on first use.
  process.env.AGENTSTATE_TABLE = tableName;
  process.env.AGENTSTATE_DYNAMODB_ENDPOINT = dynamoEndpoint();
  process.env.AGENTSTATE_API_KEYS = 'acme:acme-key';
});
afterAll(() => client.destroy());

describe('webhook store', () => {
  it('lists a tenant’s webhooks newest first, page by page, and nobody else’s', async () => {
    // Prepare
    const store = new DynamoDbWebhookStore(new TableClient(client, tableName));
    const hook = (id: string) => ({
      id,
      url: `https://${id}.example`,
      secret: id === 'w2' ? 's' : null,
      sessionId: null,
      createdAt: '2025-06-01T00:00:00.000Z',
    });
    for (const id of ['w1', 'w2', 'w3']) await store.putWebhook('list-tenant', hook(id), { limit: 20 });
    await store.putWebhook('someone-else', hook('w9'), { limit: 20 });

    // Act
    const first = await store.listWebhooks('list-tenant', { limit: 2 });
    const second = await store.listWebhooks('list-tenant', { limit: 2, cursor: first.next as string });

    // Assess
    expect(first.items.map((webhook) => webhook.id)).toEqual(['w3', 'w2']);
    expect(first.items[1]?.secret).toBe('s');
    expect(second.items.map((webhook) => webhook.id)).toEqual(['w1']);
    expect((await store.allWebhooks('list-tenant')).map((webhook) => webhook.id)).toEqual(['w1', 'w2', 'w3']);
    await expect(store.listWebhooks('someone-else', { limit: 2, cursor: first.next as string })).rejects.toMatchObject({
      code: 'invalid_request',
    });
  });

  it('keeps one dead letter per event: a second failure adds attempts and keeps the first failure time', async () => {
    // Prepare
    const store = new DynamoDbWebhookStore(new TableClient(client, tableName));
    const event = (sessionId: string, version: number) => ({ id: `${sessionId}:${version}`, sessionId, version, body: `{"v":${version}}` });

    // Act
    await store.recordDeadLetter('dl', 'w', event('s2', 1), { attempts: 3, error: 'HTTP 500', at: '2025-06-01T10:00:00.000Z' });
    await store.recordDeadLetter('dl', 'w', event('s1', 10), { attempts: 3, error: 'HTTP 500', at: '2025-06-01T10:00:01.000Z' });
    await store.recordDeadLetter('dl', 'w', event('s1', 9), { attempts: 0, error: 'not attempted', at: '2025-06-01T10:00:01.000Z' });
    await store.recordDeadLetter('dl', 'w', event('s2', 1), { attempts: 1, error: 'HTTP 502', at: '2025-06-01T11:00:00.000Z' });
    const page = await store.listDeadLetters('dl', 'w', { limit: 10 });

    // Assess: in replay order (session, then version), one item for the redelivered event.
    expect(page.items.map((letter) => letter.eventId)).toEqual(['s1:9', 's1:10', 's2:1']);
    expect(page.items[2]).toEqual({
      webhookId: 'w',
      eventId: 's2:1',
      sessionId: 's2',
      version: 1,
      body: '{"v":1}',
      attempts: 4,
      lastError: 'HTTP 502',
      firstFailedAt: '2025-06-01T10:00:00.000Z',
      lastFailedAt: '2025-06-01T11:00:00.000Z',
    });
    await store.deleteDeadLetter('dl', 'w', { sessionId: 's1', version: 9 });
    expect((await store.listDeadLetters('dl', 'w', { limit: 10 })).items.map((letter) => letter.eventId)).toEqual(['s1:10', 's2:1']);
  });

  it("keeps a document event's dead letter apart from the thread event of the same session and version", async () => {
    // Prepare
    const store = new DynamoDbWebhookStore(new TableClient(client, tableName));
    const failure = { attempts: 3, error: 'HTTP 500', at: '2025-06-01T10:00:00.000Z' };

    // Act
    await store.recordDeadLetter(
      'dl-docs',
      'w',
      { id: 'profile/u1/2', sessionId: 's1', version: 2, document: 'profile#u1', body: '{"p":2}' },
      failure,
    );
    await store.recordDeadLetter(
      'dl-docs',
      'w',
      { id: 'run/s1/r1/2', sessionId: 's1', version: 2, document: 'run#r1', body: '{"r":2}' },
      failure,
    );
    await store.recordDeadLetter('dl-docs', 'w', { id: 's1:2', sessionId: 's1', version: 2, body: '{"t":2}' }, failure);
    await store.recordDeadLetter(
      'dl-docs',
      'w',
      { id: 'run/s1/r1/1', sessionId: 's1', version: 1, document: 'run#r1', body: '{"r":1}' },
      failure,
    );

    // Assess: the thread's events first, then each document's in version order.
    const letters = (await store.listDeadLetters('dl-docs', 'w', { limit: 10 })).items;
    expect(letters.map((letter) => [letter.eventId, letter.document])).toEqual([
      ['s1:2', undefined],
      ['profile/u1/2', 'profile#u1'],
      ['run/s1/r1/1', 'run#r1'],
      ['run/s1/r1/2', 'run#r1'],
    ]);
    await store.deleteDeadLetter('dl-docs', 'w', { sessionId: 's1', version: 2, document: 'run#r1' });
    expect((await store.listDeadLetters('dl-docs', 'w', { limit: 10 })).items.map((letter) => letter.eventId)).toEqual([
      's1:2',
      'profile/u1/2',
      'run/s1/r1/1',
    ]);
  });
});

describe('WebSocket handler and live store', () => {
  const message = (connectionId: string, body: unknown): WebSocketEvent => ({
    requestContext: { routeKey: '$default', connectionId },
    body: JSON.stringify(body),
  });

  it('connects with a key from AGENTSTATE_API_KEYS or the table, and refuses others', async () => {
    const { apiKey } = await new ApiKeyStore(client, tableName).create({ tenant: 'from-table' });
    const connect = (connectionId: string, token?: string) =>
      webSocketHandler({ requestContext: { routeKey: '$connect', connectionId }, queryStringParameters: token ? { token } : null });

    expect(await connect('c-env', 'acme-key')).toEqual({ statusCode: 200 });
    expect(await connect('c-table', apiKey)).toEqual({ statusCode: 200 });
    const refused = await connect('c-bad', 'nope');
    expect(refused.statusCode).toBe(401);
    expect(JSON.parse(refused.body as string)).toMatchObject({ type: 'error', code: 'unauthorized' });
    expect((await connect('c-none')).statusCode).toBe(401);
    const live = new DynamoDbLiveStore(new TableClient(client, tableName));
    // A key of the table can be revoked: its connection keeps the key's hash (docs/security.md).
    expect(await live.getConnection('c-table')).toEqual({ tenant: 'from-table', sessions: [], keyHash: hashApiKey(apiKey) });
    expect(await live.getConnection('c-env')).toEqual({ tenant: 'acme', sessions: [] });
    expect(await live.getConnection('c-bad')).toBeNull();
  });

  it('subscribes within the connection’s tenant, and $disconnect removes every trace', async () => {
    // Prepare
    const live = new DynamoDbLiveStore(new TableClient(client, tableName));
    await webSocketHandler({ requestContext: { routeKey: '$connect', connectionId: 'c1' }, queryStringParameters: { token: 'acme-key' } });

    // Act
    const ack = await webSocketHandler(message('c1', { action: 'subscribe', sessionId: 's1' }));
    await webSocketHandler(message('c1', { action: 'subscribe', sessionId: 's2' }));
    const followers = await live.subscribers({ tenant: 'acme', sessionId: 's1' });
    const otherTenant = await live.subscribers({ tenant: 'other', sessionId: 's1' });
    await webSocketHandler({ requestContext: { routeKey: '$disconnect', connectionId: 'c1' } });

    // Assess
    expect(JSON.parse(ack.body as string)).toEqual({ type: 'subscribed', sessionId: 's1' });
    expect(followers).toEqual(['c1']);
    expect(otherTenant).toEqual([]);
    expect(await live.subscribers({ tenant: 'acme', sessionId: 's1' })).toEqual([]);
    expect(await live.subscribers({ tenant: 'acme', sessionId: 's2' })).toEqual([]);
    expect(await live.getConnection('c1')).toBeNull();
  });

  it('answers messages on an unknown connection, bad JSON and bad ids with errors', async () => {
    const unknown = await webSocketHandler(message('never-connected', { action: 'subscribe', sessionId: 's1' }));
    const badJson = await webSocketHandler({ requestContext: { routeKey: '$default', connectionId: 'x' }, body: '{nope' });
    expect(JSON.parse(unknown.body as string)).toMatchObject({
      type: 'error',
      status: 401,
      code: 'unauthorized',
      action: 'subscribe',
      sessionId: 's1',
    });
    expect(JSON.parse(badJson.body as string)).toMatchObject({ type: 'error', status: 400, code: 'invalid_json' });
    expect(JSON.parse(badJson.body as string)).not.toHaveProperty('sessionId');
  });

  it('names the action and session an error answers, never echoing a malformed id', async () => {
    await webSocketHandler({
      requestContext: { routeKey: '$connect', connectionId: 'c-errors' },
      queryStringParameters: { token: 'acme-key' },
    });

    const badId = await webSocketHandler(message('c-errors', { action: 'subscribe', sessionId: 'not valid!' }));
    const badAction = await webSocketHandler(message('c-errors', { action: 'follow', sessionId: 's1' }));

    expect(JSON.parse(badId.body as string)).toEqual({
      type: 'error',
      status: 400,
      code: 'invalid_id',
      detail: expect.any(String),
      field: 'sessionId',
      action: 'subscribe',
    });
    expect(JSON.parse(badAction.body as string)).toMatchObject({ type: 'error', status: 400, code: 'invalid_request', sessionId: 's1' });
    expect(JSON.parse(badAction.body as string)).not.toHaveProperty('action');
  });

  it('caps the sessions one connection follows', async () => {
    const live = new DynamoDbLiveStore(new TableClient(client, tableName));
    await live.putConnection('many', 'acme', Math.floor(Date.now() / 1000) + 60);
    for (let index = 0; index < 100; index++) {
      expect(await live.subscribe('many', { tenant: 'acme', sessionId: `s${index}` }, Math.floor(Date.now() / 1000) + 60)).toBe(true);
    }
    // Following one it already follows is fine; a 101st is not.
    expect(await live.subscribe('many', { tenant: 'acme', sessionId: 's5' }, Math.floor(Date.now() / 1000) + 60)).toBe(true);
    expect(await live.subscribe('many', { tenant: 'acme', sessionId: 'one-more' }, Math.floor(Date.now() / 1000) + 60)).toBe(false);
  });

  it('treats expired records as gone before TTL removes them', async () => {
    const live = new DynamoDbLiveStore(new TableClient(client, tableName));
    const past = Math.floor(Date.now() / 1000) - 10;
    await live.putConnection('old', 'acme', past);
    await live.putConnection('old2', 'acme', Math.floor(Date.now() / 1000) + 60);
    await live.subscribe('old2', { tenant: 'acme', sessionId: 'expiring' }, past);
    expect(await live.getConnection('old')).toBeNull();
    expect(await live.subscribers({ tenant: 'acme', sessionId: 'expiring' })).toEqual([]);
  });
});

describe('the stream poller on DynamoDB Local', () => {
  let poller: StreamPoller | undefined;
  let streams: DynamoDBStreamsClient | undefined;
  afterAll(async () => {
    await poller?.stop();
    streams?.destroy();
  });

  it('hands version records over as Lambda would, filtered, with prev one read away', async () => {
    // Prepare
    const { Table } = await client.send(new DescribeTableCommand({ TableName: tableName }));
    streams = new DynamoDBStreamsClient({
      endpoint: dynamoEndpoint(),
      region: 'us-east-1',
      credentials: { accessKeyId: 'local', secretAccessKey: 'local' },
    });
    const events: DynamoDBStreamEvent[] = [];
    const pk = { S: 'S#poll#s1' };
    // Version n is the first change of the log after version n - 1 (V#<life>#<base>#<seq>).
    const version = (n: number, prev: number, seq = 1) => ({
      pk,
      sk: { S: `V#000000#${String(n - 1).padStart(12, '0')}#${String(seq).padStart(8, '0')}` },
      kind: { S: LOG_ITEM_KIND.version },
      version: { N: String(n) },
      node: { S: 'root' },
      prevVersion: { N: String(prev) },
      cause: { S: 'patch' },
      createdAt: { S: new Date().toISOString() },
      state: { S: JSON.stringify({ n }) },
      agent: { S: 'null' },
      t: { S: JSON.stringify({ v: n, h: 'root', hv: n, hd: 0, hx: 0, ag: null, u: null, ta: null, w: true, b: 0 }) },
    });
    // Written before the poller starts: not an event (it starts from LATEST).
    await client.send(new PutItemCommand({ TableName: tableName, Item: version(1, 0) }));
    poller = new StreamPoller({
      client: streams,
      streamArn: Table?.LatestStreamArn as string,
      filters: changeRecordFilters,
      intervalMs: 50,
      handler: async (event) => {
        events.push(event);
      },
    });
    await poller.start();

    // Act: a head switch after version 1, a node's index, version 2 after the switch, the
    // session item, version 3, and the switch made a tombstone (as a delete does).
    const headSwitch = { pk, sk: { S: 'V#000000#000000000001#00000001' }, kind: { S: LOG_ITEM_KIND.head } };
    await client.send(new PutItemCommand({ TableName: tableName, Item: headSwitch }));
    await client.send(new PutItemCommand({ TableName: tableName, Item: { pk, sk: { S: 'N#u1#000000' }, depth: { N: '1' } } }));
    await client.send(new PutItemCommand({ TableName: tableName, Item: version(2, 1, 2) }));
    await client.send(
      new UpdateItemCommand({
        TableName: tableName,
        Key: { pk, sk: { S: 'S' } },
        UpdateExpression: 'SET updatedAt = :now',
        ExpressionAttributeValues: { ':now': { S: 'x' } },
      }),
    );
    await client.send(new PutItemCommand({ TableName: tableName, Item: version(3, 2) }));
    await client.send(new PutItemCommand({ TableName: tableName, Item: { ...headSwitch, kind: { S: LOG_ITEM_KIND.tombstone } } }));
    const records = await waitFor('two version records', () => {
      const all = events.flatMap((event) => event.Records);
      return all.length >= 2 ? all : null;
    });

    // Assess
    expect(records.map((record) => [record.eventName, record.dynamodb?.NewImage?.version?.N])).toEqual([
      ['INSERT', '2'],
      ['INSERT', '3'],
    ]);
    expect(typeof records[0]?.dynamodb?.ApproximateCreationDateTime).toBe('number');
    const recorded = records.map((record) => recordedVersionOf(record));
    expect(recorded.map((change) => [change?.tenant, change?.sessionId, change?.version.version, change?.version.state])).toEqual([
      ['poll', 's1', 2, { n: 2 }],
      ['poll', 's1', 3, { n: 3 }],
    ]);
    const { sessions } = createStores(client, tableName);
    expect(await sessions.getVersionState({ tenant: 'poll', sessionId: 's1' }, 1)).toEqual({ state: { n: 1 } });
    expect(await sessions.getVersionState({ tenant: 'poll', sessionId: 's1' }, 7)).toBeNull();
  });
});
