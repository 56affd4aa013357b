import { createHash } from 'node:crypto';
import { type MessageAttributeValue, SendMessageBatchCommand, type SendMessageBatchRequestEntry, SQSClient } from '@aws-sdk/client-sqs';
import type { SQSRecord } from 'aws-lambda';
import type { DeadLetterEvent, QueuedDelivery, WebhookQueue } from '../core/webhooks/records.js';
import { AWS_CALL_TIMEOUTS } from '../store/table/client.js';
import { traced } from '../telemetry/telemetry.js';

/**
 * The webhook lanes in AWS (core/webhooks/lanes.ts): an SQS FIFO queue with one message group
 * per lane, (webhook, stream). SQS hands out a group's next message only once the one before
 * it is done, and every group on its own, so a lane stays in order and a dead endpoint's
 * backlog waits in its own groups; the delivery function (delivery-hook.ts) takes one message
 * at a time.
 *
 * A message is the delivery's body exactly as it goes out (at most 256 KiB,
 * core/fanout/change-fanout.ts `WEBHOOK_BODY_LIMIT_BYTES`; the queue takes 1 MiB) with what names
 * it in message attributes. The webhook itself is read again at delivery (its secret is never
 * in the queue, and a deleted webhook gets no more deliveries). The deduplication id is the
 * webhook and the event: a stream record retried within SQS's 5 minute window queues nothing
 * twice; later, receivers deduplicate by the event id as always (at least once).
 */

/** SendMessageBatch takes 10 entries and 1 MiB in all (SQS quotas, 2025). */
const MAX_ENTRIES = 10;
const MAX_REQUEST_BYTES = 1024 * 1024;
/** Room for the attributes' names, types and values in an entry's size. */
const ATTRIBUTE_BYTES = 1024;

/**
 * The SQS client of the webhook hook: each attempt bounded, as every AWS call here
 * (store/table/client.ts). It sends to its region's endpoint, not the queue URL's host (the same
 * place in AWS; `AWS_ENDPOINT_URL_SQS` wins where it is set).
 */
export function sqsClient(): SQSClient {
  return traced(new SQSClient({ maxAttempts: 3, requestHandler: AWS_CALL_TIMEOUTS, useQueueUrlAsEndpoint: false }));
}

/** Hex SHA-256: group and deduplication ids take at most 128 characters of a small alphabet. */
function digest(text: string): string {
  return createHash('sha256').update(text, 'utf8').digest('hex');
}

function attributesOf(delivery: QueuedDelivery): Record<string, MessageAttributeValue> {
  const text = (value: string): MessageAttributeValue => ({ DataType: 'String', StringValue: value });
  const { event } = delivery;
  return {
    tenant: text(delivery.tenant),
    webhookId: text(delivery.webhook.id),
    eventId: text(event.id),
    version: { DataType: 'Number', StringValue: String(event.version) },
    // SQS refuses empty attribute values: a memory event has no session.
    ...(event.sessionId === '' ? {} : { sessionId: text(event.sessionId) }),
    ...(event.document === undefined ? {} : { document: text(event.document) }),
  };
}

/**
 * Queues deliveries on the FIFO queue at `queueUrl`, in order, ten at a time. An entry SQS
 * refuses, or a request that fails, blocks its lane: nothing after it in that lane is sent in
 * a later request, and all of them are reported for the stream to retry. (Within one request
 * SQS answers per entry: should it refuse an entry and take a later one of the same lane, that
 * later one is queued first and the retried one after it. SQS refuses single entries for what
 * is wrong with them, size or attributes, which this code rules out, not for load.)
 */
export function sqsWebhookQueue(client: Pick<SQSClient, 'send'>, queueUrl: string): WebhookQueue {
  return {
    async enqueue(deliveries) {
      const blocked = new Set<string>();
      const failed: number[] = [];
      let batch: Array<{ index: number; entry: SendMessageBatchRequestEntry; bytes: number }> = [];
      const flush = async () => {
        if (batch.length === 0) return;
        const sending = batch;
        batch = [];
        let refused: Set<string>;
        try {
          const output = await client.send(new SendMessageBatchCommand({ QueueUrl: queueUrl, Entries: sending.map(({ entry }) => entry) }));
          refused = new Set((output.Failed ?? []).map((failure) => failure.Id ?? ''));
        } catch (error) {
          console.warn('agentstate: could not queue webhook deliveries', String(error));
          refused = new Set(sending.map(({ entry }) => entry.Id as string));
        }
        for (const { index, entry } of sending) {
          if (!refused.has(entry.Id as string)) continue;
          failed.push(index);
          blocked.add((deliveries[index] as QueuedDelivery).lane);
        }
      };
      for (const [index, delivery] of deliveries.entries()) {
        if (blocked.has(delivery.lane)) {
          failed.push(index);
          continue;
        }
        const bytes = Buffer.byteLength(delivery.event.body, 'utf8') + ATTRIBUTE_BYTES;
        if (batch.length === MAX_ENTRIES || batch.reduce((sum, entry) => sum + entry.bytes, 0) + bytes > MAX_REQUEST_BYTES) await flush();
        // A lane blocked by the batch just sent stops here too.
        if (blocked.has(delivery.lane)) {
          failed.push(index);
          continue;
        }
        batch.push({
          index,
          bytes,
          entry: {
            Id: String(index),
            MessageBody: delivery.event.body,
            MessageGroupId: digest(delivery.lane),
            MessageDeduplicationId: digest(JSON.stringify([delivery.tenant, delivery.webhook.id, delivery.event.id])),
            MessageAttributes: attributesOf(delivery),
          },
        });
      }
      await flush();
      return { failed: failed.sort((a, b) => a - b) };
    },
  };
}

/** A queued delivery as the delivery function reads it back; null when its attributes are not ours. */
export function queuedDeliveryOf(record: SQSRecord): { tenant: string; webhookId: string; lane: string; event: DeadLetterEvent } | null {
  const attribute = (name: string) => record.messageAttributes?.[name]?.stringValue;
  const tenant = attribute('tenant');
  const webhookId = attribute('webhookId');
  const eventId = attribute('eventId');
  const version = Number(attribute('version'));
  const lane = record.attributes?.MessageGroupId;
  if (!tenant || !webhookId || !eventId || !Number.isInteger(version) || !lane) return null;
  const document = attribute('document');
  return {
    tenant,
    webhookId,
    lane,
    event: { id: eventId, sessionId: attribute('sessionId') ?? '', version, body: record.body, ...(document ? { document } : {}) },
  };
}
