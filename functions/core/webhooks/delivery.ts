import { type Log, warnToConsole } from '../kernel/log.js';
import { countMetric } from '../kernel/metrics.js';
import { type BreakerGate, breakerAfterFailure, breakerGate, breakerOpenError, PROBE_HOLD_MS, type WebhookBreaker } from './breaker.js';
import type { ProbeClaim, QueuedDelivery, WebhookRecord, WebhookSender, WebhookStore } from './records.js';

/**
 * Where a webhook delivery is retried and where it becomes a dead letter, in one place: one
 * body's bounded attempts with backoff (`deliverWithRetries`), and the deliverer that runs
 * them lane by lane and keeps what still fails as a dead letter of its webhook.
 */

/**
 * How hard a delivery is tried before it becomes a dead letter. The attempt timeout lives in
 * the sender (5 s); with it, a dead endpoint costs at most ~3 × 5 s + 1.25 s per batch.
 */
export interface DeliveryPolicy {
  attempts: number;
  /** Waits before the 2nd, 3rd, … attempt (full jitter is applied to each). */
  backoffMs: readonly number[];
}

export const DEFAULT_DELIVERY_POLICY: DeliveryPolicy = { attempts: 3, backoffMs: [250, 1000] };

export type Sleep = (ms: number) => Promise<void>;
export const sleep: Sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * Delivers one body with up to `attempts` tries and backoff between them. Resolves with the
 * last failure rather than throwing: the caller decides where a failure goes.
 */
async function deliverWithRetries(
  send: WebhookSender,
  webhook: Pick<WebhookRecord, 'url' | 'secret'>,
  body: string,
  eventIdValue: string,
  options: {
    attempts: number;
    backoffMs: readonly number[];
    sleep?: Sleep;
    /** Epoch ms by which the last attempt must have started, on `now`'s clock. */
    deadline?: number;
    now?: () => Date;
  },
): Promise<{ ok: true; attempts: number } | { ok: false; attempts: number; error: string }> {
  const wait = options.sleep ?? sleep;
  const now = options.now ?? (() => new Date());
  let error = 'not attempted';
  for (let attempt = 1; attempt <= options.attempts; attempt++) {
    if (attempt > 1) {
      const base = options.backoffMs[Math.min(attempt - 2, options.backoffMs.length - 1)] ?? 0;
      const delay = base / 2 + Math.random() * (base / 2);
      // Out of time: what is left becomes a dead letter now rather than a timed-out batch.
      if (options.deadline !== undefined && now().getTime() + delay >= options.deadline) return { ok: false, attempts: attempt - 1, error };
      await wait(delay);
    }
    const result = await send(webhook, body, { eventId: eventIdValue, attempt });
    if (result.ok) return { ok: true, attempts: attempt };
    error = result.error;
  }
  return { ok: false, attempts: options.attempts, error };
}

export interface WebhookDelivererPorts {
  send: WebhookSender;
  /**
   * The function that delivers (`the webhook hook`, `the delivery hook`): a dead letter of a
   * delivery it had no time left to try names it, so that an operator knows whose timeout to raise.
   */
  deliveredBy: string;
  webhooks: Pick<WebhookStore, 'recordDeadLetter' | 'openBreaker' | 'claimProbe' | 'closeBreaker'>;
  sleep?: Sleep;
  /** The clock of breakers, deadlines and dead letters; the system clock by default. */
  now?: () => Date;
  log?: Log;
}

/**
 * Delivers, with bounded attempts, and keeps what fails as a dead letter of its webhook (visible
 * and replayable). A webhook whose delivery failed gets no further attempts in the same call:
 * its later deliveries become dead letters in order, so a replay delivers them in order. A
 * failed delivery opens the endpoint's breaker (breaker.ts), shared through the webhook's item:
 * while it is open, no instance tries the endpoint, so dead endpoints hold no delivery slots.
 */
export class WebhookDeliverer {
  private readonly now: () => Date;
  private readonly log: Log;

