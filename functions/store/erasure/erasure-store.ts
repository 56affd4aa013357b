import { DeleteCommand, GetCommand, PutCommand, QueryCommand, UpdateCommand } from '@aws-sdk/lib-dynamodb';
import { type ErasureRecord, type ErasureStore, userNamespace } from '../../core/erasure/erasure.js';
import { pathKey } from '../../core/memory/memory.js';
import type { SessionScope } from '../../core/model/model.js';
import { deleteMemoryItem } from '../memory/memory-delete.js';
import { forgetNamespace, namespaceHasItems } from '../memory/namespace-entries.js';
import type { DynamoDbSessionStore } from '../sessions/session-store.js';
import { ERASURE_ITEM_KIND, KIND_ATTRIBUTE, MEMORY_ITEM_KIND } from '../table/item-kinds.js';
import * as keys from '../table/keys.js';
import { queryAll } from '../table/paging.js';
import { tableKeys } from '../table/table.js';
import { batchPut, type Item, type TableClient } from '../table/table-client.js';

/**
 * Erasures of users (core/erasure/erasure.ts has the two steps):
 *
 *   E#<tenant>#<erasure>  E            kind erasure: status (closing, running, done), userId
 *                                      (removed when done), the counts, createdAt, finishedAt
 *   E#<tenant>#<erasure>  S#<session>  a session the erasure closed in life `life`, until it is erased
 *   E#<tenant>#<erasure>  N#<path>     a memory namespace it closed items in (the namespace list
 *                                      forgets it at once), until their past is erased
 *
 * The `DELETE` puts the item as `closing`, closes the user's sessions (writing one `S#` item
 * each), profile and memory items, and then sets it `running` with the counts: that MODIFY is
 * what the change hook's filter lets through (stream-images.ts), so the erasure's second step
 * starts only once its first is complete. A `DELETE` that died before its `202` leaves a
 * `closing` erasure nobody continues (its caller, who got no `202`, sends it again: a new
 * erasure, which closes and erases the same things).
 */

/** How many sessions or memory items are closed or erased side by side. */
const PARALLEL = 16;
/** A session list page while closing a user's sessions. */
const LIST_PAGE = 100;

export class DynamoDbErasureStore implements ErasureStore {
  constructor(
    protected readonly table: TableClient,
    protected readonly sessions: DynamoDbSessionStore,
  ) {}

  start(tenant: string, userId: string): Promise<ErasureRecord> {
    return this.startErasure(tenant, userId);
  }

  /**
   * The erasure of what a user has (`userId`), or of every session, profile and memory item of
   * the tenant (null: the admin CLI's `tenants erase`, which then erases the rest of the tenant
   * itself, erasure-finish.ts `eraseTenantRest`).
   */
  protected async startErasure(tenant: string, userId: string | null): Promise<ErasureRecord> {
    const erasureId = crypto.randomUUID();
    const createdAt = new Date(this.table.now()).toISOString();
    const key = { pk: keys.erasure(tenant, erasureId), sk: keys.erasureSort };
    await this.table.send(
      new PutCommand({
        TableName: this.table.tableName,
        Item: {
          ...key,
          [KIND_ATTRIBUTE]: ERASURE_ITEM_KIND,
          status: 'closing',
          ...(userId === null ? { subject: 'tenant' } : { userId }),
          createdAt,
        },
      }),
    );
    const [closed, memoryItems] = await Promise.all([
      this.closeSessions(tenant, erasureId, userId, createdAt),
      this.closeMemory(tenant, erasureId, userId, createdAt),
    ]);
    const sessions = closed.length;
    // A user's profile; for a tenant, the profiles of the users of its sessions.
    const profiles =
      userId === null ? [...new Set(closed.flatMap((session) => (session.userId === null ? [] : [session.userId])))] : [userId];
    const documents = (await Promise.all(profiles.map((user) => this.deleteProfile(tenant, user)))).reduce((sum, one) => sum + one, 0);
    await this.table.send(
      new UpdateCommand({
        TableName: this.table.tableName,
        Key: key,
        UpdateExpression: 'SET #status = :running, sessions = :sessions, memoryItems = :memory, documents = :documents',
        ExpressionAttributeNames: { '#status': 'status' },
        ExpressionAttributeValues: { ':running': 'running', ':sessions': sessions, ':memory': memoryItems, ':documents': documents },
      }),
    );
    return { erasureId, status: 'running', sessions, memoryItems, documents, createdAt };
  }

