import { countMetric } from '../kernel/metrics.js';
import {
  DEFAULT_DELIVERY_POLICY,
  type DeadLetterEvent,
  type DeliveryPolicy,
  deliverWithRetries,
  type Sleep,
  sleep,
  type WebhookRecord,
  type WebhookSender,
  type WebhookStore,
} from './webhooks.js';

/**
 * Webhook deliveries travel in lanes (API.md section 9: a slow or dead endpoint delays only
 * its own deliveries). A lane is one webhook and one stream of events it follows (a session's
 * thread, one of its documents, one memory item): a lane's deliveries go one after the other,
 * in version order, and lanes never wait for each other.
 *
 *   stream consumer ── enqueue ──> lane (webhook A, session s1): v7 → v8 → v9
 *                                  lane (webhook B, session s1): v7 ✗✗✗ (B's wait alone)
 *                                  lane (webhook A, session s2): v3 → v4
 *
 * The stream's webhook consumer only builds each delivery (the event as the webhook may see
 * it, its body) and hands it to a `WebhookQueue`; `WebhookDeliverer` is the one rule for what
 * happens next, wherever the lane runs: in AWS an SQS FIFO queue with one message group per
 * lane and a delivery function (functions/streams/delivery-hook.ts); under `npm start` the
 * in-process `WebhookLanes` below.
 */

/** One event for one webhook, ready to send. */
export interface QueuedDelivery {
  tenant: string;
  webhook: WebhookRecord;
  /** Deliveries of the same lane go in order, one at a time (`laneOf`). */
  lane: string;
  /** The event as it goes out (`body`), and where its dead letter sorts. */
  event: DeadLetterEvent;
}

/** Where the stream's webhook consumer hands deliveries over. */
export interface WebhookQueue {
  /**
   * Takes deliveries, each lane's in order. Resolves with the indexes of those it could not
   * take (and every later one of their lanes): the stream retries their records.
   */
  enqueue(deliveries: readonly QueuedDelivery[], options?: { deadline?: number }): Promise<{ failed: number[] }>;
}

/**
 * The lane of a webhook and one stream of events (`stream`: the session for thread events,
 * else the document or memory item). JSON arrays: identifiers may hold any character but `#`
 * and `/`, tenants too.
 */
export function laneOf(tenant: string, webhookId: string, stream: readonly string[]): string {
  return JSON.stringify([tenant, webhookId, ...stream]);
}

export interface WebhookDelivererPorts {
  send: WebhookSender;
  /**
   * The function that delivers (`the webhook hook`, `the delivery hook`): a dead letter of a
   * delivery it had no time left to try names it, so that an operator knows whose timeout to raise.
   */
  deliveredBy: string;
  webhooks: Pick<WebhookStore, 'recordDeadLetter'>;
  sleep?: Sleep;
  /** The clock of probations, deadlines and dead letters; the system clock by default. */
  now?: () => Date;
  log?: (message: string, detail: Record<string, unknown>) => void;
}

/** What a stream consumer needs to read the webhooks of a tenant and record what failed. */
export type WebhookReads = Pick<WebhookStore, 'allWebhooks' | 'recordDeadLetter'>;

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
export function fanoutQueue(
  ports: WebhookDeliveryPorts &
    Omit<WebhookDelivererPorts, 'send' | 'webhooks' | 'deliveredBy'> & { queue?: WebhookQueue; deliveredBy?: string },
  policy: DeliveryPolicy,
): { webhooks: WebhookReads; queue: WebhookQueue } | undefined {
  if (ports.deliversWebhooks === false) return undefined;
  const queue = ports.queue ?? inlineQueue(new WebhookDeliverer({ ...ports, deliveredBy: ports.deliveredBy ?? 'the change hook' }, policy));
  return { webhooks: ports.webhooks, queue };
}

/** A webhook that dead-lettered recently gets one attempt per delivery until one succeeds. */
const PROBATION_MS = 60_000;

/**
 * Delivers, with bounded attempts, and keeps what fails as a dead letter of its webhook (visible
 * and replayable). A webhook whose delivery failed gets no further attempts in the same call:
 * its later deliveries become dead letters in order, so a replay delivers them in order and a
 * dead endpoint costs one timeout per call, not one per event. After a failure it is on
 * probation (one attempt per delivery) for a minute.
 */
