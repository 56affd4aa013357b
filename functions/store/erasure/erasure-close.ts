import { randomUUID } from 'node:crypto';
import { QueryCommand, TransactWriteCommand, UpdateCommand } from '@aws-sdk/lib-dynamodb';
import { userNamespace } from '../../core/erasure/erasure.js';
import { pathKey } from '../../core/memory/memory.js';
import { forgetIfEmpty } from '../../core/memory/memory-changes.js';
import type { ClosingTip } from '../../core/model/model.js';
import * as documentItem from '../documents/document-item.js';
import { namespaceEntry } from '../memory/memory-codecs.js';
import { deleteMemoryItem } from '../memory/memory-delete.js';
import { DynamoDbMemoryUpkeep } from '../memory/memory-upkeep-store.js';
import * as sessionItem from '../sessions/session-item.js';
import { listSessionIds } from '../sessions/session-list.js';
import { KIND_ATTRIBUTE, MEMORY_ITEM_KIND } from '../table/item-kinds.js';
import * as keys from '../table/keys.js';
import { queryAll } from '../table/paging.js';
import { tableKeys } from '../table/table.js';
import { batchGet, batchPut, conditionally, type Item } from '../table/table-client.js';
import { DUE_NAMES, DynamoDbErasureStore, erasureKey, RECORD_TTL_SECONDS } from './erasure-store.js';

/**
 * The first step of an erasure, the change hook's (erasure-store.ts has the items): closing
 * everything it covers, so that none of it is readable, in steps of bounded size. Each step
 * reads where the last one stopped from the erasure's `cursor`, does one page of work, and
 * moves the cursor on the condition that it is still where it read it (a step run twice, by a
 * redelivered record, moves it once). That write is a stream record, which drives the next
 * step. Every piece of work can be done again: closing a closed session joins its fence,
 * recording it again puts the same record, a tombstone the erasure made is signed with its id.
 *
 *   sessions  pages of the user's list (`?userId=`; a tenant's: the tenant's list): each
 *             session made at or before the erasure gets a delete's fence and an `S#` record
 *             with the life it closed (erasure-finish.ts erases it). The list names a closed
 *             session by its entries until it is erased, so a step that died before recording
 *             finds it again (closing, no item): recorded then. Pass after pass, until one
 *             records nothing (a session written during a pass moves ahead of its cursor; the
 *             next pass finds it); no pass begins before the list index has caught up with the
 *             erasure's time.
 *   memory    the user's namespaces (`users/<userId>` and below, never `users/<userId>0`), one
 *             at a time, recorded (`N#`), then their items a page at a time: each live item
 *             made at or before the erasure becomes the memory store's tombstone; counted by
 *             page, with the cursor.
 *   profile   replaced by its tombstone (a new fence alone, which a keyed commit that read
 *             the profile before fails on), counted when it held a document, in one
 *             transaction with the cursor; erasure-finish.ts deletes the tombstone when done.
 *
 * Then the count of sessions is that of the `S#` records, and the erasure is `running`: what
 * the `DELETE` waits for.
 */

/** Sessions read from the list per step. */
const SESSION_PAGE = 100;
/** Memory items read per step. */
const MEMORY_PAGE = 200;
/** How many sessions or memory items are closed or erased side by side. */
const PARALLEL = 16;
/** How far the list index may trail the table: no pass over the list begins sooner than this after the erasure. */
const INDEX_LAG_MS = 1_000;

/** Where closing is (the erasure's `cursor`, JSON text). */
interface Cursor {
  phase: 'sessions' | 'memory' | 'profile';
  /** Sessions: which pass over the list, the list's cursor, sessions recorded in this pass so far. */
  pass?: number;
  list?: string;
  found?: number;
  /** Memory: the namespace list's entry last finished, the namespace being closed and where in it; profile: `profile` once deleted. */
  after?: string;
  namespace?: string;
  item?: Item;
}

/** An erasure as a step reads it. */
export interface OpenErasure {
  tenant: string;
  erasureId: string;
  /** The user's; null: the whole tenant's. */
  userId: string | null;
  /** What was made at or before this (ISO) is erased. */
  createdAt: string;
  /** The cursor as read (the condition of moving it). */
  cursor: string;
  /** When the run ends (epoch ms): every write of the erasure's item moves its entry of the retention index past it. */
  deadline: number;
  /**
   * The name the run holds sessions' fences under (erasure-finish.ts): the change hook's runs
   * share one, any other run has its own.
   */
  eraser: string;
}

