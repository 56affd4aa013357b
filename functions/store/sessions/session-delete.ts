import { DeleteCommand, GetCommand, PutCommand, QueryCommand, TransactWriteCommand, UpdateCommand } from '@aws-sdk/lib-dynamodb';
import { AgentStateError } from '../../core/kernel/errors.js';
import type { SessionScope, Tip } from '../../core/model/model.js';
import { entryOf, type FenceEntry, isFence, type LogEntry } from '../log/log-items.js';
import { type Deleted, INLINE_ERASE_MS, isAbandonedCopyItem, isAbandonedDelete, nextSlot } from '../log/session-writes.js';
import {
  FENCE_CAUSE_EXPIRED,
  FENCE_COPY_LIFE,
  FENCE_ERASURE,
  FENCE_HANDED_OFF,
  FENCE_HANDED_OFF_ATTRIBUTE,
  FENCE_HELD_UNTIL,
  FENCE_HOLDER,
  KIND_ATTRIBUTE,
  LOG_ITEM_KIND,
} from '../table/item-kinds.js';
import * as keys from '../table/keys.js';
import { type LogPosition, logPositionOf } from '../table/keys.js';
import { tableKeys } from '../table/table.js';
import { batchDelete, batchPut, conditionally, type Item, isConditionFailure, type TableClient } from '../table/table-client.js';
import * as sessionItem from './session-item.js';

/** How many times a delete tries to close a session that keeps being written. */
const CLOSE_ATTEMPTS = 20;
/**
 * How long a deleted session's tombstones stay: far longer than any write could have been in
 * flight when the delete began, so that no such write can land. Then TTL removes them (free).
 */
const TOMBSTONE_TTL_SECONDS = 24 * 60 * 60;
/**
 * How long after its deadline an eraser's hold on the fence lasts: an eraser starts no write
 * after its deadline, and the writes it started by then (one page's batches) land well within
 * this. Only then may another eraser take over.
 */
const HOLD_MARGIN_MS = 5_000;
/** The longest one eraser goes on before it hands on (a caller that gives no end: the admin CLI). */
const LONGEST_ERASE_MS = 60_000;
/** How many items of the session one page of the erase reads: its deadline is looked at between pages. */
const ERASE_PAGE_ITEMS = 250;
/** How long one run of the change hook erases at most (then it hands on to its next run): a short hold, a short wait for a retry of a run that died. */
const HOOK_RUN_MS = 20_000;

// The eraser that holds a closing fence, until when, and whether it is a copy's life (log-items.ts): only the holder erases and closes (`claim`).
const HOLDER = FENCE_HOLDER;
const HELD_UNTIL = FENCE_HELD_UNTIL;
const COPY_LIFE = FENCE_COPY_LIFE;
/** The eraser name of the change hook's runs (`finishHandedOff`). */
const HOOK_ERASER = 'hook';

/** An eraser's hold on a closing fence (`claim`). */
interface Hold {
  eraser: string;
  until: number;
}

/** What the holder of a fence needs to close it: whether it takes a TTL (a copy's life), and the followers it carries. */
interface Closing {
  copyLife: boolean;
  followersUntil: number | undefined;
  /** The session item was gone when this eraser read it (`erase`). */
  itemGone?: boolean;
}

