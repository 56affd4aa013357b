import type { SchemaReader } from '../agents/agent-reader.js';
import {
  buildDeltaEvent,
  buildDocumentChangedEvent,
  buildSessionExpiredEvent,
  buildStateChangedEvent,
  buildUserErasedEvent,
  type ChangeEvent,
  eventForAgent,
  isRecordedDocument,
  isRecordedErasure,
  isRecordedExpiry,
  type RecordedChange,
  type RecordedVersion,
  SESSION_EXPIRED,
  STATE_CHANGED,
  serializeWithin,
  USER_ERASED,
  WEBHOOK_BODY_LIMIT_BYTES,
} from '../events/events.js';
import type { Json } from '../json/json.js';
import type { Schema } from '../model/fields.js';
import type { Lifetime, Retention } from '../model/lifetime.js';
import type { SessionScope } from '../model/model.js';
import { laneOf, type QueuedDelivery, type WebhookQueue, type WebhookRecord } from '../webhooks/records.js';
import { enqueueDeliveries, type FanoutOptions, publishEvents, StreamFanout, type WebhookDeliveryPorts } from './fanout.js';

/**
 * The change hook's work for one batch of recorded versions (DynamoDB stream records, in
 * stream order): build each version's event, then hand it to webhooks, live clients and the
 * event bus. A commit's run, profile and shared documents have versions of their own; each is
 * handled like a session of its own (a "stream" below), and its events go where the events of
 * the session that made the commit go.
 *
 * Ordering: a session's records are in version order within a batch (DynamoDB orders a
 * partition key's records within a shard). Each (webhook, session) pair and each (WebSocket
 * connection, session) pair gets the session's events one after the other; different
 * sessions, webhooks and connections proceed in parallel, so a slow or failing endpoint only
 * ever waits for itself.
 *
 *   session s1: v7 ─ v8 ─ v9      webhook A (healthy):  v7 → v8 → v9        ✓
 *                                 webhook B (failing):  v7 ✗✗✗ → dead letter
 *                                                       v8, v9 → dead letters, not tried
 *   session s2: v3 ─ v4           webhook A:            v3 → v4  (never waits for B)
 *
 * Webhook deliveries are only built here and handed to a queue of lanes, one lane per
 * (webhook, stream) (core/webhooks/lanes.ts): a dead endpoint's lanes wait, nothing else does.
 * Without a queue (tests, one-off tools) they are delivered in the batch, by the same rule.
 *
 * Typed fields (API.md section 7): a webhook registered with an `agentId`, and a WebSocket
 * subscription that names one, get each event as that agent may see it (`eventForAgent`):
 * `next` and `prev` cut to its readable fields of the session's hierarchy. The hierarchy's
 * fields are read once per (tenant, session agent) and batch, and only when such a receiver
 * follows the session. Everyone else, and the event bus, gets the whole event.
 *
 * Failures that lose nothing are absorbed here (dead letters, live clients that are gone). What
 * would lose an event is reported instead: the first record of a session whose event could not
 * be built, dead-lettered or published. The stream handler reports those as batch item
 * failures, so the stream retries from there (at least once; receivers deduplicate by id).
 */

/**
 * The state of a recorded version of a session (of its `incarnation`-th life; the first when
 * absent): one GetItem; null when that version no longer exists.
 */
export type VersionStateReader = (scope: SessionScope, version: number, incarnation?: number) => Promise<{ state: Json } | null>;

/**
 * The session's events as an agent may see them (`null`: no agent, the whole events), in the
 * same order as the whole events. Rejects when the typed fields cannot be read: then nothing
 * may be sent to that agent's followers (never the whole events instead).
 */
export type AgentEvents = (agentId: string | null) => Promise<readonly ChangeEvent[]>;

/**
 * Sends a session's events, in order, to the live clients that follow it. Best effort. A
 * follower that subscribed as an agent is sent `eventsFor(agentId)`; without `eventsFor`, only
 * followers without an agent are sent anything.
 */
