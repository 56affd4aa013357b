import { DeleteCommand, GetCommand, UpdateCommand } from '@aws-sdk/lib-dynamodb';
import { DynamoDbMemoryUpkeep } from '../memory/memory-upkeep-store.js';
import { forgetNamespace, namespaceHasItems } from '../memory/namespace-entries.js';
import type { DynamoDbSessionStore } from '../sessions/session-store.js';
import { KIND_ATTRIBUTE, MEMORY_ITEM_KIND } from '../table/item-kinds.js';
import * as keys from '../table/keys.js';
import { tableKeys } from '../table/table.js';
import { conditionally, type TableClient } from '../table/table-client.js';
import { DynamoDbErasureStore, inParallel } from './erasure-store.js';

/**
 * The second step of a user's erasure (erasure-store.ts has the first): the change hook's
 * alone, a module of its own so that the sessions group, which starts erasures, carries none
 * of it (the memory items' history above all).
 */

/** How long a finished erasure's record is kept, then TTL removes it: 30 days. */
const RECORD_TTL_SECONDS = 30 * 86_400;

export class ErasureFinisher extends DynamoDbErasureStore {
  private readonly upkeep: DynamoDbMemoryUpkeep;

  constructor(table: TableClient, sessions: DynamoDbSessionStore) {
    super(table, sessions);
    this.upkeep = new DynamoDbMemoryUpkeep(table);
  }

  /**
   * The second step (the change hook, on the record of the erasure set `running`): erases the
   * sessions closed, looks once more for sessions of the user the list index did not show yet,
   * erases the memory items' past, and sets the erasure `done`. Idempotent: run again after a
   * crash, it finds what is left by what is still stored.
   */
  async finish(tenant: string, erasureId: string): Promise<void> {
    const key = { pk: keys.erasure(tenant, erasureId), sk: keys.erasureSort };
    const { Item } = await this.table.send(new GetCommand({ TableName: this.table.tableName, Key: key, ConsistentRead: true }));
    if (Item?.status !== 'running') return;
    // A user's erasure names the user; a tenant's (the admin CLI) says so.
    const userId = typeof Item.userId === 'string' ? Item.userId : Item.subject === 'tenant' ? null : undefined;
    if (userId === undefined) return;
    const createdAt = String(Item.createdAt);
    const closed = await this.workOf(key.pk, keys.erasedSessionPrefix);
    await inParallel(closed, async (item) => {
      const scope = { tenant, sessionId: String(item.sessionId) };
      await this.sessions.finishErasure(scope, Number(item.life));
      await this.table.send(new DeleteCommand({ TableName: this.table.tableName, Key: { pk: item.pk, sk: item.sk } }));
    });
    // A session made just before the DELETE may have been missing from the list index, which
    // trails the table: what the list shows now of sessions made before the erasure goes too.
    const late = await this.userSessions(tenant, userId, createdAt);
    await inParallel(late, async ({ scope }) => {
      const life = await this.sessions.closeForErasure(scope);
      await this.sessions.finishErasure(scope, life);
    });
    const lateMemory = await this.closeMemory(tenant, erasureId, userId, createdAt);
    const namespaces = (await this.workOf(key.pk, keys.erasedNamespacePrefix)).map((item) => String(item.namespace).split('/'));
    await this.eraseMemoryPast(tenant, erasureId, namespaces, createdAt);
    // Only while running: a redelivered record that ran beside this one may have finished it.
    await conditionally(
      this.table.send(
        new UpdateCommand({
          TableName: this.table.tableName,
          Key: key,
          // The user's id goes with the rest: a finished erasure says what it erased, not whose.
          UpdateExpression: 'SET #status = :done, finishedAt = :now, #ttl = :ttl ADD sessions :late, memoryItems :lateMemory REMOVE userId',
          ConditionExpression: '#status = :running',
          ExpressionAttributeNames: { '#status': 'status', '#ttl': tableKeys.timeToLive },
          ExpressionAttributeValues: {
            ':done': 'done',
            ':running': 'running',
            ':now': new Date(this.table.now()).toISOString(),
            ':ttl': this.table.nowSeconds() + RECORD_TTL_SECONDS,
            ':late': late.length,
            ':lateMemory': lateMemory,
          },
        }),
      ),
    );
  }

  /**
   * The replaced versions of every item erased (its lives made before the erasure), the
   * tombstones themselves, and the namespace entries left with no item. (The change hook's
   * memory upkeep erases the history of each tombstone's record too, after any version it was
   * still keeping: the stream orders an item's records.)
   */
  private async eraseMemoryPast(tenant: string, erasureId: string, namespaces: readonly string[][], before: string): Promise<void> {
    for (const namespace of namespaces) {
      // Tombstones, and items that expired (a delete leaves them be; TTL would take them in 48 h).
      const nowSeconds = this.table.nowSeconds();
      const tombstones: string[] = [];
      await this.itemsOf(tenant, namespace, (item) => {
        const expired = typeof item[tableKeys.timeToLive] === 'number' && (item[tableKeys.timeToLive] as number) <= nowSeconds;
        if (item[KIND_ATTRIBUTE] === MEMORY_ITEM_KIND.deleted || (expired && String(item.createdAt) <= before))
          tombstones.push(String(item.sk).slice(keys.memoryKeyPrefix.length));
      });
      await inParallel(tombstones, async (key) => {
        await this.upkeep.eraseHistory(tenant, namespace, key, before);
        // Only while it is still a tombstone or expired: a put since is a new item.
        await conditionally(
          this.table.send(
            new DeleteCommand({
              TableName: this.table.tableName,
              Key: { pk: keys.memoryNamespace(tenant, namespace), sk: keys.memoryKey(key) },
              ConditionExpression: '#kind = :deleted OR #ttl <= :now',
              ExpressionAttributeNames: { '#kind': KIND_ATTRIBUTE, '#ttl': tableKeys.timeToLive },
              ExpressionAttributeValues: { ':deleted': MEMORY_ITEM_KIND.deleted, ':now': nowSeconds },
            }),
          ),
        );
      });
      if (!(await namespaceHasItems(this.table, tenant, namespace))) await forgetNamespace(this.table, tenant, namespace);
      await this.table.send(
        new DeleteCommand({
          TableName: this.table.tableName,
          Key: { pk: keys.erasure(tenant, erasureId), sk: keys.erasedNamespace(namespace) },
        }),
      );
    }
  }
}