/**
 * Deleting a session (API.md section 2: afterwards it reads as unknown, and stays so; nothing
 * written before the 204 is ever readable again).
 *
 * A write reads the tip and claims the log's next place with a conditional put. The delete
 * first closes the session: its fence takes the next place under the same condition, so every
 * write based on an earlier tip fails its own. Then it erases the session: every change of the
 * log becomes a tombstone (no content, removed by TTL a day later), every other item — the
 * session, the node index, runs, decision records — is deleted. Last, the fence says the
 * delete is done, and the session's next life begins above it: versions restart at 1 under
 * `V#<life + 1>#…`, where nothing of the old life is.
 *
 *   writer reads tip V#0#41#1 ──┐   delete puts fence V#0#41#2 ✓, tombstones V#0#…, deletes N#, S, …
 *   writer puts V#0#41#2 ✗ ─────┘   re-reads: closing → retries → closed → V#1#0#1, version 1
 *
 * The tombstones are what make the gap of the old design (a write that read the tip before
 * the delete and puts only after it) impossible: every place such a write could claim is
 * taken, by a tombstone or the fence, so its put fails and it retries in the new life, or
 * answers as a write to the session that is deleted. Its index puts, made before its claim,
 * land under the old life's keys, where no reader looks, and it deletes them once its claim
 * fails or a read shows the life closed (store/log/unclaimed-writes.ts).
 *
 * The erase goes on only until a deadline (a `DELETE`'s: well within its function's timeout):
 * a session too large to erase by then reads as unknown all the same, and its eraser hands the
 * rest to the change hook (`eraseHeld`; the hook's runs `finishHandedOff`, each as long as it
 * may, then hand on). One eraser at a time holds the fence (`claim`), so that none erases after
 * another closed the fence and the next life began; every step can run again. While held, the
 * fence is due on the retention sweep's index at the hold's end (`dueWhenHeld`): an eraser that
 * dies holding it leaves the erase to that sweep, not to whoever next asks for the id, if anyone does.
 *
 * Only a delete needs this module (a `DELETE`, or a write that finds a delete abandoned,
 * session-writes.ts `isAbandonedDelete`): session-store.ts imports it on first use, so it is a
 * chunk that no other cold start reads.
 */
export class SessionDeleter {
  constructor(
    private readonly table: TableClient,
    private readonly readTip: (scope: SessionScope) => Promise<Tip>,
  ) {}

