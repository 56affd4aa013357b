import type { Context, DynamoDBBatchResponse, DynamoDBStreamEvent } from 'aws-lambda';
import type { RecordedChange } from '../core/events/events.js';
import type { ChangeFanout, ChangeInput } from '../core/fanout/change-fanout.js';
import type { MemoryFanout } from '../core/fanout/memory-fanout.js';
import type { MemoryUpkeep, MemoryUpkeepInput } from '../core/memory/memory-changes.js';
import { sessionDefaultsFrom } from '../core/model/lifetime.js';
import type { SessionScope } from '../core/model/model.js';
import { DynamoDbAgentStore } from '../store/agents/agent-store.js';
import {
  deleteToFinishOf,
  erasureToFinishOf,
  expiredSessionOf,
  type OpenedCopy,
  openedCopyOf,
  recordedChangeOf,
} from '../store/events/stream-images.js';
import { recordedMemoryChangeOf } from '../store/memory/memory-stream.js';
import { DynamoDbSessionStore } from '../store/sessions/session-store.js';
import { dynamoDbClient } from '../store/table/client.js';
import { defaultTableName } from '../store/table/table.js';
import { TableClient } from '../store/table/table-client.js';
import { instrumented } from '../telemetry/telemetry.js';

/**
 * What the two consumers of the table's stream share: reading a batch's records, handing them
 * to the consumer's fan-outs, and answering with partial batch failures. Each consumer is an
 * entry of its own (change-hook.ts, webhook-hook.ts), so that each function bundles only what
 * it does: the change hook no webhook delivery, queue or sealing key; the webhook hook no
 * WebSocket, event bus or upkeep.
 *
 * Records are read in order: a record that cannot be read fails with everything after it
 * (their order matters), and the stream retries from there; a record whose event could not be
 * built, published or queued is reported by its fan-out (the first such record of its
 * session).
 */

/** Deliveries stop being started this long before the invocation's deadline. */
const DEADLINE_MARGIN_MS = 5_000;

/** The stream handler's invocation context: only its deadline is read. */
export type StreamContext = Pick<Context, 'getRemainingTimeInMillis'>;

export type StreamHandler = (event: DynamoDBStreamEvent, context?: StreamContext) => Promise<DynamoDBBatchResponse>;

/** What one consumer does with a batch. */
export interface StreamConsumer {
  state: ChangeFanout;
  memory: MemoryFanout;
  /** The memory upkeep (namespace list, replaced versions): the live consumer's alone. */
  upkeep?: MemoryUpkeep;
  /**
   * Sweeps a session whose item TTL removed (API.md section 12): the change hook carries out
   * its expiry; the webhook consumer has none, and leaves it alone.
   */
  sweepExpired?: (scope: SessionScope, expiredAt: string, unopened?: true) => Promise<void>;
  /** The versions of a copy its opening releases, in order (stream-images.ts `releasedVersions`): their events were held back. */
  releasedVersions: (opened: OpenedCopy) => Promise<RecordedChange[]>;
  /**
   * Goes on with a user's erasure under way (API.md section 12) until `deadline` (epoch ms, when
   * the stream gives one): the change hook closes and erases; the webhook consumer has none.
   */
  finishErasure?: (tenant: string, erasureId: string, deadline?: number) => Promise<void>;
  /**
   * Goes on with the erase of a deleted session that its `DELETE` handed over (it did not fit the
   * request's time) until `deadline`; false when it could not finish (the record is retried).
   * The change hook's alone.
   */
  finishDelete?: (scope: SessionScope, deadline?: number) => Promise<boolean>;
  /** Runs once before a batch with events is handed over (the webhook consumer opens its sealed secrets). */
  beforeEvents?: () => Promise<void>;
}

/** What both consumers read: a recorded version's state (for `prev`), and the agents (for typed fields). */
export interface StreamStores {
  table: TableClient;
  sessions: DynamoDbSessionStore;
  agents: DynamoDbAgentStore;
}

/**
 * Those stores over the environment's table (`AGENTSTATE_TABLE`, `AGENTSTATE_DYNAMODB_ENDPOINT`),
 * and no others: a consumer bundles neither the API key, decision nor idempotency store.
 */
