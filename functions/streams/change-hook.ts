import { schemaReader } from '../core/agents/agent-reader.js';
import { ChangeFanout } from '../core/fanout/change-fanout.js';
import { KeyLiveness } from '../core/fanout/key-liveness.js';
import { MemoryFanout } from '../core/fanout/memory-fanout.js';
import { DEFAULT_HISTORY_DAYS, MemoryUpkeep } from '../core/memory/memory-changes.js';
import { pruneIntervalFrom } from '../core/model/retention.js';
import { keyIsLive } from '../store/access/key-items.js';
import { ErasureFinisher } from '../store/erasure/erasure-finish.js';
import { DynamoDbLiveStore } from '../store/events/live-store.js';
import { releasedVersions } from '../store/events/stream-images.js';
import { DynamoDbMemoryUpkeep } from '../store/memory/memory-upkeep-store.js';
import { instrumented, traced } from '../telemetry/telemetry.js';
import { liveBroadcaster, memoryBroadcaster } from '../ws/broadcast.js';
import { connectionGatewayFromEnv } from '../ws/connections.js';
import { eventBridgeClient, eventBridgePublisher } from './event-bus.js';
import { isScheduledEvent, type PruneSweep, sweepDuePrunes } from './prune-sweep.js';
import {
  instrumentedStreamHandler,
  type StreamConsumer,
  type StreamContext,
  type StreamHandler,
  type StreamStores,
  storesFromEnv,
  streamHandler,
} from './stream-batch.js';

/**
 * The change hook, the stream's live consumer: the table's stream → one `state.changed` event
 * per recorded version (and one `run.changed`, `profile.changed` or `shared.changed` per
 * document version a commit recorded, one `memory.changed` per memory write) → live WebSocket
 * clients and (in AWS) the EventBridge bus; and the upkeep that follows writes: each written
 * session's activity (`updatedAt`, the session list's order) moved to its newest version, once
 * per session and batch (a state write is then one PutItem), the pieces no version names
 * swept, the history of sessions with retention pruned (at most once a minute each), and
 * memory's namespace list and replaced versions kept. An EventBridge rule also invokes it every
 * minute with a scheduled event: then it runs the retention that is due without a write,
 * finishes the erase of any delete whose eraser died holding its fence, and goes on with any
 * user's erasure whose runs stopped (prune-sweep.ts; locally a timer of the server).
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

function liveConsumer(env: NodeJS.ProcessEnv, stores: StreamStores): StreamConsumer {
  const gateway = connectionGatewayFromEnv(env);
  const bus = env.AGENTSTATE_EVENT_BUS;
  const publish = bus ? { publish: eventBridgePublisher(traced(eventBridgeClient()), bus) } : {};
  const live = gateway ? new DynamoDbLiveStore(stores.table) : undefined;
  // A follower whose key was revoked gets nothing more, and its connection is closed.
  const keys = new KeyLiveness((keyHash) => keyIsLive(stores.table, keyHash));
  const keyLive = (keyHash: string) => keys.isLive(keyHash);
  const days = Number(env.AGENTSTATE_MEMORY_HISTORY_DAYS ?? DEFAULT_HISTORY_DAYS);
  const pruneEvery = pruneIntervalFrom(env);
  return {
    state: new ChangeFanout({
      readState: (scope, version, incarnation) => stores.sessions.getVersionState(scope, version, incarnation),
      deliversWebhooks: false,
      schemaFor: schemaReader(stores.agents),
      moveActivity: (scope, at, lifetime, options) => stores.sessions.moveActivity(scope, at, false, lifetime, options),
      sweepPieces: async (scope) => {
        await stores.sessions.sweepPieces(scope);
      },
      // What a run leaves for later is marked due on the session, and the scheduled sweep runs it.
      pruneHistory: async (scope, builtThrough) => {
        await stores.sessions.pruneHistory(scope, { builtThrough, everyMs: pruneEvery });
      },
      ...(gateway && live ? { broadcast: liveBroadcaster(live, gateway, keyLive) } : {}),
      ...publish,
    }),
    memory: new MemoryFanout({
      deliversWebhooks: false,
      ...(gateway && live ? { broadcast: memoryBroadcaster(live, gateway, keyLive) } : {}),
      ...publish,
    }),
    sweepExpired: (scope, expiredAt, unopened) => stores.sessions.sweepExpired(scope, expiredAt, unopened),
    releasedVersions: (opened) => releasedVersions(stores.table, opened),
    finishDelete: (scope, deadline) => stores.sessions.finishDelete(scope, deadline),
    finishErasure: (tenant, erasureId, deadline) =>
      new ErasureFinisher(stores.table, stores.sessions).run(tenant, erasureId, 'hook', deadline),
    upkeep: new MemoryUpkeep(new DynamoDbMemoryUpkeep(stores.table), {
      historySeconds: Number.isFinite(days) && days > 0 ? Math.round(days * 86_400) : 0,
    }),
  };
}

/** A live consumer built from `process.env` on first use (the local server runs one per stream reader). */
export function changeHook(): StreamHandler {
  return streamHandler(() => liveConsumer(process.env, storesFromEnv(process.env)));
}

/**
 * The scheduled sweep over `process.env`'s table (stores built on first use): runs the retention
 * that is due, until `deadline` (epoch ms) comes near.
 */
export function pruneSweeper(): (deadline?: number) => Promise<PruneSweep> {
  let stores: StreamStores | undefined;
  return (deadline) => {
    stores ??= storesFromEnv(process.env);
    const { sessions, table } = stores;
    return sweepDuePrunes(
      {
        duePrunes: (perShard) => sessions.duePrunes(perShard),
        pruneHistory: (scope, options) => sessions.pruneHistory(scope, options),
        finishClosing: (scope, life, deadline) => sessions.finishClosing(scope, life, deadline),
        finishErasure: (tenant, erasureId, deadline) => new ErasureFinisher(table, sessions).run(tenant, erasureId, 'sweep', deadline),
        putOff: (due, failures, delayMs) => sessions.putOffDue(due, failures, delayMs),
        log: (message, error) => console.warn(`agentstate: ${message}`, error),
      },
      { everyMs: pruneIntervalFrom(process.env), ...(deadline === undefined ? {} : { deadline }) },
    );
  };
}

const streamed = instrumentedStreamHandler('change hook', 'live', changeHook());
const sweep = pruneSweeper();
const scheduled = instrumented(
  'prune sweep',
  (_event: unknown, context: StreamContext) => sweep(Date.now() + context.getRemainingTimeInMillis()),
  (_event, { result }) => ({
    message: 'prune sweep',
    level: 'info',
    fields: {
      sessions: result?.sessions ?? 0,
      pruned: result?.pruned ?? 0,
      erased: result?.erased ?? 0,
      erasures: result?.erasures ?? 0,
      cut: result?.cut ?? false,
    },
  }),
);

/** The Lambda handler: stream batches, and every minute the schedule's sweep. */
export const handler = (event: unknown, context: StreamContext) =>
  isScheduledEvent(event) ? scheduled(event, context as never) : streamed(event as never, context);
