import { randomUUID } from 'node:crypto';
import type { AttributeValue } from '@aws-sdk/client-dynamodb';
import { DeleteCommand, GetCommand, PutCommand, QueryCommand, UpdateCommand } from '@aws-sdk/lib-dynamodb';
import { unmarshall } from '@aws-sdk/util-dynamodb';
import { openSecret, sealSecret } from '../../core/kernel/sealing.js';
import { invalidateTenant } from '../../core/kernel/tenant-cache.js';
import type { Page } from '../../core/model/model.js';
import type { WebhookBreaker } from '../../core/webhooks/breaker.js';
import type { DeadLetter, DeadLetterEvent, DeliveryFailure, ProbeClaim, WebhookRecord, WebhookStore } from '../../core/webhooks/records.js';
import { secretOwner } from '../table/item-codecs.js';
import * as keys from '../table/keys.js';
import { forEachInRange, pageOf, prefixPageQuery } from '../table/paging.js';
import { tableKeys } from '../table/table.js';
import { conditionally, conditions, type Item, isConditionFailure, type TableClient } from '../table/table-client.js';

/** A place with no webhook for longer than any request runs (a Lambda runs 15 minutes at most) was left by a request that stopped. */
const ABANDONED_PLACE_MS = 15 * 60 * 1000;

/** Dead letters are kept as long as SQS keeps a message at most: two weeks to replay them. */
const DEAD_LETTER_TTL_SECONDS = 14 * 24 * 60 * 60;

/**
 * Webhooks and their dead letters (keys.ts):
 *
 *   H#<tenant>             HP                             places: {<webhook id>: when its place was taken}
 *   H#<tenant>             H#<webhook id>                 url, secret, sessionId, agentId, createdAt,
 *                                                         breakerFailures, breakerOpenUntil,
 *                                                         breakerProbeUntil, breakerProbeBy (the claim's id)
 *                                                         (core/webhooks/breaker.ts)
 *   X#<tenant>#<webhook>   D#<session>#<000000000042>     body (the event's JSON text),
 *                                                         attempts, lastError, times, TTL
 *
 * A tenant's webhooks are one partition: delivery reads them with one Query per tenant and
 * batch. A webhook's dead letters are one partition too, in replay order (session, version).
 * Webhook ids are UUIDv7, so the webhook list reads newest first by key alone.
 */
export class DynamoDbWebhookStore implements WebhookStore {
  constructor(private readonly table: TableClient) {}

  async putWebhook(tenant: string, webhook: WebhookRecord, options: { limit: number }): Promise<boolean> {
    if (!(await this.takePlace(tenant, webhook.id, options.limit))) return false;
    const key = { pk: keys.webhooks(tenant), sk: keys.webhook(webhook.id) };
    await this.table.send(
      new PutCommand({
        TableName: this.table.tableName,
        Item: {
          ...key,
          id: webhook.id,
          url: webhook.url,
          // Sealed, bound to this item (core/kernel/sealing.ts): a table read shows no secret.
          secret: webhook.secret ? sealSecret(webhook.secret, secretOwner(key)) : undefined,
          sessionId: webhook.sessionId,
          agentId: webhook.agentId ?? undefined,
          createdAt: webhook.createdAt,
        },
        // Ids are fresh UUIDv7s; the condition only makes a collision an error, not an overwrite.
        ConditionExpression: conditions.itemIsNew,
      }),
    );
    // The lists this process's hooks keep (core/kernel/tenant-cache.ts): the next batch sees it.
    invalidateTenant('webhooks', tenant);
    return true;
  }