  /**
   * Closes the session and erases every item of it, or what fits before `deadline` (epoch ms;
   * default `INLINE_ERASE_MS` from now), leaving the rest to the change hook. `found`: false
   * when it had none. With `sweep` (the change hook, when TTL removed the item of a session that
   * expired at `sweep.expiredAt`): carries out that expiry, if the session's log agrees it
   * expired, and nothing else; or erases the copy that never opened its session
   * (`sweep.unopened`, or a log that says so), with no expiry to record. With `life`: only
   * finishes a delete whose fence closes that life, and never closes the session itself.
   */
  async deleteSession(
    scope: SessionScope,
    sweep?: { expiredAt: string; unopened?: true },
    options: { deadline?: number; eraser?: string; life?: number } = {},
  ): Promise<Deleted> {
    const none: Deleted = { found: false, erased: true };
    const [tip, meta] = await Promise.all([
      this.readTip(scope),
      this.table.send(new GetCommand({ TableName: this.table.tableName, Key: sessionItem.key(scope), ConsistentRead: true })),
    ]);
    // Only a delete under way in that life is finished: once it is done, a write may have begun
    // the next life, which this eraser must not close (`finishClosed`, the retention sweep).
    if (options.life !== undefined && (tip.kind !== 'closing' || tip.incarnation !== options.life || !fenceOf(tip))) return none;
    // A copy's undo (session-copy.ts) erases only its own session: one erased as abandoned
    // meanwhile may be another's by now.
    if (scope.copy !== undefined && !isCopyOf(tip, meta.Item, scope.copy)) return none;
    // A session nothing was written to whose item TTL removed: only its expiry is left to record.
    const unwritten = tip.kind === 'empty' && tip.lifetime === undefined;
    // A copy never opened whose item TTL removed (it stopped): erased, with no expiry to record.
    const unopened = tip.kind === 'closing' && tip.unopened === true;
    // Another request's copy that has not opened its session: no session to anyone else, so a
    // `DELETE` of the id answers as for an unknown one and leaves it be while it may still run;
    // a copy that stopped is erased (as the id's next writer would) all the same.
    const othersCopy =
      scope.copy === undefined &&
      (unopened || (tip.kind === 'empty' && meta.Item !== undefined && sessionItem.isOthersUnopened(meta.Item, scope)));
    if (othersCopy && !sweep && !this.isAbandonedCopy(tip, meta.Item)) return none;
    // The life erased is a copy's that never opened (its undo, its erase once it stopped): no
    // write but the copy's own ever landed in it, and none of those is still on its way, so its
    // fence need not outlive the tombstones (it keeps no straggler from reusing the life).
    const copyLife = scope.copy !== undefined || othersCopy;
    if (sweep && !((tip.kind === 'closing' && tip.expiredAt !== undefined) || unwritten || unopened)) return none;
    if (tip.kind === 'empty' && !meta.Item && !sweep) return none;
    // Carrying out an expiry (API.md section 12): its fence says so, and becomes the session's
    // `session.expired` event (stream-images.ts). Known from the tip, or, with nothing in the
    // log, from the session item.
    const expiredAt =
      tip.kind === 'closing' ? tip.expiredAt : unwritten ? (itemExpiry(meta.Item, this.table.now()) ?? sweep?.expiredAt) : undefined;
    // (A copy's item that TTL removed, `sweep.unopened`, was never a session: nothing expired.)
    const expiry =
      expiredAt === undefined || sweep?.unopened ? undefined : { cause: FENCE_CAUSE_EXPIRED, expiredAt, ...lifeOf(tip, meta.Item) };
    // A hold must end: one given no end (the admin CLI's tenant erasure) erases for a minute at a time.
    const deadline = Math.min(options.deadline ?? Date.now() + INLINE_ERASE_MS, Date.now() + LONGEST_ERASE_MS);
    const hold: Hold = { eraser: options.eraser ?? crypto.randomUUID(), until: deadline + HOLD_MARGIN_MS };
    // A new fence is put held by this delete; another's (a delete closing it, or one that
    // stopped) is claimed, unless its eraser still holds it: then that one goes on, and this
    // delete is done (the session is unreadable already).
    const held = { [HOLDER]: hold.eraser, [HELD_UNTIL]: hold.until, ...dueWhenHeld(scope, hold), ...(copyLife ? { [COPY_LIFE]: 1 } : {}) };
    const closed = await this.close(scope, tip, { ...expiry, ...held });
    const found = !othersCopy;
    const holder = closed.joined ? closed.holder : undefined;
    const now = Date.now();
    // Held by another eraser (as the tip read it): it goes on, and this delete needs no write to know.
    if (holder && holder.eraser !== hold.eraser && holder.until >= now) return { found, erased: false };
    // Held under this eraser's own name by a run of it that died: still its own, no claim needed
    // (its time is that hold's, less the margin).
    const own = holder?.eraser === hold.eraser && holder.until - HOLD_MARGIN_MS > now;
    const closing = !closed.joined
      ? { copyLife, followersUntil: closed.followersUntil }
      : own
        ? { copyLife: closed.copyLife, followersUntil: closed.followersUntil }
        : await this.claim(scope, closed.position, hold);
    if (closing === 'closed') return { found, erased: true };
    if ('heldUntil' in closing) return { found, erased: false };
    const until = own && holder ? Math.min(deadline, holder.until - HOLD_MARGIN_MS) : deadline;
    const erased = await this.eraseHeld(scope, closed.position, hold, until, {
      copyLife: closing.copyLife || copyLife,
      followersUntil: closing.followersUntil,
      itemGone: meta.Item === undefined,
    });
    return { found, erased };
  }

  /**
   * The change hook's run for a fence whose erase was handed to it (`eraseHeld`): goes on with the
   * erase until `deadline` (or `HOOK_RUN_MS`), or, while another eraser holds the fence (a run
   * of the hook that died, whose retry this is; a `DELETE`), waits until it lets go or its hold
   * lapses. True once the fence is closed (or was), false when its time ran out first: the run
   * handed on (its record brings the next), or another still held the fence (the caller reports
   * the record failed, and the stream retries it).
   */
  async finishHandedOff(scope: SessionScope, deadline = Date.now() + HOOK_RUN_MS): Promise<boolean> {
    const eraseUntil = Math.min(deadline, Date.now() + HOOK_RUN_MS);
    for (;;) {
      const tip = await this.readTip(scope);
      const fence = fenceOf(tip);
      if (tip.kind !== 'closing' || !fence) return true;
      // One name for every run of the hook: the stream's retry of a run that died (at its timeout,
      // or killed) takes its hold back at once; runs of one session never overlap (one batch of a
      // shard at a time, its records in order).
      const hold: Hold = { eraser: HOOK_ERASER, until: eraseUntil + HOLD_MARGIN_MS };
      const closing = await this.claim(scope, fence.position, hold);
      if (closing === 'closed') return true;
      if ('heldUntil' in closing) {
        if (closing.heldUntil >= deadline) return false;
        await new Promise((resolve) => setTimeout(resolve, Math.max(0, closing.heldUntil - Date.now()) + 50));
        continue;
      }
      await this.eraseHeld(scope, fence.position, hold, eraseUntil, closing);
      return true;
    }
  }

