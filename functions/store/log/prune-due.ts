import { QueryCommand } from '@aws-sdk/lib-dynamodb';
import type { SessionScope } from '../../core/model/model.js';
import * as keys from '../table/keys.js';
import { tableKeys } from '../table/table.js';
import type { TableClient } from '../table/table-client.js';
import { isMarkerKey } from './prune-marker.js';

/**
 * The sessions whose history is due for a retention run by `nowMs`, oldest due first in each of
 * the index's partitions (`byPruneDue`, prune-marker.ts): at most `perShard` from each, read
 * side by side, one Query per partition. No scan, and nothing per tenant: an idle deployment
 * costs PRUNE_DUE_SHARDS empty Queries a sweep. The index trails the table by a moment; a
 * session found due that is not (any more) costs its run's claim and nothing else.
 */
export async function dueSessions(table: TableClient, nowMs: number, perShard: number): Promise<SessionScope[]> {
  const { name, partitionKey, sortKey } = tableKeys.pruneDueIndex;
  const pages = await Promise.all(
    Array.from({ length: keys.PRUNE_DUE_SHARDS }, async (_, shard) => {
      const { Items } = await table.send(
        new QueryCommand({
          TableName: table.tableName,
          IndexName: name,
          KeyConditionExpression: '#dpk = :dpk AND #dsk <= :now',
          ExpressionAttributeNames: { '#dpk': partitionKey, '#dsk': sortKey },
          ExpressionAttributeValues: { ':dpk': keys.pruneDue(shard), ':now': keys.pruneDueAt(nowMs) },
          Limit: perShard,
        }),
      );
      return Items ?? [];
    }),
  );
  const due: SessionScope[] = [];
  for (const item of pages.flat()) {
    const scope = isMarkerKey(item.sk) ? keys.sessionScopeOf(String(item.pk)) : null;
    if (scope) due.push(scope);
  }
  return due;
}