export class ErasureCloser extends DynamoDbErasureStore {
  /** The memory upkeep's ports: an emptied namespace is forgotten by its rule (memory-changes.ts `forgetIfEmpty`). */
  protected readonly upkeep = new DynamoDbMemoryUpkeep(this.table);

  /** One step of closing: moves the cursor on, or sets the erasure `running` when everything is closed. */
  protected async closeStep(erasure: OpenErasure): Promise<void> {
    const cursor = JSON.parse(erasure.cursor) as Cursor;
    if (cursor.phase === 'sessions') return this.sessionsStep(erasure, cursor);
    if (cursor.phase === 'memory') return this.memoryStep(erasure, cursor);
    return this.profileStep(erasure, cursor);
  }

  /** A page of the list: closes and records the sessions of it made at or before the erasure. */
  private async sessionsStep(erasure: OpenErasure, cursor: Cursor): Promise<void> {
    // A pass must not begin before the index could show every session made before the erasure.
    const due = Date.parse(erasure.createdAt) + INDEX_LAG_MS - this.table.now();
    if (cursor.list === undefined && due > 0) await new Promise((resolve) => setTimeout(resolve, due));
    const page = await this.closePage(erasure, cursor.list);
    const found = (cursor.found ?? 0) + page.closed;
    const next: Cursor =
      page.next !== undefined
        ? { phase: 'sessions', pass: cursor.pass ?? 1, list: page.next, found }
        : found > 0
          ? { phase: 'sessions', pass: (cursor.pass ?? 1) + 1 }
          : { phase: 'memory' };
    await this.moveCursor(erasure, next, {});
  }

  /**
   * Closes the sessions of a page of the list (`list`: its cursor) that are the erasure's and
   * not recorded yet, and records them; how many, and where the list goes on.
   */
  protected async closePage(erasure: OpenErasure, list: string | undefined): Promise<{ closed: number; next?: string }> {
    const { tenant, userId } = erasure;
    const page = await listSessionIds(this.table, tenant, {
      limit: SESSION_PAGE,
      ...(userId === null ? {} : { filter: { userId } }),
      ...(list === undefined ? {} : { cursor: list }),
    });
    const scopeOf = (sessionId: string) => ({ tenant, sessionId });
    const [items, records] = await Promise.all([
      batchGet(
        this.table,
        page.ids.map((sessionId) => sessionItem.key(scopeOf(sessionId))),
      ),
      batchGet(
        this.table,
        page.ids.map((sessionId) => ({ pk: keys.erasure(tenant, erasure.erasureId), sk: keys.erasedSession(sessionId) })),
      ),
    ]);
    const itemOf = new Map(items.map((item) => [String(item.sessionId), item]));
    const recorded = new Set(records.map((record) => String(record.sessionId)));
    const closed: Item[] = [];
    await inParallel(
      page.ids.filter((sessionId) => !recorded.has(sessionId)),
      async (sessionId) => {
        const item = itemOf.get(sessionId);
        let life: number;
        if (item) {
          // Its entry may trail a change of its user; made after the erasure, or given to the
          // user after it (a PATCH, `userAt`), it is not the erasure's.
          const since = item[sessionItem.USER_SINCE_ATTRIBUTE];
          if (userId !== null && (item.userId !== userId || (typeof since === 'string' && since > erasure.createdAt))) return;
          if (String(item.createdAt) > erasure.createdAt) return;
          // Null: given to another user since the list was read (a PATCH that won the race).
          const owner = userId === null ? null : { userId, before: erasure.createdAt, erasureId: erasure.erasureId };
          const closedLife = await this.sessions.closeForErasure(scopeOf(sessionId), owner);
          if (closedLife === null) return;
          life = closedLife;
        } else {
          // Closed by a step that died before recording it (or by a delete under way): closing still.
          const tip = await this.sessions.readTip(scopeOf(sessionId), { withState: false });
          if (tip.kind !== 'closing' || (tip as ClosingTip).since === null) return;
          life = tip.incarnation;
        }
        closed.push({
          pk: keys.erasure(tenant, erasure.erasureId),
          sk: keys.erasedSession(sessionId),
          sessionId,
          life,
          // Gone with the erasure's record, should the step that deletes it die.
          [tableKeys.timeToLive]: this.table.nowSeconds() + RECORD_TTL_SECONDS,
        });
      },
    );
    await batchPut(this.table, closed);
    return { closed: closed.length, ...(page.next === undefined ? {} : { next: page.next }) };
  }

