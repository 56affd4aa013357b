import { randomUUID } from 'node:crypto';
import { DeleteCommand, QueryCommand, UpdateCommand } from '@aws-sdk/lib-dynamodb';
import { forgetIfEmpty } from '../../core/memory/memory-changes.js';
import { KIND_ATTRIBUTE, MEMORY_ITEM_KIND } from '../table/item-kinds.js';
import * as keys from '../table/keys.js';
import { queryAll } from '../table/paging.js';
import { tableKeys } from '../table/table.js';
import { batchDelete, conditionally, type Item } from '../table/table-client.js';
import { ErasureCloser, inParallel, type OpenErasure } from './erasure-close.js';
import { DUE_NAMES, ERASURE_RUN_MS, erasureKey, RECORD_TTL_SECONDS } from './erasure-store.js';

/**
 * What the change hook does with an erasure (erasure-store.ts has the items): on every stream
 * record of it that is `closing` or `running`, it goes on from where it is, for a bounded
 * time, so that any size of user is erased in as many runs as it takes, and a run that dies
 * is followed by the stream's retry of its record. Closing is erasure-close.ts; then the
 * second step (`running`): it erases the sessions recorded (the deleter's erase and next life,
 * as `DELETE /v1/sessions/{sid}` does, only if the session is still closed at the recorded
 * life), goes once more over the user's list for a session the index had not shown yet,
 * erases each recorded namespace's tombstones and expired items with their kept versions, and
 * sets the erasure `done`, counting the sessions recorded and removing the user id; then its
 * records go (or, when the run died first, the stream's retry of its record deletes them). A
 * module of its own, so that the sessions group, which starts erasures, carries none of it.
 */

/**
 * Who runs an erasure: the change hook (on the stream's records of its item), the retention
 * sweep (an erasure whose runs stopped, streams/prune-sweep.ts), or the admin CLI's process (a
 * tenant's erasure, tenant-erasure.ts).
 */
export type ErasureRunner = 'hook' | 'sweep' | 'cli';

export class ErasureFinisher extends ErasureCloser {
  /**
   * One run of the change hook or the retention sweep: until `deadline` (its invocation's), for
   * `ERASURE_RUN_MS` at most, so that an erasure whose item no run has written for longer than
   * that and a margin has stopped (erasure-store.ts: it comes due on the retention index).
   */
  run(tenant: string, erasureId: string, runner: 'hook' | 'sweep', deadline?: number): Promise<void> {
    return this.finish(tenant, erasureId, Math.min(deadline ?? Number.POSITIVE_INFINITY, Date.now() + ERASURE_RUN_MS), 'done', runner);
  }

  /**
   * Goes on with the erasure until it is done (`closed`: only until closing is) or `deadline`
   * (epoch ms) has passed. Idempotent: run again, or beside another run, it finds what is left
   * by what is stored.
   *
   * The sessions it erases it holds under a name (session-delete.ts `claim`): the change hook's
   * runs all under the erasure's own (`erasure:<id>`), so that the stream's retry of a run that
   * died takes back at once what that run held (the stream brings one run of an erasure at a
   * time); any other run under a name of its own, for this run alone, since it may run beside
   * the hook's (a sweep's run brings the hook back; the CLI's runs beside it): two runs under
   * one name would both erase a session at once, and one could erase on after the other closed
   * its fence, in the session's next life.
   */
  async finish(
    tenant: string,
    erasureId: string,
    deadline = Date.now() + ERASURE_RUN_MS,
    until: 'closed' | 'done' = 'done',
    runner: ErasureRunner = 'hook',
  ): Promise<void> {
    const eraser = runner === 'hook' ? `erasure:${erasureId}` : `erasure:${erasureId}:${runner}:${randomUUID()}`;
    for (;;) {
      const item = await this.itemOf(tenant, erasureId);
      // Done by a run that died before its records went (the stream's retry of that run's record):
      // what is left of them goes now, or they would stay for their 30 days.
      if (item?.status === 'done') return this.dropRecords(tenant, erasureId, deadline, eraser);
      if (!item || (item.status !== 'closing' && item.status !== 'running')) return;
      if (until === 'closed' && item.status !== 'closing') return;
      // A user's erasure names the user; a tenant's (the admin CLI) says so.
      const userId = typeof item.userId === 'string' ? item.userId : item.subject === 'tenant' ? null : undefined;
      if (userId === undefined) return;
      const cursor = String(item.cursor ?? '');
      const erasure: OpenErasure = { tenant, erasureId, userId, createdAt: String(item.createdAt), cursor, deadline, eraser };
      if (item.status === 'closing') {
        await this.closeStep(erasure);
      } else if (await this.erase(erasure, deadline)) {
        return;
      }
      if (Date.now() >= deadline) {
        // Closing's own writes are stream records that bring the next run; erasing's are not: this one is.
        if (item.status === 'running') await this.nudge(erasure);
        return;
      }
    }
  }