export type LiveBroadcaster = (scope: SessionScope, events: readonly ChangeEvent[], eventsFor?: AgentEvents) => Promise<void>;

/**
 * The webhook ports (`webhooks`, `send`) are needed only by a consumer that delivers them
 * (`WebhookDeliveryPorts`, `deliversWebhooks`, default true). The deployment runs two consumers
 * of the stream, each reading it on its own, so that live pushes never wait on webhooks (API.md
 * section 9): the change hook (`deliversWebhooks: false`, with `broadcast`, `publish`,
 * `moveActivity`) and the webhook hook (webhooks only). An endpoint that never answers then
 * holds up webhook deliveries alone.
 */
export type ChangeFanoutPorts = ChangeFanoutOptions & WebhookDeliveryPorts;

interface ChangeFanoutOptions extends FanoutOptions {
  readState: VersionStateReader;
  broadcast?: LiveBroadcaster;
  /**
   * The typed fields of a session's hierarchy, for webhooks and subscriptions with an
   * `agentId`. Without it such receivers get nothing for sessions that have an agent (their
   * deliveries are retried as failures), never the whole state.
   */
  schemaFor?: SchemaReader;
  /**
   * Moves a session's activity (its `updatedAt` and place in the session list) forward to
   * `at`, never back. Best effort: the list may trail a write (API.md section 2), so a
   * failure is the port's to log, not a reason to retry the batch.
   */
  moveActivity?: (scope: SessionScope, at: string, lifetime?: Lifetime, options?: { onceAnInterval?: boolean }) => Promise<void>;
  /**
   * Collects the pieces of large states that no version names (a write that crashed between
   * its pieces and its version). Called for each session with a large state in a batch; it
   * decides itself how often it really sweeps. Best effort, like `moveActivity`.
   */
  sweepPieces?: (scope: SessionScope) => Promise<void>;
  /**
   * Prunes the history of a session with retention (API.md section 12), once this batch's
   * events are built: `builtThrough` is the newest version of the batch, whose events (and so
   * every `prev` they read) are done; the pruner leaves later ones and their previous versions
   * alone. Called for each session whose versions in the batch carry a retention; it decides
   * itself how often it really runs. Best effort, like `sweepPieces`.
   */
  pruneHistory?: (scope: SessionScope, builtThrough: { incarnation: number; version: number }) => Promise<void>;
}

export interface ChangeInput {
  /** What identifies the record to its source (the stream sequence number). */
  key: string;
  change: RecordedChange;
}

export class ChangeFanout extends StreamFanout<ChangeFanoutPorts> {
  /**
   * The newest versions' states this instance built events of, across batches: a version's
   * `prev` is most often the version before it, which came in the previous batch of the same
   * shard (a partition key's records go to one shard, read by one instance at a time), so the
   * read of `prev` (half a read unit a version) is mostly not needed. A version's state never
   * changes once recorded; a life deleted and made again has versions of another life.
   */
  private readonly recentStates = new RecentStates(RECENT_STATES);

  /**
   * Processes one batch. `deadline` (epoch ms on `now`) is when the invocation must be done: deliveries
   * not tried by then become dead letters. Resolves with the keys of the records to retry.
   */
  async process(inputs: readonly ChangeInput[], options: { deadline?: number } = {}): Promise<{ failed: string[] }> {
    const sessions = groupByStream(inputs);
    const { delivery } = this;
    const webhooksOf = memo((tenant: string) => delivery?.webhooks.allWebhooks(tenant) ?? Promise.resolve([]));
    const schemas = memo((key: string) => {
      const [tenant, agentId] = JSON.parse(key) as [string, string];
      if (!this.ports.schemaFor) return Promise.reject(new Error('no schema reader (ports.schemaFor): typed fields are unknown'));
      return this.ports.schemaFor(tenant, agentId);
    });
    const schemaOf: SchemaOf = (tenant, agentId) => schemas(JSON.stringify([tenant, agentId]));

    await Promise.all(sessions.map((session) => this.buildEvents(session)));
    await Promise.all([
      ...(delivery ? [this.deliver(delivery.queue, sessions, webhooksOf, schemaOf, options.deadline)] : []),
      ...sessions.map((session) => this.broadcast(session, schemaOf)),
      ...sessions.map((session) => this.moveActivity(session)),
      ...sessions.map((session) => this.sweepPieces(session)),
      ...sessions.map((session) => this.pruneHistory(session)),
      this.publish(sessions),
    ]);

    const failed: string[] = [];
    for (const session of sessions) {
      if (session.failedAt !== undefined) failed.push((session.inputs[session.failedAt] as ChangeInput).key);
    }
    return { failed };
  }

