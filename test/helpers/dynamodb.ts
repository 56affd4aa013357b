import { randomBytes } from 'node:crypto';
import type { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { inject } from 'vitest';
import { localDynamoDbClient } from '../../functions/local/dynamodb-local.js';
import { ensureTable } from '../../functions/store/table.js';

/** The endpoint of the run's DynamoDB Local (started by global-setup.ts). */
export function dynamoEndpoint(): string {
  return inject('dynamoEndpoint');
}

/** A client for the run's DynamoDB Local; `destroy()` it when done. */
export function testDynamoDbClient(): DynamoDBClient {
  return localDynamoDbClient(dynamoEndpoint());
}

/**
 * Creates a table shaped exactly like the real one (keys, index, stream, TTL) under a name no
 * other file or run uses, and returns that name. Touches no environment variable: pass the
 * name (and `dynamoEndpoint()`) to whatever you test.
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
