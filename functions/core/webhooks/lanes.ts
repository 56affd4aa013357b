import { type Sleep, sleep, type WebhookDeliverer } from './delivery.js';
import type { QueuedDelivery, WebhookQueue, WebhookStore } from './records.js';

/**
 * Webhook deliveries travel in lanes (API.md section 9: a slow or dead endpoint delays only
 * its own deliveries). A lane is one webhook and one stream of events it follows (a session's
 * thread, one of its documents, one memory item): a lane's deliveries go one after the other,
 * in version order, and lanes never wait for each other. A lane is one webhook's, so it reads
 * that webhook once per batch.
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

/** Delivers at once and waits: a consumer that is its own lane runner (tests, one-off tools). */
export function inlineQueue(deliverer: WebhookDeliverer): WebhookQueue {
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
      webhooks: Pick<WebhookStore, 'recordDeadLetter' | 'getWebhook'>;
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

  /**
   * Delivers a lane's batch with its webhook as the table has it now, as the delivery hook reads
   * it for each message: a breaker another delivery moved counts at once, and the deliveries of a
   * webhook deleted since end with it. A read that fails retries the whole batch.
   */
  private async deliverFresh(batch: QueuedDelivery[]): Promise<{ failed: number[] }> {
    const { tenant, webhook } = batch[0] as QueuedDelivery;
    let fresh: Awaited<ReturnType<WebhookStore['getWebhook']>>;
    try {
      fresh = await this.ports.webhooks.getWebhook(tenant, webhook.id);
    } catch (error) {
      console.warn('agentstate: could not read a webhook; its lane will try again', webhook.id, String(error));
      return { failed: batch.map((_, index) => index) };
    }
    if (!fresh) return { failed: [] };
    return this.deliverer.deliver(batch.map((delivery) => ({ ...delivery, webhook: fresh })));
  }

  private run(lane: string): void {
    const runner = (async () => {
      const wait = this.ports.sleep ?? sleep;
      while (!this.stopping) {
        const queued = this.waiting.get(lane) ?? [];
        if (queued.length === 0) break;
        // What waits now, in order; it stays at the head of its lane until done, so `drain` sees it.
        const batch = [...queued];
        const { failed } = await this.deliverFresh(batch);
        queued.splice(0, failed.length === 0 ? batch.length : (failed[0] as number));
        if (failed.length > 0) await wait(this.ports.retryMs ?? 1_000);
      }
      if ((this.waiting.get(lane)?.length ?? 0) === 0) this.waiting.delete(lane);
      this.running.delete(lane);
    })();
    this.running.set(lane, runner);
  }
}