export function storesFromEnv(env: NodeJS.ProcessEnv): StreamStores {
  const table = new TableClient(dynamoDbClient(env), env.AGENTSTATE_TABLE ?? defaultTableName);
  return { table, sessions: new DynamoDbSessionStore(table, undefined, sessionDefaultsFrom(env)), agents: new DynamoDbAgentStore(table) };
}

/** A stream handler over a consumer built on first use. */
export function streamHandler(build: () => StreamConsumer): StreamHandler {
  let consumer: StreamConsumer | undefined;
  return (event, context) => {
    consumer ??= build();
    return processBatch(consumer, event, context);
  };
}

/**
 * The Lambda handler of a consumer. In a Lambda, each batch is one log line (records, events,
 * failures) and two metrics: how long its oldest record waited between its write and this hook
 * (`EventDeliveryLag`), and how many records it reported failed (`EventBatchFailures`).
 */
export function instrumentedStreamHandler(name: string, consumer: string, handler: StreamHandler): StreamHandler {
  return instrumented(name, handler, (event: DynamoDBStreamEvent, { result }) => {
    const oldest = Math.min(...event.Records.map((record) => record.dynamodb?.ApproximateCreationDateTime ?? Number.POSITIVE_INFINITY));
    const failed = result?.batchItemFailures.length ?? event.Records.length;
    return {
      message: 'stream batch',
      level: failed > 0 ? 'warn' : 'info',
      fields: { records: event.Records.length, failed, consumer },
      metrics: [
        ...(Number.isFinite(oldest) ? [['EventDeliveryLag', Math.max(0, Date.now() - oldest * 1000)] as const] : []),
        ...(failed > 0 ? [['EventBatchFailures', failed] as const] : []),
      ],
    };
  }) as StreamHandler;
}

async function processBatch(consumer: StreamConsumer, event: DynamoDBStreamEvent, context?: StreamContext): Promise<DynamoDBBatchResponse> {
  // Each an input, or the opening of a copy whose versions take its place, read below (in order).
  const slots: Array<ChangeInput | { key: string; opened: OpenedCopy }> = [];
  const memory: MemoryUpkeepInput[] = [];
  const swept: Array<{ key: string; scope: SessionScope; expiredAt: string; unopened?: true }> = [];
  const erasures: Array<{ key: string; tenant: string; erasureId: string }> = [];
  const deletes: Array<{ key: string; scope: SessionScope }> = [];
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
      if (change) slots.push({ key, change });
      const opened = openedCopyOf(record);
      if (opened) slots.push({ key, opened });
      const expired = expiredSessionOf(record);
      if (expired) {
        const { tenant, sessionId, expiredAt, unopened } = expired;
        swept.push({ key, scope: { tenant, sessionId }, expiredAt, ...(unopened ? { unopened } : {}) });
      }
      const erasure = erasureToFinishOf(record);
      if (erasure) erasures.push({ key, ...erasure });
      const deleted = deleteToFinishOf(record);
      if (deleted) deletes.push({ key, scope: deleted });
    } catch (error) {
      // A record that cannot be read fails with everything after it (their order matters);
      // retries, bisection and finally the on-failure queue take it from there.
      console.error('agentstate: unreadable stream record', key, error);
      unreadable = key;
      break;
    }
  }
  const inputs: ChangeInput[] = [];
  try {
    const resolved = await Promise.all(
      slots.map(async (slot) =>
        'opened' in slot ? (await consumer.releasedVersions(slot.opened)).map((change) => ({ key: slot.key, change })) : [slot],
      ),
    );
    inputs.push(...resolved.flat());
  } catch (error) {
    // A copy's versions could not be read: that opening fails, and the stream retries from it.
    // (As an unreadable record: the slots are those before any such, so the first opening is the earliest failure.)
    console.error('agentstate: could not read the versions a copy released; the stream will retry', error);
    const failedAt = slots.findIndex((slot) => 'opened' in slot);
    inputs.push(...slots.slice(0, failedAt).filter((slot): slot is ChangeInput => !('opened' in slot)));
    unreadable = slots[failedAt]?.key;
  }
  if (inputs.length + memory.length > 0) await consumer.beforeEvents?.();
  const remaining = context?.getRemainingTimeInMillis?.();
  const deadline = remaining === undefined ? undefined : Date.now() + remaining - DEADLINE_MARGIN_MS;
  const within = deadline === undefined ? {} : { deadline };
  const [events, kept, memoryDelivered] = await Promise.all([
    inputs.length > 0 ? consumer.state.process(inputs, within) : { failed: [] },
    memory.length > 0 && consumer.upkeep ? consumer.upkeep.process(memory) : { failed: [] },
    memory.length > 0 ? consumer.memory.process(memory, within) : { failed: [] },
  ]);
  // Its fence is a record of the stream in turn: the expiry's event comes in a later batch.
  const [sweepFailed, erasuresFailed, deletesFailed] = await Promise.all([
    sweepAll(consumer, swept),
    finishErasures(consumer, erasures, deadline),
    finishDeletes(consumer, deletes, deadline),
  ]);
  const failed = [...events.failed, ...kept.failed, ...memoryDelivered.failed, ...sweepFailed, ...erasuresFailed, ...deletesFailed];
  if (unreadable !== undefined) failed.push(unreadable);
  return { batchItemFailures: failed.map((itemIdentifier) => ({ itemIdentifier })) };
}

