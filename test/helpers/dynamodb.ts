import { randomBytes } from 'node:crypto';
import { type AttributeValue, type DynamoDBClient, QueryCommand } from '@aws-sdk/client-dynamodb';
import { afterAll } from 'vitest';
import { localDynamoDbClient, startDynamoDbLocal } from '../../functions/local/dynamodb-local.js';
import { ensureTable } from '../../functions/store/table/table.js';

// Every test file that imports this module gets an in-memory DynamoDB Local of its own, started
// here (1.3 s) and stopped after the file's last `afterAll` (hooks run in reverse, and this one
// is registered before any of the file's own), never one shared by the run. DynamoDB Local keeps
// the stream records of every table of an instance in one SQLite table with no index on the
// shard, and on each request to a table with a stream it scans them in write order up to that
// table's first record. On a shared instance a file's requests therefore cost in proportion to
// what the files before it had written: a table made after 20,000 records answered in 8–9 ms
// instead of 2 ms, and on a fresh clone (no vitest cache to run the heavy writers first)
// request-budget.test.ts took 231 s instead of 21 s. Deleting a file's tables does not give that
// back: a deleted table's stream records stay in the instance and are scanned just the same.
// A file's instance lives for seconds, so java's optimizing tier would only cost CPU that the
// other vitest worker needs (the default jit, 'quick-start': functions/local/dynamodb-local.ts).
const dynamoDb = await startDynamoDbLocal({ dataDir: 'memory' });
afterAll(() => dynamoDb.stop());

/** The java process of this test file's own DynamoDB Local. */
export function dynamoPid(): number {
  return dynamoDb.pid;
}

/** The endpoint of this test file's own DynamoDB Local. */
export function dynamoEndpoint(): string {
  return dynamoDb.endpoint;
}

/** A client for this test file's DynamoDB Local; `destroy()` it when done. */
export function testDynamoDbClient(): DynamoDBClient {
  return localDynamoDbClient(dynamoEndpoint());
}

/** Every item of one partition of `tableName`, read raw and strongly consistent (what a test checks is stored). */
export async function partitionItems(
  client: DynamoDBClient,
  tableName: string,
  pk: string,
): Promise<Array<Record<string, AttributeValue>>> {
  const { Items = [] } = await client.send(
    new QueryCommand({
      TableName: tableName,
      KeyConditionExpression: 'pk = :pk',
      ExpressionAttributeValues: { ':pk': { S: pk } },
      ConsistentRead: true,
    }),
  );
  return Items;
}

/**
 * Creates a table shaped exactly like the real one (keys, index, stream, TTL) under a name no
 * other table of the file uses, and returns that name. Touches no environment variable: pass
 * the name (and `dynamoEndpoint()`) to whatever you test.
 */
export async function createTestTable(prefix = 'test'): Promise<string> {
  const safePrefix = prefix.replace(/[^A-Za-z0-9_.-]/g, '-').slice(0, 100);
  const tableName = `${safePrefix}-${Date.now().toString(36)}-${randomBytes(4).toString('hex')}`;
  const client = testDynamoDbClient();
  try {
    await ensureTable(client, tableName);
  } finally {
    client.destroy();
  }
  return tableName;
}
