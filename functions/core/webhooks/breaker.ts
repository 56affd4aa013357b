/**
 * The breaker of a webhook endpoint: the one rule for when deliveries stop trying an endpoint
 * that keeps failing. Its state lives on the webhook's own item (store/events/webhook-store.ts),
 * which every delivery reads anyway, so every function instance that delivers sees it.
 *
 *   closed ──a delivery fails all its attempts──> open (30 s, doubling per failure, at most 15 min)
 *   open ──until `openUntil`: every delivery a dead letter, no attempt
 *   half-open (after `openUntil`) ──one delivery claims the probe: one attempt
 *        ├─ it succeeds ──> closed
 *        └─ it fails ─────> open again, twice as long
 *
 * Why: the delivery hook runs a bounded number of deliveries at once (its event source mapping's
 * maximum concurrency). Without a breaker, every lane waiting on a dead endpoint would hold one
 * of those slots for a timeout per delivery, and enough dead lanes of one tenant would slow
 * every tenant's deliveries. With it, a dead endpoint costs one failed delivery (3 attempts) per
 * opening, and then nothing but the dead letters, which keep every event for a replay.
 */

/** What the webhook's item says about its endpoint; absent while the breaker is closed. */
export interface WebhookBreaker {
  /** Deliveries failed in a row (each after all its attempts, or a failed probe). */
  failures: number;
  /** Epoch ms until which no delivery tries the endpoint. */
  openUntil: number;
  /** Epoch ms until which one delivery holds the probe of a half-open breaker. */
  probeUntil?: number;
}

const FIRST_OPENING_MS = 30_000;
const LONGEST_OPENING_MS = 15 * 60_000;
/**
 * How long a claimed probe keeps others from probing: one attempt's timeout (the sender's 5 s)
 * with room to record its outcome. A probe whose function died frees the claim after it.
 */
export const PROBE_HOLD_MS = 10_000;

/** What a delivery may do now. */
export type BreakerGate =
  | { kind: 'closed' }
  | { kind: 'open'; until: number; failures: number }
  /** The breaker's time is up: one delivery may claim the probe (`WebhookStore.claimProbe`). */
  | { kind: 'half-open'; failures: number };

export function breakerGate(breaker: WebhookBreaker | undefined, now: number): BreakerGate {
  if (!breaker) return { kind: 'closed' };
  if (now < breaker.openUntil) return { kind: 'open', until: breaker.openUntil, failures: breaker.failures };
  // A probe under way keeps the breaker open for everyone else until it ends or its hold runs out.
  if (breaker.probeUntil !== undefined && now < breaker.probeUntil) {
    return { kind: 'open', until: breaker.probeUntil, failures: breaker.failures };
  }
  return { kind: 'half-open', failures: breaker.failures };
}

/** The breaker after one more failed delivery: open again, for twice as long each time. */
export function breakerAfterFailure(breaker: WebhookBreaker | undefined, now: number): WebhookBreaker {
  const failures = (breaker?.failures ?? 0) + 1;
  const opening = Math.min(FIRST_OPENING_MS * 2 ** Math.min(failures - 1, 10), LONGEST_OPENING_MS);
  return { failures, openUntil: now + opening };
}

/** Why a delivery was not attempted, as its dead letter says it. */
export function breakerOpenError(gate: Extract<BreakerGate, { kind: 'open' }>): string {
  const deliveries = gate.failures === 1 ? 'a delivery' : `${gate.failures} deliveries in a row`;
  return `not attempted: the endpoint failed ${deliveries}, so its breaker is open until ${new Date(gate.until).toISOString()}`;
}