  /** Whether another's copy not opened yet (its tip, or its item when it wrote no change) stopped: its request is over. */
  private isAbandonedCopy(tip: Tip, item: Item | undefined): boolean {
    return tip.kind === 'closing' ? isAbandonedDelete(tip, this.table.now()) : isAbandonedCopyItem(item ?? {}, this.table.now());
  }

  /**
   * The first step of a user's erasure (API.md section 12, erasure/erasure-store.ts): closes the
   * session at once, as a delete does, so that it reads as unknown from the erasure's `202`;
   * the change hook erases it later (`finishClosed`). The life it closed; a delete already
   * closing it is joined at its own fence. `userId`: the user whose erasure it is; null for a
   * whole tenant's erasure, which finds the sessions it closed again by their items (the
   * tenant's list), so it keeps them.
   *
   * A user's erasure closes the session only while it is that user's, and was since `before`
   * (the erasure's start: a session given to the user later is, like one made later, not the
   * erasure's): the fence and the delete of the item go in one transaction, on the condition
   * that the item says so. A `PATCH` that gives the session to another user claims the log's
   * places too, in the transaction that changes the item: whichever comes first, the other
   * fails. So either the session is erased (and the `PATCH` answers 404), or it is the other
   * user's and left alone (null), never a session of the erased user left readable or another
   * user's erased.
   */
  async closeOnly(scope: SessionScope, owner: Owner | null): Promise<number | null> {
    const tip = await this.readTip(scope);
    if (owner === null) return (await this.close(scope, tip, undefined)).position.incarnation;
    // Held by nobody, the fence is due on the retention sweep's index at once, and names the
    // erasure: should the erasure's runs stop before they erase it (a run killed, its stream
    // record given up), the sweep finishes the erase, and marks the erasure's record of it, as
    // it does a dead DELETE's. The erasure's own first claim moves the entry to its hold's end.
    const due = { ...dueAt(scope, this.table.now()), [FENCE_ERASURE]: owner.erasureId };
    const closed = await this.close(scope, tip, due, owner);
    if (closed === null) return null;
    // Lists show a session by its item (session-list.ts `sessionsOf`), not by its tip, so no
    // list may show the session's user or metadata after the erasure's 202: joined at another
    // delete's fence, the erasure deletes the item now all the same. (Its entries in the user's
    // list stay until it is erased: the erasure finds it by them.)
    if (closed.joined) await this.table.send(new DeleteCommand({ TableName: this.table.tableName, Key: sessionItem.key(scope) }));
    return closed.position.incarnation;
  }

  /**
   * Erases a session `closeOnly` closed in `life`, if it is still closing there: once it is
   * not, that delete is done (a write that found it abandoned finished it) and the session's
   * next life is not the erasure's to touch. False when the erase goes on (past `deadline`, or
   * held by another eraser). `eraser`: the erasure's name, the same in each of its runs, so that
   * a run takes back at once what a run of it that died held.
   */
  async finishClosed(
    scope: SessionScope,
    life: number,
    options: { deadline?: number; eraser?: string; markErasure?: true } = {},
  ): Promise<boolean> {
    const tip = await this.readTip(scope);
    const fence = fenceOf(tip);
    if (tip.kind !== 'closing' || tip.incarnation !== life || !fence) return true;
    const { erased } = await this.deleteSession(scope, undefined, { deadline: options.deadline, eraser: options.eraser, life });
    // The retention sweep's erase of a session a user's erasure closed: its record says so, as
    // the erasure's run would have it (erasure-finish.ts `eraseRecorded`), so that a run of that
    // erasure, if one comes, has nothing left to do for it. Never a record that is gone (the
    // erasure done, its records deleted) or was never put (its step died first).
    if (erased && options.markErasure && fence.erasure !== undefined) {
      await conditionally(
        this.table.send(
          new UpdateCommand({
            TableName: this.table.tableName,
            Key: { pk: keys.erasure(scope.tenant, fence.erasure), sk: keys.erasedSession(scope.sessionId) },
            UpdateExpression: 'SET erased = :yes',
            ConditionExpression: 'attribute_exists(pk) AND life = :life',
            ExpressionAttributeValues: { ':yes': true, ':life': life },
          }),
        ),
      );
    }
    return erased;
  }