  /**
   * Takes one of the tenant's `limit` places for a webhook about to be put: one conditional
   * UpdateItem of the places item (`HP`), which holds each webhook's id and when its place was
   * taken. Creates at once each add their own id under the condition that fewer than `limit`
   * are there, so together they never take more (counting the webhooks and then putting one
   * let 50 creates at once make 50 where the limit is 20). A refusal looks at why
   * (`settlePlaces`): places not counted yet (or counted since), or places whose create or
   * delete stopped halfway.
   */
  private async takePlace(tenant: string, webhookId: string, limit: number): Promise<boolean> {
    for (let look = 0; look < 5; look += 1) {
      const taken = await conditionally(
        this.table.send(
          new UpdateCommand({
            TableName: this.table.tableName,
            Key: { pk: keys.webhooks(tenant), sk: keys.webhookPlaces },
            UpdateExpression: 'SET places.#id = :at',
            ConditionExpression: 'attribute_exists(places) AND size(places) < :limit',
            ExpressionAttributeNames: { '#id': webhookId },
            ExpressionAttributeValues: { ':at': this.table.now(), ':limit': limit },
          }),
        ),
      );
      if (taken) return true;
      const settled = await this.settlePlaces(tenant, webhookId, limit);
      if (settled === 'ours') return true;
      if (settled === 'full') return false;
    }
    return false;
  }

  /**
   * Why a place was refused, and what can be put right: `ours` when the place is ours already
   * (the SDK resent an update whose answer was lost); `changed` when places were counted for the
   * first time (webhooks made before the places item existed: every one found), are fewer than
   * the limit now (counted by another create after this one was refused), or were freed from
   * ids that hold no webhook since longer than any request runs (a create that stopped between
   * its place and its put, a delete between its delete and its place; a Lambda runs 15 minutes
   * at most); `full` when every place is taken.
   */
  private async settlePlaces(tenant: string, webhookId: string, limit: number): Promise<'ours' | 'changed' | 'full'> {
    const key = { pk: keys.webhooks(tenant), sk: keys.webhookPlaces };
    const [{ Item }, webhooks] = await Promise.all([
      this.table.send(new GetCommand({ TableName: this.table.tableName, Key: key, ConsistentRead: true })),
      this.allWebhooks(tenant),
    ]);
    const places = (Item?.places ?? undefined) as Record<string, number> | undefined;
    if (places?.[webhookId] !== undefined) return 'ours';
    if (!places) {
      const counted = Object.fromEntries(webhooks.map((webhook) => [webhook.id, Date.parse(webhook.createdAt)]));
      await conditionally(
        this.table.send(
          new UpdateCommand({
            TableName: this.table.tableName,
            Key: key,
            UpdateExpression: 'SET places = :counted',
            ConditionExpression: 'attribute_not_exists(places)',
            ExpressionAttributeValues: { ':counted': counted },
          }),
        ),
      );
      return 'changed';
    }
    // Refused before the places were counted, read after: a place may be free now.
    if (Object.keys(places).length < limit) return 'changed';
    const present = new Set(webhooks.map((webhook) => webhook.id));
    const stale = Object.entries(places)
      .filter(([id, at]) => !present.has(id) && this.table.now() - at > ABANDONED_PLACE_MS)
      .map(([id]) => id);
    if (stale.length === 0) return 'full';
    await this.table.send(
      new UpdateCommand({
        TableName: this.table.tableName,
        Key: key,
        UpdateExpression: `REMOVE ${stale.map((_, index) => `places.#stale${index}`).join(', ')}`,
        ExpressionAttributeNames: Object.fromEntries(stale.map((id, index) => [`#stale${index}`, id])),
      }),
    );
    return 'changed';
  }

  async getWebhook(tenant: string, webhookId: string): Promise<WebhookRecord | null> {
    const { Item } = await this.table.send(
      new GetCommand({
        TableName: this.table.tableName,
        Key: { pk: keys.webhooks(tenant), sk: keys.webhook(webhookId) },
        ConsistentRead: true,
      }),
    );
    return Item ? toWebhook(Item) : null;
  }

  async listWebhooks(tenant: string, options: { limit: number; cursor?: string }): Promise<Page<WebhookRecord>> {
    const range = { tableName: this.table.tableName, partition: keys.webhooks(tenant), prefix: keys.webhookPrefix };
    const { Items, LastEvaluatedKey } = await this.table.send(new QueryCommand(prefixPageQuery(range, { ...options, newestFirst: true })));
    return pageOf((Items ?? []).map(toWebhook), LastEvaluatedKey, range);
  }

