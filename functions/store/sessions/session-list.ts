import { QueryCommand } from '@aws-sdk/lib-dynamodb';
import { openCursor, sealCursor } from '../../core/kernel/sealing.js';
import type { Page, SessionMeta } from '../../core/model/model.js';
import type { SessionFilter, SessionListOptions } from '../../core/model/ports.js';
import { isListedUnder } from '../../core/sessions/session-lists.js';
import * as keys from '../table/keys.js';
import { invalidCursor } from '../table/paging.js';
import { tableKeys } from '../table/table.js';
import type { Item, TableClient } from '../table/table-client.js';
import { entrySortOf, listOf } from './list-entries.js';
import * as sessionItem from './session-item.js';
import { readManySessionItems } from './session-read.js';

/**
 * A tenant's sessions, most recently active first, from the list index's partitions: the
 * tenant's list (`T#<tenant>#<shard>`, keys.ts `ACTIVITY_SHARDS`, the session items
 * themselves), or a filtered one (`T#<tenant>#<list>#<shard>`, the entries of list-entries.ts).
 * Each partition is read side by side, newest first, `limit` entries at most, and the answers
 * are merged; then the sessions of the page are read by key (one BatchGet a hundred: the index
 * holds the session id alone, so that metadata never enters it). Two rounds of reads per page,
 * at any number of sessions.
 *
 * Exact: a partition that stopped early (DynamoDB's `LastEvaluatedKey`) holds nothing unread
 * as new as where it stopped, so an entry may be handed out only when it is at least as new as
 * every such stop; without a filter the `limit` newest entries always are (a partition that stopped has
 * `limit` entries at least as new as its stop). With `prefix`, a filter that DynamoDB applies
 * after `Limit`, a page may come back short or empty, with `next`, as before.
 *
 * The cursor holds, for each partition, the activity (`<updatedAt>#<session>`) of the last
 * entry handed out from it (or of where it stopped, when all it read was handed out or
 * filtered away), `''` for not read yet, or `null` for read to its end; sealed for this
 * tenant's list and filter (core/kernel/sealing.ts), so it shows nothing.
 */
export async function listSessions(table: TableClient, tenant: string, options: SessionListOptions): Promise<Page<SessionMeta>> {
  const { ids, next } = await listSessionIds(table, tenant, options);
  const items = await sessionsOf(table, tenant, ids, options.filter);
  return next === undefined ? { items } : { items, next };
}

/**
 * A page of the ids the list's entries name, in its order, whether or not their sessions
 * still exist: what a user's erasure closes (erasure-close.ts), which must find again a session
 * whose item it deleted when it closed it (its entries stay until the session is erased).
 */
export async function listSessionIds(
  table: TableClient,
  tenant: string,
  options: SessionListOptions,
): Promise<{ ids: string[]; next?: string }> {
  const index = tableKeys.sessionsIndex;
  const { filter } = options;
  const listName = filter === undefined ? null : listOf(filter);
  const partitionOf = (shard: number) =>
    listName === null ? keys.tenantSessions(tenant, shard) : keys.listSessions(tenant, listName, shard);
  const list = JSON.stringify([table.tableName, index.name, `T#${tenant}`, listName]);
  const positions =
    options.cursor === undefined ? Array<string | null>(keys.ACTIVITY_SHARDS).fill('') : openPositions(options.cursor, list);
  const reads = await Promise.all(
    positions.map(async (position, shard) => {
      if (position === null) return { shard, items: [] as Item[], stop: null };
      const partition = partitionOf(shard);
      const { Items, LastEvaluatedKey } = await table.send(
        new QueryCommand({
          TableName: table.tableName,
          IndexName: index.name,
          KeyConditionExpression: `${index.partitionKey} = :partition`,
          ...(options.prefix === undefined
            ? { ExpressionAttributeValues: { ':partition': partition } }
            : {
                FilterExpression: 'begins_with(sessionId, :prefix)',
                ExpressionAttributeValues: { ':partition': partition, ':prefix': options.prefix },
              }),
          ScanIndexForward: false,
          Limit: options.limit,
          ExclusiveStartKey: position === '' ? undefined : startKey(tenant, partition, position, filter),
        }),
      );
      const stop = LastEvaluatedKey ? String(LastEvaluatedKey[index.sortKey]) : null;
      return { shard, items: Items ?? [], stop };
    }),
  );
  // Nothing older than the newest stop may go out yet: a partition that stopped there may hold
  // more. The stop itself may (it is the last entry its partition read; activities are unique).
  const frontier = reads.reduce((newest, read) => (read.stop !== null && read.stop > newest ? read.stop : newest), '');
  const candidates = reads
    .flatMap((read) => read.items.map((item) => ({ shard: read.shard, item, activity: String(item[index.sortKey]) })))
    .sort((a, b) => (a.activity < b.activity ? 1 : a.activity > b.activity ? -1 : 0));
  const page = candidates.filter((candidate) => candidate.activity >= frontier).slice(0, options.limit);

  const next = reads.map((read): string | null => {
    const position = positions[read.shard] as string | null;
    if (position === null) return null;
    const handed = page.filter((candidate) => candidate.shard === read.shard);
    // All it read went out (or was filtered away): it goes on from where it stopped, or is done.
    if (handed.length === read.items.length) return read.stop;
    return handed.length > 0 ? (handed[handed.length - 1] as { activity: string }).activity : position;
  });
  const ids = page.map((candidate) => String(candidate.item.sessionId));
  return next.some((position) => position !== null) ? { ids, next: sealCursor(next, list) } : { ids };
}

/**
 * The sessions of a page, in its order, read by key: what a list shows of each comes from the
 * session item, never from the index. The one place that decides whether a session the index
 * names is shown: it must exist (a delete erases its entries with it, but the index follows
 * the table), and be in the filtered list still (its entry may trail a change of its user,
 * agent or metadata).
 */
async function sessionsOf(table: TableClient, tenant: string, sessionIds: string[], filter?: SessionFilter): Promise<SessionMeta[]> {
  if (sessionIds.length === 0) return [];
  // Each session's item and its metadata's (session-read.ts), in one round.
  const found = await readManySessionItems(table, tenant, sessionIds);
  return sessionIds.flatMap((sessionId) => {
    const read = found.get(sessionId);
    // A copy not opened yet is in no list (its item has no place in the index; nor may an entry name it).
    if (!read || sessionItem.isOthersUnopened(read.item, { tenant, sessionId })) return [];
    const meta = sessionItem.decode(read.item, read.metadataItem);
    return filter === undefined || isListedUnder(meta, filter) ? [meta] : [];
  });
}

/** The positions a cursor of this list holds: one per partition, each a string or null. */
function openPositions(cursor: string, list: string): Array<string | null> {
  const parsed = openCursor(cursor, list);
  const shaped =
    Array.isArray(parsed) &&
    parsed.length === keys.ACTIVITY_SHARDS &&
    parsed.every((position) => position === null || (typeof position === 'string' && (position === '' || position.includes('#'))));
  if (!shaped) throw invalidCursor();
  return parsed as Array<string | null>;
}

/** The index key of the entry with `activity` in `partition`: where a Query goes on from. */
function startKey(tenant: string, partition: string, activity: string, filter?: SessionFilter): Item {
  const sessionId = activity.slice(activity.indexOf('#') + 1);
  const index = tableKeys.sessionsIndex;
  return {
    pk: keys.session({ tenant, sessionId }),
    sk: filter === undefined ? keys.sessionSort : entrySortOf(filter),
    [index.partitionKey]: partition,
    [index.sortKey]: activity,
  };
}