  async get(tenant: string, erasureId: string): Promise<ErasureRecord | null> {
    const { Item } = await this.table.send(
      new GetCommand({
        TableName: this.table.tableName,
        Key: { pk: keys.erasure(tenant, erasureId), sk: keys.erasureSort },
        ConsistentRead: true,
      }),
    );
    return Item ? recordOf(Item) : null;
  }

  /** The erasure's records of what it closed (`S#` sessions, `N#` namespaces). */
  protected async workOf(partition: string, prefix: string): Promise<Item[]> {
    const work: Item[] = [];
    await queryAll(
      (start) =>
        this.table.send(
          new QueryCommand({
            TableName: this.table.tableName,
            KeyConditionExpression: 'pk = :pk AND begins_with(sk, :prefix)',
            ExpressionAttributeValues: { ':pk': partition, ':prefix': prefix },
            ConsistentRead: true,
            ExclusiveStartKey: start,
          }),
        ),
      (item) => work.push(item),
    );
    return work;
  }

  // ---- the first step: closing ------------------------------------------------------------

  /** Closes every session of the user (its list, API.md section 2; null: the tenant's), recording each; those closed. */
  private async closeSessions(tenant: string, erasureId: string, userId: string | null, before: string): Promise<SessionOf[]> {
    const found = await this.userSessions(tenant, userId, before);
    const records: Item[] = [];
    await inParallel(found, async (session) => {
      const life = await this.sessions.closeForErasure(session.scope);
      records.push({
        pk: keys.erasure(tenant, erasureId),
        sk: keys.erasedSession(session.scope.sessionId),
        sessionId: session.scope.sessionId,
        life,
      });
    });
    await batchPut(this.table, records);
    return found;
  }

  /** The user's sessions made at or before `before`, from the user's list (null: the tenant's list); never a scan. */
  protected async userSessions(tenant: string, userId: string | null, before: string): Promise<SessionOf[]> {
    const found: SessionOf[] = [];
    let cursor: string | undefined;
    do {
      const page = await this.sessions.listSessions(tenant, {
        limit: LIST_PAGE,
        ...(userId === null ? {} : { filter: { userId } }),
        ...(cursor === undefined ? {} : { cursor }),
      });
      for (const session of page.items) {
        if (session.createdAt <= before) found.push({ scope: { tenant, sessionId: session.sessionId }, userId: session.userId });
      }
      cursor = page.next;
    } while (cursor !== undefined);
    return found;
  }

  /** Deletes the user's profile document; 1 when there was one. */
  private async deleteProfile(tenant: string, userId: string): Promise<number> {
    const { Attributes } = await this.table.send(
      new DeleteCommand({
        TableName: this.table.tableName,
        Key: { pk: keys.profile(tenant, userId), sk: keys.profileSort },
        ReturnValues: 'ALL_OLD',
      }),
    );
    return Attributes ? 1 : 0;
  }

