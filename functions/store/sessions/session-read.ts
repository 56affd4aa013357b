import { QueryCommand } from '@aws-sdk/lib-dynamodb';
import type { SessionMeta, SessionScope } from '../../core/model/model.js';
import * as keys from '../table/keys.js';
import { batchGet, type Item, type TableClient } from '../table/table-client.js';
import * as sessionItem from './session-item.js';

/**
 * A session read whole: its item and its metadata item (session-item.ts), as one read. A read
 * that saw the two from different writes (`sessionItem.isTorn`: a Query or a BatchGet reads each
 * item as it is when it gets to it, and a `PATCH` writes both in a transaction) reads again; a
 * few times at most, then it takes what it found (two writes in a row of one session's metadata
 * are a `PATCH` each, each a change of the log: a read cannot keep falling between them).
 */
const READ_ATTEMPTS = 3;

export interface SessionItems {
  item: Item;
  /** Absent when the session has none (or carries its metadata inline). */
  metadataItem?: Item;
}

/**
 * The session's items, read consistently in one Query (`S` and `SM` sort next to each other:
 * keys.ts `sessionMetadataSort`), which costs what one GetItem of an item of both their sizes
 * would; null when the session item is not there.
 */
export async function readSessionItems(table: TableClient, scope: SessionScope): Promise<SessionItems | null> {
  for (let attempt = 1; ; attempt++) {
    const { Items = [] } = await table.send(
      new QueryCommand({
        TableName: table.tableName,
        KeyConditionExpression: 'pk = :pk AND sk BETWEEN :session AND :metadata',
        ExpressionAttributeValues: { ':pk': keys.session(scope), ':session': keys.sessionSort, ':metadata': keys.sessionMetadataSort },
        ConsistentRead: true,
      }),
    );
    const found = itemsOf(Items);
    if (!found) return null;
    if (!sessionItem.isTorn(found.item, found.metadataItem) || attempt >= READ_ATTEMPTS) return found;
  }
}

/**
 * The session an item of its says, to `scope` (null: another's copy not opened yet, no session
 * to it: log-items.ts `closeIfUnopened`); `metadataItem` as read beside it.
 */
export function sessionMetaOf(scope: SessionScope, item: Item, metadataItem?: Item): SessionMeta | null {
  return sessionItem.isOthersUnopened(item, scope) ? null : sessionItem.decode(item, metadataItem);
}

/**
 * The session a write's refusal returned its item of (SessionItemRefused), when that item tells
 * all of it: not when the metadata is in an item of its own, which the refusal did not return.
 */
export function refusedSessionMeta(scope: SessionScope, item: Item | undefined): SessionMeta | null | undefined {
  return item && !sessionItem.hasMetadataItem(item) ? sessionMetaOf(scope, item) : undefined;
}

/**
 * The items of many sessions of one tenant, by id, in one round: both keys of each in BatchGets
 * side by side (100 keys each). A session read torn is read again by itself.
 */
export async function readManySessionItems(
  table: TableClient,
  tenant: string,
  sessionIds: readonly string[],
): Promise<Map<string, SessionItems>> {
  const scopes = sessionIds.map((sessionId) => ({ tenant, sessionId }));
  const found = await batchGet(
    table,
    scopes.flatMap((scope) => [sessionItem.key(scope), sessionItem.metadataKey(scope)]),
  );
  const byPartition = new Map<string, Item[]>();
  for (const item of found) byPartition.set(String(item.pk), [...(byPartition.get(String(item.pk)) ?? []), item]);
  const read = new Map<string, SessionItems>();
  await Promise.all(
    scopes.map(async (scope) => {
      let items = itemsOf(byPartition.get(keys.session(scope)) ?? []);
      if (items && sessionItem.isTorn(items.item, items.metadataItem)) items = await readSessionItems(table, scope);
      if (items) read.set(scope.sessionId, items);
    }),
  );
  return read;
}

function itemsOf(items: readonly Item[]): SessionItems | null {
  const item = items.find((candidate) => candidate.sk === keys.sessionSort);
  if (!item) return null;
  const metadataItem = items.find((candidate) => candidate.sk === keys.sessionMetadataSort);
  return metadataItem ? { item, metadataItem } : { item };
}
