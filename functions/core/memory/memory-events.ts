import { serializeWithin } from '../events/events.js';
import { type EventPublisher, WEBHOOK_BODY_LIMIT_BYTES } from '../fanout/change-fanout.js';
import type { Json, JsonObject } from '../json/json.js';
import {
  enqueueAll,
  fanoutQueue,
  laneOf,
  type QueuedDelivery,
  type WebhookDeliveryPorts,
  type WebhookQueue,
  type WebhookReads,
} from '../webhooks/webhook-lanes.js';
import { DEFAULT_DELIVERY_POLICY, type DeliveryPolicy, type Sleep } from '../webhooks/webhooks.js';
import { type Namespace, namespaceRoots, withinRoots } from './memory.js';
import type { MemoryUpkeepInput, RecordedMemoryChange } from './memory-changes.js';

/**
 * `memory.changed` events (API.md section 10): every put and every delete of a memory item,
 * built from the stream record alone (its new and old images: no read), delivered to the
 * tenant's webhooks and the event bus with the guarantees of state events — at least once, in
 * version order per item, the same `id` on every redelivery, a delivery that keeps failing a
 * dead letter of its webhook. An expiry is no event: it was known from `expiresAt` in advance.
 */

export const MEMORY_CHANGED = 'memory.changed';

export interface MemoryChangedEvent {
  /**
   * `memory:<namespace path>/<key>:<createdAt ms>:<version>`: stable across redeliveries, and
   * never reused by a later item of the same key (which has another `createdAt`).
   */
  id: string;
  type: typeof MEMORY_CHANGED;
  namespace: string[];
  key: string;
  /** The item's version after the change; a delete is the version after the last put. */
  version: number;
  prevVersion: number;
  cause: 'put' | 'delete';
  /** The acting agent (`X-Agent-Id`), or null. */
  author: string | null;
  /** The value after the change; null for a delete. Left out when `truncated` (and for a `mode: "patch"` subscriber). */
  next?: JsonObject | null;
  /** The value of `prevVersion`; null for a new item. Left out as `next` is. */
  prev?: JsonObject | null;
  /** As on `state.changed`: the RFC 7396 merge patch turning `prev` into `next` (null for a delete). */
  patch?: Json;
  /** When this item (this life of the key) was created. */
  createdAt: string;
  /** The item's expiry, when it has one. */
  expiresAt?: string;
  occurredAt: string;
  /** As on `state.changed`: `next` and `prev` together are over 64 KiB, and left out. */
  truncated?: true;
}

/** The event of a recorded memory change; null for a TTL removal (no event). */
export function buildMemoryChangedEvent(change: RecordedMemoryChange): MemoryChangedEvent | null {
  const item = change.kind === 'put' ? change.next : change.kind === 'delete' ? change.old : null;
  if (!item) return null;
  const isDelete = change.kind === 'delete';
  const version = isDelete ? item.version + 1 : item.version;
  const old = change.old;
  const prev = isDelete ? old : old && old.createdAt === item.createdAt && old.version === item.version - 1 ? old : null;
  return {
    id: `memory:${[...item.namespace, item.key].join('/')}:${Date.parse(item.createdAt)}:${version}`,
    type: MEMORY_CHANGED,
    namespace: item.namespace,
    key: item.key,
    version,
    prevVersion: prev ? prev.version : 0,
    cause: isDelete ? 'delete' : 'put',
    author: change.author,
    next: isDelete ? null : item.value,
    prev: prev ? prev.value : null,
    createdAt: item.createdAt,
    ...(item.expiresAt === undefined || isDelete ? {} : { expiresAt: item.expiresAt }),
    occurredAt: change.occurredAt,
  };
}

/** Whether a receiver acting as `agentId` (null: any) may see an event of this namespace (the limited-key rule). */
function memoryEventVisibleTo(event: MemoryChangedEvent, agentId: string | null | undefined): boolean {
  return withinRoots(event.namespace, agentId == null ? null : namespaceRoots([agentId]));
}

/** Sends one namespace's events, in order, to the live clients that follow it (best effort). */
export type MemoryBroadcaster = (tenant: string, namespace: Namespace, events: readonly MemoryChangedEvent[]) => Promise<void>;

/**
 * `deliversWebhooks` (WebhookDeliveryPorts): whether this consumer delivers webhooks (default
 * true); the stream's live consumer does not, so that it never waits on an endpoint.
 */
export type MemoryFanoutPorts = MemoryFanoutOptions & WebhookDeliveryPorts;

interface MemoryFanoutOptions {
  broadcast?: MemoryBroadcaster;
  publish?: EventPublisher;
  /** Who delivers without a queue, as for state events (core/fanout/change-fanout.ts `deliveredBy`). */
  deliveredBy?: string;
  /** Where deliveries go, as for state events (core/fanout/change-fanout.ts `queue`). */
  queue?: WebhookQueue;
  sleep?: Sleep;
  now?: () => Date;
  log?: (message: string, detail: Record<string, unknown>) => void;
}

interface Built {
  key: string;
  tenant: string;
  event: MemoryChangedEvent;
}

