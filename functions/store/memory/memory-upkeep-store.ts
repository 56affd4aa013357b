import { PutCommand, QueryCommand } from '@aws-sdk/lib-dynamodb';
import type { MemoryAddress, MemoryItem, Namespace } from '../../core/memory/memory.js';
import type { MemoryUpkeepPorts } from '../../core/memory/memory-changes.js';
import { codeBytes } from '../../core/memory/memory-vector.js';
import { queryAll } from '../table/paging.js';
import { batchDelete, type Item, type TableClient } from '../table/table-client.js';
import { historyItem } from './memory-codecs.js';
import { codeStamp, dropCode, heldStamp, keepCode } from './memory-codes.js';
import { listNamespace } from './memory-vectors.js';
import { forgetNamespace, namespaceCreations, namespaceHasItems } from './namespace-entries.js';

/**
 * The change hook's writes for memory (core/memory/memory-changes.ts): the namespace list
 * (`MN#<tenant>` / `<path>/`) and replaced versions (`MH#<tenant>#<path>#<key>` /
 * `<createdAt>#<version>`, TTL), and the codes of embeddings (memory-codes.ts). Every write is
 * idempotent, so a redelivered record is harmless.
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

  namespaceHasItems(tenant: string, namespace: Namespace): Promise<boolean> {
    return namespaceHasItems(this.table, tenant, namespace);
  }

  namespaceCreations(tenant: string, namespace: Namespace): Promise<number> {
    return namespaceCreations(this.table, tenant, namespace);
  }

  async forgetNamespace(tenant: string, namespace: Namespace, creations: number): Promise<void> {
    await forgetNamespace(this.table, tenant, namespace, creations);
  }

  async keepEmbeddingCode(item: MemoryAddress, life: Pick<MemoryItem, 'createdAt' | 'version'>, code: Uint8Array): Promise<void> {
    const stamp = codeStamp(life);
    // Most often the put wrote it already: a look at its stamp costs less than a page rewritten.
    const held = await heldStamp(this.table, item, code.length - codeBytes(0));
    if (held !== null && held >= stamp) return;
    await keepCode(this.table, item, code, stamp);
  }

  dropEmbeddingCode(item: MemoryAddress, life: Pick<MemoryItem, 'createdAt' | 'version'>, dimensions: number): Promise<void> {
    return dropCode(this.table, item, dimensions, codeStamp(life));
  }
}
