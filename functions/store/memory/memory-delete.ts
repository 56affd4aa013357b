import type { AttributeValue } from '@aws-sdk/client-dynamodb';
import { UpdateCommand } from '@aws-sdk/lib-dynamodb';
import { unmarshall } from '@aws-sdk/util-dynamodb';
import type { MemoryAddress, MemoryDeleteResult, MemoryPrecondition } from '../../core/memory/memory.js';
import { MEMORY_ITEM_KIND } from '../table/item-kinds.js';
import { tableKeys } from '../table/table.js';
import { type Item, isConditionFailure, type TableClient } from '../table/table-client.js';
import { memoryItem } from './memory-codecs.js';
import { codeStamp, dropCode } from './memory-codes.js';

/**
 * A memory item's delete (memory-store.ts has the item's life): one UpdateItem that leaves a
 * tombstone. A module of its own, because a user's erasure deletes items too
 * (store/erasure/erasure-store.ts), from a function that must not carry the rest of the memory
 * store (its search, its history reads).
 */

export async function deleteMemoryItem(
  table: TableClient,
  address: MemoryAddress,
  condition: MemoryPrecondition,
  author: string | null,
  erasureId?: string,
): Promise<MemoryDeleteResult> {
  const nowSeconds = table.nowSeconds();
  const values: Record<string, unknown> = {
    ':live': MEMORY_ITEM_KIND.item,
    ':deleted': MEMORY_ITEM_KIND.deleted,
    ':now': new Date(table.now()).toISOString(),
    ':nowSeconds': nowSeconds,
  };
  let guard = '#kind = :live AND (attribute_not_exists(#ttl) OR #ttl > :nowSeconds)';
  if (condition.kind === 'version') guard += ` AND version IN (${expectedVersions(condition.versions, values)})`;
  if (author !== null) values[':author'] = author;
  // A user's erasure signs its tombstones, so that a step of it run again counts each once (erasure-close.ts).
  if (erasureId !== undefined) values[':erasure'] = erasureId;
  try {
    const { Attributes: deleted } = await table.send(
      new UpdateCommand({
        TableName: table.tableName,
        Key: memoryItem.key(address.tenant, address.namespace, address.key),
        // Expired at once: TTL removes the tombstone; until then it reads as absent.
        UpdateExpression: `SET #kind = :deleted, deletedAt = :now, #ttl = :nowSeconds${author === null ? '' : ', author = :author'}${erasureId === undefined ? '' : ', erasure = :erasure'} REMOVE #value, version, createdAt, updatedAt, mu, mf, mp, vs, ve${author === null ? ', author' : ''}`,
        ConditionExpression: guard,
        ExpressionAttributeNames: { '#kind': 'kind', '#value': 'value', '#ttl': tableKeys.timeToLive },
        ExpressionAttributeValues: values,
        ReturnValues: 'ALL_OLD',
        ReturnValuesOnConditionCheckFailure: 'ALL_OLD',
      }),
    );
    // Its code goes before the delete answers (an erasure's too: a code is the user's data).
    if (deleted?.ve instanceof Uint8Array) {
      const dimensions = deleted.ve.length / 4;
      await dropCode(table, address, dimensions, codeStamp(memoryItem.decode(deleted)));
    }
    return { outcome: 'deleted' };
  } catch (error) {
    if (!isConditionFailure(error)) throw error;
    // Tombstoned by the same erasure: a run of it beside this one (the change hook's and the
    // retention sweep's) got there first. Deleted all the same, so that each run's count of the
    // page is whole, whichever of them moves the cursor (erasure-close.ts).
    if (erasureId !== undefined && oldItemOf(error)?.erasure === erasureId) return { outcome: 'deleted' };
    if (condition.kind === 'none') return { outcome: 'absent' };
    return { outcome: 'precondition_failed', currentVersion: liveVersion(oldItemOf(error), nowSeconds) };
  }
}

/** The placeholders of `If-Match` versions for an `IN (…)` (DynamoDB takes up to 100), added to `values`. */
export function expectedVersions(versions: readonly number[], values: Record<string, unknown>): string {
  return versions
    .slice(0, 100)
    .map((version, index) => {
      values[`:expected${index}`] = version;
      return `:expected${index}`;
    })
    .join(', ');
}

/**
 * The old item a failed condition returned. The document client leaves it in wire format
 * (`{version: {N: "3"}}`), so it is unmarshalled here.
 */
export function oldItemOf(error: { Item?: Record<string, unknown> }): Item | undefined {
  return error.Item ? unmarshall(error.Item as Record<string, AttributeValue>) : undefined;
}

/** The version of the live item among what a failed condition returned; 0 when there is none. */
export function liveVersion(old: Item | undefined, nowSeconds: number): number {
  return memoryItem.isLive(old, nowSeconds) ? Number(old.version) : 0;
}
