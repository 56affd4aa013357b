import type { TestProject } from 'vitest/node';
import { startDynamoDbLocal } from '../../functions/local/dynamodb-local.js';
import { ensureInspectorBuilt } from '../../functions/local/inspector-build.js';

/**
 * Starts one in-memory DynamoDB Local for the whole run and hands its endpoint to the test
 * files (`inject('dynamoEndpoint')`, or `dynamoEndpoint()` from ./dynamodb.ts), and builds
 * the inspector page if it is stale.
 */
export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= 'true';
  // Built once here when stale, so that the servers the test files start in parallel find it
  // up to date instead of each building it (bin/start.ts builds only a stale page).
  const [dynamoDb] = await Promise.all([startDynamoDbLocal({ dataDir: 'memory' }), ensureInspectorBuilt({ log: () => {} })]);
  project.provide('dynamoEndpoint', dynamoDb.endpoint);
  return () => dynamoDb.stop();
}