export class WebhookDeliverer {
  /** Per process: webhooks that failed recently, until when (epoch ms). */
  private readonly probation = new Map<string, number>();
  private readonly now: () => Date;
  private readonly log: (message: string, detail: Record<string, unknown>) => void;

  constructor(
    private readonly ports: WebhookDelivererPorts,
    private readonly policy: DeliveryPolicy = DEFAULT_DELIVERY_POLICY,
  ) {
    this.now = ports.now ?? (() => new Date());
    this.log = ports.log ?? ((message, detail) => console.warn(`agentstate: ${message}`, JSON.stringify(detail)));
  }

  /**
   * Delivers each lane's deliveries in order, lanes in parallel. `deadline` (epoch ms on `now`)
   * is when the caller must be done: deliveries not tried by then become dead letters. Resolves
   * with the indexes to retry: a delivery whose dead letter could not be recorded, and every
   * later one of its lane.
   */
  async deliver(deliveries: readonly QueuedDelivery[], options: { deadline?: number } = {}): Promise<{ failed: number[] }> {
    const tripped = new Set<string>();
    const failed: number[] = [];
    await Promise.all(
      lanesOf(deliveries).map(async (lane) => {
        for (const [position, index] of lane.entries()) {
          const ok = await this.deliverOne(deliveries[index] as QueuedDelivery, tripped, options.deadline);
          if (!ok) {
            failed.push(...lane.slice(position));
            return;
          }
        }
      }),
    );
    return { failed: failed.sort((a, b) => a - b) };
  }

  /** False when the delivery failed and its dead letter could not be recorded either. */
  private async deliverOne(delivery: QueuedDelivery, tripped: Set<string>, deadline: number | undefined): Promise<boolean> {
    const { tenant, webhook, event } = delivery;
    let failure: { attempts: number; error: string };
    if (tripped.has(webhook.id)) {
      failure = { attempts: 0, error: 'not attempted: an earlier delivery to this webhook failed in the same batch' };
    } else if (deadline !== undefined && this.now().getTime() >= deadline) {
      failure = { attempts: 0, error: `not attempted: ${this.ports.deliveredBy} ran out of time` };
    } else {
      const onProbation = (this.probation.get(webhook.id) ?? 0) > this.now().getTime();
      const result = await deliverWithRetries(this.ports.send, webhook, event.body, event.id, {
        attempts: onProbation ? 1 : this.policy.attempts,
        backoffMs: this.policy.backoffMs,
        now: this.now,
        ...(this.ports.sleep ? { sleep: this.ports.sleep } : {}),
        ...(deadline !== undefined ? { deadline } : {}),
      });
      if (result.ok) {
        this.probation.delete(webhook.id);
        return true;
      }
      failure = result;
      tripped.add(webhook.id);
      this.probation.set(webhook.id, this.now().getTime() + PROBATION_MS);
    }
    try {
      await this.ports.webhooks.recordDeadLetter(tenant, webhook.id, event, {
        attempts: failure.attempts,
        error: failure.error,
        at: this.now().toISOString(),
      });
    } catch (error) {
      // Without its dead letter the event would be lost to this webhook: it must be retried.
      this.log('could not record a dead letter; the delivery will be retried', {
        webhookId: webhook.id,
        eventId: event.id,
        error: String(error),
      });
      return false;
    }
    countMetric('WebhookDeadLetters');
    this.log('webhook delivery dead-lettered', {
      tenant,
      webhookId: webhook.id,
      eventId: event.id,
      attempts: failure.attempts,
      error: failure.error,
    });
    return true;
  }
}

/** The indexes of each lane's deliveries, in order; lanes in order of their first delivery. */
function lanesOf(deliveries: readonly QueuedDelivery[]): number[][] {
  const lanes = new Map<string, number[]>();
  for (const [index, delivery] of deliveries.entries()) {
    const lane = lanes.get(delivery.lane);
    if (lane) lane.push(index);
    else lanes.set(delivery.lane, [index]);
  }
  return [...lanes.values()];
}

/**
 * Hands deliveries to `queue` and resolves with the indexes of those it did not take: all of
 * them when it throws (logged), so the stream retries their records and loses none.
 */
