import type { SessionScope } from '../core/model/model.js';
import type { PruneReport } from '../store/log/history-prune.js';

/**
 * Retention runs when a session's versions reach the change hook, at most once an interval per
 * session (store/log/history-prune.ts). A session that goes quiet would then keep what fell out
 * of its window since its last run until it is written again. So after a run that left
 * something (it was not its turn, or versions waited for their events, or a backlog), the hook
 * runs it once more an interval later, from a timer of its own process: under `npm start` the
 * process runs on; in a Lambda, the timer fires while the instance runs (it is frozen between
 * invocations, so a deployment with no traffic at all runs it with its next invocation). A run
 * is safe whenever it comes (what nothing pointed at as of its tip is never pointed at again).
 */

/** Sessions with a follow-up pending in one process at most (older ones are dropped: their next write runs them). */
const MAX_PENDING = 10_000;

type Built = { incarnation: number; version: number };
type Prune = (scope: SessionScope, builtThrough: Built) => Promise<PruneReport | null>;

/** `prune` as the change hook calls it, with a follow-up run an interval after each run that left something. */
export function withFollowUp(
  prune: Prune,
  everyMs: number,
  log: (error: unknown) => void,
): (scope: SessionScope, builtThrough: Built) => Promise<void> {
  const pending = new Map<string, Built>();
  const run = async (scope: SessionScope, builtThrough: Built): Promise<void> => {
    const report = await prune(scope, builtThrough);
    if (!report || !(report.waiting || report.behind || !report.ran)) return;
    const key = JSON.stringify([scope.tenant, scope.sessionId]);
    // One pending follow-up per session, with the newest versions whose events are built.
    const waiting = pending.has(key);
    pending.set(key, builtThrough);
    if (waiting || pending.size > MAX_PENDING) {
      if (!waiting) pending.delete(key);
      return;
    }
    const timer = setTimeout(() => {
      const built = pending.get(key) ?? builtThrough;
      pending.delete(key);
      run(scope, built).catch(log);
    }, everyMs + 100);
    // A timer never keeps a process alive by itself (the local server stops when asked).
    timer.unref?.();
  };
  return run;
}
