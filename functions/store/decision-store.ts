import { DeleteCommand, GetCommand, PutCommand, UpdateCommand } from '@aws-sdk/lib-dynamodb';
import type { DecisionRecord, SessionScope } from '../core/model.js';
import type { DecisionCompletion, DecisionStore } from '../core/ports.js';
import { decisionItem, leaseItem } from './item-codecs.js';
import { tableKeys } from './table.js';
import { conditionally, conditions, isConditionFailure, type TableClient, type TaggedItem, transact } from './table-client.js';

/** Decision records are kept a week: long enough for any retry of a decision id. */
const DECISION_TTL_SECONDS = 7 * 24 * 60 * 60;

/**
 * Decisions (API.md section 6), in the session's own partition (keys.ts):
 *
 *   S#<tenant>#<session>   L              the decision lease: holder, leaseUntil, TTL
 *   S#<tenant>#<session>   D#<decision>   failed attempts, or the outcome to replay (a week)
 *
 * A decision that changes the session completes in the session's commit (session-store.ts),
 * with `decisionCompletionItems` in the same transaction.
 */
export class DynamoDbDecisionStore implements DecisionStore {
  constructor(private readonly table: TableClient) {}

  async getDecision(scope: SessionScope, decisionId: string): Promise<DecisionRecord | null> {
    const { Item } = await this.table.send(
      new GetCommand({ TableName: this.table.tableName, Key: decisionItem.key(scope, decisionId), ConsistentRead: true }),
    );
    return Item ? decisionItem.decode(decisionId, Item) : null;
  }

  async acquireLease(scope: SessionScope, token: string, untilMs: number): Promise<boolean> {
    try {
      await this.table.send(
        new PutCommand({
          TableName: this.table.tableName,
          Item: leaseItem.encode(scope, token, untilMs),
          // Free, or held by a decision that died without releasing it.
          ConditionExpression: `${conditions.itemIsNew} OR leaseUntil < :now`,
          ExpressionAttributeValues: { ':now': this.table.now() },
          ReturnValuesOnConditionCheckFailure: 'ALL_OLD',
        }),
      );
      return true;
    } catch (error) {
      if (!isConditionFailure(error)) throw error;
      // The SDK retries a put whose answer was lost; if the first attempt landed, the retry
      // finds this very decision's lease, which it holds.
      return leaseHolderOf(error.Item) === token;
    }
  }

  async releaseLease(scope: SessionScope, token: string): Promise<void> {
    // A lease that ran out and was taken by another decision is not ours to release.
    await conditionally(this.table.send(new DeleteCommand({ TableName: this.table.tableName, ...leaseHeldBy(scope, token) })));
  }

  async recordFailedAttempt(scope: SessionScope, decisionId: string): Promise<void> {
    await conditionally(
      this.table.send(
        new UpdateCommand({
          TableName: this.table.tableName,
          Key: decisionItem.key(scope, decisionId),
          UpdateExpression: 'SET #status = :failed, #ttl = :ttl ADD attempts :one',
          // Never downgrade a decision that is done.
          ConditionExpression: `${conditions.itemIsNew} OR #status = :failed`,
          ExpressionAttributeNames: { '#status': 'status', '#ttl': tableKeys.timeToLive },
          ExpressionAttributeValues: { ':failed': 'failed', ':one': 1, ':ttl': this.table.nowSeconds() + DECISION_TTL_SECONDS },
        }),
      ),
    );
  }

  async completeDecision(scope: SessionScope, completion: DecisionCompletion): Promise<void> {
    await transact(this.table, decisionCompletionItems(this.table, scope, completion));
  }
}

/**
 * The items that complete a decision: its record, and the release of its lease on the
 * condition that this decision still holds it (a lease that ran out and was taken by another
 * decision cancels the whole transaction with `LeaseLostError`).
 */
export function decisionCompletionItems(table: TableClient, scope: SessionScope, completion: DecisionCompletion): TaggedItem[] {
  const { record, leaseToken } = completion;
  return [
    {
      role: 'decision',
      item: { Put: { TableName: table.tableName, Item: decisionItem.encode(scope, record, table.nowSeconds() + DECISION_TTL_SECONDS) } },
    },
    { role: 'lease', item: { Delete: { TableName: table.tableName, ...leaseHeldBy(scope, leaseToken) } } },
  ];
}

function leaseHeldBy(scope: SessionScope, token: string) {
  return {
    Key: leaseItem.key(scope),
    ConditionExpression: 'holder = :token',
    ExpressionAttributeValues: { ':token': token },
  };
}

/** The holder of a lease item as a failed condition returns it (wire format or unmarshalled). */
function leaseHolderOf(item: Record<string, unknown> | undefined): string | undefined {
  const holder = item?.holder as { S?: string } | string | undefined;
  return typeof holder === 'string' ? holder : holder?.S;
}
