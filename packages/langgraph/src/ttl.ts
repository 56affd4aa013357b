/** The longest expiry agentstate takes: ten years, in seconds. */
const MAX_TTL_SECONDS = 315_360_000;

/**
 * A TTL in minutes (LangGraph's unit) as agentstate's whole seconds (`ttlSeconds`), checked
 * before anything is sent: from a second to ten years.
 */
export function ttlSecondsOf(minutes: number): number {
  const seconds = Math.round(minutes * 60);
  if (!Number.isFinite(minutes) || seconds < 1 || seconds > MAX_TTL_SECONDS) {
    throw new RangeError(`ttl must be from 1/60 to ${MAX_TTL_SECONDS / 60} minutes (got ${minutes})`);
  }
  return seconds;
}