  /**
   * Builds the stream's events in order. A thread version's `prev` comes from this batch or the
   * ones before it (`recentStates`) when it can, else one read; a document version carries its `prev` (the stream's old image).
   */
  private async buildEvents(session: StreamBatch): Promise<void> {
    for (const [index, { change }] of session.inputs.entries()) {
      if (isRecordedExpiry(change)) {
        session.events.push(buildSessionExpiredEvent(change));
        continue;
      }
      if (isRecordedErasure(change)) {
        session.events.push(buildUserErasedEvent(change));
        continue;
      }
      if (isRecordedDocument(change)) {
        session.events.push(buildDocumentChangedEvent(change));
        continue;
      }
      const { prevVersion } = change.version;
      const thread = session.thread as SessionScope;
      const life = change.incarnation ?? 0;
      try {
        // A large state (or the one after a large state) travels as its recorded change: the
        // hook reads no state kept in pieces.
        if (change.version.stateUnread || change.version.change) {
          session.events.push(buildDeltaEvent(change));
          continue;
        }
        let prev: Json = null;
        if (prevVersion > 0) {
          // By life and version: a batch may hold a deleted session's last versions and its next life's first.
          const kept = this.recentStates.get(thread, life, prevVersion);
          prev = kept ? kept.state : ((await this.ports.readState(thread, prevVersion, life))?.state ?? null);
        }
        session.events.push(buildStateChangedEvent(change, prev));
        this.recentStates.keep(thread, life, change.version.version, change.version.state);
      } catch (error) {
        this.log('could not build a change event; the stream will retry it', {
          ...thread,
          version: change.version.version,
          error: String(error),
        });
        session.fail(index);
        return;
      }
    }
  }

  /**
   * The stream's events as `agentId` may see them, made once per batch and agent. Each thread
   * version is cut by the fields of the session's agent when it was recorded; documents have
   * no typed fields, and every agent of the tenant may read them whole.
   */
  private eventsFor(session: StreamBatch, agentId: string | null, schemaOf: SchemaOf): Promise<readonly ChangeEvent[]> {
    if (agentId === null || session.thread === null) return Promise.resolve(session.events);
    let views = session.views.get(agentId);
    if (!views) {
      views = Promise.all(
        session.events.map(async (event, index) => {
          const change = session.inputs[index]?.change;
          const sessionAgent = change && isRecordedVersion(change) ? (change.version.sessionAgentId ?? null) : null;
          const schema = sessionAgent === null ? null : await schemaOf(session.tenant, sessionAgent);
          return event.type === STATE_CHANGED ? eventForAgent(event, schema, agentId) : event;
        }),
      );
      session.views.set(agentId, views);
    }
    return views;
  }

