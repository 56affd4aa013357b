import type { JsonObject } from '../../core/json/json.js';
import type { Lifetime } from '../../core/model/lifetime.js';
import type { ClosingTip, SessionScope, Tip } from '../../core/model/model.js';
import { type SessionSettings, StaleTipError } from '../../core/model/ports.js';
import * as sessionItem from '../sessions/session-item.js';
import type { LogPosition } from '../table/keys.js';
import * as keys from '../table/keys.js';
import { tableKeys } from '../table/table.js';
import { conditions, type TransactItem } from '../table/table-client.js';
import { entryOf, isProvisional, type LogEntry, newWriteId, nextPosition } from './log-items.js';

/**
 * The two pieces every write into a session is made of, whichever store sends it: the claim
 * of the log's next place (a change, a delete's fence, the guard of a documents-only commit)
 * and the move of the session's activity in a transaction.
 */

/**
 * A fence older than this belongs to a delete that stopped (a function past its timeout never
 * comes back): the next write finishes that delete (session-delete.ts). Longer than any
 * request may run.
 */
const ABANDONED_DELETE_MS = 60_000;

/**
 * Whether the delete that is closing the session at `tip` stopped halfway, so that a write must
 * finish it. A copy not opened yet (`tip.unopened`) counts so once nothing of it was written for
 * as long: its request is over, and the copy with it.
 */
export function isAbandonedDelete(tip: ClosingTip, now: number): boolean {
  // An expired session is closed by its clock, not by a delete: nobody else erases it.
  if (tip.expiredAt !== undefined) return true;
  return tip.since !== null && now - Date.parse(tip.since) > ABANDONED_DELETE_MS;
}

/**
 * Whether a session item is that of a copy that stopped before its first change of the log (an
 * item marked unopened, made longer ago than a request may run): a writer of the id erases it.
 */
export function isAbandonedCopyItem(item: Record<string, unknown>, now: number): boolean {
  return typeof item[sessionItem.COPY_ATTRIBUTE] === 'string' && now - Date.parse(String(item.createdAt)) > ABANDONED_DELETE_MS;
}

/**
 * How long an erase goes on in the request that closed the session (or found it closing) when
 * it is given no deadline: a write that finishes an abandoned delete, a session made over one.
 * Well within the route functions' 20 s (functions/http/contract/routes.ts `ROUTE_TIMEOUT_MS`).
 */
export const INLINE_ERASE_MS = 10_000;

/**
 * What a `DELETE` keeps of its function's remaining time for what follows its erase: the
 * hand-off to the change hook and the answer. With the route functions' 20 s, it erases for
 * about 12 s (the first steps, reads and the fence, take milliseconds).
 */
export const ERASE_RESERVE_MS = 8_000;

/**
 * What a delete did (session-delete.ts): whether there was a session to delete (`found`), and
 * whether its erase is done (`erased`: the fence is closed, the next life may begin) or goes on
 * (it ran out of its time and handed the rest to the change hook, or another eraser holds it).
 */
export interface Deleted {
  found: boolean;
  erased: boolean;
}

/** How a write finishes a delete that stopped halfway (or carries out an expiry), and how it knows one did. */
export interface AbandonedDeletes {
  isAbandoned(tip: ClosingTip): boolean;
  /**
   * Closes the session and erases what fits before `deadline` (epoch ms; default: the deleter's
   * budget), session-delete.ts; `sweep`: carries out an expiry only.
   */
  deleteSession(scope: SessionScope, sweep?: { expiredAt: string; unopened?: true }, options?: { deadline?: number }): Promise<Deleted>;
}

/**
 * A session's activity (`updatedAt`, its place in the sessions list) moves at most this often,
 * whatever writes it: each move is a delete and a put in the activity index, whose partitions
 * the tenant's conversations share (API.md section 14: no cost per turn there), and the list
 * may trail the latest write by up to 30 s (API.md section 2): a move due at this age, made by
 * the next write or the change hook a moment later, keeps it within that.
 */
export const ACTIVITY_EVERY_MS = 20_000;

/** The condition parts of a write that claims the log's next place (or a lone mark's, `loneMarkClaim`). */
export interface SlotClaim {
  ConditionExpression: string;
  ExpressionAttributeValues?: Record<string, unknown>;
}

/**
 * The place the next change after `tip` goes to, and the condition that claims it: the place
 * must still be free. Every writer of the log (a change, a delete's fence, the guard of a
 * documents-only commit) claims it this way, so any two that read the same tip cannot both
 * succeed. Nothing claims a place in a session that is being deleted: the writer re-reads.
 */
