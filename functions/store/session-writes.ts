import type { SessionScope, Tip } from '../core/model.js';
import { StaleTipError } from '../core/ports.js';
import { sessionItem } from './item-codecs.js';
import { KIND_ATTRIBUTE, SLOT_ITEM_KIND } from './item-kinds.js';
import { keys } from './keys.js';
import { tableKeys } from './table.js';
import { conditions, type TransactItem } from './table-client.js';

/**
 * The two pieces every write into a session is made of, whichever store sends it: the claim
 * of the tip slot (a version or head move, a delete's tombstone, the guard of a documents-only
 * commit) and the move of the session's activity in a transaction.
 */

/** The condition parts of a write that claims a tip slot. */
interface SlotClaim {
  ConditionExpression: string;
  ExpressionAttributeNames?: Record<string, string>;
  ExpressionAttributeValues?: Record<string, unknown>;
}

/**
 * The slot the next write after `tip` goes to, and the condition that claims it: the slot
 * above a version must still be free; a head marker in the top slot may be replaced only while
 * it is the very marker that was read. Every writer of the tip (a commit, a delete's tombstone,
 * a document commit's guard) claims it this way, so any two that read the same tip cannot
 * both succeed. Nothing claims a slot of a session that is being deleted: the writer re-reads.
 */
export function nextSlot(tip: Tip): { slot: number; claim: SlotClaim } {
  switch (tip.kind) {
    case 'empty':
    case 'version':
      return { slot: tip.slot + 1, claim: { ConditionExpression: conditions.itemIsNew } };
    case 'marker':
      return {
        slot: tip.slot,
        claim: {
          ConditionExpression: '#kind = :marker AND #seq = :seq',
          ExpressionAttributeNames: { '#kind': KIND_ATTRIBUTE, '#seq': 'seq' },
          ExpressionAttributeValues: { ':marker': SLOT_ITEM_KIND.marker, ':seq': tip.markerSeq },
        },
      };
    case 'closing':
      throw new StaleTipError('the session is being deleted');
  }
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
      ':tenant': keys.tenantSessions(scope.tenant),
      ':activity': keys.activity(at, scope.sessionId),
      ':null': null,
    },
  };
}