export class MemoryFanout {
  private readonly delivery: { webhooks: WebhookReads; queue: WebhookQueue } | undefined;

  constructor(
    private readonly ports: MemoryFanoutPorts,
    policy: DeliveryPolicy = DEFAULT_DELIVERY_POLICY,
  ) {
    this.delivery = fanoutQueue(ports, policy);
  }

  /**
   * One batch of memory records, in stream order. Each webhook of the tenant registered
   * without a session (and, with an `agentId`, only for the namespaces that agent may read)
   * gets the events one after the other; webhooks in parallel. Resolves with the records to
   * retry: those whose event could not be dead-lettered or published.
   */
  async process(inputs: readonly MemoryUpkeepInput[], options: { deadline?: number } = {}): Promise<{ failed: string[] }> {
    const built: Built[] = [];
    for (const { key, change } of inputs) {
      const event = buildMemoryChangedEvent(change);
      if (event) built.push({ key, tenant: change.tenant, event });
    }
    if (built.length === 0) return { failed: [] };
    const failed = new Set<string>();
    const tenants = [...new Set(built.map((entry) => entry.tenant))];
    const { delivery } = this;
    const delivering = delivery ? tenants : [];
    await Promise.all([
      ...delivering.map((tenant) =>
        this.deliver(
          delivery as NonNullable<typeof delivery>,
          tenant,
          built.filter((entry) => entry.tenant === tenant),
          failed,
          options.deadline,
        ),
      ),
      this.publish(built, failed),
      this.broadcast(built),
    ]);
    return { failed: [...failed] };
  }

  /** The tenant's deliveries, one lane per (webhook, memory item); what the queue could not take is retried. */
  private async deliver(
    delivery: { webhooks: WebhookReads; queue: WebhookQueue },
    tenant: string,
    events: readonly Built[],
    failed: Set<string>,
    deadline: number | undefined,
  ): Promise<void> {
    let webhooks: Awaited<ReturnType<WebhookReads['allWebhooks']>>;
    try {
      webhooks = (await delivery.webhooks.allWebhooks(tenant)).filter((webhook) => webhook.sessionId === null);
    } catch (error) {
      this.log('could not read webhooks; the stream will retry', { tenant, error: String(error) });
      failed.add((events[0] as Built).key);
      return;
    }
    const deliveries: Array<{ key: string; delivery: QueuedDelivery }> = [];
    for (const webhook of webhooks) {
      for (const { key, event } of events) {
        if (!memoryEventVisibleTo(event, webhook.agentId)) continue;
        // Memory events have no session: their dead letters sort under the item, by its life and
        // version; one lane holds every life of a key, so a put after a delete comes after it.
        const item = [...event.namespace, event.key].join('/');
        deliveries.push({
          key,
          delivery: {
            tenant,
            webhook,
            lane: laneOf(tenant, webhook.id, ['memory', item]),
            event: {
              id: event.id,
              sessionId: '',
              version: event.version,
              body: serializeWithin(event, WEBHOOK_BODY_LIMIT_BYTES),
              document: `memory#${item}#${Date.parse(event.createdAt)}`,
            },
          },
        });
      }
    }
    if (deliveries.length === 0) return;
    const refused = await enqueueAll(
      delivery.queue,
      deliveries.map((entry) => entry.delivery),
      deadline,
      (message, detail) => this.log(message, { tenant, ...detail }),
    );
    for (const index of refused) {
      const entry = deliveries[index];
      if (entry) failed.add(entry.key);
    }
  }

  /** Live clients are a view, not a log: a failure is logged, never retried. */
  private async broadcast(built: readonly Built[]): Promise<void> {
    const broadcast = this.ports.broadcast;
    if (!broadcast) return;
    const groups = new Map<string, Built[]>();
    for (const entry of built) {
      const id = JSON.stringify([entry.tenant, entry.event.namespace]);
      groups.set(id, [...(groups.get(id) ?? []), entry]);
    }
    await Promise.all(
      [...groups.values()].map(async (group) => {
        const { tenant, event } = group[0] as Built;
        try {
          await broadcast(
            tenant,
            event.namespace,
            group.map((entry) => entry.event),
          );
        } catch (error) {
          this.log('could not send memory events to live clients', { tenant, namespace: event.namespace, error: String(error) });
        }
      }),
    );
  }

  private async publish(built: readonly Built[], failed: Set<string>): Promise<void> {
    if (!this.ports.publish) return;
    let refused: number[];
    try {
      refused = await this.ports.publish(built.map(({ tenant, event }) => ({ tenant, event })));
    } catch (error) {
      this.log('could not publish memory events; the stream will retry', { error: String(error) });
      refused = built.map((_, index) => index);
    }
    for (const index of refused) {
      const entry = built[index];
      if (entry) failed.add(entry.key);
    }
  }

  private log(message: string, detail: Record<string, unknown>): void {
    (this.ports.log ?? ((text, extra) => console.warn(`agentstate: ${text}`, JSON.stringify(extra))))(message, detail);
  }
}