export async function enqueueAll(
  queue: WebhookQueue,
  deliveries: readonly QueuedDelivery[],
  deadline: number | undefined,
  log: (message: string, detail: Record<string, unknown>) => void,
): Promise<number[]> {
  try {
    return (await queue.enqueue(deliveries, deadline === undefined ? {} : { deadline })).failed;
  } catch (error) {
    log('could not queue webhook deliveries; the stream will retry', { error: String(error) });
    return deliveries.map((_, index) => index);
  }
}

/** Delivers at once and waits: a consumer that is its own lane runner (tests, one-off tools). */
function inlineQueue(deliverer: WebhookDeliverer): WebhookQueue {
  return { enqueue: (deliveries, options) => deliverer.deliver(deliveries, options) };
}

/**
 * The local server's lanes (`npm start`): each lane is a queue in memory with its own runner,
 * which hands everything waiting in it to the deliverer, in order, then looks again. A lane that
 * hangs on a dead endpoint holds only itself. What could not be dead-lettered is tried again
 * after a pause, before anything later of its lane.
 *
 * In memory means a crash loses what is waiting; the local server reads its stream from
 * LATEST at every start anyway (docs/api.md). A graceful `drain` waits for the lanes, and
 * whatever is still waiting when it gives up becomes a dead letter, never silently dropped.
 */
export class WebhookLanes implements WebhookQueue {
  private readonly waiting = new Map<string, QueuedDelivery[]>();
  private readonly running = new Map<string, Promise<void>>();
  private stopping = false;

  constructor(
    private readonly deliverer: WebhookDeliverer,
    private readonly ports: {
      webhooks: Pick<WebhookStore, 'recordDeadLetter'>;
      sleep?: Sleep;
      now?: () => Date;
      /** Pause before a lane tries again what it could not dead-letter. @default 1000 */
      retryMs?: number;
    },
  ) {}

  async enqueue(deliveries: readonly QueuedDelivery[]): Promise<{ failed: number[] }> {
    for (const delivery of deliveries) {
      const lane = this.waiting.get(delivery.lane);
      if (lane) lane.push(delivery);
      else this.waiting.set(delivery.lane, [delivery]);
      if (!this.running.has(delivery.lane)) this.run(delivery.lane);
    }
    return { failed: [] };
  }

  /** How many deliveries wait or are under way, for tests and diagnostics. */
  pending(): number {
    return [...this.waiting.values()].reduce((sum, lane) => sum + lane.length, 0);
  }

  /**
   * Waits up to `withinMs` for every lane to finish; then records what still waits as dead
   * letters (`not attempted: the server stopped`), and stops.
   */
  async drain(withinMs: number): Promise<void> {
    const settled = Promise.all([...this.running.values()]);
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([settled, new Promise((resolve) => (timer = setTimeout(resolve, withinMs)))]);
    clearTimeout(timer);
    this.stopping = true;
    const now = this.ports.now ?? (() => new Date());
    const left = [...this.waiting.values()].flat();
    this.waiting.clear();
    await Promise.all(
      left.map(({ tenant, webhook, event }) =>
        this.ports.webhooks
          .recordDeadLetter(tenant, webhook.id, event, { attempts: 0, error: 'not attempted: the server stopped', at: now().toISOString() })
          .catch((error: unknown) => console.error('agentstate: a webhook delivery was lost at shutdown', webhook.id, event.id, error)),
      ),
    );
  }

  private run(lane: string): void {
    const runner = (async () => {
      const wait = this.ports.sleep ?? sleep;
      while (!this.stopping) {
        const queued = this.waiting.get(lane) ?? [];
        if (queued.length === 0) break;
        // What waits now, in order; it stays at the head of its lane until done, so `drain` sees it.
        const batch = [...queued];
        const { failed } = await this.deliverer.deliver(batch);
        queued.splice(0, failed.length === 0 ? batch.length : (failed[0] as number));
        if (failed.length > 0) await wait(this.ports.retryMs ?? 1_000);
      }
      if ((this.waiting.get(lane)?.length ?? 0) === 0) this.waiting.delete(lane);
      this.running.delete(lane);
    })();
    this.running.set(lane, runner);
  }
}