  /** The next namespace of the user's, or a page of the one being closed. */
  private async memoryStep(erasure: OpenErasure, cursor: Cursor): Promise<void> {
    const { tenant, userId } = erasure;
    if (cursor.namespace === undefined) {
      const low = userId === null ? '' : pathKey(userNamespace(userId));
      const { Items = [] } = await this.table.send(
        new QueryCommand({
          TableName: this.table.tableName,
          KeyConditionExpression: userId === null ? 'pk = :pk' : 'pk = :pk AND sk BETWEEN :low AND :high',
          ExpressionAttributeValues:
            userId === null
              ? { ':pk': keys.memoryNamespaces(tenant) }
              : { ':pk': keys.memoryNamespaces(tenant), ':low': low, ':high': `${low}\x7f` },
          ProjectionExpression: 'pk, sk',
          ConsistentRead: true,
          Limit: 1,
          ...(cursor.after === undefined ? {} : { ExclusiveStartKey: { pk: keys.memoryNamespaces(tenant), sk: cursor.after } }),
        }),
      );
      const entry = Items[0];
      if (!entry) return this.moveCursor(erasure, { phase: 'profile' }, {});
      const namespace = namespaceEntry.namespaceOf(entry);
      // Recorded first: once it holds tombstones alone, the namespace list no longer names it.
      await batchPut(this.table, [
        { pk: keys.erasure(tenant, erasure.erasureId), sk: keys.erasedNamespace(namespace), namespace: namespace.join('/') },
      ]);
      return this.moveCursor(erasure, { ...cursor, namespace: namespace.join('/') }, {});
    }
    const namespace = cursor.namespace.split('/');
    const { Items = [], LastEvaluatedKey } = await this.table.send(
      new QueryCommand({
        TableName: this.table.tableName,
        KeyConditionExpression: 'pk = :pk AND begins_with(sk, :items)',
        ExpressionAttributeValues: { ':pk': keys.memoryNamespace(tenant, namespace), ':items': keys.memoryKeyPrefix },
        ExpressionAttributeNames: { '#kind': KIND_ATTRIBUTE },
        ProjectionExpression: 'pk, sk, #kind, createdAt, erasure',
        ConsistentRead: true,
        Limit: MEMORY_PAGE,
        ...(cursor.item === undefined ? {} : { ExclusiveStartKey: cursor.item }),
      }),
    );
    let count = 0;
    await inParallel(Items, async (item) => {
      const kind = item[KIND_ATTRIBUTE];
      // A tombstone this erasure made (a step that died before moving the cursor): counted again here, once.
      if (kind === MEMORY_ITEM_KIND.deleted && item.erasure === erasure.erasureId) count++;
      if (kind !== MEMORY_ITEM_KIND.item || String(item.createdAt) > erasure.createdAt) return;
      const key = String(item.sk).slice(keys.memoryKeyPrefix.length);
      const { outcome } = await deleteMemoryItem(this.table, { tenant, namespace, key }, { kind: 'none' }, null, erasure.erasureId);
      if (outcome === 'deleted') count++;
    });
    let next: Cursor;
    if (LastEvaluatedKey) {
      next = { ...cursor, item: LastEvaluatedKey };
    } else {
      // Its name leaves the namespace list at once too (the change hook would, a moment later).
      await forgetIfEmpty(this.upkeep, tenant, namespace);
      next = { phase: 'memory', after: namespaceEntry.key(tenant, namespace).sk as string };
    }
    await this.moveCursor(erasure, next, { memoryItems: count });
  }

  /**
   * The user's profile (none for a tenant: the admin CLI erases every profile with the rest),
   * then the count of sessions closed, and `running`.
   */
  private async profileStep(erasure: OpenErasure, cursor: Cursor): Promise<void> {
    const { tenant, userId } = erasure;
    if (userId !== null && cursor.after !== 'profile') {
      // The profile becomes a tombstone, an item of a new fence alone (document-item.ts): a keyed
      // commit that read the profile, or no profile, before it fails its condition on the fence
      // it read and reads again (finding its session closed), so nothing of the user is written
      // after this (the sessions it covers are closed already). Put and counted
      // together with the cursor's move, or neither: a step run again finds the tombstone and
      // counts none. Whether a document is there decides the count; a commit may change that
      // between two tries, a concurrent transaction cancel one.
      let holds = true;
      for (let tries = 0; ; tries++) {
        const codes = await this.tombstoneProfile(erasure, userId, holds);
        if (codes === null) return;
        // The cursor moved on: another step did this.
        if (codes[1] === 'ConditionalCheckFailed') break;
        if (tries >= 8) throw new Error(`the profile of the erasure ${erasure.erasureId} kept changing`);
        if (codes[0] === 'ConditionalCheckFailed') holds = !holds;
      }
    }
    const sessions = await this.sessionsRecorded(erasure);
    await conditionally(
      this.table.send(
        new UpdateCommand({
          TableName: this.table.tableName,
          Key: erasureKey(tenant, erasure.erasureId),
          UpdateExpression: 'SET #status = :running, sessions = :sessions, #dpk = :dpk, #dsk = :dsk REMOVE #cursor',
          ConditionExpression: '#status = :closing AND #cursor = :cursor',
          ExpressionAttributeNames: { '#status': 'status', '#cursor': 'cursor', ...DUE_NAMES },
          ExpressionAttributeValues: {
            ':running': 'running',
            ':closing': 'closing',
            ':sessions': sessions,
            ':cursor': erasure.cursor,
            ...this.dueValues(erasure),
          },
        }),
      ),
    );
  }

