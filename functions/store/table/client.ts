import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { traced } from '../../telemetry/telemetry.js';

/**
 * The bounds of every call an AWS SDK client makes (DynamoDB here; EventBridge and the API
 * Gateway Management API in the change hook): a connection that does not open within a
 * second, or an answer that does not come within three, fails that attempt. Without them the
 * SDK waits as long as the socket lives, and one endpoint that accepts and never answers
 * holds a request, or the change hook's whole batch, until its Lambda times out. A Lambda
 * worker's invocation is bounded by the worker's own timeout instead (workers/call-worker.ts).
 */
export const AWS_CALL_TIMEOUTS = { connectionTimeout: 1_000, requestTimeout: 3_000, throwOnRequestTimeout: true } as const;

/**
 * The DynamoDB client every handler uses (its calls traced in X-Ray in a Lambda). In AWS it takes region and credentials from the
 * Lambda environment; with `AGENTSTATE_DYNAMODB_ENDPOINT` (DynamoDB Local) it points there.
 */
export function dynamoDbClient(env: NodeJS.ProcessEnv): DynamoDBClient {
  const endpoint = env.AGENTSTATE_DYNAMODB_ENDPOINT;
  return traced(
    new DynamoDBClient({
      ...(endpoint
        ? {
            endpoint,
            region: env.AWS_REGION ?? 'us-east-1',
            // DynamoDB Local accepts any credentials, but the SDK insists on having some.
            ...(env.AWS_ACCESS_KEY_ID ? {} : { credentials: { accessKeyId: 'local', secretAccessKey: 'local' } }),
          }
        : {}),
      maxAttempts: 3,
      // A DynamoDB that hangs must not hold a request: give up on a silent attempt and retry, so
      // the client gets `503 unavailable` in seconds. Writes are safe to retry: each tip item
      // carries its writer's id, so a retried write that had landed is recognised (table-client.ts, isOwnWrite).
      requestHandler: AWS_CALL_TIMEOUTS,
    }),
  );
}
