import { DynamoDBClient } from '@aws-sdk/client-dynamodb';

/**
 * The DynamoDB client every handler uses. In AWS it takes region and credentials from the
 * Lambda environment; with `AGENTSTATE_DYNAMODB_ENDPOINT` (DynamoDB Local) it points there.
 */
export function dynamoDbClient(env: NodeJS.ProcessEnv): DynamoDBClient {
  const endpoint = env.AGENTSTATE_DYNAMODB_ENDPOINT;
  return new DynamoDBClient({
    ...(endpoint
      ? {
          endpoint,
          region: env.AWS_REGION ?? 'us-east-1',
          // DynamoDB Local accepts any credentials, but the SDK insists on having some.
          ...(env.AWS_ACCESS_KEY_ID ? {} : { credentials: { accessKeyId: 'local', secretAccessKey: 'local' } }),
        }
      : {}),
    maxAttempts: 4,
  });
}
