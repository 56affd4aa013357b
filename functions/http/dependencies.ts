import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { SessionService } from '../core/session-service.js';
import type { IdempotencyStore } from '../core/ports.js';
import { DynamoDbStore } from '../store/dynamodb-store.js';
import { defaultTableName } from '../store/table.js';
import { keysFromEnv, type KeyResolver } from './auth.js';

/** What the handlers need, built once per Lambda container (or local process). */
export interface Dependencies {
  sessions: SessionService;
  idempotency: IdempotencyStore;
  resolveKey: KeyResolver;
}

let current: Dependencies | undefined;

/**
 * The handlers' dependencies, created from the environment on first use, so that the local
 * server and tests can set `AGENTSTATE_*` before any handler runs:
 * `AGENTSTATE_TABLE`, `AGENTSTATE_DYNAMODB_ENDPOINT` (DynamoDB Local), `AGENTSTATE_API_KEYS`.
 */
export function dependencies(): Dependencies {
  current ??= dependenciesFromEnv(process.env);
  return current;
}

/** Replaces the dependencies, for the benchmark and tests that wire their own. */
export function useDependencies(replacement: Dependencies | undefined): void {
  current = replacement;
}

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

export function dependenciesFromEnv(env: NodeJS.ProcessEnv): Dependencies {
  const store = new DynamoDbStore(dynamoDbClient(env), env.AGENTSTATE_TABLE ?? defaultTableName);
  return {
    sessions: new SessionService(store),
    idempotency: store,
    resolveKey: keysFromEnv(env.AGENTSTATE_API_KEYS),
  };
}
