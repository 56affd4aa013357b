import { createHash } from 'node:crypto';
import { UpdateCommand } from '@aws-sdk/lib-dynamodb';
import type { SessionMeta, SessionScope } from '../../core/model/model.js';
import type { ListedAs, SessionFilter } from '../../core/model/ports.js';
import { listedMetadata } from '../../core/sessions/session-lists.js';
import { stringOrNull } from '../table/item-codecs.js';
import * as keys from '../table/keys.js';
import { forEachInRange } from '../table/paging.js';
import { tableKeys } from '../table/table.js';
import { conditionally, type Item, type TableClient } from '../table/table-client.js';
import * as sessionItem from './session-item.js';

/**
 * A session's entries in the filtered lists (API.md section 2: `?userId=`, `?agentId=`,
 * `?metadata.<key>=`): one item each in the session's own collection (`L#u`, `L#a`,
 * `L#m#<digest of the key>`), whose list index keys name the list and the session's activity.
 * The tenant's list needs none: the session item is its entry. An entry holds the index keys,
 * the session id and the time it moved to, nothing else, so moving it costs one write unit in
 * the table and two in the index (a delete and a put of its entry) whatever the session's
 * metadata holds; a list reads the sessions it shows by key (session-list.ts). Erased with
 * every other item of the session (session-delete.ts). What a move costs still grows with the
 * number of strings in the metadata (an entry each, up to 50), never with its size.
 *
 * A list's key carries no metadata text: a key and value of any length become a digest
 * (SHA-256, base64url), and a list checks every session it shows against its filter, so a
 * digest's collision could never show a session that does not match.
 */

/** The name of the list `filter` selects (keys.ts `listSessions`). */
export function listOf(filter: SessionFilter): string {
  if ('userId' in filter) return `u:${filter.userId}`;
  if ('agentId' in filter) return `a:${filter.agentId}`;
  return `m:${digest(JSON.stringify([filter.metadata.key, filter.metadata.value]))}`;
}

/** The sort key of a session's entry in the list `filter` selects. */
export function entrySortOf(filter: SessionFilter): string {
  if ('userId' in filter) return keys.userEntry;
  if ('agentId' in filter) return keys.agentEntry;
  return keys.metadataEntry(digest(filter.metadata.key));
}

/** Every entry of a session in the filtered lists, its entry's sort key with the list it is in. */
function entriesOf(meta: ListedAs): Array<{ sk: string; list: string }> {
  return [
    ...(meta.userId === null ? [] : [{ sk: keys.userEntry, list: listOf({ userId: meta.userId }) }]),
    ...(meta.agentId === null ? [] : [{ sk: keys.agentEntry, list: listOf({ agentId: meta.agentId }) }]),
    ...listedMetadata(meta.metadata).map(([key, value]) => {
      const filter = { metadata: { key, value } };
      return { sk: entrySortOf(filter), list: listOf(filter) };
    }),
  ];
}

/** The entry items of a session as it is made (`updatedAt` its creation). */
export function entryItems(scope: SessionScope, meta: SessionMeta): Item[] {
  return entriesOf(meta).map(({ sk, list }) => entryItem(scope, sk, list, meta.updatedAt));
}

/**
 * The entries a change of what a session is listed under (`PATCH /v1/sessions/{sid}` of its
 * user, agent or metadata) writes in its own transaction, at `at` (its activity after the
 * change): each entry of `after` in its list, and each entry of `before` that `after` lacks
 * taken out of every list. The latter stays, an item with no list keys and the time it left,
 * so that a move based on a read from before the change (`moveEntries`) cannot put it back.
 */
export function changedEntries(scope: SessionScope, lists: { before: ListedAs; after: ListedAs }, at: string): Item[] {
  const after = entriesOf(lists.after);
  const kept = new Set(after.map(({ sk }) => sk));
  return [
    ...after.map(({ sk, list }) => entryItem(scope, sk, list, at)),
    ...entriesOf(lists.before)
      .filter(({ sk }) => !kept.has(sk))
      .map(({ sk }) => ({ pk: keys.session(scope), sk, sessionId: scope.sessionId, updatedAt: at })),
  ];
}

function entryItem(scope: SessionScope, sk: string, list: string, updatedAt: string): Item {
  return { pk: keys.session(scope), sk, ...indexKeys(scope, list, updatedAt), sessionId: scope.sessionId, updatedAt };
}

