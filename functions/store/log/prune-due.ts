import { QueryCommand, UpdateCommand } from '@aws-sdk/lib-dynamodb';
import type { SessionScope } from '../../core/model/model.js';
import * as keys from '../table/keys.js';
import { logPositionOf } from '../table/keys.js';
import { tableKeys } from '../table/table.js';
import { conditionally, type TableClient } from '../table/table-client.js';
import { isMarkerKey } from './prune-marker.js';

/** An entry of the retention index that the sweep found due. */
interface DueEntry {
  /** The item that carries the entry. */
  key: { pk: string; sk: string };
  /** How many runs of it in a row failed (`putOff`). */
  failures: number;
}

/**
 * A session due for the retention sweep: its history's run (its marker's entry), or, with
 * `closing`, the erase of a delete whose eraser's hold on the fence that closes that life ended
 * without closing it (the fence's own entry, session-delete.ts `dueWhenHeld`).
 */
export interface SessionDue extends DueEntry {
  scope: SessionScope;
  closing?: number;
}

/**
 * A user's erasure that no run has moved for longer than a run takes (its item's entry,
 * erasure/erasure-store.ts): its runs stopped, and the sweep goes on with it.
 */
export interface ErasureDue extends DueEntry {
  erasure: { tenant: string; erasureId: string };
}

export type Due = SessionDue | ErasureDue;

/**
 * What is due for the retention sweep by `nowMs`, oldest due first in each of the index's
 * partitions (`byPruneDue`, prune-marker.ts): at most `perShard` from each, read side by side,
 * one Query per partition. No scan, and nothing per tenant: an idle deployment costs
 * PRUNE_DUE_SHARDS empty Queries a sweep. The index trails the table by a moment; a session
 * found due that is not (any more) costs its run's claim, or its erase's tip read, and nothing else.
 */
export async function dueSessions(table: TableClient, nowMs: number, perShard: number): Promise<Due[]> {
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
  const due: Due[] = [];
  for (const item of pages.flat()) {
    const key = { pk: String(item.pk), sk: String(item.sk) };
    const failures = keys.pruneDueFailures(String(item[sortKey]));
    const erasure = keys.erasureOf(key.pk, key.sk);
    if (erasure) due.push({ erasure, key, failures });
    const scope = keys.sessionScopeOf(key.pk);
    if (!scope) continue;
    const fence = logPositionOf(key.sk);
    if (fence) due.push({ scope, closing: fence.incarnation, key, failures });
    else if (isMarkerKey(key.sk)) due.push({ scope, key, failures });
  }
  return due;
}

/**
 * Puts off an entry whose run failed (streams/prune-sweep.ts): due at `dueMs` with the count of
 * `failures` in a row, so that the entries behind it in its partition are served, and it is
 * retried. Only later than it is due now, and only while it is due at all: a run that completed
 * meanwhile (its entry removed; a fence closed), or a hold that ends later, keeps its own. One
 * conditional UpdateItem; nothing when the condition fails.
 */
export async function putOff(table: TableClient, due: Due, failures: number, dueMs: number): Promise<void> {
  await conditionally(
    table.send(
      new UpdateCommand({
        TableName: table.tableName,
        Key: due.key,
        UpdateExpression: 'SET #dsk = :next',
        ConditionExpression: 'attribute_exists(#dsk) AND #dsk < :next',
        ExpressionAttributeNames: { '#dsk': tableKeys.pruneDueIndex.sortKey },
        ExpressionAttributeValues: { ':next': keys.pruneDueRetry(dueMs, failures) },
      }),
    ),
  );
}