  constructor(
    private readonly ports: WebhookDelivererPorts,
    private readonly policy: DeliveryPolicy = DEFAULT_DELIVERY_POLICY,
  ) {
    this.now = ports.now ?? (() => new Date());
    this.log = ports.log ?? warnToConsole;
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
    const { webhook } = delivery;
    let failure: { attempts: number; error: string };
    if (tripped.has(webhook.id)) {
      failure = { attempts: 0, error: 'not attempted: an earlier delivery to this webhook failed in the same batch' };
    } else if (deadline !== undefined && this.now().getTime() >= deadline) {
      failure = { attempts: 0, error: `not attempted: ${this.ports.deliveredBy} ran out of time` };
    } else {
      const outcome = await this.attempt(delivery, deadline);
      if (outcome.ok) return true;
      failure = outcome;
      if (outcome.attempts > 0) tripped.add(webhook.id);
    }
    return this.deadLetter(delivery, failure);
  }

  /** Tries the endpoint as its breaker allows, and moves the breaker by the outcome. */
  private async attempt(
    delivery: QueuedDelivery,
    deadline: number | undefined,
  ): Promise<{ ok: true } | { ok: false; attempts: number; error: string }> {
    const { tenant, webhook, event } = delivery;
    const now = this.now().getTime();
    // As the webhook's item was read for this delivery: the delivery hook and the local lanes
    // read it fresh (lanes.ts), so a breaker moved by another instance counts at once.
    let breaker = webhook.breaker;
    let gate = breakerGate(breaker, now);
    if (gate.kind === 'open') return { ok: false, attempts: 0, error: breakerOpenError(gate) };
    if (gate.kind === 'half-open') {
      const claim = await this.claimProbe(tenant, webhook.id, now);
      if (claim === 'taken') return { ok: false, attempts: 0, error: breakerOpenError(probeTaken(gate, now)) };
      // Another delivery's probe got through since this one read the webhook: deliver as usual.
      if (claim === 'closed') {
        breaker = undefined;
        gate = { kind: 'closed' };
      }
    }
    const result = await deliverWithRetries(this.ports.send, webhook, event.body, event.id, {
      // A half-open breaker lets one attempt through: the probe.
      attempts: gate.kind === 'half-open' ? 1 : this.policy.attempts,
      backoffMs: this.policy.backoffMs,
      now: this.now,
      ...(this.ports.sleep ? { sleep: this.ports.sleep } : {}),
      ...(deadline !== undefined ? { deadline } : {}),
    });
    if (result.ok) {
      if (breaker) await this.moveBreaker(tenant, webhook.id, undefined);
      return { ok: true };
    }
    // Out of time before the first attempt says nothing about the endpoint.
    if (result.attempts > 0) await this.moveBreaker(tenant, webhook.id, breakerAfterFailure(breaker, this.now().getTime()));
    return result;
  }

  private async claimProbe(tenant: string, webhookId: string, now: number): Promise<ProbeClaim> {
    try {
      return await this.ports.webhooks.claimProbe(tenant, webhookId, { now, until: now + PROBE_HOLD_MS });
    } catch (error) {
      // Unknown whether it was claimed: leave the probe to a delivery that knows.
      this.log('could not claim the probe of a webhook breaker', { webhookId, error: String(error) });
      return 'taken';
    }
  }

  /** Opens (`next`) or closes (undefined) the breaker, for every instance. */
  private async moveBreaker(tenant: string, webhookId: string, next: WebhookBreaker | undefined): Promise<void> {
    try {
      if (next) await this.ports.webhooks.openBreaker(tenant, webhookId, next);
      else await this.ports.webhooks.closeBreaker(tenant, webhookId);
    } catch (error) {
      // The breaker only saves attempts; the delivery's own outcome is what must not be lost.
      this.log('could not move a webhook breaker', { webhookId, open: next !== undefined, error: String(error) });
    }
  }

  /** Keeps a failed delivery as a dead letter; false when even that failed (retry it). */
  private async deadLetter(delivery: QueuedDelivery, failure: { attempts: number; error: string }): Promise<boolean> {
    const { tenant, webhook, event } = delivery;
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

/** A half-open breaker whose probe another delivery holds: open for this one until the hold ends. */
function probeTaken(gate: Extract<BreakerGate, { kind: 'half-open' }>, now: number): Extract<BreakerGate, { kind: 'open' }> {
  return { kind: 'open', until: now + PROBE_HOLD_MS, failures: gate.failures };
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
