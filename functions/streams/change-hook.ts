import type { Context, DynamoDBBatchResponse, DynamoDBStreamEvent } from 'aws-lambda';
import { schemaReader } from '../core/agent-service.js';
import { ChangeFanout, type ChangeInput } from '../core/change-fanout.js';
import { DEFAULT_HISTORY_DAYS, MemoryUpkeep, type MemoryUpkeepInput } from '../core/memory-changes.js';
import { MemoryFanout } from '../core/memory-events.js';
import { WebhookDeliverer, WebhookLanes, type WebhookQueue } from '../core/webhook-lanes.js';
import { dynamoDbClient } from '../store/client.js';
import { ensureSealingKey } from '../store/key-ring.js';
import { DynamoDbLiveStore } from '../store/live-store.js';
import { recordedMemoryChangeOf } from '../store/memory-stream.js';
import { DynamoDbMemoryUpkeep } from '../store/memory-upkeep-store.js';
import { createStores } from '../store/stores.js';
import { recordedChangeOf } from '../store/stream-images.js';
import { defaultTableName } from '../store/table.js';
import { DynamoDbWebhookStore } from '../store/webhook-store.js';
import { instrumented, traced } from '../telemetry/telemetry.js';
import { webhookSender } from '../workers/webhook-delivery.js';
import { liveBroadcaster, memoryBroadcaster } from '../ws/broadcast.js';
import { connectionGatewayFromEnv } from '../ws/connections.js';
import { eventBridgeClient, eventBridgePublisher } from './event-bus.js';
import { sqsClient, sqsWebhookQueue } from './webhook-queue.js';

/**
 * The change hook: the table's stream → one `state.changed` event per recorded version (and
 * one `run.changed`, `profile.changed` or `shared.changed` per document version a commit
 * recorded) → webhooks, live WebSocket clients and (in AWS) the EventBridge bus. In AWS it is the target
 * of the stream's event source mapping, which lets through only version records
 * (store/stream-images.ts `changeRecordFilters`); locally functions/local/stream-poller.ts
 * calls it with the same event shape and filter.
 *
 * It answers with partial batch failures: a record whose event could not be built, published
 * or queued is reported (the first such record of its session), and the stream retries from
 * there. The webhook consumer delivers nothing itself: it queues each delivery in its lane,
 * one per webhook and stream (core/webhook-lanes.ts; in AWS an SQS FIFO queue,
 * webhook-queue.ts, which the delivery hook reads, delivery-hook.ts).
 *
 * It also moves each written session's activity (`updatedAt`, the session list's order) to
 * its newest version, once per session and batch: a state write is then one PutItem.
 *
 * Webhooks and WebSocket subscriptions with an `agentId` get events cut to that agent's typed
 * fields: for those, the hook reads the tenant's agents (one Query of `A#<tenant>` per session
 * agent and batch) to know the fields of the session's hierarchy. The event bus gets whole
 * events: it is the operator's own infrastructure.
 *
 * Two consumers read the stream, each with its own event source mapping (locally, its own
 * poller), so that live pushes never wait on webhooks (API.md section 9): `live` (WebSocket
 * clients, the event bus, session and memory upkeep) and `webhooks` (the webhook deliveries
 * of state and memory events), and the webhook lanes hold a dead endpoint's
 * deliveries apart from everyone else's.
 *
 * Env: AGENTSTATE_TABLE, AGENTSTATE_CHANGE_CONSUMER (`live`, `webhooks`; unset: both, one
 * consumer), AGENTSTATE_EVENT_BUS (EventBridge bus name; unset: no bus),
 * AGENTSTATE_WEBSOCKET_ENDPOINT (the WebSocket stage's callback URL; unset: the local shim),
 * AGENTSTATE_WEBHOOK_QUEUE_URL (the webhook queue; unset: deliveries are made in the batch,
 * unless the local server passes its lanes).
 */

/** Deliveries stop being started this long before the invocation's deadline. */
const DEADLINE_MARGIN_MS = 5_000;

/** What one consumer of the stream does: live sync, the bus and upkeep; webhooks; or both. */
export type ChangeConsumer = 'live' | 'webhooks' | 'all';

/** Where a consumer's webhook deliveries go: the given queue, else delivered in the batch. */
interface HookOptions {
  queue?: WebhookQueue;
}