  /**
   * The session's deliveries, one per (webhook, event it follows), each webhook's in order:
   * the event as that webhook may see it, serialized as it goes out. Returns them with the
   * index of each one's event in the stream.
   */
  private async deliveriesOf(
    session: StreamBatch,
    webhooksOf: (tenant: string) => Promise<WebhookRecord[]>,
    schemaOf: SchemaOf,
  ): Promise<Array<{ index: number; delivery: QueuedDelivery }>> {
    if (session.events.length === 0) return [];
    // A webhook registered for a session gets the events that session's writes made.
    const follows = (webhook: WebhookRecord, event: ChangeEvent) => webhook.sessionId === null || webhook.sessionId === event.sessionId;
    let webhooks: WebhookRecord[];
    try {
      webhooks = (await webhooksOf(session.tenant)).filter((webhook) => session.events.some((event) => follows(webhook, event)));
    } catch (error) {
      this.log('could not read webhooks; the stream will retry', { tenant: session.tenant, error: String(error) });
      session.fail(0);
      return [];
    }
    const perWebhook = await Promise.all(
      webhooks.map(async (webhook) => {
        let events: readonly ChangeEvent[];
        try {
          events = await this.eventsFor(session, webhook.agentId ?? null, schemaOf);
        } catch (error) {
          // Never the whole events instead: retry the session until its fields can be read.
          this.log('could not read the typed fields of a session; the stream will retry', {
            ...session.thread,
            webhookId: webhook.id,
            error: String(error),
          });
          session.fail(0);
          return [];
        }
        return [...events.entries()]
          .filter(([, event]) => follows(webhook, event))
          .map(([index, event]) => ({
            index,
            delivery: {
              tenant: session.tenant,
              webhook,
              lane: laneOf(session.tenant, webhook.id, session.stream),
              // The event as it goes out (its patch; without next/prev past 64 KiB), small enough for its dead letter.
              event: {
                id: event.id,
                sessionId: event.sessionId,
                version: event.type === USER_ERASED ? 0 : event.version,
                body: serializeWithin(event, WEBHOOK_BODY_LIMIT_BYTES),
                ...deadLetterDocument(event),
              },
            },
          }));
      }),
    );
    return perWebhook.flat();
  }

  /** Hands every session's deliveries to the queue at once; what it could not take is retried from the stream. */
  private async deliver(
    queue: WebhookQueue,
    sessions: readonly StreamBatch[],
    webhooksOf: (tenant: string) => Promise<WebhookRecord[]>,
    schemaOf: SchemaOf,
    deadline: number | undefined,
  ): Promise<void> {
    const built = (await Promise.all(sessions.map((session) => this.deliveriesOf(session, webhooksOf, schemaOf)))).flatMap(
      (deliveries, position) => deliveries.map((entry) => ({ ...entry, session: sessions[position] as StreamBatch })),
    );
    await enqueueDeliveries(queue, built, { deadline, log: this.log, refused: (entry) => entry.session.fail(entry.index) });
  }

  private async broadcast(session: StreamBatch, schemaOf: SchemaOf): Promise<void> {
    const broadcast = this.ports.broadcast;
    if (!broadcast || session.events.length === 0) return;
    // A thread's versions say whether a follow's mark was on the log when each was made: a
    // session nobody follows is not looked up (a follow puts its mark before it is answered,
    // so no version made after a subscription lacks it). Documents and expiries carry no mark.
    if (session.thread && session.inputs.every(({ change }) => isRecordedVersion(change) && !change.followed)) return;
    // A thread's events go to its followers; a document's to the followers of each session
    // whose commits changed it (in order within each).
    const bySession = new Map<string, ChangeEvent[]>();
    for (const event of session.events) {
      // An erasure is of no one session: no live client follows it.
      if (event.type === USER_ERASED) continue;
      const events = bySession.get(event.sessionId);
      if (events) events.push(event);
      else bySession.set(event.sessionId, [event]);
    }
    await Promise.all(
      [...bySession].map(async ([sessionId, events]) => {
        const scope = { tenant: session.tenant, sessionId };
        try {
          await broadcast(
            scope,
            events,
            session.thread ? (agentId) => this.eventsFor(session, agentId, schemaOf) : () => Promise.resolve(events),
          );
        } catch (error) {
          // Live clients are a view, not a log: a client that missed an event reads the state.
          this.log('could not send change events to live clients', { ...scope, error: String(error) });
        }
      }),
    );
  }

