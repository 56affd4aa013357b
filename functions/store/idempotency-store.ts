import { randomUUID } from 'node:crypto';
import type { AttributeValue } from '@aws-sdk/client-dynamodb';
import { DeleteCommand, PutCommand, UpdateCommand } from '@aws-sdk/lib-dynamodb';
import { unmarshall } from '@aws-sdk/util-dynamodb';
import type { IdempotencyClaim, IdempotencyStore, StoredResponse } from '../core/ports.js';
import { idempotencyItem } from './item-codecs.js';
import { tableKeys } from './table.js';
import { conditionally, isConditionFailure, isOwnWrite, type TableClient } from './table-client.js';

/** How long a request's answer is kept for its retries (API.md section 1). */
const IDEMPOTENCY_TTL_SECONDS = 24 * 60 * 60;

/**
 * `Idempotency-Key` claims (keys.ts), removed by TTL after 24 hours:
 *
 *   I#<tenant>#<key>   I   fingerprint, status (pending | done), lockedUntil, response (done)
 *
 * A claim is one conditional put: the key is free, expired, or abandoned by a holder that
 * died; otherwise the put fails and hands back the holder, so the answer needs no extra read.
 */
export class DynamoDbIdempotencyStore implements IdempotencyStore {
  constructor(private readonly table: TableClient) {}

  async claim(tenant: string, key: string, fingerprint: string, lockMs: number): Promise<IdempotencyClaim> {
    const now = this.table.now();
    const nowSeconds = Math.floor(now / 1000);
    const writeId = randomUUID();
    try {
      await this.table.send(
        new PutCommand({
          TableName: this.table.tableName,
          Item: {
            ...idempotencyItem.encode(tenant, key, {
              fingerprint,
              lockedUntil: now + lockMs,
              expiresAt: nowSeconds + IDEMPOTENCY_TTL_SECONDS,
            }),
            writeId,
          },
          // Free, expired (TTL deletes lazily), or abandoned by a holder that died.
          ConditionExpression: 'attribute_not_exists(pk) OR #ttl < :nowSeconds OR (#status = :pending AND lockedUntil < :now)',
          ExpressionAttributeNames: { '#ttl': tableKeys.timeToLive, '#status': 'status' },
          ExpressionAttributeValues: { ':nowSeconds': nowSeconds, ':pending': 'pending', ':now': now },
          ReturnValuesOnConditionCheckFailure: 'ALL_OLD',
        }),
      );
      return { outcome: 'claimed' };
    } catch (error) {
      if (isConditionFailure(error) && error.Item) {
        // A retried claim whose first attempt landed finds its own claim: it holds the key.
        if (isOwnWrite(error.Item, writeId)) return { outcome: 'claimed' };
        // The SDK hands back the old item in wire format, even through the document client.
        return idempotencyItem.decodeHolder(unmarshall(error.Item as Record<string, AttributeValue>));
      }
      throw error;
    }
  }

  async complete(tenant: string, key: string, fingerprint: string, response: StoredResponse): Promise<void> {
    await this.table.send(
      new UpdateCommand({
        TableName: this.table.tableName,
        Key: idempotencyItem.key(tenant, key),
        UpdateExpression: 'SET #status = :done, #response = :response',
        ConditionExpression: 'fingerprint = :fingerprint',
        ExpressionAttributeNames: { '#status': 'status', '#response': 'response' },
        ExpressionAttributeValues: { ':done': 'done', ':response': JSON.stringify(response), ':fingerprint': fingerprint },
      }),
    );
  }

  async release(tenant: string, key: string, fingerprint: string): Promise<void> {
    // Only a pending claim of this very request is released; a claim taken over since stays.
    await conditionally(
      this.table.send(
        new DeleteCommand({
          TableName: this.table.tableName,
          Key: idempotencyItem.key(tenant, key),
          ConditionExpression: 'fingerprint = :fingerprint AND #status = :pending',
          ExpressionAttributeNames: { '#status': 'status' },
          ExpressionAttributeValues: { ':fingerprint': fingerprint, ':pending': 'pending' },
        }),
      ),
    );
  }
}
