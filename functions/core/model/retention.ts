import type { Retention } from './lifetime.js';

/**
 * The rules of retention (API.md section 12), apart from how the store carries them out
 * (store/log/history-prune.ts). A version is kept while it is among the newest `keepVersions`,
 * or younger than `keepDays` (a window not given keeps nothing by itself), or while a message
 * node or the head points at it. Two more reasons keep a version, both invisible to the rule's
 * user: a kept large state's splice chain (its state is rebuilt from those versions), and the
 * previous version of a version whose change event is not built yet (the event's `prev`).
 */

/** A session's history is pruned at most this often (the contract: within a minute of falling out). */
export const PRUNE_INTERVAL_MS = 60_000;

/**
 * A version is not pruned within this long of being written (nor of the interval, when that is
 * shorter): the stream's webhook consumer, which reads the stream on its own, may trail the
 * change hook by a moment, and a version's event reads its previous version.
 */
export const PRUNE_GRACE_MS = 5_000;

/**
 * The deployment's interval (env `AGENTSTATE_PRUNE_INTERVAL_SECONDS`, default 60): longer costs
 * fewer runs and prunes later; shorter (tests, a demo) prunes sooner.
 */
export function pruneIntervalFrom(env: Readonly<Record<string, string | undefined>>): number {
  const raw = env.AGENTSTATE_PRUNE_INTERVAL_SECONDS?.trim();
  if (!raw) return PRUNE_INTERVAL_MS;
  const seconds = Number(raw);
  if (!Number.isFinite(seconds) || seconds < 0)
    throw new Error(`AGENTSTATE_PRUNE_INTERVAL_SECONDS must be a number of seconds, not "${raw}"`);
  return seconds * 1000;
}

/**
 * How long a pruned change's place stays taken (its item stripped, then removed by TTL): far
 * longer than any write that read a tip from before it can still be running, so that no such
 * write can claim the place again (a Lambda runs 20 s at most).
 */
export const PRUNED_TTL_SECONDS = 24 * 60 * 60;

const DAY_MS = 24 * 60 * 60 * 1000;

/** Whether `version`, written at `createdAtMs`, is in the windows `retention` keeps, the newest version being `newest`. */
export function inWindow(retention: Retention, version: number, createdAtMs: number, newest: number, nowMs: number): boolean {
  const byCount = retention.keepVersions !== undefined && version > newest - retention.keepVersions;
  const byAge = retention.keepDays !== undefined && createdAtMs > nowMs - retention.keepDays * DAY_MS;
  return byCount || byAge;
}

/** When a version written at `createdAtMs` leaves the age window (null: there is none, only writes move the count window). */
export function fallsOutAt(retention: Retention, createdAtMs: number): number | null {
  return retention.keepDays === undefined ? null : createdAtMs + retention.keepDays * DAY_MS;
}

/**
 * The first version the count window keeps (every version from it on is kept); `newest + 1`
 * when there is no count window.
 */
export function countWindowStart(retention: Retention, newest: number): number {
  return retention.keepVersions === undefined ? newest + 1 : Math.max(1, newest - retention.keepVersions + 1);
}