  /**
   * A state write is one PutItem; the session's activity follows here, once per session and
   * batch, to the newest version whose write found its move due (at most once an interval).
   */
  private async moveActivity(session: StreamBatch): Promise<void> {
    if (!this.ports.moveActivity) return;
    if (!session.thread) return this.moveActivityOfDocuments(session);
    let newest: string | undefined;
    let lifetime: Lifetime | undefined;
    for (const { change } of session.inputs) {
      if (!isRecordedVersion(change) || !change.activityDue) continue;
      if (newest === undefined || change.version.createdAt > newest) {
        newest = change.version.createdAt;
        lifetime = change.lifetime;
      }
    }
    if (newest === undefined) return;
    try {
      await this.ports.moveActivity(session.thread, newest, lifetime);
    } catch (error) {
      this.log('could not move session activity forward', { ...session.thread, error: String(error) });
    }
  }

  /**
   * A blind commit that changed only a profile or the shared document wrote no session item; the
   * session's activity follows here, once per session and batch, when its write found it due.
   * Nothing on the session's tip says the move was made (such a commit writes no tip), so the
   * move itself holds to once an interval (`onceAnInterval`: only from an activity older than one).
   */
  private async moveActivityOfDocuments(stream: StreamBatch): Promise<void> {
    const newest = new Map<string, { tenant: string; sessionId: string; at: string }>();
    for (const { change } of stream.inputs) {
      if (!isRecordedDocument(change) || !change.activityDue || !change.document.sessionId) continue;
      const key = JSON.stringify([change.tenant, change.document.sessionId]);
      const seen = newest.get(key);
      if (!seen || change.document.createdAt > seen.at) {
        newest.set(key, { tenant: change.tenant, sessionId: change.document.sessionId, at: change.document.createdAt });
      }
    }
    await Promise.all(
      [...newest.values()].map(async ({ tenant, sessionId, at }) => {
        try {
          await this.ports.moveActivity?.({ tenant, sessionId }, at, undefined, { onceAnInterval: true });
        } catch (error) {
          this.log('could not move session activity forward', { tenant, sessionId, error: String(error) });
        }
      }),
    );
  }

  /** Large states write pieces first; what a crashed write left is collected from here. */
  private async sweepPieces(session: StreamBatch): Promise<void> {
    if (!this.ports.sweepPieces || !session.thread) return;
    const large = session.inputs.some(({ change }) => isRecordedVersion(change) && change.version.stateUnread);
    if (!large) return;
    try {
      await this.ports.sweepPieces(session.thread);
    } catch (error) {
      this.log('could not sweep unused state pieces', { ...session.thread, error: String(error) });
    }
  }

  /** Retention: after the batch's events are built (`process` awaits them first). */
  private async pruneHistory(session: StreamBatch): Promise<void> {
    if (!this.ports.pruneHistory || !session.thread) return;
    let newest: { incarnation: number; version: number } | undefined;
    let retention: Retention | null = null;
    for (const { change } of session.inputs) {
      if (!isRecordedVersion(change)) continue;
      const at = { incarnation: change.incarnation ?? 0, version: change.version.version };
      if (!newest || at.incarnation > newest.incarnation || (at.incarnation === newest.incarnation && at.version > newest.version)) {
        newest = at;
        retention = change.lifetime?.retention ?? null;
      }
    }
    if (!newest || !retention || session.failedAt !== undefined) return;
    // Nothing can have fallen out of a count window yet: no run is claimed (it would wait a minute).
    if (retention.keepDays === undefined && retention.keepVersions !== undefined && newest.version <= retention.keepVersions) return;
    try {
      await this.ports.pruneHistory(session.thread, newest);
    } catch (error) {
      this.log('could not prune history', { ...session.thread, error: String(error) });
    }
  }

  private async publish(sessions: readonly StreamBatch[]): Promise<void> {
    const entries = sessions.flatMap((session) =>
      session.events.map((event, index) => ({ session, index, tenant: session.tenant, event })),
    );
    await publishEvents(this.ports.publish, entries, {
      what: 'change events',
      log: this.log,
      refused: (entry) => entry.session.fail(entry.index),
    });
  }
}

/**
 * One stream's part of a batch: a session's thread versions, or one document's versions (a
 * run of a session, a user's profile, the tenant's shared document). The stream orders each
 * item's records, so each stream's records come in version order.
 */