export function nextSlot(tip: Tip, options: { fence?: boolean } = {}): { position: LogPosition; key: string; claim: SlotClaim } {
  // Only the fence of the delete that carries out an expiry (or erases a copy not opened) is put
  // after an expired (or unopened) change.
  const fenceOfExpiry = options.fence === true && tip.kind === 'closing' && (tip.expiredAt !== undefined || tip.unopened === true);
  if (tip.kind === 'closing' && !fenceOfExpiry) throw new StaleTipError('the session is being deleted');
  const position = nextPosition(tip);
  return { position, key: keys.logEntry(position), claim: { ConditionExpression: conditions.itemIsNew } };
}

/**
 * A follow's mark that is its life's only change so far (`Carried.fo`: a subscription to a
 * session never written, or deleted), or null. Such a mark is the one change of the log that no
 * write of the session made: left there, a subscription to any id would make an item that no
 * lifetime, list or delete of a session ever reaches (API.md section 12). So it carries a TTL
 * (the table's, until its own `f`: when every follower it stands for has gone), is moved on in
 * its own place by a later follow (`loneMarkClaim`) rather than joined by a second mark, and
 * becomes part of the life, TTL removed, in the transaction of the life's first change
 * (`loneMarkJoins`). Until then it may vanish at any moment, and the log reads as never
 * written again: a writer that read it fails the condition of `loneMarkJoins` and reads again.
 */
export function loneMarkOf(tip: Tip): LogEntry | null {
  const entry = tip.kind === 'closing' ? null : (tip.log as LogEntry | undefined);
  // (Every mark has a `writeId`, which its claims name; one without would be followed as before.)
  return entry && !('closing' in entry) && entry.carried.fo === 1 && typeof entry.item.writeId === 'string' ? entry : null;
}

/**
 * The claim of a follow that moves a lone mark on (`loneMarkOf`): its own place, while it is
 * still the very item read. Once the life's first change took it into the life
 * (`loneMarkJoins` gives it another `writeId`), or TTL removed it, the follow reads again.
 */
export function loneMarkClaim(mark: LogEntry): { position: LogPosition; claim: SlotClaim } {
  return {
    position: mark.position,
    claim: { ConditionExpression: 'writeId = :mark', ExpressionAttributeValues: { ':mark': mark.item.writeId } },
  };
}

/**
 * The part of a life's first change that takes the lone mark before it into the life: its TTL
 * goes (the life's delete erases it, as every change), and its `writeId` changes, so that a
 * follow that read it before fails `loneMarkClaim` and follows the life instead. On the
 * condition that it is still the item read: a mark that TTL removed makes the change read again.
 * `passed`: the change is provisional itself (a decision's lease, `provisionalOf`), so the mark
 * keeps its TTL; only its `writeId` changes, for the same follows.
 */
export function loneMarkJoins(
  tableName: string,
  scope: SessionScope,
  mark: LogEntry,
  options: { passed?: boolean } = {},
): NonNullable<TransactItem['Update']> {
  const claim = loneMarkClaim(mark).claim;
  return {
    TableName: tableName,
    Key: { pk: keys.session(scope), sk: keys.logEntry(mark.position) },
    UpdateExpression: options.passed ? 'SET writeId = :joined' : 'SET writeId = :joined REMOVE #ttl',
    ConditionExpression: claim.ConditionExpression,
    ...(options.passed ? {} : { ExpressionAttributeNames: { '#ttl': tableKeys.timeToLive } }),
    ExpressionAttributeValues: { ...claim.ExpressionAttributeValues, ':joined': newWriteId() },
  };
}

/**
 * How long a provisional change outlives what it stands for (a lease's end, a release): long
 * enough that the change after it, made within a request, never needs to check it is still
 * there (`provisionalCheck`), and the decision that holds a lease commits on it without a check.
 */
export const PROVISIONAL_SLACK_SECONDS = 60 * 60;
/** A change after a provisional one this close to its TTL (or past it) checks that it is still there. */
const PROVISIONAL_CHECK_WITHIN_SECONDS = 10 * 60;

/**
 * The tip's change when it is provisional, or null: a change of a life with nothing written
 * (no version, node or head move) that carries the table's TTL. Those are a follow's lone mark
 * (`loneMarkOf`) and a decision's lease and its end put in such a life: no session stands
 * behind them (no lifetime, list or delete reaches them: a `DELETE` of an id never written
 * answers 404), and any key that may follow or decide could make them for every id it names,
 * so they go by themselves. The life's first write needs none of them: below a written change
 * they hold nothing a reader needs (retention gives such changes a TTL too), and a log of
 * nothing but them reads as never written, whether they are there or not.
 */
function provisionalOf(tip: Tip): LogEntry | null {
  const entry = tip.kind === 'empty' ? entryOf(tip) : null;
  return entry && isProvisional(entry) ? entry : null;
}

