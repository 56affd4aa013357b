import { schemaReader } from '../core/agents/agent-reader.js';
import { ChangeFanout } from '../core/fanout/change-fanout.js';
import { MemoryFanout } from '../core/fanout/memory-fanout.js';
import { TenantCache } from '../core/kernel/tenant-cache.js';
import { WebhookDeliverer } from '../core/webhooks/delivery.js';
import { WebhookLanes } from '../core/webhooks/lanes.js';
import type { WebhookQueue, WebhookRecord } from '../core/webhooks/records.js';
import { ensureSealingKey } from '../store/access/key-ring.js';
import { releasedVersions } from '../store/events/stream-images.js';
import { DynamoDbWebhookStore } from '../store/events/webhook-store.js';
import type { TableClient } from '../store/table/table-client.js';
import { webhookSender } from '../workers/webhook-sender.js';
import { instrumentedStreamHandler, type StreamConsumer, type StreamHandler, storesFromEnv, streamHandler } from './stream-batch.js';
import { sqsClient, sqsWebhookQueue } from './webhook-queue.js';

/**
 * The webhook hook, the stream's webhook consumer: the table's stream → the webhook
 * deliveries of every state, document and memory event. It delivers nothing itself: it builds
 * each delivery (the event as the webhook may see it, cut to its agent's typed fields) and
 * queues it in its lane, one per webhook and stream (core/webhooks/lanes.ts; in AWS an SQS FIFO
 * queue, webhook-queue.ts, which the delivery hook reads, delivery-hook.ts; under `npm start`
 * the local server's lanes).
 *
 * It reads the stream on its own event source mapping, apart from the change hook
 * (change-hook.ts), so that a webhook endpoint that never answers holds up no live push (API.md
 * section 9), and it is an entry of its own, so that its function bundles no WebSocket, event
 * bus or upkeep code.
 *
 * Env: AGENTSTATE_TABLE, AGENTSTATE_WEBHOOK_QUEUE_URL (the webhook queue; unset: deliveries are
 * made in the batch, unless the local server passes its lanes).
 */

/** Who delivers when there is no queue, as its dead letters name it. */
const DELIVERED_BY = 'the webhook hook';

/**
 * The webhook store, with each tenant's webhook list read at most once a second per instance
 * however many batches come (API.md section 14; core/kernel/tenant-cache.ts: a registration
 * through this process is seen by the next batch, elsewhere within that second).
 */
class ListedOnceASecond extends DynamoDbWebhookStore {
  private readonly lists: TenantCache<WebhookRecord[]>;

  constructor(table: TableClient) {
    super(table);
    this.lists = new TenantCache('webhooks', (tenant) => super.allWebhooks(tenant), table.now);
  }

  override allWebhooks(tenant: string): Promise<WebhookRecord[]> {
    return this.lists.get(tenant);
  }
}

function webhookConsumer(env: NodeJS.ProcessEnv, queue: WebhookQueue | undefined): StreamConsumer {
  const stores = storesFromEnv(env);
  const webhooks = new ListedOnceASecond(stores.table);
  // Same address rules as workers: in a Lambda only public https endpoints.
  const send = webhookSender({ allowLoopbackHttp: !env.AWS_LAMBDA_FUNCTION_NAME });
  const delivery = { webhooks, send, deliveredBy: DELIVERED_BY, ...(queue ? { queue } : {}) };
  return {
    state: new ChangeFanout({
      readState: (scope, version, incarnation) => stores.sessions.getVersionState(scope, version, incarnation),
      schemaFor: schemaReader(stores.agents),
      ...delivery,
    }),
    memory: new MemoryFanout(delivery),
    releasedVersions: (opened) => releasedVersions(stores.table, opened),
    // Webhook secrets are sealed with the deployment's key (store/access/key-ring.ts).
    beforeEvents: () => ensureSealingKey({ create: false }),
  };
}

/**
 * The local server's webhook lanes (core/webhooks/lanes.ts): one in-memory queue per (webhook,
 * stream), delivered by the same rule as the AWS delivery function, so that a dead endpoint
 * holds only its own lanes.
 */
export function webhookLanes(env: NodeJS.ProcessEnv = process.env): WebhookLanes {
  const webhooks = new DynamoDbWebhookStore(storesFromEnv(env).table);
  const send = webhookSender({ allowLoopbackHttp: !env.AWS_LAMBDA_FUNCTION_NAME });
  const deliverer = new WebhookDeliverer({ webhooks, send, deliveredBy: "the local server's webhook lanes" });
  return new WebhookLanes(deliverer, { webhooks });
}

/**
 * A webhook consumer built from `process.env` on first use. With `queue`, it hands its
 * deliveries to it (the local server's lanes, `webhookLanes`); else to the SQS queue of
 * `AGENTSTATE_WEBHOOK_QUEUE_URL`, else it delivers them in the batch.
 */
export function webhookHook(options: { queue?: WebhookQueue } = {}): StreamHandler {
  return streamHandler(() => {
    const url = process.env.AGENTSTATE_WEBHOOK_QUEUE_URL;
    return webhookConsumer(process.env, options.queue ?? (url ? sqsWebhookQueue(sqsClient(), url) : undefined));
  });
}

/** The Lambda handler. */
export const handler = instrumentedStreamHandler('webhook hook', 'webhooks', webhookHook());