  /**
   * Puts the delete's fence (with `extra`: its expiry, its eraser's hold) where the next change would go, with that change's condition; a
   * write that wins the race first makes it read the tip again. A delete already closing the
   * session (another one, or one that stopped halfway) is joined at its own fence. With
   * `owner` (a user's erasure, `closeOnly`), the session item goes with the fence, on the
   * condition that it names that user since `before`; null when it does not (or is gone) and
   * nobody else is closing the session.
   */
  private async close(scope: SessionScope, first: Tip, extra: Item | undefined): Promise<Closed>;
  private async close(scope: SessionScope, first: Tip, extra: Item | undefined, owner: Owner): Promise<Closed | null>;
  private async close(scope: SessionScope, first: Tip, extra: Item | undefined, owner?: Owner): Promise<Closed | null> {
    let tip = first;
    for (let attempt = 1; ; attempt++) {
      const closing = fenceOf(tip);
      if (tip.kind === 'closing' && closing)
        return {
          position: closing.position,
          joined: true,
          followersUntil: closing.followersUntil,
          ...(closing.holder ? { holder: closing.holder } : {}),
          copyLife: closing.copyLife === true,
        };
      const { position, claim } = nextSlot(tip, { fence: true });
      // The fence keeps the followers the life had: the session id's next life carries them on.
      const followers = tip.followersUntil === undefined ? {} : { f: tip.followersUntil };
      const fence = { ...fenceItem(scope, position, new Date(this.table.now()).toISOString(), 'closing'), ...followers, ...extra };
      try {
        if (owner === undefined) {
          await this.table.send(new PutCommand({ TableName: this.table.tableName, Item: fence, ...claim }));
        } else {
          await this.table.send(
            new TransactWriteCommand({
              TransactItems: [
                { Put: { TableName: this.table.tableName, Item: fence, ...claim } },
                {
                  Delete: {
                    TableName: this.table.tableName,
                    Key: sessionItem.key(scope),
                    ConditionExpression: `userId = :owner AND (attribute_not_exists(${sessionItem.USER_SINCE_ATTRIBUTE}) OR ${sessionItem.USER_SINCE_ATTRIBUTE} <= :before)`,
                    ExpressionAttributeValues: { ':owner': owner.userId, ':before': owner.before },
                  },
                },
              ],
            }),
          );
        }
        return { position, joined: false, followersUntil: tip.followersUntil, copyLife: extra?.[COPY_LIFE] !== undefined };
      } catch (error) {
        const refused = claimRefusal(error);
        // The item names another user now (or is gone): not this erasure's, unless a delete is
        // closing the session (then it is joined, above, once the tip is read again).
        if (refused === 'item') {
          tip = await this.readTip(scope);
          if (tip.kind === 'closing') continue;
          return null;
        }
        // A write took the place first (or the SDK retried our own landed put: the next read
        // sees our fence). Writes are short; a session written faster than it can be closed
        // for this long is refused rather than deleted halfway.
        if (refused === null || attempt >= CLOSE_ATTEMPTS) {
          throw refused !== null
            ? new AgentStateError('conflict', 'the session is changing too fast to delete; try again', { attempts: attempt })
            : error;
        }
      }
      tip = await this.readTip(scope);
    }
  }

