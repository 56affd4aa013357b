import type { PruneSweep } from '../streams/prune-sweep.js';
import { runAs } from './running-function.js';

/**
 * What the EventBridge rule does in AWS (every minute, the change hook's retention sweep:
 * functions/streams/prune-sweep.ts, which also finishes the erase of a delete whose eraser died
 * holding its fence), for `npm start`: a timer that runs one sweep each prune
 * interval (AGENTSTATE_PRUNE_INTERVAL_SECONDS; at least a second, at most the minute of the
 * rule), as the change hook, never two at once.
 */
export function startPruneSchedule(sweep: (deadline?: number) => Promise<PruneSweep>, everyMs: number): { stop(): Promise<void> } {
  const tickMs = Math.min(60_000, Math.max(1_000, everyMs));
  let running: Promise<unknown> | undefined;
  const timer = setInterval(() => {
    if (running) return;
    // A Lambda's minute to finish, as the change hook has in AWS.
    running = runAs('change-hook', () => sweep(Date.now() + 60_000))
      .catch((error: unknown) => console.warn('agentstate: the retention sweep failed', error))
      .finally(() => {
        running = undefined;
      });
  }, tickMs);
  // A timer never keeps a process alive by itself (the local server stops when asked).
  timer.unref();
  return {
    stop: async () => {
      clearInterval(timer);
      await running;
    },
  };
}
