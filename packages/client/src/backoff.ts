/** How a failed attempt is retried: exponential backoff with full jitter. */
export interface RetryOptions {
  /** Attempts in all, the first included. @default 4 */
  attempts: number;
  /** The delay before the first retry, before jitter. @default 100 */
  baseDelayMs: number;
  /** The longest delay between two attempts. @default 5000 */
  maxDelayMs: number;
}

export const defaultRetry: RetryOptions = { attempts: 4, baseDelayMs: 100, maxDelayMs: 5_000 };

/** The delay before attempt `attempt + 1` (attempt counts from 1): random in [0, min(max, base·2^(attempt-1))]. */
export function backoffDelay(attempt: number, options: Pick<RetryOptions, 'baseDelayMs' | 'maxDelayMs'>): number {
  const ceiling = Math.min(options.maxDelayMs, options.baseDelayMs * 2 ** Math.max(0, attempt - 1));
  return Math.round(Math.random() * ceiling);
}

/** Resolves after `ms`, or rejects with the signal's reason when it aborts first. */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal?.reason);
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}
