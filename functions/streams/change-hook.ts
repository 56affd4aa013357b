import { schemaReader } from '../core/agents/agent-reader.js';
import { ChangeFanout } from '../core/fanout/change-fanout.js';
import { MemoryFanout } from '../core/fanout/memory-fanout.js';
import { DEFAULT_HISTORY_DAYS, MemoryUpkeep } from '../core/memory/memory-changes.js';
import { pruneIntervalFrom } from '../core/model/retention.js';
import { ErasureFinisher } from '../store/erasure/erasure-finish.js';
import { DynamoDbLiveStore } from '../store/events/live-store.js';
import { DynamoDbMemoryUpkeep } from '../store/memory/memory-upkeep-store.js';
import { traced } from '../telemetry/telemetry.js';
import { liveBroadcaster, memoryBroadcaster } from '../ws/broadcast.js';
import { connectionGatewayFromEnv } from '../ws/connections.js';
import { eventBridgeClient, eventBridgePublisher } from './event-bus.js';
import { withFollowUp } from './prune-follow-up.js';
import { instrumentedStreamHandler, type StreamConsumer, type StreamHandler, storesFromEnv, streamHandler } from './stream-batch.js';

/**
 * The change hook, the stream's live consumer: the table's stream → one `state.changed` event
 * per recorded version (and one `run.changed`, `profile.changed` or `shared.changed` per
 * document version a commit recorded, one `memory.changed` per memory write) → live WebSocket
 * clients and (in AWS) the EventBridge bus; and the upkeep that follows writes: each written
 * session's activity (`updatedAt`, the session list's order) moved to its newest version, once
 * per session and batch (a state write is then one PutItem), the pieces no version names
 * swept, the history of sessions with retention pruned (at most once a minute each), and
 * memory's namespace list and replaced versions kept.
 *
 * In AWS it is the target of one of the stream's two event source mappings, which let through
 * only version records (store/events/stream-images.ts `changeRecordFilters`); locally
 * functions/local/stream-poller.ts calls it with the same event shape and filter. The other
 * consumer, the webhook hook (webhook-hook.ts), reads the stream on its own, so that live pushes
 * never wait on a webhook endpoint (API.md section 9); this entry bundles none of its code.
 *
 * WebSocket subscriptions with an `agentId` get events cut to that agent's typed fields: for
 * those, the hook reads the tenant's agents (one Query of `A#<tenant>` per session agent and
 * batch) to know the fields of the session's hierarchy. The event bus gets whole events: it is
 * the operator's own infrastructure.
 *
 * Env: AGENTSTATE_TABLE, AGENTSTATE_EVENT_BUS (EventBridge bus name; unset: no bus),
 * AGENTSTATE_WEBSOCKET_ENDPOINT (the WebSocket stage's callback URL; unset: the local shim),
 * AGENTSTATE_MEMORY_HISTORY_DAYS (how long a replaced memory version is kept; default 30, 0
 * keeps none), AGENTSTATE_PRUNE_INTERVAL_SECONDS (how often a session's history is pruned at
 * most; default 60).
 */

function liveConsumer(env: NodeJS.ProcessEnv): StreamConsumer {
  const stores = storesFromEnv(env);
  const gateway = connectionGatewayFromEnv(env);
  const bus = env.AGENTSTATE_EVENT_BUS;
  const publish = bus ? { publish: eventBridgePublisher(traced(eventBridgeClient()), bus) } : {};
  const live = gateway ? new DynamoDbLiveStore(stores.table) : undefined;
  const days = Number(env.AGENTSTATE_MEMORY_HISTORY_DAYS ?? DEFAULT_HISTORY_DAYS);
  const pruneEvery = pruneIntervalFrom(env);
  return {
    state: new ChangeFanout({
      readState: (scope, version, incarnation) => stores.sessions.getVersionState(scope, version, incarnation),
      deliversWebhooks: false,
      schemaFor: schemaReader(stores.agents),
      moveActivity: (scope, at, lifetime) => stores.sessions.moveActivity(scope, at, false, lifetime),
      sweepPieces: async (scope) => {
        await stores.sessions.sweepPieces(scope);
      },
      pruneHistory: withFollowUp(
        (scope, builtThrough) => stores.sessions.pruneHistory(scope, { builtThrough, everyMs: pruneEvery }),
        pruneEvery,
        (error) => console.warn('agentstate: could not prune history', error),
      ),
      ...(gateway && live ? { broadcast: liveBroadcaster(live, gateway) } : {}),
      ...publish,
    }),
    memory: new MemoryFanout({
      deliversWebhooks: false,
      ...(gateway && live ? { broadcast: memoryBroadcaster(live, gateway) } : {}),
      ...publish,
    }),
    sweepExpired: (scope, expiredAt) => stores.sessions.sweepExpired(scope, expiredAt),
    finishErasure: (tenant, erasureId) => new ErasureFinisher(stores.table, stores.sessions).finish(tenant, erasureId),
    upkeep: new MemoryUpkeep(new DynamoDbMemoryUpkeep(stores.table), {
      historySeconds: Number.isFinite(days) && days > 0 ? Math.round(days * 86_400) : 0,
    }),
  };
}

/** A live consumer built from `process.env` on first use (the local server runs one per stream reader). */
export function changeHook(): StreamHandler {
  return streamHandler(() => liveConsumer(process.env));
}

/** The Lambda handler. */
export const handler = instrumentedStreamHandler('change hook', 'live', changeHook());
