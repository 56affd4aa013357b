import { describe, expect, it } from 'vitest';
import type { PruneReport } from '../../functions/store/log/history-prune.js';
import type { Due } from '../../functions/store/log/prune-due.js';
import { isScheduledEvent, sweepDuePrunes } from '../../functions/streams/prune-sweep.js';

/**
 * The scheduled retention sweep's own rules (functions/streams/prune-sweep.ts), apart from the
 * store (test/integration/retention-schedule.test.ts runs it on DynamoDB Local): each due
 * session runs once a sweep, a failing run does not stop the others, and a sweep starts no run
 * near its invocation's deadline, leaving the rest due for the next; a delete's fence found due
 * is finished as an erase, not run as a history.
 */

const report = (pruned: number): PruneReport => ({ pruned, expiring: 0, kept: 0, behind: false, ran: true, waiting: false });
const scopes = (count: number): Due[] => Array.from({ length: count }, (_, index) => ({ scope: { tenant: 't', sessionId: `s${index}` } }));
const unexpected = async (): Promise<never> => {
  throw new Error('not expected');
};

describe('the retention sweep', () => {
  it('runs each due session once, though the index still lists it (a run refused its turn leaves it due)', async () => {
    const due = scopes(30);
    const ran: string[] = [];
    const sweep = await sweepDuePrunes(
      {
        duePrunes: async () => due,
        pruneHistory: async (scope) => {
          ran.push(scope.sessionId);
          return report(scope.sessionId === 's3' ? 2 : 0);
        },
        finishClosing: unexpected,
        log: () => {},
      },
      { everyMs: 60_000 },
    );

    expect(ran.sort()).toEqual(due.map(({ scope }) => scope.sessionId).sort());
    expect(sweep).toEqual({ sessions: 30, pruned: 1, erased: 0, cut: false });
  });

  it('logs a run that fails and goes on with the others', async () => {
    const failures: string[] = [];
    const sweep = await sweepDuePrunes(
      {
        duePrunes: async () => scopes(3),
        pruneHistory: async (scope) => {
          if (scope.sessionId === 's1') throw new Error('throttled');
          return report(1);
        },
        finishClosing: unexpected,
        log: (message, error) => failures.push(`${message}: ${String(error)}`),
      },
      { everyMs: 60_000 },
    );

    expect(failures).toEqual(['could not prune history: Error: throttled']);
    expect(sweep).toEqual({ sessions: 3, pruned: 2, erased: 0, cut: false });
  });

  it('starts no run within 10 s of its deadline: what it did not reach stays due', async () => {
    let runs = 0;
    const sweep = await sweepDuePrunes(
      {
        duePrunes: async () => scopes(5),
        pruneHistory: async () => {
          runs++;
          return report(0);
        },
        finishClosing: unexpected,
        log: () => {},
      },
      { everyMs: 60_000, deadline: Date.now() + 5_000 },
    );

    expect(runs).toBe(0);
    expect(sweep).toEqual({ sessions: 0, pruned: 0, erased: 0, cut: true });
  });

  it('finishes the erase of a delete whose fence is due, once a sweep, beside the same session’s history run', async () => {
    const due: Due[] = [
      { scope: { tenant: 't', sessionId: 'a' }, closing: 0 },
      { scope: { tenant: 't', sessionId: 'a' } },
      { scope: { tenant: 't', sessionId: 'b' }, closing: 3 },
      { scope: { tenant: 't', sessionId: 'c' }, closing: 1 },
    ];
    const erases: string[] = [];
    const histories: string[] = [];
    const failures: string[] = [];
    const sweep = await sweepDuePrunes(
      {
        duePrunes: async () => due,
        pruneHistory: async (scope) => {
          histories.push(scope.sessionId);
          return null;
        },
        finishClosing: async (scope, life, deadline) => {
          erases.push(`${scope.sessionId}@${life} ${deadline === undefined ? 'no deadline' : 'deadline'}`);
          if (scope.sessionId === 'c') throw new Error('throttled');
          return scope.sessionId === 'a';
        },
        log: (message, error) => failures.push(`${message}: ${String(error)}`),
      },
      { everyMs: 60_000 },
    );

    expect(erases.sort()).toEqual(['a@0 no deadline', 'b@3 no deadline', 'c@1 no deadline']);
    expect(histories).toEqual(['a']);
    expect(failures).toEqual(['could not finish the erase of a deleted session: Error: throttled']);
    expect(sweep).toEqual({ sessions: 4, pruned: 0, erased: 1, cut: false });
  });

  it('tells the schedule’s invocation from a stream batch', () => {
    expect(isScheduledEvent({ 'detail-type': 'Scheduled Event', source: 'aws.events', detail: {} })).toBe(true);
    expect(isScheduledEvent({ Records: [] })).toBe(false);
    expect(isScheduledEvent(null)).toBe(false);
  });
});
