import type { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import type { Lifetime } from '../core/model/lifetime.js';
import { ApiKeyStore } from './access/api-keys.js';
import { DynamoDbAgentStore } from './agents/agent-store.js';
import { DynamoDbDocumentStore } from './documents/document-store.js';
import { DynamoDbIdempotencyStore } from './idempotency/idempotency-store.js';
import { DynamoDbWriteQueue } from './log/write-queue.js';
import { DynamoDbDecisionStore } from './sessions/decision-store.js';
import { DynamoDbSessionStore } from './sessions/session-store.js';
import { TableClient } from './table/table-client.js';

/**
 * The stores of the API's aggregates over one table, sharing one table client and one clock:
 * what the route handlers, the change hook and tests wire their services with. The stores of
 * change events (webhook-store.ts, live-store.ts) are built on the same `table` by the few
 * functions that use them, so the route bundles do not carry them.
 */
export interface Stores {
  /** The client the stores share (the API key store talks to it directly). */
  client: DynamoDBClient;
  table: TableClient;
  sessions: DynamoDbSessionStore;
  documents: DynamoDbDocumentStore;
  decisions: DynamoDbDecisionStore;
  agents: DynamoDbAgentStore;
  idempotency: DynamoDbIdempotencyStore;
  apiKeys: ApiKeyStore;
  /** Where blind writes of a crowded session or document wait their turn. */
  queue: DynamoDbWriteQueue;
}

interface StoreOptions {
  /** The clock of every time the stores write or compare (epoch ms); the real one by default. */
  now?: () => number;
  /** How many bytes of a session's log one part of a path read spans (tests make it small). */
  pathSegmentBytes?: number;
  /** The deployment's session lifetime defaults (API.md section 12; `sessionDefaultsFrom` reads them from the environment). */
  sessionDefaults?: Lifetime;
}

export function createStores(client: DynamoDBClient, tableName: string, options: StoreOptions = {}): Stores {
  const now = options.now ?? Date.now;
  const table = new TableClient(client, tableName, now);
  return {
    client,
    table,
    sessions: new DynamoDbSessionStore(table, options.pathSegmentBytes, options.sessionDefaults),
    documents: new DynamoDbDocumentStore(table),
    decisions: new DynamoDbDecisionStore(table),
    agents: new DynamoDbAgentStore(table),
    idempotency: new DynamoDbIdempotencyStore(table),
    apiKeys: new ApiKeyStore(client, tableName, () => new Date(now())),
    queue: new DynamoDbWriteQueue(table),
  };
}
