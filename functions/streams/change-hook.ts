import { EventBridgeClient } from '@aws-sdk/client-eventbridge';
import type { Context, DynamoDBBatchResponse, DynamoDBStreamEvent } from 'aws-lambda';
import { schemaReader } from '../core/agent-service.js';
import { ChangeFanout, type ChangeInput } from '../core/change-fanout.js';
import { DEFAULT_HISTORY_DAYS, MemoryUpkeep, type MemoryUpkeepInput } from '../core/memory-changes.js';
import { MemoryFanout } from '../core/memory-events.js';
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
import { eventBridgePublisher } from './event-bus.js';

/**
 * The change hook: the table's stream → one `state.changed` event per recorded version (and
 * one `run.changed`, `profile.changed` or `shared.changed` per document version a commit
 * recorded) → webhooks, live WebSocket clients and (in AWS) the EventBridge bus. In AWS it is the target
 * of the stream's event source mapping, which lets through only version records
 * (store/stream-images.ts `changeRecordFilters`); locally functions/local/stream-poller.ts
 * calls it with the same event shape and filter.
 *
 * It answers with partial batch failures: a record whose event could not be built, published
 * or dead-lettered is reported (the first such record of its session), and the stream retries
 * from there. Webhook endpoints that fail do not fail the batch: their deliveries become dead
 * letters (core/change-fanout.ts).
 *
 * It also moves each written session's activity (`updatedAt`, the session list's order) to
 * its newest version, once per session and batch: a state write is then one PutItem.
 *
 * Webhooks and WebSocket subscriptions with an `agentId` get events cut to that agent's typed
 * fields: for those, the hook reads the tenant's agents (one Query of `A#<tenant>` per session
 * agent and batch) to know the fields of the session's hierarchy. The event bus gets whole
 * events: it is the operator's own infrastructure.
 *
 * Env: AGENTSTATE_TABLE, AGENTSTATE_EVENT_BUS (EventBridge bus name; unset: no bus),
 * AGENTSTATE_WEBSOCKET_ENDPOINT (the WebSocket stage's callback URL; unset: the local shim).
 */

/** Deliveries stop being started this long before the invocation's deadline. */
const DEADLINE_MARGIN_MS = 5_000;

let fanout: ChangeFanout | undefined;

function changeFanout(): ChangeFanout {
  fanout ??= fanoutFromEnv(process.env);
  return fanout;
}

function fanoutFromEnv(env: NodeJS.ProcessEnv): ChangeFanout {
  const stores = createStores(dynamoDbClient(env), env.AGENTSTATE_TABLE ?? defaultTableName);
  const gateway = connectionGatewayFromEnv(env);
  const bus = env.AGENTSTATE_EVENT_BUS;
  return new ChangeFanout({
    readState: (scope, version, incarnation) => stores.sessions.getVersionState(scope, version, incarnation),
    webhooks: new DynamoDbWebhookStore(stores.table),
    // Same address rules as workers: in a Lambda only public https endpoints.
    send: webhookSender({ allowLoopbackHttp: !env.AWS_LAMBDA_FUNCTION_NAME }),
    schemaFor: schemaReader(stores.agents),
    moveActivity: (scope, at) => stores.sessions.moveActivity(scope, at),
    sweepPieces: async (scope) => {
      await stores.sessions.sweepPieces(scope);
    },
    ...(gateway ? { broadcast: liveBroadcaster(new DynamoDbLiveStore(stores.table), gateway) } : {}),
    ...(bus ? { publish: eventBridgePublisher(traced(new EventBridgeClient({})), bus) } : {}),
  });
}

/** Replaces the fan-out (tests); undefined rebuilds it from the environment on next use. */
export function useChangeFanout(replacement: ChangeFanout | undefined): void {
  fanout = replacement;
}

let memoryEvents: MemoryFanout | undefined;

/** The memory events' fan-out: the same webhooks, sender and bus as the state events'. */
function memoryFanout(): MemoryFanout {
  if (!memoryEvents) {
    const env = process.env;
    const stores = createStores(dynamoDbClient(env), env.AGENTSTATE_TABLE ?? defaultTableName);
    const bus = env.AGENTSTATE_EVENT_BUS;
    const gateway = connectionGatewayFromEnv(env);
    memoryEvents = new MemoryFanout({
      webhooks: new DynamoDbWebhookStore(stores.table),
      send: webhookSender({ allowLoopbackHttp: !env.AWS_LAMBDA_FUNCTION_NAME }),
      ...(gateway ? { broadcast: memoryBroadcaster(new DynamoDbLiveStore(stores.table), gateway) } : {}),
      ...(bus ? { publish: eventBridgePublisher(new EventBridgeClient({}), bus) } : {}),
    });
  }
  return memoryEvents;
}

let upkeep: MemoryUpkeep | undefined;

/**
 * The memory upkeep: the namespace list and replaced versions. `AGENTSTATE_MEMORY_HISTORY_DAYS`
 * is how long a replaced version is kept (default 30; 0 keeps none).
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

/**
 * In a Lambda, each batch is one log line (records, events, failures) and two metrics: how
 * long its oldest record waited between its write and this hook (`EventDeliveryLag`), and how
 * many records it reported failed (`EventBatchFailures`).
 */
export const handler = instrumented('change hook', processBatch, (event: DynamoDBStreamEvent, { result }) => {
  const oldest = Math.min(...event.Records.map((record) => record.dynamodb?.ApproximateCreationDateTime ?? Number.POSITIVE_INFINITY));
  const failed = result?.batchItemFailures.length ?? event.Records.length;
  return {
    message: 'stream batch',
    level: failed > 0 ? 'warn' : 'info',
    fields: { records: event.Records.length, failed },
    metrics: [
      ...(Number.isFinite(oldest) ? [['EventDeliveryLag', Math.max(0, Date.now() - oldest * 1000)] as const] : []),
      ...(failed > 0 ? [['EventBatchFailures', failed] as const] : []),
    ],
  };
}) as (event: DynamoDBStreamEvent, context?: Pick<Context, 'getRemainingTimeInMillis'>) => Promise<DynamoDBBatchResponse>;

async function processBatch(
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
  if (inputs.length > 0) await ensureSealingKey({ create: false });
  const remaining = context?.getRemainingTimeInMillis?.();
  const deadline = remaining === undefined ? undefined : Date.now() + remaining - DEADLINE_MARGIN_MS;
  const within = deadline === undefined ? {} : { deadline };
  const [events, kept, memoryDelivered] = await Promise.all([
    inputs.length > 0 ? changeFanout().process(inputs, within) : { failed: [] },
    memory.length > 0 ? memoryUpkeep().process(memory) : { failed: [] },
    memory.length > 0 ? memoryFanout().process(memory, within) : { failed: [] },
  ]);
  failed.push(...events.failed, ...kept.failed, ...memoryDelivered.failed);
  if (unreadable !== undefined) failed.push(unreadable);
  return { batchItemFailures: failed.map((itemIdentifier) => ({ itemIdentifier })) };
}