/** Carries out the expiries of sessions whose items TTL removed; the keys of those that failed (retried from the stream). */
async function sweepAll(
  consumer: StreamConsumer,
  swept: ReadonlyArray<{ key: string; scope: SessionScope; expiredAt: string; unopened?: true }>,
): Promise<string[]> {
  const sweep = consumer.sweepExpired;
  if (!sweep || swept.length === 0) return [];
  const failed: string[] = [];
  await Promise.all(
    swept.map(async ({ key, scope, expiredAt, unopened }) => {
      try {
        await sweep(scope, expiredAt, unopened);
      } catch (error) {
        console.error('agentstate: could not sweep an expired session; the stream will retry', scope, error);
        failed.push(key);
      }
    }),
  );
  return failed;
}

/**
 * Goes on with the erases that deletes handed over, each session once a batch, side by side;
 * the keys of those that failed or could not finish (retried from the stream: each run goes on
 * from what is stored, and one that runs out of time hands on with a record of its own).
 */
async function finishDeletes(
  consumer: StreamConsumer,
  deletes: ReadonlyArray<{ key: string; scope: SessionScope }>,
  deadline: number | undefined,
): Promise<string[]> {
  const finish = consumer.finishDelete;
  if (!finish || deletes.length === 0) return [];
  const failed: string[] = [];
  const bySession = new Map(deletes.map((entry) => [`${entry.scope.tenant}#${entry.scope.sessionId}`, entry]));
  await Promise.all(
    [...bySession.values()].map(async ({ key, scope }) => {
      try {
        if (!(await finish(scope, deadline))) failed.push(key);
      } catch (error) {
        console.error('agentstate: could not finish the erase of a deleted session; the stream will retry', scope, error);
        failed.push(key);
      }
    }),
  );
  return failed;
}

/** Goes on with the erasures under way, each once a batch; the keys of those that failed (retried from the stream: each step can run again). */
async function finishErasures(
  consumer: StreamConsumer,
  erasures: ReadonlyArray<{ key: string; tenant: string; erasureId: string }>,
  deadline: number | undefined,
): Promise<string[]> {
  const finish = consumer.finishErasure;
  if (!finish || erasures.length === 0) return [];
  const failed: string[] = [];
  const seen = new Set<string>();
  for (const { key, tenant, erasureId } of erasures) {
    if (seen.has(`${tenant}#${erasureId}`)) continue;
    seen.add(`${tenant}#${erasureId}`);
    try {
      await finish(tenant, erasureId, deadline);
    } catch (error) {
      console.error('agentstate: could not finish an erasure; the stream will retry', { tenant, erasureId }, error);
      failed.push(key);
    }
  }
  return failed;
}
