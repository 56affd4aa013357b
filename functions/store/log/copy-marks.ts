import { AgentStateError } from '../../core/kernel/errors.js';
import type { SessionScope, Tip } from '../../core/model/model.js';
import type { TipChange } from '../../core/model/ports.js';
import { emptyTip } from '../../core/model/tree.js';
import * as sessionItem from '../sessions/session-item.js';
import type { TransactItem } from '../table/table-client.js';
import { closeIfExpired, entryOf, type LogEntry, tipOf } from './log-items.js';

/**
 * A copy's mark (SessionScope.copy, `Carried.cp`, session-item.ts `COPY_ATTRIBUTE`): how a copy
 * not opened yet is read by everyone else (as unknown), and what its own writes check
 * (docs/architecture.md, Copying a session).
 */

/**
 * The tip as `scope` sees it: a copy that has not opened its session yet (`Carried.cp`) is seen
 * by its own reads and writes only; to everyone else the session reads as unknown, as one
 * being deleted (API.md section 12: a copy is all or nothing), and once nothing of the copy
 * was written for longer than a request may run, the next write erases it as a delete that
 * stopped halfway (`since`, session-writes.ts `isAbandonedDelete`). The newest change stays in
 * `log`, so that the delete that erases it can claim the place after it.
 */
function closeIfUnopened(tip: Tip, scope: SessionScope): Tip {
  const entry = tip.kind === 'closing' ? null : entryOf(tip);
  const copy = entry?.carried.cp;
  if (!entry || copy === undefined || copy === scope.copy) return tip;
  return {
    ...emptyTip(tip.incarnation),
    ...(tip.followersUntil === undefined ? {} : { followersUntil: tip.followersUntil }),
    kind: 'closing',
    since: entry.createdAt,
    unopened: true,
    log: entry,
  };
}

/** The tip `scope` reads at `nowMs`: closed when it expired (`closeIfExpired`) or is another's copy not opened yet (`closeIfUnopened`). */
export function tipAsSeen(tip: Tip, scope: SessionScope, nowMs: number): Tip {
  return closeIfUnopened(closeIfExpired(tip, nowMs), scope);
}

/**
 * The condition of a copy's first change (SessionScope.copy), which leaves its session item as
 * made: the item is there, still the copy's, and has not expired, so that a copy whose session
 * was erased as abandoned meanwhile cannot start writing the id again. An update that sets the
 * mark it checks rather than a ConditionCheck: every function that writes the log may update
 * an item, not all may check one.
 */
export function copyItemCheck(
  tableName: string,
  scope: SessionScope & { copy: string },
  nowMs: number,
): NonNullable<TransactItem['Update']> {
  return {
    TableName: tableName,
    Key: sessionItem.key(scope),
    UpdateExpression: 'SET #cp = :copy',
    ConditionExpression: '#cp = :copy AND (attribute_not_exists(#xa) OR #xa > :now)',
    ExpressionAttributeNames: { '#xa': sessionItem.EXPIRES_ATTRIBUTE, '#cp': sessionItem.COPY_ATTRIBUTE },
    ExpressionAttributeValues: { ':now': nowMs, ':copy': scope.copy },
  };
}

/**
 * The mark a change after `basedOn` carries when `scope` is a copy's, which writes only the life
 * it began: a log that no longer carries its mark was erased as abandoned (and maybe written by
 * others since), so the copy stops (`409 conflict`).
 */
export function ownCopyMark(scope: SessionScope, basedOn: Tip): string | undefined {
  const copy = scope.copy;
  if (copy !== undefined && basedOn.kind !== 'empty' && entryOf(basedOn)?.carried.cp !== copy) {
    throw new AgentStateError('conflict', 'the copy stopped for longer than a request may run and was erased; copy again');
  }
  return copy;
}

/** The session of `scope` as anyone but a copy sees it: what a delete of an abandoned session erases. */
export function withoutCopy(scope: SessionScope): SessionScope {
  return { tenant: scope.tenant, sessionId: scope.sessionId };
}

/** `409 conflict`: another request's copy is being written into the session (session-copy.ts). */
function copyUnderWay(scope: SessionScope): AgentStateError {
  return new AgentStateError('conflict', `a copy into session ${scope.sessionId} is under way; try again once it has answered`);
}

/**
 * Where a change of an id that another request's copy is writing goes (`tip`: the copy's, as
 * seen from outside it): nowhere but for a follow (a WebSocket subscription's mark,
 * core/fanout/live.ts), `409 conflict` otherwise. A follow goes into the copy's log, after its
 * newest change and under its mark, as one of the copy's own changes: so the subscription is
 * answered as for an unknown id (which the id reads as), the copy's later changes carry the
 * follow on (its next write loses its place to it and reads again), and its opening releases
 * the copy's versions to the follower (stream-images.ts `releasedVersions`).
 */
export function intoCopy(scope: SessionScope, tip: Tip, change: TipChange): [SessionScope & { copy: string }, TipChange] {
  const entry = tip.kind === 'closing' && tip.unopened ? (tip.log as LogEntry | undefined) : undefined;
  const copy = entry?.carried.cp;
  if (!entry || copy === undefined || change.follow === undefined) throw copyUnderWay(scope);
  return [
    { ...scope, copy },
    { ...change, basedOn: tipOf(entry, { withState: false }) },
  ];
}
