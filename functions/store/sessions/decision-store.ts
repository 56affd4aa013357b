import { QueryCommand, UpdateCommand } from '@aws-sdk/lib-dynamodb';
import type { DecisionRecord, SessionScope } from '../../core/model/model.js';
import type { DecisionStore } from '../../core/model/ports.js';
import * as keys from '../table/keys.js';
import { incarnationOf } from '../table/keys.js';
import { tableKeys } from '../table/table.js';
import { conditionally, conditions, type TableClient } from '../table/table-client.js';
import * as decisionItem from './decision-item.js';

/** Decision records are kept a week: long enough for any retry of a decision id. */
export const DECISION_TTL_SECONDS = 7 * 24 * 60 * 60;

/**
 * Decision records (API.md section 6), in the session's own partition (keys.ts):
 *
 *   S#<tenant>#<session>   D#<decision>#<life>   failed attempts, or the outcome to replay (a week)
 *
 * A decision's lease and its outcome travel in the session's log (session-store.ts): the change
 * that completes a decision holds its answer, and the writer after it puts this record
 * (node-index.ts, `departure`) when the caller named the decision. Until then the tip holds it.
 */
export class DynamoDbDecisionStore implements DecisionStore {
  constructor(private readonly table: TableClient) {}

  async getDecision(scope: SessionScope, decisionId: string): Promise<DecisionRecord | null> {
    // The newest life's record sorts last; the caller tells whether it is of the current life.
    const { Items } = await this.table.send(
      new QueryCommand({
        TableName: this.table.tableName,
        KeyConditionExpression: 'pk = :pk AND begins_with(sk, :prefix)',
        ExpressionAttributeValues: { ':pk': keys.session(scope), ':prefix': keys.decisionKeys(decisionId) },
        ScanIndexForward: false,
        Limit: 1,
        ConsistentRead: true,
      }),
    );
    const item = Items?.[0];
    return item ? { ...decisionItem.decode(decisionId, item), incarnation: incarnationOf(String(item.sk)) } : null;
  }

  async recordFailedAttempt(scope: SessionScope, decisionId: string, incarnation: number): Promise<void> {
    await conditionally(
      this.table.send(
        new UpdateCommand({
          TableName: this.table.tableName,
          Key: decisionItem.key(scope, decisionId, incarnation),
          UpdateExpression: 'SET #status = :failed, #ttl = :ttl ADD attempts :one',
          // Never downgrade a decision that is done.
          ConditionExpression: `${conditions.itemIsNew} OR #status = :failed`,
          ExpressionAttributeNames: { '#status': 'status', '#ttl': tableKeys.timeToLive },
          ExpressionAttributeValues: { ':failed': 'failed', ':one': 1, ':ttl': this.table.nowSeconds() + DECISION_TTL_SECONDS },
        }),
      ),
    );
  }
}