  /** The second step; false when the deadline stopped it. */
  private async erase(erasure: OpenErasure, deadline: number): Promise<boolean> {
    const { tenant, erasureId } = erasure;
    const partition = keys.erasure(tenant, erasureId);
    if ((await this.eraseRecorded(tenant, erasureId, deadline, erasure.eraser)) === null) return false;
    // A session made just before the DELETE may have been missing from the list index, which
    // trails the table: what the list shows now of sessions made before the erasure goes too
    // (closed and recorded as closing does, erased by the next run).
    let late = 0;
    let list: string | undefined;
    do {
      const page = await this.closePage(erasure, list);
      late += page.closed;
      list = page.next;
    } while (list !== undefined);
    if (late > 0) return this.erase(erasure, deadline);
    const namespaces = (await this.workOf(partition, keys.erasedNamespacePrefix)).map((item) => String(item.namespace).split('/'));
    for (const namespace of namespaces) {
      if (!(await this.eraseMemoryPast(erasure, namespace, deadline))) return false;
    }
    if (erasure.userId !== null) {
      // The profile's tombstone (erasure-close.ts) goes, unless a profile was written since (by a
      // session given to the user after the erasure): only an item of a fence alone.
      await conditionally(
        this.table.send(
          new DeleteCommand({
            TableName: this.table.tableName,
            Key: { pk: keys.profile(tenant, erasure.userId), sk: keys.profileSort },
            ConditionExpression: 'attribute_not_exists(#version)',
            ExpressionAttributeNames: { '#version': 'version' },
          }),
        ),
      );
      // The next DELETE of the user starts an erasure of its own. Before `done`, which removes the
      // user's id from the erasure: a run that died after it would leave this item, which names
      // the user, with nothing left to say whose it is. (A DELETE between the two starts a new
      // erasure beside this one, which has nothing of the user left to close.)
      await conditionally(
        this.table.send(
          new DeleteCommand({
            TableName: this.table.tableName,
            Key: { pk: keys.userErasure(tenant, erasure.userId), sk: keys.userErasureSort },
            ConditionExpression: 'erasureId = :id',
            ExpressionAttributeValues: { ':id': erasureId },
          }),
        ),
      );
    }
    const records = await this.workOf(partition, keys.erasedSessionPrefix);
    // Only while running: a redelivered record that ran beside this one may have finished it.
    await conditionally(
      this.table.send(
        new UpdateCommand({
          TableName: this.table.tableName,
          Key: erasureKey(tenant, erasureId),
          // The user's id goes with the rest: a finished erasure says what it erased, not whose;
          // and its entry of the retention index: nothing of it is due any more.
          UpdateExpression: 'SET #status = :done, finishedAt = :now, #ttl = :ttl, sessions = :sessions REMOVE userId, #dpk, #dsk',
          ConditionExpression: '#status = :running',
          ExpressionAttributeNames: { '#status': 'status', '#ttl': tableKeys.timeToLive, ...DUE_NAMES },
          ExpressionAttributeValues: {
            ':done': 'done',
            ':running': 'running',
            ':now': new Date(this.table.now()).toISOString(),
            ':ttl': this.table.nowSeconds() + RECORD_TTL_SECONDS,
            ':sessions': records.length,
          },
        }),
      ),
    );
    // The records go after `done`, which counts them (each session once, however often a step
    // ran): deleted first, a run that died halfway would leave a retry fewer to count. A run that
    // dies before they are gone leaves the erasure done with records, and the stream's retry of
    // its record finds it so (`finish`): that run deletes them. So whichever run set `done`, or
    // this one found it set by a run beside it, they go the same way.
    await this.dropRecords(tenant, erasureId, deadline, erasure.eraser);
    return true;
  }

