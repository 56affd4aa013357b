import type { IdempotencyStore } from '../../core/model/ports.js';
import type { ApiKeyStore } from '../../store/access/api-keys.js';
import { DynamoDbIdempotencyStore } from '../../store/idempotency/idempotency-store.js';
import { type KeyResolver, keysFromEnv } from '../edge/auth.js';
import type { Part } from '../wiring.js';

// What the middleware of every keyed group uses: the key resolver and the Idempotency-Key store.

/** The table's API keys, as a promise: the key store is imported on first use. */
export type TableKeys = () => Promise<Pick<ApiKeyStore, 'resolve'>>;

/**
 * The key store, imported when the first key is looked up in the table: behind the authorizer
 * no key is ever resolved here, so a route group's Lambda bundle keeps the store in a chunk it
 * never loads (lib/bundling.ts); the authorizer and the WebSocket function import it at once.
 */
export const apiKeyStore: Part<TableKeys> = (wiring) => {
  let store: Promise<ApiKeyStore> | undefined;
  return () => {
    store ??= import('../../store/access/api-keys.js').then(
      ({ ApiKeyStore }) => new ApiKeyStore(wiring.client, wiring.table.tableName, () => new Date(wiring.table.now())),
    );
    return store;
  };
};

export const idempotency: Part<IdempotencyStore> = (wiring) => new DynamoDbIdempotencyStore(wiring.table);

/**
 * Behind API Gateway (`AGENTSTATE_AUTH=authorizer`) only the Lambda authorizer's verdict
 * counts, so nothing here resolves a key. Locally, keys come from `AGENTSTATE_API_KEYS` and
 * from the table, where `agentstate keys create --endpoint …` puts them.
 */
export const resolveKey: Part<KeyResolver> = (wiring) => {
  if (wiring.env.AGENTSTATE_AUTH === 'authorizer') return async () => null;
  const fromEnv = keysFromEnv(wiring.env.AGENTSTATE_API_KEYS);
  const tableKeys = wiring.use(apiKeyStore);
  return async (apiKey) => (await fromEnv(apiKey)) ?? (await (await tableKeys()).resolve(apiKey));
};