function fanoutFromEnv(env: NodeJS.ProcessEnv, consumer: ChangeConsumer, options: HookOptions): ChangeFanout {
  const stores = createStores(dynamoDbClient(env), env.AGENTSTATE_TABLE ?? defaultTableName);
  const live = consumer !== 'webhooks';
  const gateway = live ? connectionGatewayFromEnv(env) : undefined;
  const bus = live ? env.AGENTSTATE_EVENT_BUS : undefined;
  return new ChangeFanout({
    readState: (scope, version, incarnation) => stores.sessions.getVersionState(scope, version, incarnation),
    webhooks: new DynamoDbWebhookStore(stores.table),
    // Same address rules as workers: in a Lambda only public https endpoints.
    send: webhookSender({ allowLoopbackHttp: !env.AWS_LAMBDA_FUNCTION_NAME }),
    deliversWebhooks: consumer !== 'live',
    ...(options.queue ? { queue: options.queue } : {}),
    schemaFor: schemaReader(stores.agents),
    // Session upkeep is the live consumer's: one of the two consumers does it, once.
    ...(live
      ? {
          moveActivity: (scope, at) => stores.sessions.moveActivity(scope, at),
          sweepPieces: async (scope) => {
            await stores.sessions.sweepPieces(scope);
          },
        }
      : {}),
    ...(gateway ? { broadcast: liveBroadcaster(new DynamoDbLiveStore(stores.table), gateway) } : {}),
    ...(bus ? { publish: eventBridgePublisher(traced(eventBridgeClient()), bus) } : {}),
  });
}

/** The memory events' fan-out: the same webhooks, sender and bus as the state events'. */
function memoryFanoutFromEnv(env: NodeJS.ProcessEnv, consumer: ChangeConsumer, options: HookOptions): MemoryFanout {
  const stores = createStores(dynamoDbClient(env), env.AGENTSTATE_TABLE ?? defaultTableName);
  const live = consumer !== 'webhooks';
  const bus = live ? env.AGENTSTATE_EVENT_BUS : undefined;
  const gateway = live ? connectionGatewayFromEnv(env) : undefined;
  return new MemoryFanout({
    webhooks: new DynamoDbWebhookStore(stores.table),
    send: webhookSender({ allowLoopbackHttp: !env.AWS_LAMBDA_FUNCTION_NAME }),
    deliversWebhooks: consumer !== 'live',
    ...(options.queue ? { queue: options.queue } : {}),
    ...(gateway ? { broadcast: memoryBroadcaster(new DynamoDbLiveStore(stores.table), gateway) } : {}),
    ...(bus ? { publish: eventBridgePublisher(traced(eventBridgeClient()), bus) } : {}),
  });
}

/**
 * The local server's webhook lanes (core/webhook-lanes.ts): one in-memory queue per (webhook,
 * stream), delivered by the same rule as the AWS delivery function, so that a dead endpoint
 * holds only its own lanes.
 */
export function webhookLanes(env: NodeJS.ProcessEnv = process.env): WebhookLanes {
  const stores = createStores(dynamoDbClient(env), env.AGENTSTATE_TABLE ?? defaultTableName);
  const webhooks = new DynamoDbWebhookStore(stores.table);
  const deliverer = new WebhookDeliverer({ webhooks, send: webhookSender({ allowLoopbackHttp: !env.AWS_LAMBDA_FUNCTION_NAME }) });
  return new WebhookLanes(deliverer, { webhooks });
}

/** In AWS the webhook hook's deliveries go to the stack's FIFO queue (streams/webhook-queue.ts). */
function queueFromEnv(env: NodeJS.ProcessEnv): HookOptions {
  const url = env.AGENTSTATE_WEBHOOK_QUEUE_URL;
  return url ? { queue: sqsWebhookQueue(sqsClient(), url) } : {};
}

function consumerFromEnv(env: NodeJS.ProcessEnv): ChangeConsumer {
  const value = env.AGENTSTATE_CHANGE_CONSUMER;
  return value === 'live' || value === 'webhooks' ? value : 'all';
}

let upkeep: MemoryUpkeep | undefined;

/**
 * The memory upkeep: the namespace list and replaced versions. `AGENTSTATE_MEMORY_HISTORY_DAYS`
 * is how long a replaced version is kept (default 30; 0 keeps none). It is upkeep, not events:
 * the live consumer does it (one of the two, once).
 */
function memoryUpkeep(): MemoryUpkeep {
  if (!upkeep) {
    const env = process.env;
    const stores = createStores(dynamoDbClient(env), env.AGENTSTATE_TABLE ?? defaultTableName);
    const days = Number(env.AGENTSTATE_MEMORY_HISTORY_DAYS ?? DEFAULT_HISTORY_DAYS);
    upkeep = new MemoryUpkeep(new DynamoDbMemoryUpkeep(stores.table), {
      historySeconds: Number.isFinite(days) && days > 0 ? Math.round(days * 86_400) : 0,
    });
  }
  return upkeep;
}

