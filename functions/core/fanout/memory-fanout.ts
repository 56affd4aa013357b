import { serializeWithin, WEBHOOK_BODY_LIMIT_BYTES } from '../events/events.js';
import { buildMemoryChangedEvent, type MemoryChangedEvent } from '../events/memory-changed.js';
import { type Namespace, namespaceRoots, withinRoots } from '../memory/memory.js';
import type { MemoryUpkeepInput } from '../memory/memory-changes.js';
import { laneOf, type QueuedDelivery, type WebhookQueue } from '../webhooks/records.js';
import {
  enqueueDeliveries,
  type FanoutOptions,
  publishEvents,
  StreamFanout,
  type WebhookDeliveryPorts,
  type WebhookReads,
} from './fanout.js';

/**
 * The fan-out of `memory.changed` events (events/memory-changed.ts): to the tenant's webhooks,
 * the event bus and live clients, by the same steps as state events (fanout.ts).
 */

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

interface MemoryFanoutOptions extends FanoutOptions {
  broadcast?: MemoryBroadcaster;
}

interface Built {
  key: string;
  tenant: string;
  event: MemoryChangedEvent;
}

export class MemoryFanout extends StreamFanout<MemoryFanoutPorts> {
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
    await enqueueDeliveries(delivery.queue, deliveries, {
      deadline,
      log: (message, detail) => this.log(message, { tenant, ...detail }),
      refused: (entry) => failed.add(entry.key),
    });
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

  private publish(built: readonly Built[], failed: Set<string>): Promise<void> {
    return publishEvents(this.ports.publish, built, { what: 'memory events', log: this.log, refused: (entry) => failed.add(entry.key) });
  }
}
