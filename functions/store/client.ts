import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { traced } from '../telemetry/telemetry.js';

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
      requestHandler: { connectionTimeout: 1_000, requestTimeout: 3_000, throwOnRequestTimeout: true },
    }),
  );
}
