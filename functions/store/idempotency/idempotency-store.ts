import { randomBytes } from 'node:crypto';
import type { AttributeValue } from '@aws-sdk/client-dynamodb';
import { DeleteCommand, PutCommand, UpdateCommand } from '@aws-sdk/lib-dynamodb';
import { unmarshall } from '@aws-sdk/util-dynamodb';
import type { SessionScope } from '../../core/model/model.js';
import type { ClaimId, IdempotencyClaim, IdempotencyStore, StoredResponse } from '../../core/model/ports.js';
import { findKeptAnswer } from '../log/kept-answers.js';
import { encodeText, pieceKeysOf } from '../state/state-codec.js';
import { tableKeys } from '../table/table.js';
import { batchGet, batchPut, conditionally, type Item, isConditionFailure, isOwnWrite, type TableClient } from '../table/table-client.js';
import * as idempotencyItem from './idempotency-item.js';

/** How long a request's answer is kept for its retries (API.md section 1). */
const IDEMPOTENCY_TTL_SECONDS = 24 * 60 * 60;

/**
 * `Idempotency-Key` claims (keys.ts), removed by TTL after 24 hours:
 *
 *   I#<tenant>#<key>   I   fingerprint, status (pending | done), lockedUntil, response (done)
 *
 * A claim is one conditional put: the key is free or expired; otherwise the put fails and
 * hands back the holder, so the answer needs no extra read. A write that records a change of
 * a session's log keeps its answer in that change, under the claim's id (kept-answers.ts), and
 * its claim stays pending: the claim is then the key's one write, and a retry that finds it
 * pending looks for the answer there (`recover`). Every other answer is kept here (`complete`). A pending claim is never taken
 * over, not even once its holder's lock has lapsed: the holder may have written and died (or
 * failed to keep its answer) before completing, and running the request again would then
 * undo whatever was acknowledged since. Such a key answers `409` until its TTL.
 * An answer is kept by the state codec (state-codec.ts): as text, compressed, or — the answer
 * to a write of a 4 MiB state — as pieces `B#<hash>` in the key's own partition, removed by
 * TTL with it.
 */
export class DynamoDbIdempotencyStore implements IdempotencyStore {
  constructor(private readonly table: TableClient) {}

  async claim(tenant: string, key: string, fingerprint: string, lockMs: number): Promise<IdempotencyClaim> {
    const now = this.table.now();
    const nowSeconds = Math.floor(now / 1000);
    // Also the claim's id, which a change that keeps the answer carries (kept-answers.ts): short.
    const writeId = randomBytes(12).toString('base64url');
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
          // Free, or expired (TTL deletes lazily).
          ConditionExpression: 'attribute_not_exists(pk) OR #ttl < :nowSeconds',
          ExpressionAttributeNames: { '#ttl': tableKeys.timeToLive },
          ExpressionAttributeValues: { ':nowSeconds': nowSeconds },
          ReturnValuesOnConditionCheckFailure: 'ALL_OLD',
        }),
      );
      return { outcome: 'claimed', claim: { id: writeId, since: now } };
    } catch (error) {
      if (isConditionFailure(error) && error.Item) {
        // A retried claim whose first attempt landed finds its own claim: it holds the key.
        if (isOwnWrite(error.Item, writeId)) return { outcome: 'claimed', claim: { id: writeId, since: now } };
        // The SDK hands back the old item in wire format, even through the document client.
        const holder = unmarshall(error.Item as Record<string, AttributeValue>);
        return idempotencyItem.decodeHolder(holder, await this.piecesOf(holder), now, IDEMPOTENCY_TTL_SECONDS);
      }
      throw error;
    }
  }

  async complete(tenant: string, key: string, fingerprint: string, response: StoredResponse): Promise<void> {
    const itemKey = idempotencyItem.key(tenant, key);
    const encoded = encodeText(idempotencyItem.responseText, JSON.stringify(response));
    if (encoded.pieces.length > 0) {
      // The pieces outlive the claim by its own lifetime at most, and go with it by TTL.
      const expiresAt = this.table.nowSeconds() + IDEMPOTENCY_TTL_SECONDS;
      await batchPut(
        this.table,
        encoded.pieces.map((piece) => ({ pk: itemKey.pk, sk: piece.sk, z: piece.z, [tableKeys.timeToLive]: expiresAt })),
      );
    }
    const names: Record<string, string> = { '#status': 'status' };
    const values: Record<string, unknown> = { ':done': 'done', ':fingerprint': fingerprint };
    const sets = ['#status = :done'];
    for (const [index, [name, value]] of Object.entries(encoded.attributes).entries()) {
      names[`#a${index}`] = name;
      values[`:a${index}`] = value;
      sets.push(`#a${index} = :a${index}`);
    }
    await this.table.send(
      new UpdateCommand({
        TableName: this.table.tableName,
        Key: itemKey,
        UpdateExpression: `SET ${sets.join(', ')}`,
        ConditionExpression: 'fingerprint = :fingerprint',
        ExpressionAttributeNames: names,
        ExpressionAttributeValues: values,
      }),
    );
  }

  /** The pieces of a held key's answer, when it is kept in pieces. */
  private async piecesOf(holder: Item): Promise<Map<string, Item>> {
    const sortKeys = pieceKeysOf(holder, idempotencyItem.responseText);
    if (sortKeys.length === 0) return new Map();
    const found = await batchGet(
      this.table,
      sortKeys.map((sk) => ({ pk: holder.pk, sk })),
    );
    return new Map(found.map((item) => [String(item.sk), item]));
  }

  recover(scope: SessionScope, claim: ClaimId): Promise<StoredResponse | null> {
    return findKeptAnswer(this.table, scope, claim);
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
