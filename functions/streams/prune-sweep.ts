import type { ScheduledEvent } from 'aws-lambda';
import type { SessionScope } from '../core/model/model.js';
import type { PruneOptions, PruneReport } from '../store/log/history-prune.js';
import type { Due } from '../store/log/prune-due.js';

/**
 * Retention on a schedule (API.md section 12). The change hook prunes a session's history when
 * its versions reach it, at most once an interval per session; what falls out of a window
 * without a write (an age window, a write that came when it was not a run's turn, a backlog, a
 * new setting) is marked due on the session's marker (store/log/prune-marker.ts). This sweep
 * finds the sessions due (the index `byPruneDue`: no scan, nothing per tenant) and runs theirs.
 * In AWS an EventBridge rule invokes the change hook with a scheduled event every minute; under
 * `npm start` a timer of the local server does the same (functions/local/server.ts).
 *
 * One sweep stops starting runs near its deadline; what it did not reach is still due and
 * the next sweep takes it. A run is safe whenever it comes (what nothing pointed at as of its
 * tip is never pointed at again), and a run for a session the change hook is pruning at the
 * same moment loses the claim and does nothing.
 *
 * The same index holds the closing fence of every delete while an eraser holds it, due when
 * that hold ends (store/sessions/session-delete.ts): a `DELETE` whose function died holding it
 * (killed, past its timeout), or whose hand-off to the change hook was lost, leaves the entry
 * due, and the sweep finishes that erase as the next request of the id would (`finishClosing`,
 * an eraser like any other: one at a time holds the fence). An erase that completes closes the
 * fence, which leaves the index with it.
 *
 * And it holds each user's erasure that no run has moved for longer than a run takes
 * (store/erasure/erasure-store.ts): one whose runs stopped (a run killed, its stream record
 * given up, so nothing brings the next). The sweep runs its next steps as the change hook would
 * (`finishErasure`: for up to 20 s, under an eraser's name of its own), each step's move of the
 * cursor bringing the hook back and moving the entry on; `done` removes it.
 *
 * A run that fails (it throws) puts its entry off (`retryDelayMs`: a minute, doubling with each
 * failure in a row, an hour at most), so that an entry that fails every time never stays at the
 * front of its partition, where 25 of them would hold back every entry behind them for good;
 * it is still retried. The count rides on the entry (store/table/keys.ts `pruneDueRetry`).
 */

/** Due sessions read from each index partition per round. */
const PER_SHARD = 25;
/** Runs in flight at once. */
const PARALLEL_RUNS = 8;
/** A sweep starts no run this close to its deadline. */
const DEADLINE_MARGIN_MS = 10_000;
/** An erase a sweep finishes stops this long before the sweep's deadline: what is left, it hands to the change hook. */
const HAND_OFF_MARGIN_MS = 5_000;
/** A failed run's entry is due again this long after its first failure in a row, twice as long after each next, ... */
const RETRY_FIRST_MS = 60_000;
/** ... and at most this long. */
const RETRY_LONGEST_MS = 60 * 60_000;
/** The count of failures in a row stops growing here (the delay stopped well before). */
const FAILURES_COUNTED = 99;

export interface PruneSweepPorts {
  duePrunes(perShard: number): Promise<Due[]>;
  pruneHistory(scope: SessionScope, options: PruneOptions): Promise<PruneReport | null>;
  /**
   * Finishes the erase of the delete whose fence closes `life` (while it is closing there),
   * as far as `deadline` allows: whether the fence is closed.
   */
  finishClosing(scope: SessionScope, life: number, deadline?: number): Promise<boolean>;
  /**
   * Goes on with a user's erasure whose runs stopped, as a run of the change hook would, until
   * `deadline` (or the run's own bound) at most.
   */
  finishErasure(tenant: string, erasureId: string, deadline?: number): Promise<void>;
  /** Makes an entry whose run failed, `failures` in a row, due `delayMs` from now (never sooner than it is due already). */
  putOff(due: Due, failures: number, delayMs: number): Promise<void>;
  log(message: string, error: unknown): void;
}

