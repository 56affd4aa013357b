import type { Context, SQSBatchResponse, SQSEvent } from 'aws-lambda';
import { WebhookDeliverer } from '../core/webhooks/delivery.js';
import type { QueuedDelivery, WebhookRecord } from '../core/webhooks/records.js';
import { ensureSealingKey } from '../store/access/key-ring.js';
import { DynamoDbWebhookStore } from '../store/events/webhook-store.js';
import { dynamoDbClient } from '../store/table/client.js';
import { defaultTableName } from '../store/table/table.js';
import { TableClient } from '../store/table/table-client.js';
import { instrumented } from '../telemetry/telemetry.js';
import { webhookSender } from '../workers/webhook-sender.js';
import { queuedDeliveryOf } from './webhook-queue.js';

/**
 * The delivery hook: the webhook queue (an SQS FIFO queue, one message group per webhook and
 * stream; streams/webhook-queue.ts) → webhook endpoints. Its event source mapping hands it
 * one message at a time, so a delivery that waits out a dead endpoint holds no other lane's.
 * Each delivery follows the one rule of core/webhooks/delivery.ts (3 attempts with backoff, then
 * a dead letter of the webhook; none while the endpoint's breaker is open, breaker.ts).
 *
 * It answers with partial batch failures: a delivery whose dead letter could not be recorded
 * is reported, with everything after it of its lane (FIFO order), and SQS gives it again once
 * its visibility timeout is over; after the queue's `maxReceiveCount` it moves to the delivery
 * dead-letter queue, for the operator. A message for a webhook deleted since is done.
 *
 * Env: AGENTSTATE_TABLE.
 */

/** Deliveries stop being started this long before the invocation's deadline. */
const DEADLINE_MARGIN_MS = 5_000;

let deliverer: { store: DynamoDbWebhookStore; deliverer: WebhookDeliverer } | undefined;

function delivererFromEnv(env: NodeJS.ProcessEnv): { store: DynamoDbWebhookStore; deliverer: WebhookDeliverer } {
  const store = new DynamoDbWebhookStore(new TableClient(dynamoDbClient(env), env.AGENTSTATE_TABLE ?? defaultTableName));
  // Same address rules as workers: in a Lambda only public https endpoints.
  const send = webhookSender({ allowLoopbackHttp: !env.AWS_LAMBDA_FUNCTION_NAME });
  return { store, deliverer: new WebhookDeliverer({ webhooks: store, send, deliveredBy: 'the delivery hook' }) };
}

type DeliveryHandler = (event: SQSEvent, context?: Pick<Context, 'getRemainingTimeInMillis'>) => Promise<SQSBatchResponse>;

/**
 * The Lambda handler. Each batch is one log line (messages, failures) and the metrics of its
 * deliveries (`WebhookDeadLetters`).
 */
export const handler = instrumented(
  'delivery hook',
  async (event: SQSEvent, context?: Pick<Context, 'getRemainingTimeInMillis'>): Promise<SQSBatchResponse> => {
    deliverer ??= delivererFromEnv(process.env);
    return deliverBatch(deliverer, event, context);
  },
  (event: SQSEvent, { result }) => {
    const failed = result?.batchItemFailures.length ?? event.Records.length;
    return {
      message: 'webhook deliveries',
      level: failed > 0 ? 'warn' : 'info',
      fields: { messages: event.Records.length, failed },
      metrics: [],
    };
  },
) as DeliveryHandler;

async function deliverBatch(
  { store, deliverer }: { store: DynamoDbWebhookStore; deliverer: WebhookDeliverer },
  event: SQSEvent,
  context?: Pick<Context, 'getRemainingTimeInMillis'>,
): Promise<SQSBatchResponse> {
  // Webhook secrets are sealed with the deployment's key (store/access/key-ring.ts).
  await ensureSealingKey({ create: false });
  const webhooks = new Map<string, Promise<WebhookRecord | null>>();
  const webhookOf = (tenant: string, webhookId: string) => {
    const key = JSON.stringify([tenant, webhookId]);
    let found = webhooks.get(key);
    if (!found) {
      found = store.getWebhook(tenant, webhookId);
      webhooks.set(key, found);
    }
    return found;
  };

  const failedIds: string[] = [];
  const blocked = new Set<string>();
  const deliveries: QueuedDelivery[] = [];
  const messageIds: string[] = [];
  for (const record of event.Records) {
    const lane = record.attributes?.MessageGroupId ?? '';
    const queued = queuedDeliveryOf(record);
    let webhook: WebhookRecord | null = null;
    if (queued && !blocked.has(lane)) {
      try {
        webhook = await webhookOf(queued.tenant, queued.webhookId);
        if (!webhook) continue; // deleted since: its deliveries end with it
      } catch (error) {
        console.warn('agentstate: could not read a webhook; its delivery will be retried', queued.webhookId, String(error));
      }
    } else if (!queued) {
      console.error('agentstate: a webhook queue message without its attributes; it stays until the dead-letter queue', record.messageId);
    }
    if (!queued || !webhook) {
      // FIFO: nothing after a failed message of its lane may go before it.
      blocked.add(lane);
      failedIds.push(record.messageId);
      continue;
    }
    deliveries.push({ tenant: queued.tenant, webhook, lane: queued.lane, event: queued.event });
    messageIds.push(record.messageId);
  }

  const remaining = context?.getRemainingTimeInMillis?.();
  const deadline = remaining === undefined ? undefined : Date.now() + remaining - DEADLINE_MARGIN_MS;
  const { failed } = await deliverer.deliver(deliveries, deadline === undefined ? {} : { deadline });
  failedIds.push(...failed.map((index) => messageIds[index] as string));
  return { batchItemFailures: failedIds.map((itemIdentifier) => ({ itemIdentifier })) };
}