  /** Moves the cursor from where the step read it, adding `counts`; nothing when another step moved it first. */
  private async moveCursor(erasure: OpenErasure, next: Cursor, counts: Record<string, number>): Promise<void> {
    await conditionally(this.table.send(new UpdateCommand({ TableName: this.table.tableName, ...this.cursorMove(erasure, next, counts) })));
  }

  /**
   * The profile's tombstone put in place of what is there (`holds`: a document, counted; else
   * none or a fence alone) with the cursor's move; null when it landed, else the cancellation's
   * reason codes (the tombstone's, the cursor's).
   */
  private async tombstoneProfile(erasure: OpenErasure, userId: string, holds: boolean): Promise<string[] | null> {
    const key = { pk: keys.profile(erasure.tenant, userId), sk: keys.profileSort };
    try {
      await this.table.send(
        new TransactWriteCommand({
          TransactItems: [
            {
              Put: {
                TableName: this.table.tableName,
                Item: { ...key, [documentItem.FENCE_ATTRIBUTE]: randomUUID() },
                ConditionExpression: holds ? 'attribute_exists(#version)' : 'attribute_not_exists(#version)',
                ExpressionAttributeNames: { '#version': 'version' },
              },
            },
            {
              Update: {
                TableName: this.table.tableName,
                ...this.cursorMove(erasure, { phase: 'profile', after: 'profile' }, holds ? { documents: 1 } : {}),
              },
            },
          ],
        }),
      );
      return null;
    } catch (error) {
      if ((error as { name?: string }).name !== 'TransactionCanceledException') throw error;
      return ((error as { CancellationReasons?: Array<{ Code?: string }> }).CancellationReasons ?? []).map(
        (reason) => reason.Code ?? 'None',
      );
    }
  }

  private cursorMove(erasure: OpenErasure, next: Cursor, counts: Record<string, number>) {
    const names = Object.keys(counts);
    return {
      Key: erasureKey(erasure.tenant, erasure.erasureId),
      // The entry of the retention index moves on with the cursor (erasure-store.ts): due only if no run comes after this one.
      UpdateExpression: `SET #cursor = :next, #dpk = :dpk, #dsk = :dsk${names.length > 0 ? ` ADD ${names.map((name) => `${name} :${name}`).join(', ')}` : ''}`,
      ConditionExpression: '#status = :closing AND #cursor = :cursor',
      ExpressionAttributeNames: { '#status': 'status', '#cursor': 'cursor', ...DUE_NAMES },
      ExpressionAttributeValues: {
        ':next': JSON.stringify(next),
        ':closing': 'closing',
        ':cursor': erasure.cursor,
        ...this.dueValues(erasure),
        ...Object.fromEntries(names.map((name) => [`:${name}`, counts[name]])),
      },
    };
  }

  /** The values of `#dpk` and `#dsk` for a write of the erasure's item by the run `erasure` was read by. */
  protected dueValues(erasure: OpenErasure): Item {
    const due = this.dueAfterRun(erasure.tenant, erasure.erasureId, erasure.deadline);
    return { ':dpk': due.dpk, ':dsk': due.dsk };
  }

  /** How many sessions the erasure recorded (each once, however often a step ran). */
  protected async sessionsRecorded(erasure: OpenErasure): Promise<number> {
    let count = 0;
    let start: Item | undefined;
    do {
      const page = await this.table.send(
        new QueryCommand({
          TableName: this.table.tableName,
          KeyConditionExpression: 'pk = :pk AND begins_with(sk, :prefix)',
          ExpressionAttributeValues: { ':pk': keys.erasure(erasure.tenant, erasure.erasureId), ':prefix': keys.erasedSessionPrefix },
          Select: 'COUNT',
          ConsistentRead: true,
          ExclusiveStartKey: start,
        }),
      );
      count += page.Count ?? 0;
      start = page.LastEvaluatedKey;
    } while (start);
    return count;
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