/** Whether the life at `tip` holds nothing yet but provisional changes: a change that is no write put after it is provisional too. */
export function isProvisionalLife(tip: Tip): boolean {
  // (A lone mark put before marks had a TTL counts too: a follow gives it one.)
  return tip.kind === 'empty' && (entryOf(tip) === null || provisionalOf(tip) !== null || loneMarkOf(tip) !== null);
}

/**
 * The TTL of a provisional change: when its lease ends (or now, for a release), with the slack,
 * and never before the followers its life may have (`f`, carried) have gone.
 */
export function provisionalTtl(followersUntil: number | undefined, leaseUntilMs: number | undefined, nowMs: number): number {
  return Math.max(followersUntil ?? 0, Math.ceil((leaseUntilMs ?? nowMs) / 1000) + PROVISIONAL_SLACK_SECONDS);
}

/**
 * The check a change after a provisional tip (not a lone mark: those are claimed or joined
 * by their `writeId` anyway) makes in its transaction when that tip's TTL is near: TTL may
 * remove the tip between this change's read and its claim, and a writer reading after that
 * would claim a place below this one. On the condition that it is still the item read, the tip
 * gets another `writeId` (an update rather than a ConditionCheck: every function that writes
 * the log may update an item, not all may check one); the change reads again otherwise. Null
 * while the TTL is far: no request lasts that long.
 */
export function provisionalCheck(
  tableName: string,
  scope: SessionScope,
  tip: Tip,
  nowMs: number,
): NonNullable<TransactItem['Update']> | null {
  const entry = provisionalOf(tip);
  if (!entry || loneMarkOf(tip)) return null;
  if (Number(entry.item[tableKeys.timeToLive]) - nowMs / 1000 > PROVISIONAL_CHECK_WITHIN_SECONDS) return null;
  return {
    TableName: tableName,
    Key: { pk: keys.session(scope), sk: keys.logEntry(entry.position) },
    UpdateExpression: 'SET writeId = :checked',
    ConditionExpression: 'writeId = :read',
    ExpressionAttributeValues: { ':read': entry.item.writeId, ':checked': newWriteId() },
  };
}

/** The condition of a first change that does not write the session item: the item, if any, has not expired. */
export function sessionNotExpired(tableName: string, scope: SessionScope, nowMs: number): NonNullable<TransactItem['ConditionCheck']> {
  return {
    TableName: tableName,
    Key: sessionItem.key(scope),
    ConditionExpression: 'attribute_not_exists(#xa) OR #xa > :now',
    ExpressionAttributeNames: { '#xa': sessionItem.EXPIRES_ATTRIBUTE },
    ExpressionAttributeValues: { ':now': nowMs },
  };
}

/** The condition of a change computed as for a session without its item (TipChange `sessionAbsent`): there is none. */
export function sessionItemAbsent(tableName: string, scope: SessionScope): NonNullable<TransactItem['ConditionCheck']> {
  // The item that is there comes back with the refusal: the writer need not read it (SessionItemRefused).
  return {
    TableName: tableName,
    Key: sessionItem.key(scope),
    ConditionExpression: conditions.itemIsNew,
    ReturnValuesOnConditionCheckFailure: 'ALL_OLD',
  };
}

/**
 * Creates the session item when missing and moves its activity time; with `lifetime`, sets the
 * session's lifetime as of `at` (a first change of a life, a `PATCH`). `first`: nothing is in
 * the log of this life yet, so the session item alone says whether the session expired, and
 * the update is refused when it did (`SessionItemRefused`: the writer erases it first).
 * `settings` (a `PATCH`) changes the metadata (with `metadataWrite` beside it), user and agent
 * too, and only a session item that exists. The item holds no metadata, so its size, and what
 * this update costs, is the same whatever the session's metadata holds.
 * `userIs` (a profile commit) changes it only while it names that user.
 */
