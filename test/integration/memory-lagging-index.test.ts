import { createServer, type Server } from 'node:http';
import { ScanCommand, type ScanCommandOutput } from '@aws-sdk/client-dynamodb';
import { BatchWriteCommand, DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import { unmarshall } from '@aws-sdk/util-dynamodb';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { dependenciesFor, useDependencies } from '../../functions/http/dependencies.js';
import { handlers } from '../../functions/http/index.js';
import { createRequestListener } from '../../functions/local/http-adapter.js';
import { createStores } from '../../functions/store/index.js';
import { dynamoDbClient } from '../../functions/store/table/client.js';
import { type ApiClient, apiClient, uniqueId } from '../helpers/api-client.js';
import { createTestTable, dynamoEndpoint } from '../helpers/dynamodb.js';

/**
 * A memory search and the namespace list see a put as soon as it answered, and stop seeing a
 * delete as soon as it answered (API.md section 10), in AWS too, where an eventually
 * consistent read (a global index, or a table read without `ConsistentRead`) may answer from
 * before the write. DynamoDB Local never lags, so a middleware makes it lag: while `lagging`,
 * every eventually consistent read of the table (Query, GetItem, Scan) is answered from a copy
 * of the table taken before the writes under test, as an index or replica that has not applied
 * them yet would answer. Consistent reads go to the table itself. End to end over real HTTP
 * (the handlers behind the local server's own adapter) on DynamoDB Local.
 */

const TENANT = 'lag';
const KEY = 'lag-key';
const OTHER_KEY = 'lag-other-key';
const LIMITED_KEY = 'lag-limited-key';

let tableName: string;
let shadow: string | undefined;
let lagging = false;
let http: Server;
let api: ApiClient;
let other: ApiClient;
let limited: ApiClient;
const raw = dynamoDbClient({ AGENTSTATE_DYNAMODB_ENDPOINT: dynamoEndpoint() });
const doc = DynamoDBDocumentClient.from(raw);

beforeAll(async () => {
  tableName = await createTestTable('memory-lag');
  const client = dynamoDbClient({ AGENTSTATE_DYNAMODB_ENDPOINT: dynamoEndpoint() });
  client.middlewareStack.add(
    (next, context) => async (args) => {
      const input = args.input as { TableName?: string; ConsistentRead?: boolean };
      const read = ['QueryCommand', 'GetItemCommand', 'ScanCommand'].includes(String(context.commandName));
      if (lagging && shadow && read && !input.ConsistentRead && input.TableName === tableName) {
        return next({ ...args, input: { ...input, TableName: shadow } });
      }
      return next(args);
    },
    { step: 'initialize', name: 'laggingReads' },
  );
  const keys: Record<string, { tenant: string; agents: string[] | null }> = {
    [KEY]: { tenant: TENANT, agents: null },
    [OTHER_KEY]: { tenant: 'lag-other', agents: null },
    [LIMITED_KEY]: { tenant: TENANT, agents: ['helper'] },
  };
  useDependencies(dependenciesFor(createStores(client, tableName), { resolveKey: async (key) => keys[key] ?? null }));
  http = createServer(createRequestListener(handlers, { logError: () => {} }));
  await new Promise<void>((resolve) => http.listen(0, '127.0.0.1', resolve));
  const url = `http://127.0.0.1:${(http.address() as { port: number }).port}`;
  api = apiClient(url, KEY);
  other = apiClient(url, OTHER_KEY);
  // A key limited to agents acts as one of them (X-Agent-Id).
  const asHelper = apiClient(url, LIMITED_KEY);
  const helper = { headers: { 'x-agent-id': 'helper' } };
  limited = {
    ...asHelper,
    get: (path, options) => asHelper.get(path, { ...helper, ...options }),
    post: (path, json, options) => asHelper.post(path, json, { ...helper, ...options }),
  };
  vi.spyOn(console, 'error').mockImplementation(() => {});
}, 60_000);

afterAll(async () => {
  await new Promise((resolve) => http?.close(resolve));
  useDependencies(undefined);
  vi.restoreAllMocks();
  doc.destroy();
});

/** From now on, eventually consistent reads answer as the table is now (a copy of it). */
async function lagFromNow(): Promise<void> {
  lagging = false;
  shadow = await createTestTable('memory-lag-shadow');
  let start: ScanCommandOutput['LastEvaluatedKey'];
  do {
    const page = await raw.send(new ScanCommand({ TableName: tableName, ConsistentRead: true, ExclusiveStartKey: start }));
    const items = (page.Items ?? []).map((item) => unmarshall(item));
    for (let offset = 0; offset < items.length; offset += 25) {
      const batch = items.slice(offset, offset + 25).map((Item) => ({ PutRequest: { Item } }));
      await doc.send(new BatchWriteCommand({ RequestItems: { [shadow]: batch } }));
    }
    start = page.LastEvaluatedKey;
  } while (start);
  lagging = true;
}

const itemPath = (namespace: string[], key: string) => `/v1/memory/${[...namespace, key].join('/')}`;

async function put(namespace: string[], key: string, value: Record<string, unknown>, client = api) {
  const response = await client.put(itemPath(namespace, key), { value });
  expect([200, 201], response.text).toContain(response.status);
}

async function search(body: Record<string, unknown>, client = api): Promise<Array<{ key: string; value: Record<string, unknown> }>> {
  const response = await client.post('/v1/memory/search', { limit: 100, ...body });
  expect(response.status, response.text).toBe(200);
  return response.body.items;
}

async function namespaces(prefix: string[], client = api): Promise<string[][]> {
  const response = await client.get(`/v1/memory?prefix=${prefix.join('/')}`);
  expect(response.status, response.text).toBe(200);
  return response.body.namespaces;
}

describe('with eventually consistent reads lagging behind the writes', () => {
  it('a search and the namespace list find a put into a new namespace as soon as it answered, under its prefix too', async () => {
    // Prepare
    const user = uniqueId('u');
    await put(['users', user, 'older'], 'k0', { n: 0 });
    await lagFromNow();

    // Act
    await put(['users', user, 'facts'], 'k1', { n: 1 });
    const found = await search({ namespacePrefix: ['users', user, 'facts'] });
    const underPrefix = await search({ namespacePrefix: ['users', user] });
    const listed = await namespaces(['users', user]);

    // Assert
    expect(found.map((item) => item.key)).toEqual(['k1']);
    expect(underPrefix.map((item) => item.key)).toEqual(['k1', 'k0']);
    expect(listed).toEqual([
      ['users', user, 'facts'],
      ['users', user, 'older'],
    ]);
  });

  it('a search right after 50 puts at once into one namespace finds all 50', async () => {
    // Prepare
    const namespace = ['users', uniqueId('u'), 'facts'];
    await put(namespace, 'before', { n: -1 });
    await lagFromNow();

    // Act
    await Promise.all(Array.from({ length: 50 }, (_, index) => put(namespace, `k${index}`, { n: index })));
    const found = await search({ namespacePrefix: namespace });

    // Assert
    expect(found.map((item) => item.key).sort()).toEqual(['before', ...Array.from({ length: 50 }, (_, index) => `k${index}`)].sort());
  });

  it('does not return an item once its delete answered', async () => {
    // Prepare
    const namespace = ['users', uniqueId('u'), 'facts'];
    await put(namespace, 'gone', { topic: 'travel' });
    await put(namespace, 'kept', { topic: 'travel' });
    await lagFromNow();

    // Act
    const deleted = await api.delete(itemPath(namespace, 'gone'));
    const found = await search({ namespacePrefix: namespace });
    const filtered = await search({ namespacePrefix: namespace, filter: { topic: 'travel' } });

    // Assert
    expect(deleted.status, deleted.text).toBe(204);
    expect(found.map((item) => item.key)).toEqual(['kept']);
    expect(filtered.map((item) => item.key)).toEqual(['kept']);
  });

  it('shows an update with its new value, first, and matches filters on the new value only', async () => {
    // Prepare
    const namespace = ['users', uniqueId('u'), 'facts'];
    await put(namespace, 'a', { topic: 'food', n: 1 });
    await put(namespace, 'b', { topic: 'food', n: 2 });
    await lagFromNow();

    // Act
    await put(namespace, 'a', { topic: 'travel', n: 3 });
    const found = await search({ namespacePrefix: namespace });
    const travel = await search({ namespacePrefix: namespace, filter: { topic: 'travel' } });
    const food = await search({ namespacePrefix: namespace, filter: { topic: 'food' } });

    // Assert
    expect(found.map((item) => [item.key, item.value.n])).toEqual([
      ['a', 3],
      ['b', 2],
    ]);
    expect(travel.map((item) => item.key)).toEqual(['a']);
    expect(food.map((item) => item.key)).toEqual(['b']);
  });

  it("shows another tenant none of it, and a limited key nothing outside its agents' and the shared namespaces", async () => {
    // Prepare
    const user = uniqueId('u');
    await lagFromNow();
    await put(['users', user, 'facts'], 'secret', { n: 1 });
    await put(['agents', 'helper', user], 'mine', { n: 2 });
    await put(['agents', 'other-agent', user], 'theirs', { n: 3 });

    // Act
    const otherSearch = await search({ namespacePrefix: ['users', user] }, other);
    const otherList = await namespaces(['users', user], other);
    const limitedSearch = await search({ namespacePrefix: ['agents'] }, limited);
    const limitedUsers = await search({ namespacePrefix: ['users', user] }, limited);
    const limitedList = await namespaces(['agents'], limited);

    // Assert
    expect(otherSearch).toEqual([]);
    expect(otherList).toEqual([]);
    expect(limitedSearch.map((item) => item.key)).toEqual(['mine']);
    expect(limitedUsers).toEqual([]);
    expect(limitedList).toEqual([['agents', 'helper', user]]);
  });
});
