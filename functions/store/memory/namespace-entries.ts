import { DeleteCommand, GetCommand, QueryCommand } from '@aws-sdk/lib-dynamodb';
import type { Namespace } from '../../core/memory/memory.js';
import { MEMORY_ITEM_KIND } from '../table/item-kinds.js';
import * as keys from '../table/keys.js';
import { tableKeys } from '../table/table.js';
import { conditionally, type Item, type TableClient } from '../table/table-client.js';
import { NAMESPACE_CREATIONS, namespaceEntry } from './memory-codecs.js';
import { dropEmptyPages } from './memory-codes.js';

/**
 * Whether a namespace still holds a live item, and taking it off the namespace list: what the
 * change hook's upkeep does after a delete (memory-upkeep-store.ts), and a user's erasure once it
 * emptied the namespace (store/erasure/), by one rule (core/memory/memory-changes.ts `forgetIfEmpty`).
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

/**
 * How many items were created in the namespace, as its entry counts them (`creations`: every
 * put that creates an item adds one after writing it, memory-vectors.ts `listNamespace`); 0
 * when there is no entry or no count. Read before the look for a live item, it tells
 * `forgetNamespace` whether an item was created since.
 */
export async function namespaceCreations(table: TableClient, tenant: string, namespace: Namespace): Promise<number> {
  const { Item: entry } = await table.send(
    new GetCommand({
      TableName: table.tableName,
      Key: namespaceEntry.key(tenant, namespace),
      ProjectionExpression: NAMESPACE_CREATIONS,
      ConsistentRead: true,
    }),
  );
  return typeof entry?.[NAMESPACE_CREATIONS] === 'number' ? entry[NAMESPACE_CREATIONS] : 0;
}

/**
 * Takes the namespace off the namespace list, and deletes the pages of codes it no longer needs
 * (memory-codes.ts), only if no item was created in it since it counted `creations` (what
 * `namespaceCreations` read before the look that found the namespace empty: core/memory/memory-changes.ts
 * `forgetIfEmpty`, the one rule, for the change hook and a user's erasure alike). A put that
 * lands behind the look (where it had already read) counts its creation after writing its item,
 * so either the count moved and the namespace stays listed, or the put lists it again after
 * this. Resolves with whether it forgot.
 */
export async function forgetNamespace(table: TableClient, tenant: string, namespace: Namespace, creations: number): Promise<boolean> {
  const unchanged =
    creations === 0
      ? { ConditionExpression: `attribute_not_exists(${NAMESPACE_CREATIONS})` }
      : { ConditionExpression: `${NAMESPACE_CREATIONS} = :creations`, ExpressionAttributeValues: { ':creations': creations } };
  const forgot = await conditionally(
    table.send(new DeleteCommand({ TableName: table.tableName, Key: namespaceEntry.key(tenant, namespace), ...unchanged })),
  );
  if (!forgot) return false;
  await dropEmptyPages(table, tenant, namespace);
  return true;
}
