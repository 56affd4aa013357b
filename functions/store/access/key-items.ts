import { GetCommand } from '@aws-sdk/lib-dynamodb';
import { tableKeys } from '../table/table.js';
import type { TableClient } from '../table/table-client.js';

/**
 * The API key items' keys (api-keys.ts describes the items), and the one read of them that
 * functions other than the authorizer and the WebSocket function make: whether a key is still
 * live. Apart from api-keys.ts, so that the change hook bundles no key store.
 */
export const apiKeyItems = {
  key: (hash: string) => `K#${hash}`,
  keyPrefix: 'K#',
  keySort: 'K',
  listing: 'KEYS',
  listingSort: (createdAt: string, keyId: string) => `${createdAt}#${keyId}`,
} as const;

/**
 * Whether the key whose hash is `keyHash` is issued and not revoked: one consistent GetItem
 * (as `ApiKeyStore.resolve`), so a read that begins after a revoke answered sees it. What the WebSocket
 * function and the change hook check an open connection's key with (core/fanout/key-liveness.ts).
 */
export async function keyIsLive(table: TableClient, keyHash: string): Promise<boolean> {
  const { Item } = await table.send(
    new GetCommand({
      TableName: table.tableName,
      Key: { [tableKeys.partitionKey]: apiKeyItems.key(keyHash), [tableKeys.sortKey]: apiKeyItems.keySort },
      ConsistentRead: true,
    }),
  );
  return Boolean(Item) && typeof Item?.revokedAt !== 'string' && typeof Item?.tenant === 'string';
}
