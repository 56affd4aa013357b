import { DeleteCommand, QueryCommand } from '@aws-sdk/lib-dynamodb';
import type { Namespace } from '../../core/memory/memory.js';
import { MEMORY_ITEM_KIND } from '../table/item-kinds.js';
import * as keys from '../table/keys.js';
import { tableKeys } from '../table/table.js';
import type { Item, TableClient } from '../table/table-client.js';
import { namespaceEntry } from './memory-codecs.js';
import { dropEmptyPages } from './memory-codes.js';

/**
 * Whether a namespace still holds a live item, and taking it off the namespace list: what the
 * change hook's upkeep does after a delete (memory-upkeep-store.ts), and what a user's erasure
 * does at once (store/erasure/erasure-store.ts), in a function that carries no more of memory.
 */

/** Pages of a namespace the emptiness check reads before it takes the namespace as in use. */
const EMPTINESS_PAGES = 20;

/** Whether the namespace holds a live item (read consistently). */
export async function namespaceHasItems(table: TableClient, tenant: string, namespace: Namespace): Promise<boolean> {
  let start: Item | undefined;
  for (let page = 0; page < EMPTINESS_PAGES; page++) {
    const { Items = [], LastEvaluatedKey } = await table.send(
      new QueryCommand({
        TableName: table.tableName,
        KeyConditionExpression: 'pk = :pk AND begins_with(sk, :items)',
        FilterExpression: '#kind = :live AND (attribute_not_exists(#ttl) OR #ttl > :now)',
        ExpressionAttributeNames: { '#kind': 'kind', '#ttl': tableKeys.timeToLive },
        ExpressionAttributeValues: {
          ':pk': keys.memoryNamespace(tenant, namespace),
          ':items': keys.memoryKeyPrefix,
          ':live': MEMORY_ITEM_KIND.item,
          ':now': table.nowSeconds(),
        },
        ProjectionExpression: 'pk',
        ConsistentRead: true,
        Limit: 25,
        ExclusiveStartKey: start,
      }),
    );
    if (Items.length > 0) return true;
    if (!LastEvaluatedKey) return false;
    start = LastEvaluatedKey;
  }
  // Page after page of tombstones and expired items: rather listed a while longer than lost.
  return true;
}

/** Takes the namespace off the namespace list, and deletes the pages of codes it no longer needs (memory-codes.ts). */
export async function forgetNamespace(table: TableClient, tenant: string, namespace: Namespace): Promise<void> {
  await table.send(new DeleteCommand({ TableName: table.tableName, Key: namespaceEntry.key(tenant, namespace) }));
  await dropEmptyPages(table, tenant, namespace);
}