  /**
   * Every live memory item under `users/<userId>` made at or before `before` becomes a
   * delete's tombstone (the memory store's own delete: it reads as absent at once, and the
   * change hook erases its history on its record); how many. An item made later is a write
   * after the erasure, and stays.
   */
  protected async closeMemory(tenant: string, erasureId: string, userId: string | null, before: string): Promise<number> {
    let count = 0;
    const namespaces = await this.userNamespaces(tenant, userId);
    // Recorded first: once it holds tombstones alone, the namespace list no longer names it.
    await batchPut(
      this.table,
      namespaces.map((namespace) => ({
        pk: keys.erasure(tenant, erasureId),
        sk: keys.erasedNamespace(namespace),
        namespace: namespace.join('/'),
      })),
    );
    for (const namespace of namespaces) {
      const live: string[] = [];
      await this.itemsOf(tenant, namespace, (item) => {
        if (item[KIND_ATTRIBUTE] === MEMORY_ITEM_KIND.item && String(item.createdAt) <= before)
          live.push(String(item.sk).slice(keys.memoryKeyPrefix.length));
      });
      await inParallel(live, async (key) => {
        const { outcome } = await deleteMemoryItem(this.table, { tenant, namespace, key }, { kind: 'none' }, null);
        if (outcome === 'deleted') count++;
      });
      // Its name leaves the namespace list at once too (the change hook would, a moment later).
      if (!(await namespaceHasItems(this.table, tenant, namespace))) await forgetNamespace(this.table, tenant, namespace);
    }
    return count;
  }

  /**
   * The namespaces listed under `users/<userId>` (`users/u1` reaches `users/u1/facts`, never
   * `users/u10`); null: every namespace of the tenant.
   */
  private async userNamespaces(tenant: string, userId: string | null): Promise<string[][]> {
    const low = userId === null ? '' : pathKey(userNamespace(userId));
    const found: string[][] = [];
    await queryAll(
      (start) =>
        this.table.send(
          new QueryCommand({
            TableName: this.table.tableName,
            KeyConditionExpression: userId === null ? 'pk = :pk' : 'pk = :pk AND sk BETWEEN :low AND :high',
            ExpressionAttributeValues:
              userId === null
                ? { ':pk': keys.memoryNamespaces(tenant) }
                : { ':pk': keys.memoryNamespaces(tenant), ':low': low, ':high': `${low}\x7f` },
            ProjectionExpression: 'sk',
            ConsistentRead: true,
            ExclusiveStartKey: start,
          }),
        ),
      (entry) => found.push(String(entry.sk).slice(0, -1).split('/')),
    );
    return found;
  }

  /** Every item of a namespace's partition, live or a tombstone (its key, kind and creation). */
  protected itemsOf(tenant: string, namespace: readonly string[], each: (item: Item) => void): Promise<void> {
    return queryAll(
      (start) =>
        this.table.send(
          new QueryCommand({
            TableName: this.table.tableName,
            KeyConditionExpression: 'pk = :pk AND begins_with(sk, :items)',
            ExpressionAttributeValues: { ':pk': keys.memoryNamespace(tenant, namespace), ':items': keys.memoryKeyPrefix },
            ExpressionAttributeNames: { '#kind': KIND_ATTRIBUTE, '#ttl': tableKeys.timeToLive },
            ProjectionExpression: 'sk, #kind, createdAt, #ttl',
            ConsistentRead: true,
            ExclusiveStartKey: start,
          }),
        ),
      each,
    );
  }
}

/** A session an erasure found, and its user. */
interface SessionOf {
  scope: SessionScope;
  userId: string | null;
}

/** An erasure as `GET /v1/erasures/{erasureId}` shows it (`closing` is `running` to the caller). */
function recordOf(item: Item): ErasureRecord {
  return {
    erasureId: String(item.pk).split('#')[2] as string,
    status: item.status === 'done' ? 'done' : 'running',
    sessions: Number(item.sessions ?? 0),
    memoryItems: Number(item.memoryItems ?? 0),
    documents: Number(item.documents ?? 0),
    createdAt: String(item.createdAt),
    ...(typeof item.finishedAt === 'string' ? { finishedAt: item.finishedAt } : {}),
  };
}

/** Runs `work` over `items`, `PARALLEL` at a time; rejects with the first failure once all settled. */
export async function inParallel<T>(items: readonly T[], work: (item: T) => Promise<void>): Promise<void> {
  let next = 0;
  let failure: unknown;
  const lane = async () => {
    while (next < items.length) {
      const item = items[next++] as T;
      try {
        await work(item);
      } catch (error) {
        failure ??= error;
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(PARALLEL, items.length) }, lane));
  if (failure !== undefined) throw failure;
}