  /**
   * Claims a closing fence for `hold`'s eraser: while no other eraser holds it (or its hold
   * lapsed; or it is the same eraser's, by name: a run of it that died). What closing it takes; `closed` when it is not closing (any more); `heldUntil` when
   * another eraser holds it. A claim takes back a hand-off (`eraseHeld`), so its record is the
   * hook's only while nobody has gone on since.
   */
  private async claim(scope: SessionScope, fence: LogPosition, hold: Hold): Promise<Closing | 'closed' | { heldUntil: number }> {
    try {
      const { Attributes = {} } = await this.table.send(
        new UpdateCommand({
          TableName: this.table.tableName,
          Key: { pk: keys.session(scope), sk: keys.logEntry(fence) },
          UpdateExpression: `SET ${HOLDER} = :eraser, ${HELD_UNTIL} = :until, #dpk = :dpk, #dsk = :dsk REMOVE ${FENCE_HANDED_OFF_ATTRIBUTE}`,
          ConditionExpression: `fence = :closing AND (attribute_not_exists(${HELD_UNTIL}) OR ${HELD_UNTIL} < :now OR ${HOLDER} = :eraser)`,
          ExpressionAttributeNames: DUE_NAMES,
          ExpressionAttributeValues: {
            ':eraser': hold.eraser,
            ':until': hold.until,
            ':closing': 'closing',
            ':now': Date.now(),
            ':dpk': keys.pruneDue(keys.pruneDueShard(scope)),
            ':dsk': keys.pruneDueAt(hold.until),
          },
          ReturnValues: 'ALL_NEW',
          ReturnValuesOnConditionCheckFailure: 'ALL_OLD',
        }),
      );
      return { copyLife: Attributes[COPY_LIFE] !== undefined, followersUntil: typeof Attributes.f === 'number' ? Attributes.f : undefined };
    } catch (error) {
      if (!isConditionFailure(error)) throw error;
      // The old item comes in wire format ({S: …}) from the service, whatever the client.
      const old = error.Item as Record<string, { S?: string; N?: string } | string | number> | undefined;
      const text = (value: unknown) =>
        typeof value === 'object' && value !== null ? ((value as { S?: string; N?: string }).S ?? (value as { N?: string }).N) : value;
      if (text(old?.fence) !== 'closing') return 'closed';
      return { heldUntil: Number(text(old?.[HELD_UNTIL])) };
    }
  }

  /**
   * The erase, by the eraser that holds the fence, until `deadline`: then, done, it closes the
   * fence (the next life begins); not done, it hands the rest to the change hook. Whether it
   * closed it. Either only while it still holds it: an eraser that overran its hold leaves the
   * fence to the one that took over.
   */
  private async eraseHeld(scope: SessionScope, fence: LogPosition, hold: Hold, deadline: number, closing: Closing): Promise<boolean> {
    const key = { pk: keys.session(scope), sk: keys.logEntry(fence) };
    const holder = { ':eraser': hold.eraser };
    const handOff = () =>
      conditionally(
        this.table.send(
          new UpdateCommand({
            TableName: this.table.tableName,
            Key: key,
            UpdateExpression: `SET ${FENCE_HANDED_OFF_ATTRIBUTE} = :hook REMOVE ${HOLDER}, ${HELD_UNTIL}`,
            ConditionExpression: `${HOLDER} = :eraser`,
            ExpressionAttributeValues: { ...holder, ':hook': FENCE_HANDED_OFF },
          }),
        ),
      );
    let erased: boolean;
    try {
      erased = await this.erase(scope, fence, deadline, closing.itemGone === true);
    } catch (error) {
      // A step that failed (DynamoDB throttling or unavailable past the SDK's retries) answers
      // the request with its error, but must not leave the erase to whoever writes the id next,
      // if anyone does: a retried DELETE would find the hold still live and answer 204 without
      // erasing. So the rest goes to the change hook, as when time runs out; if even that write
      // fails, the hold lapses and the next DELETE or write of the id takes the erase on.
      await handOff().catch(() => false);
      throw error;
    }
    if (!erased) {
      await handOff();
      return false;
    }
    // The fence leaves the retention sweep's index with its hold: nothing of it is due any more.
    const done = `REMOVE ${HOLDER}, ${HELD_UNTIL}, ${COPY_LIFE}, ${FENCE_HANDED_OFF_ATTRIBUTE}, ${FENCE_ERASURE}, #dpk, #dsk`;
    return conditionally(
      this.table.send(
        new UpdateCommand({
          TableName: this.table.tableName,
          Key: key,
          ConditionExpression: `${HOLDER} = :eraser`,
          // The fence itself stays, with no TTL: it says which life comes next. Were it to expire,
          // the session would start over at life 0, where a write that was in flight during the
          // delete may have put its node index (under life 0's keys, after the erase read them).
          // A copy's life has no such writes: its fence goes with its tombstones (or once the
          // followers it carries have gone), and the id's next life is the copy's again.
          ...(closing.copyLife
            ? {
                UpdateExpression: `SET fence = :closed, #ttl = :ttl ${done}`,
                ExpressionAttributeNames: { '#ttl': tableKeys.timeToLive, ...DUE_NAMES },
                ExpressionAttributeValues: {
                  ...holder,
                  ':closed': 'closed',
                  ':ttl': Math.max(this.table.nowSeconds() + TOMBSTONE_TTL_SECONDS, closing.followersUntil ?? 0),
                },
              }
            : {
                UpdateExpression: `SET fence = :closed ${done}`,
                ExpressionAttributeNames: DUE_NAMES,
                ExpressionAttributeValues: { ...holder, ':closed': 'closed' },
              }),
        }),
      ),
    );
  }

