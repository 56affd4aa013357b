import { createServer, type Server } from 'node:http';
import { CreateTableCommand, DescribeTableCommand } from '@aws-sdk/client-dynamodb';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { dependenciesFor, useDependencies } from '../../functions/http/dependencies.js';
import { keysFromEnv } from '../../functions/http/edge/auth.js';
import { handlers } from '../../functions/http/index.js';
import { createRequestListener } from '../../functions/local/http-adapter.js';
import { createStores } from '../../functions/store/index.js';
import { dynamoDbClient } from '../../functions/store/table/client.js';
import { ensureTable, tableKeys } from '../../functions/store/table/table.js';
import { type ApiClient, apiClient, uniqueId } from '../helpers/api-client.js';
import { createTestTable, dynamoEndpoint, testDynamoDbClient } from '../helpers/dynamodb.js';

/**
 * The memory index is a local index, read consistently (docs/architecture.md, "Memory items"):
 * the table DynamoDB Local gets has it as the deployed one does (test/infra checks the
 * template), a table made by an earlier build with the global one is refused with what to do,
 * and DynamoDB's answer to a partition key past 10 GB (which only a table with a local index
 * gives, and DynamoDB Local never does: it is injected) is a `413`, not a `500`.
 */

const { memoryIndex } = tableKeys;
let http: Server;
let api: ApiClient;
/** The next UpdateItem, PutItem or TransactWriteItems fails as DynamoDB's 10 GB limit does. */
let collectionFull = false;

beforeAll(async () => {
  const tableName = await createTestTable('memory-lsi');
  const client = dynamoDbClient({ AGENTSTATE_DYNAMODB_ENDPOINT: dynamoEndpoint() });
  client.middlewareStack.add(
    (next, context) => async (args) => {
      const write = ['UpdateItemCommand', 'PutItemCommand', 'TransactWriteItemsCommand'].includes(String(context.commandName));
      if (collectionFull && write) {
        collectionFull = false;
        throw Object.assign(new Error('Item collection size limit exceeded'), {
          name: 'ItemCollectionSizeLimitExceededException',
          $fault: 'client',
          $metadata: { httpStatusCode: 400 },
        });
      }
      return next(args);
    },
    { step: 'initialize', name: 'collectionFull' },
  );
  useDependencies(dependenciesFor(createStores(client, tableName), { resolveKey: keysFromEnv('full:full-key') }));
  http = createServer(createRequestListener(handlers, { logError: () => {} }));
  await new Promise<void>((resolve) => http.listen(0, '127.0.0.1', resolve));
  api = apiClient(`http://127.0.0.1:${(http.address() as { port: number }).port}`, 'full-key');
  vi.spyOn(console, 'error').mockImplementation(() => {});
}, 60_000);

afterAll(async () => {
  await new Promise((resolve) => http?.close(resolve));
  useDependencies(undefined);
  vi.restoreAllMocks();
});

describe('the memory index', () => {
  it('is a local index of the table ensureTable makes, with the projection table.ts names', async () => {
    // Prepare
    const client = testDynamoDbClient();
    const tableName = await createTestTable('lsi-shape');

    // Act
    const { Table } = await client.send(new DescribeTableCommand({ TableName: tableName }));
    client.destroy();

    // Assert
    expect(Table?.GlobalSecondaryIndexes?.map((index) => index.IndexName)).not.toContain(memoryIndex.name);
    expect(Table?.LocalSecondaryIndexes).toEqual([
      expect.objectContaining({
        IndexName: memoryIndex.name,
        KeySchema: [
          { AttributeName: memoryIndex.partitionKey, KeyType: 'HASH' },
          { AttributeName: memoryIndex.sortKey, KeyType: 'RANGE' },
        ],
        Projection: { ProjectionType: 'INCLUDE', NonKeyAttributes: [...memoryIndex.projected] },
      }),
    ]);
  });

  it('refuses a table an earlier build made with it as a global index, saying what to do', async () => {
    // Prepare
    const client = testDynamoDbClient();
    const tableName = uniqueId('earlier-build');
    await client.send(
      new CreateTableCommand({
        TableName: tableName,
        BillingMode: 'PAY_PER_REQUEST',
        AttributeDefinitions: [
          { AttributeName: 'pk', AttributeType: 'S' },
          { AttributeName: 'sk', AttributeType: 'S' },
          { AttributeName: 'mu', AttributeType: 'S' },
        ],
        KeySchema: [
          { AttributeName: 'pk', KeyType: 'HASH' },
          { AttributeName: 'sk', KeyType: 'RANGE' },
        ],
        GlobalSecondaryIndexes: [
          {
            IndexName: memoryIndex.name,
            KeySchema: [
              { AttributeName: 'pk', KeyType: 'HASH' },
              { AttributeName: 'mu', KeyType: 'RANGE' },
            ],
            Projection: { ProjectionType: 'INCLUDE', NonKeyAttributes: [...memoryIndex.projected] },
          },
        ],
      }),
    );

    // Act
    const ensured = ensureTable(client, tableName);

    // Assert
    await expect(ensured).rejects.toThrow(/earlier build.*local index byMemoryRecency.*new data folder or table name/);
    client.destroy();
  });
});

describe('a partition key at 10 GB', () => {
  it('answers a memory put and a session write 413 payload_too_large, not 500', async () => {
    // Prepare
    await api.post('/v1/sessions', { sessionId: 'full-session' });

    // Act
    collectionFull = true;
    const put = await api.put('/v1/memory/users/u1/facts/k1', { value: { a: 1 } });
    collectionFull = true;
    const patch = await api.patch('/v1/sessions/full-session/state', { a: 1 });
    const after = await api.put('/v1/memory/users/u1/facts/k1', { value: { a: 1 } });

    // Assert
    expect(put.status, put.text).toBe(413);
    expect(put.body.code).toBe('payload_too_large');
    expect(patch.status, patch.text).toBe(413);
    expect(patch.body.code).toBe('payload_too_large');
    expect(after.status, after.text).toBe(201);
  });
});