/**
 * Moves a session's entries to `at`, side by side, each never back (one UpdateItem of a small
 * item each). An entry a session lacks is made (a session listed before its filters were), so
 * an entry may outlive its session by a race with its delete: lists check every session they
 * show (session-list.ts), so such an entry is never shown. An entry moves only within the list
 * it is in: `meta` may be read from before a change of the user, agent or metadata, whose own
 * transaction moved the entry to its new list (or out of every list, `changedEntries`), and a
 * move based on that read must not put it back where it was.
 */
export async function moveEntries(table: TableClient, scope: SessionScope, meta: ListedAs, at: string): Promise<void> {
  await moveEach(
    table,
    scope,
    entriesOf(meta).map(({ sk, list }) => ({ sk, partition: listPartition(scope, list) })),
    at,
  );
}

/**
 * `moveEntries` for the session `session` (its item, as the activity's move wrote or read it):
 * the entries of its metadata's strings are read, not the metadata, when it is in an item of its
 * own (session-item.ts): a Query of the session's `L#m#` entries reads a few hundred bytes an
 * entry, where the metadata may be 16 KiB. Such a session has had every entry of its metadata
 * since it was made, or since the `PATCH` that moved its metadata out (which wrote them all,
 * `changedEntries`); an entry taken out of every list (no list keys) stays out. A session item
 * that carries its metadata inline (from before the split) moves as it always did.
 */
export async function moveEntriesOf(table: TableClient, scope: SessionScope, session: Item, at: string): Promise<void> {
  if (!sessionItem.hasMetadataItem(session)) {
    await moveEntries(table, scope, sessionItem.decode({ ...session, sessionId: scope.sessionId }), at);
    return;
  }
  const index = tableKeys.sessionsIndex;
  const owners = entriesOf({ userId: stringOrNull(session.userId), agentId: stringOrNull(session.agentId), metadata: null });
  const strings: Item[] = [];
  await forEachInRange(table, { partition: keys.session(scope), prefix: keys.metadataEntryPrefix }, (item) => strings.push(item), {
    ProjectionExpression: 'sk, #partition',
    ExpressionAttributeNames: { '#partition': index.partitionKey },
  });
  await moveEach(
    table,
    scope,
    [
      ...owners.map(({ sk, list }) => ({ sk, partition: listPartition(scope, list) })),
      ...strings.flatMap((entry) => {
        const partition = entry[index.partitionKey];
        return typeof partition === 'string' ? [{ sk: String(entry.sk), partition }] : [];
      }),
    ],
    at,
  );
}

/** Moves each entry to `at` within the list partition it is in (`moveEntries`). */
async function moveEach(table: TableClient, scope: SessionScope, entries: ReadonlyArray<{ sk: string; partition: string }>, at: string) {
  const index = tableKeys.sessionsIndex;
  await Promise.all(
    entries.map(async ({ sk, partition }) => {
      await conditionally(
        table.send(
          new UpdateCommand({
            TableName: table.tableName,
            Key: { pk: keys.session(scope), sk },
            UpdateExpression: 'SET updatedAt = :at, sessionId = :sessionId, #partition = :partition, #activity = :activity',
            ConditionExpression: 'attribute_not_exists(updatedAt) OR (updatedAt < :at AND #partition = :partition)',
            ExpressionAttributeNames: { '#partition': index.partitionKey, '#activity': index.sortKey },
            ExpressionAttributeValues: {
              ':at': at,
              ':sessionId': scope.sessionId,
              ':partition': partition,
              ':activity': keys.activity(at, scope.sessionId),
            },
          }),
        ),
      );
    }),
  );
}

/** The partition of `list` that holds this session's entry (keys.ts `listSessions`). */
function listPartition(scope: SessionScope, list: string): string {
  return keys.listSessions(scope.tenant, list, keys.activityShard(scope.sessionId));
}

/** An entry's list index keys: its list's partition for this session, and its activity. */
function indexKeys(scope: SessionScope, list: string, updatedAt: string): Item {
  const index = tableKeys.sessionsIndex;
  return {
    [index.partitionKey]: keys.listSessions(scope.tenant, list, keys.activityShard(scope.sessionId)),
    [index.sortKey]: keys.activity(updatedAt, scope.sessionId),
  };
}

function digest(text: string): string {
  return createHash('sha256').update(text, 'utf8').digest('base64url');
}
