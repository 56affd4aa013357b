import type { EventPublisher, WireEvent } from '../events/events.js';
import { type Log, warnToConsole } from '../kernel/log.js';
import {
  DEFAULT_DELIVERY_POLICY,
  type DeliveryPolicy,
  type Sleep,
  WebhookDeliverer,
  type WebhookDelivererPorts,
} from '../webhooks/delivery.js';
import { inlineQueue } from '../webhooks/lanes.js';
import type { QueuedDelivery, WebhookQueue, WebhookSender, WebhookStore } from '../webhooks/records.js';

/**
 * The one fan-out mechanism of the stream's consumers, shared by state and document events
 * (change-fanout.ts) and memory events (memory-fanout.ts): each builds its events and its
 * deliveries, and these steps hand them to the webhook queue and the event bus. A step never
 * throws: it hands back, through `refused`, each entry a channel did not take, so that the
 * consumer retries that entry's record from the stream (at least once) and loses nothing.
 */

/** What every fan-out takes beside its own ports. */
export interface FanoutOptions {
  publish?: EventPublisher;
  /**
   * The stream consumer that delivers here when there is no `queue`, as its dead letters name
   * it (webhooks/delivery.ts `deliveredBy`). @default 'the change hook'
   */
  deliveredBy?: string;
  /**
   * Where deliveries go (webhooks/lanes.ts): the webhook consumer only builds them, and each
   * (webhook, stream) lane delivers on its own. Absent: delivered here and waited for.
   */
  queue?: WebhookQueue;
  sleep?: Sleep;
  /** The clock of breakers, deadlines and dead letters; the system clock by default. */
  now?: () => Date;
  log?: Log;
}

/** What a stream consumer needs to read the webhooks of a tenant and record what failed (dead letters, breakers). */
export type WebhookReads = Pick<WebhookStore, 'allWebhooks' | 'recordDeadLetter' | 'openBreaker' | 'claimProbe' | 'closeBreaker'>;

/**
 * Whether a stream consumer delivers webhooks, and with what: the webhook consumer needs the
 * webhooks and a sender (the sender only to deliver in the batch, without a queue); the live
 * consumer (`deliversWebhooks: false`) needs neither, and so its function bundles neither.
 */
export type WebhookDeliveryPorts =
  | { deliversWebhooks?: true; webhooks: WebhookReads; send: WebhookSender }
  | { deliversWebhooks: false; webhooks?: WebhookReads; send?: WebhookSender };

/**
 * The queue a fan-out hands its deliveries to: the given one, else its own deliverer waited
 * for; undefined for a consumer that delivers no webhooks.
 */
function fanoutQueue(
  ports: WebhookDeliveryPorts &
    Omit<WebhookDelivererPorts, 'send' | 'webhooks' | 'deliveredBy'> & { queue?: WebhookQueue; deliveredBy?: string },
  policy: DeliveryPolicy,
): { webhooks: WebhookReads; queue: WebhookQueue } | undefined {
  if (ports.deliversWebhooks === false) return undefined;
  const queue = ports.queue ?? inlineQueue(new WebhookDeliverer({ ...ports, deliveredBy: ports.deliveredBy ?? 'the change hook' }, policy));
  return { webhooks: ports.webhooks, queue };
}

/**
 * What a stream consumer's fan-out is made of, whatever its events: its ports, its log, and
 * where its webhook deliveries go (none for the live consumer).
 */
export abstract class StreamFanout<Ports extends FanoutOptions & WebhookDeliveryPorts> {
  protected readonly log: Log;
  /** Where this consumer's deliveries go, and the webhooks it reads; none for the live consumer. */
  protected readonly delivery: { webhooks: WebhookReads; queue: WebhookQueue } | undefined;

  constructor(
    protected readonly ports: Ports,
    policy: DeliveryPolicy = DEFAULT_DELIVERY_POLICY,
  ) {
    this.log = ports.log ?? warnToConsole;
    this.delivery = fanoutQueue(ports, policy);
  }
}

/**
 * Hands deliveries to `queue`; `refused` gets each entry it did not take: all of them when it
 * throws (logged), so the stream retries their records and loses none.
 */
export async function enqueueDeliveries<T extends { delivery: QueuedDelivery }>(
  queue: WebhookQueue,
  entries: readonly T[],
  options: { deadline: number | undefined; log: Log; refused: (entry: T) => void },
): Promise<void> {
  if (entries.length === 0) return;
  const deliveries = entries.map((entry) => entry.delivery);
  let failed: number[];
  try {
    failed = (await queue.enqueue(deliveries, options.deadline === undefined ? {} : { deadline: options.deadline })).failed;
  } catch (error) {
    options.log('could not queue webhook deliveries; the stream will retry', { error: String(error) });
    failed = deliveries.map((_, index) => index);
  }
  for (const index of failed) {
    const entry = entries[index];
    if (entry) options.refused(entry);
  }
}

/**
 * Puts events on the event bus; `refused` gets each entry it did not take: all of them when
 * `publish` throws (logged as `what`), so the stream retries their records.
 */
export async function publishEvents<T extends { tenant: string; event: WireEvent }>(
  publish: EventPublisher | undefined,
  entries: readonly T[],
  options: { what: string; log: Log; refused: (entry: T) => void },
): Promise<void> {
  if (!publish || entries.length === 0) return;
  let failed: number[];
  try {
    failed = await publish(entries.map(({ tenant, event }) => ({ tenant, event })));
  } catch (error) {
    options.log(`could not publish ${options.what}; the stream will retry`, { error: String(error) });
    failed = entries.map((_, index) => index);
  }
  for (const index of failed) {
    const entry = entries[index];
    if (entry) options.refused(entry);
  }
}