  /**
   * Erases the session up to the fence, page by page, until `deadline`: the session item first
   * (no list shows the session from then on), then every change of the log becomes a tombstone
   * and every other item goes. True when nothing is left. Can run again, from anywhere: a
   * tombstone is skipped, what is gone is not read again.
   *
   * `itemGone`: the eraser's own consistent read, before it held the fence, found no session
   * item (an erasure's closing deleted it; an earlier eraser did): then that first delete is
   * skipped. It is a write each eraser would otherwise repeat (a user's erasure resumes each of
   * its sessions in every run), and it guards nothing the pages do not: the item lives in the
   * session's partition, which the pages read and delete, so one put after that read (a create
   * that read the tip before the fence) fares as one put after the first delete always did.
   */
  private async erase(scope: SessionScope, fence: LogPosition, deadline: number, itemGone: boolean): Promise<boolean> {
    if (!itemGone) await this.table.send(new DeleteCommand({ TableName: this.table.tableName, Key: sessionItem.key(scope) }));
    const fenceKey = keys.logEntry(fence);
    let start: Item | undefined;
    do {
      if (Date.now() >= deadline) return false;
      const createdAt = new Date(this.table.now()).toISOString();
      const expiresAt = this.table.nowSeconds() + TOMBSTONE_TTL_SECONDS;
      const { Items = [], LastEvaluatedKey } = await this.table.send(
        new QueryCommand({
          TableName: this.table.tableName,
          KeyConditionExpression: 'pk = :pk',
          ExpressionAttributeValues: { ':pk': keys.session(scope) },
          ProjectionExpression: 'pk, sk, #kind',
          ExpressionAttributeNames: { '#kind': KIND_ATTRIBUTE },
          ExclusiveStartKey: start,
          Limit: ERASE_PAGE_ITEMS,
          ConsistentRead: true,
        }),
      );
      const tombstones: Item[] = [];
      const gone: Item[] = [];
      for (const item of Items) {
        const sk = String(item.sk);
        const position = logPositionOf(sk);
        if (!position) {
          gone.push({ pk: item.pk, sk });
        } else if (sk !== fenceKey && item[KIND_ATTRIBUTE] !== LOG_ITEM_KIND.tombstone) {
          tombstones.push({ ...fenceItem(scope, position, createdAt), [tableKeys.timeToLive]: expiresAt });
        }
      }
      await batchPut(this.table, tombstones);
      await batchDelete(this.table, gone);
      start = LastEvaluatedKey;
    } while (start);
    return true;
  }
}

// ---- fences and tombstones: written by a delete alone (log-items.ts reads them back) ----------------

/** Whether the session at `tip` (its item `item`) is the one copy `copy` is writing and has not opened. */
function isCopyOf(tip: Tip, item: Item | undefined, copy: string): boolean {
  const entry = tip.kind === 'closing' ? null : entryOf(tip);
  if (entry?.carried.cp !== undefined) return entry.carried.cp === copy;
  return tip.kind === 'empty' && item?.[sessionItem.COPY_ATTRIBUTE] === copy;
}

