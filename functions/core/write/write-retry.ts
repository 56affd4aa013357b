import { AgentStateError } from '../kernel/errors.js';
import { countMetric } from '../kernel/metrics.js';
import type { Tip } from '../model/model.js';
import { StaleTipError } from '../model/ports.js';

export interface RetryPolicy {
  /** Give up after this many attempts. */
  maxAttempts: number;
  /** Or once this much time has passed since the first attempt. */
  maxElapsedMs: number;
  /** Upper bound of the first backoff after a brief race; it doubles per attempt up to `maxDelayMs`. */
  baseDelayMs: number;
  maxDelayMs: number;
  /**
   * On a crowded session, the window of the first wait: the k-th wait is random within
   * `queueWindowMs / k`, but never narrower than `queueMinMs`.
   */
  queueWindowMs: number;
  queueMinMs: number;
}

/**
 * Under heavy contention each round lets one writer through, so a writer may lose many rounds
 * in a row; the time budget, not the count, is the real bound. 15 s stays inside the handlers'
 * 20 s Lambda timeout, so a loser still gets a clear 409 rather than a timeout. The queue's
 * window was chosen by measurement (docs/benchmarks.md, concurrency): 20 blind writers on one
 * session, where exponential backoff alone gave a p99 of 1.7–4.4 s.
 */
const defaults: RetryPolicy = {
  maxAttempts: 250,
  maxElapsedMs: 15_000,
  baseDelayMs: 2,
  maxDelayMs: 100,
  queueWindowMs: 400,
  queueMinMs: 20,
};

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** What an attempt knows of the ones before it. */
export interface AttemptContext {
  /** 1 for the first attempt. */
  attempt: number;
  /** Whether an earlier attempt lost a race for the session's log (not only waited its turn). */
  raced: boolean;
}

/**
 * Thrown by a first attempt that finds other writers waiting for the same session (its tip was
 * made, a moment ago, by a writer that had lost a race first): it waits its turn like them
 * instead of going straight in, which is what let a writer that had just won win again and
 * again while the others backed off (the capture effect that made contention's p99 seconds).
 */
export class QueueBehindOthers extends Error {
  constructor() {
    super('other writers are waiting for this session');
    this.name = 'QueueBehindOthers';
  }
}

/** How long a change made after a lost race says that others may still be waiting. */
const CONTENDED_FOR_MS = 1_000;

/** Whether a first attempt that read `tip` should queue behind writers still waiting for the session. */
export function othersWaiting(tip: Pick<Tip, 'contendedAt'>, context: AttemptContext, now: Date): boolean {
  if (context.attempt > 1 || tip.contendedAt === undefined) return false;
  // Either way: a writer whose clock runs a little behind the one that made the change queues
  // too, and a change stamped far off (a test's clock) says nothing.
  return Math.abs(now.getTime() - Date.parse(tip.contendedAt)) < CONTENDED_FOR_MS;
}

/**
 * Runs `attempt` until it no longer loses a race. A write that lost (its tip moved) is safe to
 * repeat because it wrote nothing; each repeat re-reads, so the update lands on fresh state.
 * Waits are random ("full jitter") so that many writers on one session spread out instead of
 * colliding again in lockstep; on a crowded session they narrow with each turn waited (the
 * longest waiting go first), and a first attempt that finds others waiting queues behind them
 * (`QueueBehindOthers`), so that no writer is passed over again and again.
 */
export async function retryOnStaleTip<T>(
  policy: Partial<RetryPolicy>,
  attempt: (context: AttemptContext) => Promise<T>,
  isAlsoRetryable: (error: unknown) => boolean = () => false,
): Promise<T> {
  const { maxAttempts, maxElapsedMs, baseDelayMs, maxDelayMs, queueWindowMs, queueMinMs } = { ...defaults, ...policy };
  // Wall time, not a service's injected clock: the budget bounds real sleeps inside a real
  // Lambda timeout, and a test's frozen clock must not make it endless.
  const started = Date.now();
  let raced = false;
  let turnsWaited = 0;
  for (let attemptNumber = 1; ; attemptNumber++) {
    try {
      return await attempt({ attempt: attemptNumber, raced });
    } catch (error) {
      const retryable = error instanceof StaleTipError || error instanceof QueueBehindOthers || isAlsoRetryable(error);
      if (!retryable) throw error;
      if (attemptNumber >= maxAttempts || Date.now() - started >= maxElapsedMs) {
        throw new AgentStateError(
          'conflict',
          'the session is changing too fast to apply this write; try again',
          { attempts: attemptNumber },
          { cause: error },
        );
      }
      if (error instanceof StaleTipError) {
        raced = true;
        countMetric('VersionRacesRetried');
      }
      // Two regimes. A race lost to a writer that won at its first try is a brief one: retry
      // at once, backing off exponentially (full jitter). Once the session is crowded (the
      // winner had lost races itself, or others are waiting), wait in a wide window that
      // narrows with each turn waited, so that the writers waiting longest go first.
      const crowded = error instanceof QueueBehindOthers || (error instanceof StaleTipError && error.newer?.contendedAt !== undefined);
      if (crowded) turnsWaited++;
      const delay = crowded
        ? Math.random() * Math.max(queueMinMs, queueWindowMs / turnsWaited)
        : Math.random() * Math.min(maxDelayMs, baseDelayMs * 2 ** (attemptNumber - 1));
      await sleep(delay);
    }
  }
}