  async allWebhooks(tenant: string): Promise<WebhookRecord[]> {
    const webhooks: WebhookRecord[] = [];
    await forEachInRange(this.table, { partition: keys.webhooks(tenant), prefix: keys.webhookPrefix }, (item) =>
      webhooks.push(toWebhook(item)),
    );
    return webhooks;
  }

  async deleteWebhook(tenant: string, webhookId: string): Promise<boolean> {
    // Conditional, so that of deletes at once exactly one finds it (an unconditional delete's
    // old item came back to 6 of 50 at once on DynamoDB Local).
    const deleted = await conditionally(
      this.table.send(
        new DeleteCommand({
          TableName: this.table.tableName,
          Key: { pk: keys.webhooks(tenant), sk: keys.webhook(webhookId) },
          ConditionExpression: conditions.itemExists,
        }),
      ),
    );
    invalidateTenant('webhooks', tenant);
    if (!deleted) return false;
    // Its place goes with it; a delete that stops here leaves a place `settlePlaces` frees.
    await conditionally(
      this.table.send(
        new UpdateCommand({
          TableName: this.table.tableName,
          Key: { pk: keys.webhooks(tenant), sk: keys.webhookPlaces },
          UpdateExpression: 'REMOVE places.#id',
          ConditionExpression: 'attribute_exists(places)',
          ExpressionAttributeNames: { '#id': webhookId },
        }),
      ),
    );
    return true;
  }

  async recordDeadLetter(tenant: string, webhookId: string, event: DeadLetterEvent, failure: DeliveryFailure): Promise<void> {
    await this.table.send(
      new UpdateCommand({
        TableName: this.table.tableName,
        Key: { pk: keys.deadLetters(tenant, webhookId), sk: keys.deadLetter(event.sessionId, event.version, event.document) },
        // One item per event: a redelivered event (or a failed replay) updates its dead letter.
        UpdateExpression:
          `SET eventId = :eventId, sessionId = :sessionId, version = :version, ${event.document === undefined ? '' : '#document = :document, '}` +
          'body = :body, lastError = :error, ' +
          'lastFailedAt = :at, firstFailedAt = if_not_exists(firstFailedAt, :at), #ttl = :ttl ADD attempts :attempts',
        ExpressionAttributeNames: { '#ttl': tableKeys.timeToLive, ...(event.document === undefined ? {} : { '#document': 'document' }) },
        ExpressionAttributeValues: {
          ...(event.document === undefined ? {} : { ':document': event.document }),
          ':eventId': event.id,
          ':sessionId': event.sessionId,
          ':version': event.version,
          ':body': event.body,
          ':error': failure.error.slice(0, 500),
          ':at': failure.at,
          ':ttl': Math.floor(Date.parse(failure.at) / 1000) + DEAD_LETTER_TTL_SECONDS,
          ':attempts': failure.attempts,
        },
      }),
    );
  }

  async openBreaker(tenant: string, webhookId: string, breaker: WebhookBreaker): Promise<void> {
    // The webhook's own item: every delivery reads it anyway, so every instance sees the breaker.
    await conditionally(
      this.table.send(
        new UpdateCommand({
          TableName: this.table.tableName,
          Key: { pk: keys.webhooks(tenant), sk: keys.webhook(webhookId) },
          UpdateExpression: 'SET breakerFailures = :failures, breakerOpenUntil = :until REMOVE breakerProbeUntil, breakerProbeBy',
          ConditionExpression: conditions.itemExists,
          ExpressionAttributeValues: { ':failures': breaker.failures, ':until': breaker.openUntil },
        }),
      ),
    );
  }

