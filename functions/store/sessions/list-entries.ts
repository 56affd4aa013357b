import { createHash } from 'node:crypto';
import { UpdateCommand } from '@aws-sdk/lib-dynamodb';
import type { SessionMeta, SessionScope } from '../../core/model/model.js';
import type { ListedAs, SessionFilter } from '../../core/model/ports.js';
import { listedMetadata } from '../../core/sessions/session-lists.js';
import * as keys from '../table/keys.js';
import { tableKeys } from '../table/table.js';
import { conditionally, type Item, type TableClient } from '../table/table-client.js';

/**
 * A session's entries in the filtered lists (API.md section 2: `?userId=`, `?agentId=`,
 * `?metadata.<key>=`): one item each in the session's own collection (`L#u`, `L#a`,
 * `L#m#<digest of the key>`), whose list index keys name the list and the session's activity.
 * The tenant's list needs none: the session item is its entry. An entry holds the index keys,
 * the session id and the time it moved to, nothing else, so moving it costs one write unit in
 * the table and one in the index whatever the session's metadata holds; a list reads the
 * sessions it shows by key (session-list.ts). Erased with every other item of the session
 * (session-delete.ts).
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
export async function moveEntries(table: TableClient, scope: SessionScope, meta: SessionMeta, at: string): Promise<void> {
  const index = tableKeys.sessionsIndex;
  await Promise.all(
    entriesOf(meta).map(async ({ sk, list }) => {
      const moved = indexKeys(scope, list, at);
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
              ':partition': moved[index.partitionKey],
              ':activity': moved[index.sortKey],
            },
          }),
        ),
      );
    }),
  );
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
