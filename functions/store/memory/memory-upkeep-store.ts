import { DeleteCommand, PutCommand, QueryCommand } from '@aws-sdk/lib-dynamodb';
import type { MemoryItem, Namespace } from '../../core/memory/memory.js';
import type { MemoryUpkeepPorts } from '../../core/memory/memory-changes.js';
import { MEMORY_ITEM_KIND } from '../table/item-kinds.js';
import * as keys from '../table/keys.js';
import { queryAll } from '../table/paging.js';
import { tableKeys } from '../table/table.js';
import { batchDelete, type Item, type TableClient } from '../table/table-client.js';
import { historyItem, namespaceEntry } from './memory-codecs.js';
import { listNamespace } from './memory-vectors.js';

/** Pages of a namespace the emptiness check reads before it takes the namespace as in use. */
const EMPTINESS_PAGES = 20;

/**
 * The change hook's writes for memory (core/memory/memory-changes.ts): the namespace list
 * (`MN#<tenant>` / `<path>/`) and replaced versions (`MH#<tenant>#<path>#<key>` /
 * `<createdAt>#<version>`, TTL). Every write is idempotent, so a redelivered record is harmless.
 */
export class DynamoDbMemoryUpkeep implements MemoryUpkeepPorts {
  constructor(private readonly table: TableClient) {}

  async recordHistory(tenant: string, item: MemoryItem, expiresAt: number): Promise<void> {
    await this.table.send(new PutCommand({ TableName: this.table.tableName, Item: historyItem.encode(tenant, item, expiresAt) }));
  }

  async eraseHistory(tenant: string, namespace: Namespace, key: string, createdAt: string): Promise<void> {
    const partition = historyItem.partition(tenant, namespace, key);
    const doomed: Item[] = [];
    await queryAll(
      (start) =>
        this.table.send(
          new QueryCommand({
            TableName: this.table.tableName,
            // The lives up to the deleted one: a later life's versions are not the delete's to erase.
            KeyConditionExpression: 'pk = :pk AND sk <= :upTo',
            ExpressionAttributeValues: { ':pk': partition, ':upTo': `${createdAt}#\x7f` },
            ProjectionExpression: 'pk, sk',
            ExclusiveStartKey: start,
          }),
        ),
      (entry) => doomed.push({ pk: entry.pk, sk: entry.sk }),
    );
    await batchDelete(this.table, doomed);
  }

  async registerNamespace(tenant: string, namespace: Namespace): Promise<void> {
    // An update: the entry may hold the dimensions of the namespace's embeddings (memory-vectors.ts).
    await listNamespace(this.table, tenant, namespace);
  }

  async namespaceHasItems(tenant: string, namespace: Namespace): Promise<boolean> {
    let start: Item | undefined;
    for (let page = 0; page < EMPTINESS_PAGES; page++) {
      const { Items = [], LastEvaluatedKey } = await this.table.send(
        new QueryCommand({
          TableName: this.table.tableName,
          KeyConditionExpression: 'pk = :pk AND begins_with(sk, :items)',
          FilterExpression: '#kind = :live AND (attribute_not_exists(#ttl) OR #ttl > :now)',
          ExpressionAttributeNames: { '#kind': 'kind', '#ttl': tableKeys.timeToLive },
          ExpressionAttributeValues: {
            ':pk': keys.memoryNamespace(tenant, namespace),
            ':items': keys.memoryKeyPrefix,
            ':live': MEMORY_ITEM_KIND.item,
            ':now': this.table.nowSeconds(),
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

  async forgetNamespace(tenant: string, namespace: Namespace): Promise<void> {
    await this.table.send(new DeleteCommand({ TableName: this.table.tableName, Key: namespaceEntry.key(tenant, namespace) }));
  }
}