/** What one sweep did. */
export interface PruneSweep {
  /** Sessions whose run (or erase) it started. */
  sessions: number;
  /** Runs that pruned or expired something. */
  pruned: number;
  /** Erases of deletes it finished (their fences closed). */
  erased: number;
  /** Users' erasures whose runs had stopped, that it went on with. */
  erasures: number;
  /** Whether it stopped at its deadline with due sessions left. */
  cut: boolean;
}

/** Whether the change hook was invoked by its schedule (an EventBridge scheduled event), not by the stream. */
export function isScheduledEvent(event: unknown): event is ScheduledEvent {
  return typeof event === 'object' && event !== null && (event as { 'detail-type'?: unknown })['detail-type'] === 'Scheduled Event';
}

/**
 * One sweep: the due sessions, round after round, each run once, until none is left or the
 * deadline (epoch ms) comes near. `everyMs` is the prune interval; a version younger than it
 * keeps its previous version, since the change hook may not have built its event yet.
 */
export async function sweepDuePrunes(ports: PruneSweepPorts, options: { everyMs: number; deadline?: number }): Promise<PruneSweep> {
  const done = new Set<string>();
  const sweep: PruneSweep = { sessions: 0, pruned: 0, erased: 0, erasures: 0, cut: false };
  const late = () => options.deadline !== undefined && Date.now() > options.deadline - DEADLINE_MARGIN_MS;
  for (;;) {
    const due = (await ports.duePrunes(PER_SHARD)).filter((entry) => !done.has(keyOf(entry)));
    if (due.length === 0) return sweep;
    let next = 0;
    const worker = async () => {
      while (next < due.length) {
        if (late()) {
          sweep.cut = true;
          return;
        }
        const entry = due[next++] as Due;
        done.add(keyOf(entry));
        const until = options.deadline === undefined ? undefined : options.deadline - HAND_OFF_MARGIN_MS;
        if ('erasure' in entry) {
          try {
            await ports.finishErasure(entry.erasure.tenant, entry.erasure.erasureId, until);
            sweep.erasures += 1;
          } catch (error) {
            ports.log('could not go on with an erasure', error);
            await putOff(ports, entry);
          }
          continue;
        }
        sweep.sessions += 1;
        if (entry.closing !== undefined) {
          try {
            if (await ports.finishClosing(entry.scope, entry.closing, until)) sweep.erased += 1;
          } catch (error) {
            // Its entry stays due, later (a later sweep goes on): the rest of its partition first.
            ports.log('could not finish the erase of a deleted session', error);
            await putOff(ports, entry);
          }
          continue;
        }
        try {
          const report = await ports.pruneHistory(entry.scope, { everyMs: options.everyMs, graceMs: options.everyMs });
          if (report && report.pruned + report.expiring > 0) sweep.pruned += 1;
        } catch (error) {
          ports.log('could not prune history', error);
          await putOff(ports, entry);
        }
      }
    };
    await Promise.all(Array.from({ length: Math.min(PARALLEL_RUNS, due.length) }, worker));
    if (sweep.cut) return sweep;
  }
}

// A session's history run and the erase of a delete of it are two entries, each run once a sweep; an erasure is one.
const keyOf = (entry: Due) =>
  'erasure' in entry ? `${entry.key.pk}#erasure` : `${entry.scope.tenant}#${entry.scope.sessionId}#${entry.closing ?? 'history'}`;

/** How long after its `failures`-th failure in a row an entry is due again: a minute, doubling, an hour at most. */
export function retryDelayMs(failures: number): number {
  return Math.min(RETRY_LONGEST_MS, RETRY_FIRST_MS * 2 ** Math.max(0, Math.min(failures, FAILURES_COUNTED) - 1));
}

/** A failed run's entry, put off (a failure to put it off is logged: it stays where it was, as before). */
async function putOff(ports: PruneSweepPorts, entry: Due): Promise<void> {
  const failures = Math.min(entry.failures + 1, FAILURES_COUNTED);
  try {
    await ports.putOff(entry, failures, retryDelayMs(failures));
  } catch (error) {
    ports.log('could not put off a failing entry', error);
  }
}