export function sessionUpsert(
  tableName: string,
  scope: SessionScope,
  at: string,
  options: {
    lifetime?: Lifetime;
    first?: boolean;
    /** Whether the activity moves to `at` (default); else it is set only on an item made now. */
    moves?: boolean;
    nowMs?: number;
    settings?: SessionSettings;
    /** Only while the session item names this user (a profile commit's: the user it read). */
    userIs?: string;
    /** Opens the session of this copy (SessionScope.copy): only while the item is still the copy's, whose mark it removes. */
    opens?: string;
    /** The stamp of the metadata item `settings.metadata` is written to (`metadataWrite`), when not null. */
    metadataStamp?: string;
    /** Only while there is no session item: the change was computed as for none (TipChange `sessionAbsent`). */
    absent?: boolean;
  } = {},
): NonNullable<TransactItem['Update']> {
  const index = tableKeys.sessionsIndex;
  const values: Record<string, unknown> = {
    ':sessionId': scope.sessionId,
    ':at': at,
    ':tenant': keys.tenantSessions(scope.tenant, keys.activityShard(scope.sessionId)),
    ':activity': keys.activity(at, scope.sessionId),
    ':null': null,
  };
  const names: Record<string, string> = { '#gpk': index.partitionKey, '#gsk': index.sortKey };
  const set = [
    options.moves === false
      ? 'sessionId = :sessionId, updatedAt = if_not_exists(updatedAt, :at), #gpk = if_not_exists(#gpk, :tenant), #gsk = if_not_exists(#gsk, :activity)'
      : 'sessionId = :sessionId, updatedAt = :at, #gpk = :tenant, #gsk = :activity',
    'createdAt = if_not_exists(createdAt, :at)',
    options.settings?.agentId !== undefined ? 'agentId = :agentId' : 'agentId = if_not_exists(agentId, :null)',
    options.settings?.userId !== undefined ? 'userId = :userId' : 'userId = if_not_exists(userId, :null)',
  ];
  const remove: string[] = [];
  if (options.settings?.metadata !== undefined) {
    // The metadata is an item of its own (`metadataWrite`, in the same transaction): the session
    // item names it by its stamp, and one from before the split loses its inline copy.
    names['#mv'] = sessionItem.METADATA_STAMP_ATTRIBUTE;
    remove.push('metadata');
    if (options.settings.metadata === null || options.metadataStamp === undefined) remove.push('#mv');
    else {
      set.push('#mv = :mv');
      values[':mv'] = options.metadataStamp;
    }
  }
  if (options.settings?.agentId !== undefined) values[':agentId'] = options.settings.agentId;
  if (options.settings?.userId !== undefined) {
    values[':userId'] = options.settings.userId;
    set.push(`${sessionItem.USER_SINCE_ATTRIBUTE} = :at`);
  }
  // A PATCH that sets both leaves `:null` unused, which DynamoDB refuses.
  if (!set.some((part) => part.includes(':null'))) delete values[':null'];
  if (options.lifetime) {
    const attributes = sessionItem.lifetimeAttributes(options.lifetime, Date.parse(at));
    for (const [index, name] of ['lt', sessionItem.EXPIRES_ATTRIBUTE, tableKeys.timeToLive].entries()) {
      names[`#l${index}`] = name;
      if (attributes[name] === undefined) remove.push(`#l${index}`);
      else {
        set.push(`#l${index} = :l${index}`);
        values[`:l${index}`] = attributes[name];
      }
    }
  }
  const conditionParts: string[] = [];
  if (options.opens !== undefined) {
    names['#cp'] = sessionItem.COPY_ATTRIBUTE;
    values[':copy'] = options.opens;
    conditionParts.push('#cp = :copy');
    remove.push('#cp');
  }
  if (options.settings) conditionParts.push(conditions.itemExists);
  if (options.userIs !== undefined) {
    values[':owner'] = options.userIs;
    conditionParts.push('userId = :owner');
  }
  if (options.absent) conditionParts.push(conditions.itemIsNew);
  if (options.first) {
    names['#xa'] = sessionItem.EXPIRES_ATTRIBUTE;
    values[':now'] = options.nowMs ?? Date.now();
    conditionParts.push('(attribute_not_exists(#xa) OR #xa > :now)');
  }
  return {
    TableName: tableName,
    Key: sessionItem.key(scope),
    UpdateExpression: `SET ${set.join(', ')}${remove.length > 0 ? ` REMOVE ${remove.join(', ')}` : ''}`,
    ...(conditionParts.length > 0 ? { ConditionExpression: conditionParts.join(' AND ') } : {}),
    // Refused for being there, the item comes back with the refusal: the writer need not read it.
    ...(options.absent ? { ReturnValuesOnConditionCheckFailure: 'ALL_OLD' as const } : {}),
    ExpressionAttributeNames: names,
    ExpressionAttributeValues: values,
  };
}

/**
 * The write of a session's metadata item that goes in the transaction of a `PATCH` that
 * changes the metadata (session-item.ts): the whole metadata under a new stamp, which the
 * session item's update (`sessionUpsert`, `metadataStamp`) names; or, for no metadata, the
 * item's delete.
 */
export function metadataWrite(
  tableName: string,
  scope: SessionScope,
  written: { metadata: JsonObject; stamp: string } | null,
): TransactItem {
  return written === null
    ? { Delete: { TableName: tableName, Key: sessionItem.metadataKey(scope) } }
    : { Put: { TableName: tableName, Item: sessionItem.encodeMetadata(scope, written.metadata, written.stamp) } };
}
