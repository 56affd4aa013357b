import type { IdempotencyStore } from '../../core/ports.js';
import { ApiKeyStore } from '../../store/api-keys.js';
import { DynamoDbIdempotencyStore } from '../../store/idempotency-store.js';
import { type KeyResolver, keysFromEnv } from '../auth.js';
import type { Part } from '../wiring.js';

// What the middleware of every keyed group uses: the key resolver and the Idempotency-Key store.

export const apiKeyStore: Part<ApiKeyStore> = (wiring) =>
  new ApiKeyStore(wiring.client, wiring.table.tableName, () => new Date(wiring.table.now()));

export const idempotency: Part<IdempotencyStore> = (wiring) => new DynamoDbIdempotencyStore(wiring.table);

/**
 * Behind API Gateway (`AGENTSTATE_AUTH=authorizer`) only the Lambda authorizer's verdict
 * counts, so nothing here resolves a key. Locally, keys come from `AGENTSTATE_API_KEYS` and
 * from the table, where `agentstate keys create --endpoint …` puts them.
 */
export const resolveKey: Part<KeyResolver> = (wiring) => {
  if (wiring.env.AGENTSTATE_AUTH === 'authorizer') return async () => null;
  const fromEnv = keysFromEnv(wiring.env.AGENTSTATE_API_KEYS);
  const keyStore = wiring.use(apiKeyStore);
  return async (apiKey) => (await fromEnv(apiKey)) ?? (await keyStore.resolve(apiKey));
};
