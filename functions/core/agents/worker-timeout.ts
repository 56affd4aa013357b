/**
 * How long a worker may take to answer a decision (API.md section 7, `worker.timeoutMs`). One
 * rule for the three places that need it: the registry's schema (the range it accepts), the
 * decision lease (held for the timeout plus a margin) and the transport (when it gives up).
 */

export const DEFAULT_WORKER_TIMEOUT_MS = 10_000;
/** API Gateway cuts a request at 30 s: a worker must have answered well before. */
export const MAX_WORKER_TIMEOUT_MS = 25_000;

/**
 * The timeout a worker call gets: its `timeoutMs`, else 10 s; never more than 25 s. A value
 * the registry would refuse (not a positive number) counts as unset, so a record written
 * under other rules cannot give a call no time at all, or forever.
 */
export function workerTimeoutMs(worker: { timeoutMs?: number | null | undefined }): number {
  const ms = worker.timeoutMs;
  if (typeof ms !== 'number' || !Number.isFinite(ms) || ms <= 0) return DEFAULT_WORKER_TIMEOUT_MS;
  return Math.min(Math.max(Math.floor(ms), 1), MAX_WORKER_TIMEOUT_MS);
}