class StreamBatch {
  readonly inputs: ChangeInput[] = [];
  readonly events: ChangeEvent[] = [];
  /** `events` as each agent that receives them may see them. */
  readonly views = new Map<string, Promise<readonly ChangeEvent[]>>();
  /** The first record that must be retried, if any. */
  failedAt: number | undefined;

  /**
   * `thread`: the session of a thread stream; null for a document stream. `stream`: what
   * names the stream within its tenant (its webhook lanes, core/webhooks/lanes.ts).
   */
  constructor(
    readonly tenant: string,
    readonly thread: SessionScope | null,
    readonly stream: readonly string[],
  ) {}

  fail(index: number): void {
    if (this.failedAt === undefined || index < this.failedAt) this.failedAt = index;
  }
}

/** The typed fields of a (tenant, session agent), memoized per batch. */
type SchemaOf = (tenant: string, agentId: string) => Promise<Schema | null>;

function groupByStream(inputs: readonly ChangeInput[]): StreamBatch[] {
  const streams = new Map<string, StreamBatch>();
  for (const input of inputs) {
    const { change } = input;
    // JSON arrays as keys: identifiers may hold any character but `#` and `/`, tenants too.
    const id = isRecordedDocument(change)
      ? JSON.stringify([
          change.tenant,
          change.document.kind,
          change.document.kind === 'run' ? change.document.sessionId : '',
          change.document.id,
        ])
      : isRecordedErasure(change)
        ? JSON.stringify([change.tenant, 'erasure', change.erasure.erasureId])
        : JSON.stringify([change.tenant, 'thread', change.sessionId]);
    let stream = streams.get(id);
    if (!stream) {
      const thread =
        isRecordedDocument(change) || isRecordedErasure(change) ? null : { tenant: change.tenant, sessionId: change.sessionId };
      stream = new StreamBatch(change.tenant, thread, (JSON.parse(id) as string[]).slice(1));
      streams.set(id, stream);
    }
    stream.inputs.push(input);
  }
  return [...streams.values()];
}

/** Where a document event's dead letter is kept apart from the session's thread events. */
function deadLetterDocument(event: ChangeEvent): { document?: string } {
  if (event.type === STATE_CHANGED || event.type === SESSION_EXPIRED) return {};
  if (event.type === USER_ERASED) return { document: `erasure#${event.erasureId}` };
  if (event.scope === 'run') return { document: `run#${event.runId}` };
  if (event.scope === 'profile') return { document: `profile#${event.userId}` };
  return { document: 'shared' };
}

function memo<T>(load: (key: string) => Promise<T>): (key: string) => Promise<T> {
  const cache = new Map<string, Promise<T>>();
  return (key) => {
    let value = cache.get(key);
    if (!value) {
      value = load(key);
      cache.set(key, value);
    }
    return value;
  };
}

/** A thread's version (neither a document's, a session's expiry nor an erasure). */
function isRecordedVersion(change: RecordedChange): change is RecordedVersion {
  return !isRecordedDocument(change) && !isRecordedExpiry(change) && !isRecordedErasure(change);
}

/** How many versions' states the change hook keeps between batches (inline states only: at most a few KB each). */
const RECENT_STATES = 512;

/** States of recently built versions of sessions, by session, life and version; the least recently kept go first. */
class RecentStates {
  private readonly states = new Map<string, { state: Json }>();

  constructor(private readonly limit: number) {}

  get(scope: SessionScope, life: number, version: number): { state: Json } | undefined {
    return this.states.get(RecentStates.key(scope, life, version));
  }

  keep(scope: SessionScope, life: number, version: number, state: Json): void {
    const key = RecentStates.key(scope, life, version);
    this.states.delete(key);
    this.states.set(key, { state });
    if (this.states.size > this.limit) this.states.delete(this.states.keys().next().value as string);
  }

  private static key(scope: SessionScope, life: number, version: number): string {
    return JSON.stringify([scope.tenant, scope.sessionId, life, version]);
  }
}
