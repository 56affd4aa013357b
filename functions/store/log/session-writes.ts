import type { ClosingTip, SessionScope, Tip } from '../../core/model/model.js';
import { StaleTipError } from '../../core/model/ports.js';
import * as sessionItem from '../sessions/session-item.js';
import type { LogPosition } from '../table/keys.js';
import * as keys from '../table/keys.js';
import { tableKeys } from '../table/table.js';
import { conditions, type TransactItem } from '../table/table-client.js';
import { nextPosition } from './log-items.js';

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

/** Whether the delete that is closing the session at `tip` stopped halfway, so that a write must finish it. */
export function isAbandonedDelete(tip: ClosingTip, now: number): boolean {
  return tip.since !== null && now - Date.parse(tip.since) > ABANDONED_DELETE_MS;
}

/** How a write finishes a delete that stopped halfway, and how it knows one did. */
export interface AbandonedDeletes {
  isAbandoned(tip: ClosingTip): boolean;
  /** Erases every item of the session; false when it had none. */
  deleteSession(scope: SessionScope): Promise<boolean>;
}

/** The condition parts of a write that claims the log's next place. */
interface SlotClaim {
  ConditionExpression: string;
}

/**
 * The place the next change after `tip` goes to, and the condition that claims it: the place
 * must still be free. Every writer of the log (a change, a delete's fence, the guard of a
 * documents-only commit) claims it this way, so any two that read the same tip cannot both
 * succeed. Nothing claims a place in a session that is being deleted: the writer re-reads.
 */
export function nextSlot(tip: Tip): { position: LogPosition; key: string; claim: SlotClaim } {
  if (tip.kind === 'closing') throw new StaleTipError('the session is being deleted');
  const position = nextPosition(tip);
  return { position, key: keys.logEntry(position), claim: { ConditionExpression: conditions.itemIsNew } };
}

/** Creates the session item when missing (a first write) and moves its activity time. */
export function sessionUpsert(tableName: string, scope: SessionScope, at: string): NonNullable<TransactItem['Update']> {
  const index = tableKeys.sessionsIndex;
  return {
    TableName: tableName,
    Key: sessionItem.key(scope),
    UpdateExpression: [
      'SET sessionId = :sessionId, updatedAt = :at, #gpk = :tenant, #gsk = :activity',
      'createdAt = if_not_exists(createdAt, :at)',
      'agentId = if_not_exists(agentId, :null)',
      'userId = if_not_exists(userId, :null)',
      'metadata = if_not_exists(metadata, :null)',
    ].join(', '),
    ExpressionAttributeNames: { '#gpk': index.partitionKey, '#gsk': index.sortKey },
    ExpressionAttributeValues: {
      ':sessionId': scope.sessionId,
      ':at': at,
      ':tenant': keys.tenantSessions(scope.tenant, keys.activityShard(scope.sessionId)),
      ':activity': keys.activity(at, scope.sessionId),
      ':null': null,
    },
  };
}
