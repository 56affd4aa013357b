import { SessionService } from '../core/session-service.js';
import type { IdempotencyStore } from '../core/ports.js';
import { DynamoDbStore } from '../store/dynamodb-store.js';
import { ApiKeyStore } from '../store/api-keys.js';
import { dynamoDbClient } from '../store/client.js';
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

export function dependenciesFromEnv(env: NodeJS.ProcessEnv): Dependencies {
  const client = dynamoDbClient(env);
  const tableName = env.AGENTSTATE_TABLE ?? defaultTableName;
  const store = new DynamoDbStore(client, tableName);
  return {
    sessions: new SessionService(store),
    idempotency: store,
    resolveKey: keyResolver(env, new ApiKeyStore(client, tableName)),
  };
}

/**
 * Behind API Gateway (`AGENTSTATE_AUTH=authorizer`) only the Lambda authorizer's verdict
 * counts, so nothing here resolves a key. Locally, keys come from `AGENTSTATE_API_KEYS` and
 * from the table, where `agentstate keys create --endpoint …` puts them.
 */
function keyResolver(env: NodeJS.ProcessEnv, keyStore: ApiKeyStore): KeyResolver {
  if (env.AGENTSTATE_AUTH === 'authorizer') return async () => null;
  const fromEnv = keysFromEnv(env.AGENTSTATE_API_KEYS);
  return async (apiKey) => (await fromEnv(apiKey)) ?? (await keyStore.resolve(apiKey))?.tenant ?? null;
}
