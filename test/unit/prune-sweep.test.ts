import { describe, expect, it } from 'vitest';
import type { PruneReport } from '../../functions/store/log/history-prune.js';
import type { Due, SessionDue } from '../../functions/store/log/prune-due.js';
import { isScheduledEvent, retryDelayMs, sweepDuePrunes } from '../../functions/streams/prune-sweep.js';

/**
 * The scheduled retention sweep's own rules (functions/streams/prune-sweep.ts), apart from the
 * store (test/integration/retention-schedule.test.ts runs it on DynamoDB Local): each due
 * session runs once a sweep, a failing run does not stop the others, and a sweep starts no run
 * near its invocation's deadline, leaving the rest due for the next; a delete's fence found due
 * is finished as an erase, not run as a history; a run that fails (an erasure's too) puts its
 * entry off, longer with each failure in a row.
 */

const report = (pruned: number): PruneReport => ({ pruned, expiring: 0, kept: 0, behind: false, ran: true, waiting: false });
const entry = (sessionId: string, closing?: number, failures = 0): SessionDue => ({
  scope: { tenant: 't', sessionId },
  ...(closing === undefined ? {} : { closing }),
  key: { pk: `S#t#${sessionId}`, sk: closing === undefined ? 'U~prune' : `V#${closing}` },
  failures,
});
const scopes = (count: number): SessionDue[] => Array.from({ length: count }, (_, index) => entry(`s${index}`));
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
        finishErasure: unexpected,
        putOff: async () => {},
        log: () => {},
      },
      { everyMs: 60_000 },
    );

    expect(ran.sort()).toEqual(due.map(({ scope }) => scope.sessionId).sort());
    expect(sweep).toEqual({ sessions: 30, pruned: 1, erased: 0, erasures: 0, cut: false });
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
        finishErasure: unexpected,
        putOff: async () => {},
        log: (message, error) => failures.push(`${message}: ${String(error)}`),
      },
      { everyMs: 60_000 },
    );

    expect(failures).toEqual(['could not prune history: Error: throttled']);
    expect(sweep).toEqual({ sessions: 3, pruned: 2, erased: 0, erasures: 0, cut: false });
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
        finishErasure: unexpected,
        putOff: async () => {},
        log: () => {},
      },
      { everyMs: 60_000, deadline: Date.now() + 5_000 },
    );

    expect(runs).toBe(0);
    expect(sweep).toEqual({ sessions: 0, pruned: 0, erased: 0, erasures: 0, cut: true });
  });

  it('finishes the erase of a delete whose fence is due, once a sweep, beside the same session’s history run', async () => {
    const due: SessionDue[] = [entry('a', 0), entry('a'), entry('b', 3), entry('c', 1)];
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
        finishErasure: unexpected,
        finishClosing: async (scope, life, deadline) => {
          erases.push(`${scope.sessionId}@${life} ${deadline === undefined ? 'no deadline' : 'deadline'}`);
          if (scope.sessionId === 'c') throw new Error('throttled');
          return scope.sessionId === 'a';
        },
        putOff: async () => {},
        log: (message, error) => failures.push(`${message}: ${String(error)}`),
      },
      { everyMs: 60_000 },
    );

    expect(erases.sort()).toEqual(['a@0 no deadline', 'b@3 no deadline', 'c@1 no deadline']);
    expect(histories).toEqual(['a']);
    expect(failures).toEqual(['could not finish the erase of a deleted session: Error: throttled']);
    expect(sweep).toEqual({ sessions: 4, pruned: 0, erased: 1, erasures: 0, cut: false });
  });

  it('puts off the entry of a run that fails, by a delay that grows with its failures in a row, and only that entry', async () => {
    const stalled: Due = { erasure: { tenant: 't', erasureId: 'stalled' }, key: { pk: 'E#t#stalled', sk: 'E' }, failures: 1 };
    const due: Due[] = [entry('ok'), entry('first'), entry('again', undefined, 3), entry('fence', 2, 1), stalled];
    const putOff: string[] = [];
    const failures: string[] = [];
    const sweep = await sweepDuePrunes(
      {
        duePrunes: async () => due,
        pruneHistory: async (scope) => {
          if (scope.sessionId !== 'ok') throw new Error('throttled');
          return report(0);
        },
        finishErasure: async () => {
          throw new Error('throttled as well');
        },
        finishClosing: async () => {
          throw new Error('unavailable');
        },
        putOff: async (failed, count, delayMs) => {
          const name = 'erasure' in failed ? failed.erasure.erasureId : failed.scope.sessionId;
          putOff.push(`${failed.key.sk} ${name} #${count} +${delayMs / 60_000} min`);
          if (name === 'again') throw new Error('throttled too');
        },
        log: (message, error) => failures.push(`${message}: ${String(error)}`),
      },
      { everyMs: 60_000 },
    );

    expect(putOff.sort()).toEqual(['E stalled #2 +2 min', 'U~prune again #4 +8 min', 'U~prune first #1 +1 min', 'V#2 fence #2 +2 min']);
    expect(failures.sort()).toEqual([
      'could not finish the erase of a deleted session: Error: unavailable',
      'could not go on with an erasure: Error: throttled as well',
      'could not prune history: Error: throttled',
      'could not prune history: Error: throttled',
      'could not put off a failing entry: Error: throttled too',
    ]);
    expect(sweep).toEqual({ sessions: 4, pruned: 0, erased: 0, erasures: 0, cut: false });
  });

  it('backs a failing entry off a minute, doubling with each failure in a row, an hour at most', () => {
    expect([1, 2, 3, 4, 5, 6, 7, 8, 99, 1_000].map((failures) => retryDelayMs(failures) / 60_000)).toEqual([
      1, 2, 4, 8, 16, 32, 60, 60, 60, 60,
    ]);
  });

  it('tells the schedule’s invocation from a stream batch', () => {
    expect(isScheduledEvent({ 'detail-type': 'Scheduled Event', source: 'aws.events', detail: {} })).toBe(true);
    expect(isScheduledEvent({ Records: [] })).toBe(false);
    expect(isScheduledEvent(null)).toBe(false);
  });
});