  /**
   * Erases the sessions the erasure recorded and has not erased yet; the records it read (all
   * erased now), or null when the deadline (or another eraser's hold) stopped it.
   */
  private async eraseRecorded(tenant: string, erasureId: string, deadline: number, eraser: string): Promise<Item[] | null> {
    const records = await this.workOf(keys.erasure(tenant, erasureId), keys.erasedSessionPrefix);
    let complete = true;
    let held = false;
    await inParallel(
      records.filter((record) => record.erased !== true),
      async (record) => {
        if (Date.now() >= deadline) {
          complete = false;
          return;
        }
        // A session larger than what is left of the run (or erased by another eraser meanwhile,
        // the change hook's run of a DELETE): recorded erased only once it is.
        const erasing = { deadline, eraser };
        if (!(await this.sessions.finishErasure({ tenant, sessionId: String(record.sessionId) }, Number(record.life), erasing))) {
          complete = false;
          held = true;
          return;
        }
        await this.table.send(
          new UpdateCommand({
            TableName: this.table.tableName,
            Key: { pk: record.pk, sk: record.sk },
            UpdateExpression: 'SET erased = :yes',
            ExpressionAttributeValues: { ':yes': true },
          }),
        );
      },
    );
    // Another eraser's hold ends within seconds: the run looks again a moment later (or its next run does).
    if (held && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 250));
    return complete ? records : null;
  }

  /**
   * The `S#` records of a done erasure (its `N#` records went with their namespaces' past,
   * before `done`). Normally each is erased already; one that is not was recorded by a run
   * beside the one that set `done` (a session the list index showed it late), and is erased
   * first, as that run would. Only the records read go: one recorded after the read is its
   * run's to erase and delete. When the deadline stops it, the run fails, for the stream to
   * retry (a done erasure makes no record that would bring another run).
   */
  private async dropRecords(tenant: string, erasureId: string, deadline: number, eraser: string): Promise<void> {
    const records = await this.eraseRecorded(tenant, erasureId, deadline, eraser);
    if (records === null) throw new Error(`the erasure ${erasureId} is done, but a session it recorded is not erased yet`);
    await batchDelete(
      this.table,
      records.map((record) => ({ pk: record.pk, sk: record.sk })),
    );
  }

  /**
   * A write of a running erasure that nothing reads: its stream record brings the next run (and
   * it moves the erasure's entry of the retention index on, past that run).
   */
  private async nudge(erasure: OpenErasure): Promise<void> {
    await conditionally(
      this.table.send(
        new UpdateCommand({
          TableName: this.table.tableName,
          Key: erasureKey(erasure.tenant, erasure.erasureId),
          UpdateExpression: 'SET #dpk = :dpk, #dsk = :dsk ADD runs :one',
          ConditionExpression: '#status = :running',
          ExpressionAttributeNames: { '#status': 'status', ...DUE_NAMES },
          ExpressionAttributeValues: { ':one': 1, ':running': 'running', ...this.dueValues(erasure) },
        }),
      ),
    );
  }

  /**
   * The replaced versions of every item of the namespace the erasure tombstoned (its lives made
   * before the erasure), the tombstones themselves, and expired items; then the namespace's
   * entry if it is left with no item, and its record. False when the deadline stopped it (what
   * it erased is gone; the rest is found again). (The change hook's memory upkeep erases the
   * history of each tombstone's record too, after any version it was still keeping: the stream
   * orders an item's records.)
   */
  private async eraseMemoryPast(erasure: OpenErasure, namespace: readonly string[], deadline: number): Promise<boolean> {
    const { tenant, erasureId, createdAt: before } = erasure;
    const nowSeconds = this.table.nowSeconds();
    const tombstones: string[] = [];
    await this.itemsOf(tenant, namespace, (item) => {
      const expired = typeof item[tableKeys.timeToLive] === 'number' && (item[tableKeys.timeToLive] as number) <= nowSeconds;
      if (item[KIND_ATTRIBUTE] === MEMORY_ITEM_KIND.deleted || (expired && String(item.createdAt) <= before))
        tombstones.push(String(item.sk).slice(keys.memoryKeyPrefix.length));
    });
    let complete = true;
    await inParallel(tombstones, async (key) => {
      if (Date.now() >= deadline) {
        complete = false;
        return;
      }
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
    if (!complete) return false;
    await forgetIfEmpty(this.upkeep, tenant, namespace);
    await this.table.send(
      new DeleteCommand({
        TableName: this.table.tableName,
        Key: { pk: keys.erasure(tenant, erasureId), sk: keys.erasedNamespace(namespace) },
      }),
    );
    return true;
  }

  /** Every item of a namespace's partition, live or a tombstone (its key, kind, creation and expiry). */
  private itemsOf(tenant: string, namespace: readonly string[], each: (item: Item) => void): Promise<void> {
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
