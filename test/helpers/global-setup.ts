import type { TestProject } from 'vitest/node';
import { startDynamoDbLocal } from '../../functions/local/dynamodb-local.js';

/**
 * Starts one in-memory DynamoDB Local for the whole run and hands its endpoint to the test
 * files (`inject('dynamoEndpoint')`, or `dynamoEndpoint()` from ./dynamodb.ts).
 */
export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= 'true';
  const dynamoDb = await startDynamoDbLocal({ dataDir: 'memory' });
  project.provide('dynamoEndpoint', dynamoDb.endpoint);
  return () => dynamoDb.stop();
}