  async claimProbe(tenant: string, webhookId: string, options: { now: number; until: number }): Promise<ProbeClaim> {
    // Tells our own claim from another's when the SDK resends a claim whose answer was lost.
    const claimId = randomUUID();
    try {
      await this.table.send(
        new UpdateCommand({
          TableName: this.table.tableName,
          Key: { pk: keys.webhooks(tenant), sk: keys.webhook(webhookId) },
          UpdateExpression: 'SET breakerProbeUntil = :until, breakerProbeBy = :claim',
          // Still half-open, and nobody's probe under way: one delivery wins, the rest see it open.
          ConditionExpression: 'breakerOpenUntil <= :now AND (attribute_not_exists(breakerProbeUntil) OR breakerProbeUntil <= :now)',
          ExpressionAttributeValues: { ':now': options.now, ':until': options.until, ':claim': claimId },
          ReturnValuesOnConditionCheckFailure: 'ALL_OLD',
        }),
      );
      return 'claimed';
    } catch (error) {
      if (!isConditionFailure(error)) throw error;
      // The item as the condition found it: a deleted webhook or a closed breaker has no opening
      // left; our own claim, landed by an attempt whose answer the SDK lost, holds our id.
      const found = error.Item ? unmarshall(error.Item as Record<string, AttributeValue>) : undefined;
      if (found?.breakerProbeBy === claimId) return 'claimed';
      return found === undefined || found.breakerOpenUntil === undefined ? 'closed' : 'taken';
    }
  }

  async closeBreaker(tenant: string, webhookId: string): Promise<void> {
    await conditionally(
      this.table.send(
        new UpdateCommand({
          TableName: this.table.tableName,
          Key: { pk: keys.webhooks(tenant), sk: keys.webhook(webhookId) },
          UpdateExpression: 'REMOVE breakerFailures, breakerOpenUntil, breakerProbeUntil, breakerProbeBy',
          ConditionExpression: conditions.itemExists,
        }),
      ),
    );
  }

  async listDeadLetters(tenant: string, webhookId: string, options: { limit: number; cursor?: string }): Promise<Page<DeadLetter>> {
    const range = { tableName: this.table.tableName, partition: keys.deadLetters(tenant, webhookId), prefix: keys.deadLetterPrefix };
    const { Items, LastEvaluatedKey } = await this.table.send(new QueryCommand(prefixPageQuery(range, { ...options, consistent: true })));
    return pageOf(
      (Items ?? []).map((item) => toDeadLetter(webhookId, item)),
      LastEvaluatedKey,
      range,
    );
  }

  async deleteDeadLetter(tenant: string, webhookId: string, event: Omit<DeadLetterEvent, 'id' | 'body'>): Promise<void> {
    await this.table.send(
      new DeleteCommand({
        TableName: this.table.tableName,
        Key: { pk: keys.deadLetters(tenant, webhookId), sk: keys.deadLetter(event.sessionId, event.version, event.document) },
      }),
    );
  }
}

function toWebhook(item: Item): WebhookRecord {
  return {
    id: String(item.id),
    url: String(item.url),
    // A secret stored before secrets were sealed reads as it is.
    secret: typeof item.secret === 'string' ? openSecret(item.secret, secretOwner(item)) : null,
    sessionId: typeof item.sessionId === 'string' ? item.sessionId : null,
    agentId: typeof item.agentId === 'string' ? item.agentId : null,
    createdAt: String(item.createdAt),
    ...(typeof item.breakerOpenUntil === 'number' ? { breaker: breakerOf(item) } : {}),
  };
}

function breakerOf(item: Item): WebhookBreaker {
  return {
    failures: Number(item.breakerFailures ?? 1),
    openUntil: Number(item.breakerOpenUntil),
    ...(typeof item.breakerProbeUntil === 'number' ? { probeUntil: item.breakerProbeUntil } : {}),
  };
}

function toDeadLetter(webhookId: string, item: Item): DeadLetter {
  return {
    webhookId,
    eventId: String(item.eventId),
    sessionId: String(item.sessionId),
    version: Number(item.version),
    ...(typeof item.document === 'string' ? { document: item.document } : {}),
    body: String(item.body),
    attempts: Number(item.attempts ?? 0),
    lastError: String(item.lastError ?? ''),
    firstFailedAt: String(item.firstFailedAt),
    lastFailedAt: String(item.lastFailedAt),
  };
}