/** Who the expired session belonged to and how far it got, for its event: as its tip carried it, or its item. */
function lifeOf(tip: Tip, item: Item | undefined): Item {
  const entry = entryOf(tip);
  if (entry) return { agentId: entry.carried.ag, userId: entry.carried.u, lastVersion: entry.carried.v };
  return { agentId: item?.agentId ?? null, userId: item?.userId ?? null, lastVersion: 0 };
}

/** When a session item says its session expired (ISO), if it did by `nowMs`. */
function itemExpiry(item: Item | undefined, nowMs: number): string | undefined {
  const expires = item?.[sessionItem.EXPIRES_ATTRIBUTE];
  return typeof expires === 'number' && expires <= nowMs ? new Date(expires).toISOString() : undefined;
}

/** The user whose erasure closes a session, and since when the session must have been theirs; the erasure. */
interface Owner {
  userId: string;
  before: string;
  erasureId: string;
}

/** Where a delete's fence is, and whether it was another delete's (joined) rather than this one's. */
interface Closed {
  position: LogPosition;
  joined: boolean;
  /** The followers its fence carries on (epoch seconds; `Carried.f`). */
  followersUntil: number | undefined;
  /** Joined: the eraser that holds the fence, as the tip read it. */
  holder?: { eraser: string; until: number };
  /** Whether the fence is a copy's life's (`COPY_LIFE`). */
  copyLife: boolean;
}

/**
 * Why a fence's claim failed: its place was taken (`place`: a write, or another transaction on
 * the same items), the session item's condition (`item`), or something else (null).
 */
function claimRefusal(error: unknown): 'place' | 'item' | null {
  if (isConditionFailure(error)) return 'place';
  const name = (error as { name?: string }).name;
  if (name === 'TransactionConflictException') return 'place';
  if (name !== 'TransactionCanceledException') return null;
  const codes = ((error as { CancellationReasons?: Array<{ Code?: string }> }).CancellationReasons ?? []).map((reason) => reason.Code);
  if (codes[1] === 'ConditionalCheckFailed') return 'item';
  return codes[0] === 'ConditionalCheckFailed' || codes.includes('TransactionConflict') ? 'place' : null;
}

/** The attribute names of an entry of the retention index `byPruneDue` (prune-due.ts). */
const DUE_NAMES = { '#dpk': tableKeys.pruneDueIndex.partitionKey, '#dsk': tableKeys.pruneDueIndex.sortKey };

/**
 * What a closing fence carries while an eraser holds it: an entry of the retention index, due
 * when the hold ends. An eraser that dies holding it (its function killed, past its timeout)
 * leaves nobody to go on but the next request of the id, if one ever comes; the retention
 * sweep finds the entry within a minute of the hold's end instead, and finishes the erase
 * (prune-due.ts, streams/prune-sweep.ts). Each claim moves it to its own hold's end; closing
 * the fence removes it. So it costs no request of its own: an index write with the fence's put
 * and one with its close.
 */
function dueWhenHeld(scope: SessionScope, hold: Hold): Item {
  return dueAt(scope, hold.until);
}

/** A closing fence's entry of the retention index, due at `dueMs`. */
function dueAt(scope: SessionScope, dueMs: number): Item {
  return {
    [tableKeys.pruneDueIndex.partitionKey]: keys.pruneDue(keys.pruneDueShard(scope)),
    [tableKeys.pruneDueIndex.sortKey]: keys.pruneDueAt(dueMs),
  };
}

/** The fence of a closing tip. */
function fenceOf(tip: Tip): FenceEntry | null {
  const entry = tip.log as LogEntry | FenceEntry | undefined;
  return entry && isFence(entry) ? entry : null;
}

/** A delete's fence at `position` (closing: its delete is erasing), or a tombstone over an erased change. */
export function fenceItem(scope: SessionScope, position: LogPosition, createdAt: string, fence?: 'closing' | 'closed'): Item {
  return {
    pk: keys.session(scope),
    sk: keys.logEntry(position),
    [KIND_ATTRIBUTE]: LOG_ITEM_KIND.tombstone,
    createdAt,
    ...(fence ? { fence } : {}),
  };
}