type ChangeHandler = (event: DynamoDBStreamEvent, context?: Pick<Context, 'getRemainingTimeInMillis'>) => Promise<DynamoDBBatchResponse>;

/**
 * A stream handler for one consumer; its fan-outs are built from the environment on first use.
 * With `queue`, the webhook consumer hands its deliveries to it (the local server's lanes,
 * `webhookLanes`; in AWS the SQS FIFO queue) instead of delivering them in the batch.
 */
export function changeHook(consumer: ChangeConsumer, options: HookOptions = {}): ChangeHandler {
  let fanouts: { state: ChangeFanout; memory: MemoryFanout } | undefined;
  return (event, context) => {
    fanouts ??= {
      state: fanoutFromEnv(process.env, consumer, options),
      memory: memoryFanoutFromEnv(process.env, consumer, options),
    };
    return processBatch(fanouts, consumer, event, context);
  };
}

let envHandler: ChangeHandler | undefined;

/**
 * The Lambda handler: the consumer `AGENTSTATE_CHANGE_CONSUMER` names (unset: both in one).
 * In a Lambda, each batch is one log line (records, events, failures) and two metrics: how
 * long its oldest record waited between its write and this hook (`EventDeliveryLag`), and how
 * many records it reported failed (`EventBatchFailures`).
 */
export const handler = instrumented(
  'change hook',
  (event: DynamoDBStreamEvent, context?: Pick<Context, 'getRemainingTimeInMillis'>) => {
    envHandler ??= changeHook(consumerFromEnv(process.env), queueFromEnv(process.env));
    return envHandler(event, context);
  },
  (event: DynamoDBStreamEvent, { result }) => {
    const oldest = Math.min(...event.Records.map((record) => record.dynamodb?.ApproximateCreationDateTime ?? Number.POSITIVE_INFINITY));
    const failed = result?.batchItemFailures.length ?? event.Records.length;
    return {
      message: 'stream batch',
      level: failed > 0 ? 'warn' : 'info',
      fields: { records: event.Records.length, failed, consumer: consumerFromEnv(process.env) },
      metrics: [
        ...(Number.isFinite(oldest) ? [['EventDeliveryLag', Math.max(0, Date.now() - oldest * 1000)] as const] : []),
        ...(failed > 0 ? [['EventBatchFailures', failed] as const] : []),
      ],
    };
  },
) as ChangeHandler;

async function processBatch(
  fanouts: { state: ChangeFanout; memory: MemoryFanout },
  consumer: ChangeConsumer,
  event: DynamoDBStreamEvent,
  context?: Pick<Context, 'getRemainingTimeInMillis'>,
): Promise<DynamoDBBatchResponse> {
  const inputs: ChangeInput[] = [];
  const memory: MemoryUpkeepInput[] = [];
  let unreadable: string | undefined;
  for (const record of event.Records) {
    const key = record.dynamodb?.SequenceNumber ?? '';
    try {
      const memoryChange = recordedMemoryChangeOf(record);
      if (memoryChange) {
        memory.push({ key, change: memoryChange });
        continue;
      }
      // Everything else (markers, sessions, dead letters, deletes) is not an event; the
      // event source filter keeps it away, and this check keeps a misconfigured filter harmless.
      const change = recordedChangeOf(record);
      if (change) inputs.push({ key, change });
    } catch (error) {
      // A record that cannot be read fails with everything after it (their order matters);
      // retries, bisection and finally the on-failure queue take it from there.
      console.error('agentstate: unreadable stream record', key, error);
      unreadable = key;
      break;
    }
  }
  const failed: string[] = [];
  // Webhook secrets are sealed with the deployment's key (store/key-ring.ts).
  if (consumer !== 'live' && inputs.length + memory.length > 0) await ensureSealingKey({ create: false });
  const remaining = context?.getRemainingTimeInMillis?.();
  const deadline = remaining === undefined ? undefined : Date.now() + remaining - DEADLINE_MARGIN_MS;
  const within = deadline === undefined ? {} : { deadline };
  const [events, kept, memoryDelivered] = await Promise.all([
    inputs.length > 0 ? fanouts.state.process(inputs, within) : { failed: [] },
    memory.length > 0 && consumer !== 'webhooks' ? memoryUpkeep().process(memory) : { failed: [] },
    memory.length > 0 ? fanouts.memory.process(memory, within) : { failed: [] },
  ]);
  failed.push(...events.failed, ...kept.failed, ...memoryDelivered.failed);
  if (unreadable !== undefined) failed.push(unreadable);
  return { batchItemFailures: failed.map((itemIdentifier) => ({ itemIdentifier })) };
}
