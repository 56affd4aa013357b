import { AgentStateError } from './errors.js';
import { countMetric } from './metrics.js';
import { StaleTipError } from './ports.js';

export interface RetryPolicy {
  /** Give up after this many attempts. */
  maxAttempts: number;
  /** Or once this much time has passed since the first attempt. */
  maxElapsedMs: number;
  /** Upper bound of the first backoff; it doubles per attempt up to `maxDelayMs`. */
  baseDelayMs: number;
  maxDelayMs: number;
}

/**
 * Under heavy contention each round lets one writer through, so a writer may lose many rounds
 * in a row; the time budget, not the count, is the real bound. 15 s stays inside the handlers'
 * 20 s Lambda timeout, so a loser still gets a clear 409 rather than a timeout.
 */
const defaults: RetryPolicy = { maxAttempts: 250, maxElapsedMs: 15_000, baseDelayMs: 2, maxDelayMs: 100 };

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * Runs `attempt` until it no longer loses a race. A write that lost (its tip moved) is safe to
 * repeat because it wrote nothing; each repeat re-reads, so the update lands on fresh state.
 * Backoff is "full jitter" so that many writers on one session spread out instead of colliding
 * again in lockstep.
 */
export async function retryOnStaleTip<T>(
  policy: Partial<RetryPolicy>,
  attempt: () => Promise<T>,
  isAlsoRetryable: (error: unknown) => boolean = () => false,
): Promise<T> {
  const { maxAttempts, maxElapsedMs, baseDelayMs, maxDelayMs } = { ...defaults, ...policy };
  // Wall time, not a service's injected clock: the budget bounds real sleeps inside a real
  // Lambda timeout, and a test's frozen clock must not make it endless.
  const started = Date.now();
  for (let attemptNumber = 1; ; attemptNumber++) {
    try {
      return await attempt();
    } catch (error) {
      const retryable = error instanceof StaleTipError || isAlsoRetryable(error);
      if (!retryable) throw error;
      if (attemptNumber >= maxAttempts || Date.now() - started >= maxElapsedMs) {
        throw new AgentStateError(
          'conflict',
          'the session is changing too fast to apply this write; try again',
          { attempts: attemptNumber },
          { cause: error },
        );
      }
      countMetric('VersionRacesRetried');
      const ceiling = Math.min(maxDelayMs, baseDelayMs * 2 ** (attemptNumber - 1));
      await sleep(Math.random() * ceiling);
    }
  }
}
