import fc from 'fast-check';
import { describe, expect, it, vi } from 'vitest';
import { AgentStateError } from '../../functions/core/kernel/errors.js';
import { type CoreMetric, useMetricSink } from '../../functions/core/kernel/metrics.js';
import { LINEAGE_WINDOW, type Tip } from '../../functions/core/model/model.js';
import { type QueueTicket, StaleTipError } from '../../functions/core/model/ports.js';
import { emptyTip, nextLineage, pointerOf, rootNode } from '../../functions/core/model/tree.js';
import { othersWaiting, QueueBehindOthers, type RetryPolicy, retryOnStaleTip } from '../../functions/core/write/write-retry.js';

/* ------------------------------------------------------------------ helpers (local) */

/** An error a caller may also want retried (as appends once retried a taken node id). */
class NodeTakenError extends Error {
  constructor(readonly nodeId: string) {
    super(`node ${nodeId} already exists`);
  }
}

/** A tip whose head is `head`, pointing at `headVersion`. */
const tipAt = (head: string, headVersion: number): Tip => ({ ...emptyTip(), head, headVersion, version: 9 });

/** Policy with (almost) no waiting, so retries run fast without fake timers. */
const fast: Partial<RetryPolicy> = { baseDelayMs: 1, maxDelayMs: 1, maxElapsedMs: 10_000 };

/** An attempt function that fails with the given errors in turn, then returns `value`. */
function failingThen<T>(errors: unknown[], value: T) {
  let calls = 0;
  const attempt = vi.fn(async () => {
    const error = errors[calls++];
    if (error !== undefined) throw error;
    return value;
  });
  return attempt;
}

/* ------------------------------------------------------------------ nextLineage */

describe('nextLineage: the lineage window of a new version', () => {
  it('is empty for version 0 (nothing before it)', () => {
    expect(nextLineage(null)).toEqual([]);
  });

  it('puts the previous version first, then its own lineage', () => {
    expect(nextLineage({ version: 5, lineage: [4, 2, 1] })).toEqual([5, 4, 2, 1]);
  });

  it('starts a lineage from a version that has none', () => {
    expect(nextLineage({ version: 1, lineage: [] })).toEqual([1]);
  });

  it.each<[previousLineage: number, nextLength: number]>([
    [30, 31],
    [31, 32],
    [32, 32],
    [50, 32],
  ])('from a lineage of %i, keeps %i', (previousLineage, nextLength) => {
    const lineage = Array.from({ length: previousLineage }, (_, i) => 1000 - i - 1);

    const next = nextLineage({ version: 1000, lineage });

    expect(LINEAGE_WINDOW).toBe(32);
    expect(next).toHaveLength(nextLength);
    expect(next).toEqual([1000, ...lineage].slice(0, 32));
  });

  it('is always a bounded, nearest-first prefix of [previous, ...its lineage]', () => {
    fc.assert(
      fc.property(fc.nat(), fc.array(fc.nat(), { maxLength: 40 }), (version, lineage) => {
        const copy = [...lineage];
        const next = nextLineage({ version, lineage });
        expect(next.length).toBeLessThanOrEqual(LINEAGE_WINDOW);
        expect(next).toEqual([version, ...lineage].slice(0, next.length));
        expect(next.length).toBe(Math.min(LINEAGE_WINDOW, lineage.length + 1));
        expect(lineage).toEqual(copy);
      }),
    );
  });
});

/* ------------------------------------------------------------------ pointerOf */

describe('pointerOf: where a node’s state pointer lives', () => {
  it('takes the head’s pointer from the tip, ignoring the (stale) one stored on the node', () => {
    const head = { id: 'm7', stateVersion: 3 };

    expect(pointerOf(head, tipAt('m7', 12))).toBe(12);
  });

  it('takes any other node’s pointer from the node itself', () => {
    const other = { id: 'm3', stateVersion: 3 };

    expect(pointerOf(other, tipAt('m7', 12))).toBe(3);
  });

  it('takes the root’s pointer from the tip while the root is the head', () => {
    expect(pointerOf(rootNode('2024-01-01T00:00:00.000Z'), { ...emptyTip(), headVersion: 4 })).toBe(4);
  });

  it('takes the root’s own pointer once the head has moved away', () => {
    const root = { ...rootNode('2024-01-01T00:00:00.000Z'), stateVersion: 2 };

    expect(pointerOf(root, tipAt('m1', 8))).toBe(2);
  });

  it('compares ids exactly (no case folding)', () => {
    expect(pointerOf({ id: 'M7', stateVersion: 1 }, tipAt('m7', 12))).toBe(1);
  });
});

/* ------------------------------------------------------------------ emptyTip / rootNode */

describe('emptyTip and rootNode', () => {
  it('describes a session with nothing written: head at the root, version 0', () => {
    expect(emptyTip()).toEqual({
      kind: 'empty',
      incarnation: 0,
      version: 0,
      head: 'root',
      headVersion: 0,
      headDepth: 0,
      touchedAt: null,
      agentId: null,
      userId: null,
      latest: null,
      lease: null,
      headNode: rootNode(''),
      recentNodes: [],
      recentDecision: null,
    });
  });

  it('returns a fresh object each time, so one caller’s changes do not leak to another', () => {
    const first = emptyTip();
    first.version = 99;
    first.head = 'elsewhere';

    expect(emptyTip()).not.toBe(first);
    expect(emptyTip().version).toBe(0);
    expect(emptyTip().head).toBe('root');
  });

  it('makes the implicit root: no parent, depth 0, state version 0', () => {
    expect(rootNode('2024-05-06T07:08:09.000Z')).toEqual({
      id: 'root',
      parentId: null,
      depth: 0,
      role: null,
      message: null,
      stateVersion: 0,
      createdAt: '2024-05-06T07:08:09.000Z',
    });
  });
});

/* ------------------------------------------------------------------ retryOnStaleTip */

describe('retryOnStaleTip: repeat a write that lost a race', () => {
  it('returns the first success without retrying', async () => {
    const attempt = failingThen([], 'written');

    await expect(retryOnStaleTip(fast, attempt)).resolves.toBe('written');
    expect(attempt).toHaveBeenCalledTimes(1);
  });

  it('retries after StaleTipError and returns the first success, counting each retry for the operator', async () => {
    // Prepare: two lost races, then a win
    const attempt = failingThen([new StaleTipError(), new StaleTipError()], { version: 3 });
    const counted: CoreMetric[] = [];
    useMetricSink((name, value) => counted.push(...Array<CoreMetric>(value).fill(name)));

    // Act
    const result = await retryOnStaleTip({ ...fast, maxAttempts: 5 }, attempt).finally(() => useMetricSink(() => {}));

    // Assess
    expect(result).toEqual({ version: 3 });
    expect(attempt).toHaveBeenCalledTimes(3);
    expect(counted).toEqual(['VersionRacesRetried', 'VersionRacesRetried']);
  });

  it('succeeds on the very last allowed attempt', async () => {
    const attempt = failingThen([new StaleTipError(), new StaleTipError()], 'ok');

    await expect(retryOnStaleTip({ ...fast, maxAttempts: 3 }, attempt)).resolves.toBe('ok');
    expect(attempt).toHaveBeenCalledTimes(3);
  });

  it('gives up with 409 conflict after maxAttempts, keeping the last stale error as the cause', async () => {
    // Prepare
    const errors = [new StaleTipError('1'), new StaleTipError('2'), new StaleTipError('3'), new StaleTipError('4')];
    const attempt = failingThen(errors, 'never');

    // Act
    const failure = await retryOnStaleTip({ ...fast, maxAttempts: 3 }, attempt).catch((error: unknown) => error);

    // Assess
    expect(attempt).toHaveBeenCalledTimes(3);
    expect(failure).toBeInstanceOf(AgentStateError);
    expect(failure).toMatchObject({ code: 'conflict', status: 409, extras: { attempts: 3 } });
    expect((failure as AgentStateError).cause).toBe(errors[2]);
  });

  it('tries exactly once when maxAttempts is 1', async () => {
    const attempt = failingThen([new StaleTipError()], 'never');

    await expect(retryOnStaleTip({ ...fast, maxAttempts: 1 }, attempt)).rejects.toMatchObject({ code: 'conflict' });
    expect(attempt).toHaveBeenCalledTimes(1);
  });

  it('gives up once maxElapsedMs has passed, even with attempts left', async () => {
    const attempt = failingThen(
      Array.from({ length: 100 }, () => new StaleTipError()),
      'never',
    );

    const failure = await retryOnStaleTip({ ...fast, maxAttempts: 100, maxElapsedMs: 0 }, attempt).catch((error: unknown) => error);

    expect(failure).toMatchObject({ code: 'conflict', extras: { attempts: 1 } });
    expect(attempt).toHaveBeenCalledTimes(1);
  });

  it('retries a subclass of StaleTipError too', async () => {
    class StaleMarker extends StaleTipError {}
    const attempt = failingThen([new StaleMarker()], 'ok');

    await expect(retryOnStaleTip(fast, attempt)).resolves.toBe('ok');
    expect(attempt).toHaveBeenCalledTimes(2);
  });

  it.each<[label: string, error: unknown]>([
    ['a plain Error', new Error('boom')],
    ['an AgentStateError', new AgentStateError('node_not_found', 'no such node', { nodeId: 'n1' })],
    ['a NodeTakenError', new NodeTakenError('m1')],
    ['an Error merely named StaleTipError', Object.assign(new Error('x'), { name: 'StaleTipError' })],
    ['a thrown string', 'just a string'],
  ])('lets %s through at once, without retrying', async (_label, error) => {
    const attempt = failingThen([error], 'never');

    const failure = await retryOnStaleTip({ ...fast, maxAttempts: 10 }, attempt).catch((thrown: unknown) => thrown);

    expect(failure).toBe(error);
    expect(attempt).toHaveBeenCalledTimes(1);
  });

  it('retries errors the extra predicate accepts, and passes it the error', async () => {
    // Prepare
    const taken = new NodeTakenError('m1');
    const attempt = failingThen([taken, taken], 'appended');
    const isAlsoRetryable = vi.fn((error: unknown) => error instanceof NodeTakenError);

    // Act
    const result = await retryOnStaleTip({ ...fast, maxAttempts: 5 }, attempt, isAlsoRetryable);

    // Assess
    expect(result).toBe('appended');
    expect(attempt).toHaveBeenCalledTimes(3);
    expect(isAlsoRetryable).toHaveBeenCalledTimes(2);
    expect(isAlsoRetryable).toHaveBeenCalledWith(taken);
  });

  it('still retries StaleTipError when an extra predicate is given', async () => {
    const attempt = failingThen([new StaleTipError()], 'ok');

    await expect(retryOnStaleTip(fast, attempt, () => false)).resolves.toBe('ok');
    expect(attempt).toHaveBeenCalledTimes(2);
  });

  it('gives up with conflict on errors the predicate accepts, too', async () => {
    const taken = new NodeTakenError('m1');
    const attempt = failingThen([taken, taken, taken], 'never');

    const failure = await retryOnStaleTip({ ...fast, maxAttempts: 2 }, attempt, () => true).catch((error: unknown) => error);

    expect(failure).toMatchObject({ code: 'conflict', status: 409, extras: { attempts: 2 } });
    expect((failure as AgentStateError).cause).toBe(taken);
    expect(attempt).toHaveBeenCalledTimes(2);
  });

  it('stops at the first non-retryable error after some stale ones', async () => {
    const fatal = new Error('disk on fire');
    const attempt = failingThen([new StaleTipError(), fatal], 'never');

    await expect(retryOnStaleTip({ ...fast, maxAttempts: 10 }, attempt)).rejects.toBe(fatal);
    expect(attempt).toHaveBeenCalledTimes(2);
  });

  it('uses the default policy for members the partial policy leaves out', async () => {
    // The default allows many attempts; with tiny delays, ten stale rounds still succeed.
    const attempt = failingThen(
      Array.from({ length: 10 }, () => new StaleTipError()),
      'eventually',
    );

    await expect(retryOnStaleTip({ baseDelayMs: 0, maxDelayMs: 0 }, attempt)).resolves.toBe('eventually');
    expect(attempt).toHaveBeenCalledTimes(11);
  });

  it('waits no longer than the backoff ceiling between attempts', async () => {
    // Prepare: a ceiling of 5 ms, five retries → well under a second even with timer slack
    const attempt = failingThen(
      Array.from({ length: 5 }, () => new StaleTipError()),
      'ok',
    );
    const started = Date.now();

    // Act
    await retryOnStaleTip({ baseDelayMs: 5, maxDelayMs: 5, maxAttempts: 10 }, attempt);

    // Assess
    expect(Date.now() - started).toBeLessThan(1000);
    expect(attempt).toHaveBeenCalledTimes(6);
  });
});

describe('retryOnStaleTip on a crowded session: writers wait their turn', () => {
  const queueing: Partial<RetryPolicy> = { ...fast, queueWindowMs: 1, queueMinMs: 1 };

  it('tells each attempt its number and whether an earlier one lost a race, not only waited', async () => {
    // Prepare: an attempt that first queues, then loses a race, then lands.
    const seen: Array<{ attempt: number; raced: boolean }> = [];
    const failures: Error[] = [new QueueBehindOthers(), new StaleTipError()];

    // Act
    const result = await retryOnStaleTip(queueing, async (context) => {
      seen.push(context);
      const failure = failures.shift();
      if (failure) throw failure;
      return 'landed';
    });

    // Assess: queueing is no lost race; the race lost makes the last attempt a contended one.
    expect(result).toBe('landed');
    expect(seen).toEqual([
      { attempt: 1, raced: false },
      { attempt: 2, raced: false },
      { attempt: 3, raced: true },
    ]);
  });

  it('queues a first attempt behind a change made less than a second ago after a lost race, and nothing else', () => {
    const now = new Date('2026-12-01T10:00:01.000Z');
    const contended = { contendedAt: '2026-12-01T10:00:00.500Z' };

    expect(othersWaiting(contended, { attempt: 1, raced: false }, now)).toBe(true);
    // Its own retries do not queue again, a change whose writer won at once says nothing, and
    // a crowd a second gone is gone.
    expect(othersWaiting(contended, { attempt: 2, raced: false }, now)).toBe(false);
    expect(othersWaiting({}, { attempt: 1, raced: false }, now)).toBe(false);
    expect(othersWaiting({ contendedAt: '2026-12-01T10:00:00.000Z' }, { attempt: 1, raced: false }, now)).toBe(false);
    // A clock a little behind the writer's still queues; one an hour off does not.
    expect(othersWaiting({ contendedAt: '2026-12-01T10:00:01.200Z' }, { attempt: 1, raced: false }, now)).toBe(true);
    expect(othersWaiting({ contendedAt: '2026-12-01T11:00:01.000Z' }, { attempt: 1, raced: false }, now)).toBe(false);
  });
});

describe('retryOnStaleTip with a write queue: writers that lost a race take turns', () => {
  /** A queue in memory: tickets in the order taken, each gone when left. */
  function memoryQueue() {
    const line: string[] = [];
    let taken = 0;
    const events: string[] = [];
    const join = async (): Promise<QueueTicket> => {
      const id = `t${++taken}`;
      line.push(id);
      events.push(`join ${id}`);
      return {
        ahead: async () => line.slice(0, line.indexOf(id)),
        leave: async () => {
          line.splice(line.indexOf(id), 1);
          events.push(`leave ${id}`);
        },
      };
    };
    return { line, join, events };
  }

  it('takes a ticket after a lost race, attempts again only when no ticket is ahead, and gives it back', async () => {
    // Prepare: a ticket taken earlier by another writer, given back a moment later.
    const queue = memoryQueue();
    const other = await queue.join();
    setTimeout(() => void other.leave(), 50);
    const seen: Array<{ attempt: number; raced: boolean; queued?: boolean; at: number }> = [];
    const started = Date.now();
    const failures: Error[] = [new StaleTipError()];

    // Act
    const result = await retryOnStaleTip(
      fast,
      async (context) => {
        seen.push({ ...context, at: Date.now() - started });
        const failure = failures.shift();
        if (failure) throw failure;
        return 'landed';
      },
      undefined,
      queue.join,
    );

    // Assess: the second attempt came after the other's ticket was gone, as a queued one; no ticket is left.
    expect(result).toBe('landed');
    expect(seen.map(({ at: _, ...context }) => context)).toEqual([
      { attempt: 1, raced: false },
      { attempt: 2, raced: true, queued: true },
    ]);
    expect(seen[1]?.at).toBeGreaterThanOrEqual(45);
    expect(queue.events).toEqual(['join t1', 'join t2', 'leave t1', 'leave t2']);
    expect(queue.line).toEqual([]);
  });

  it('gives the ticket back when the write fails for good, and passes over a ticket whose writer stopped', async () => {
    // Prepare: a ticket nobody gives back, and an attempt that fails for good once its turn comes.
    const queue = memoryQueue();
    await queue.join();
    const fatal = new Error('fatal');
    const failures: Error[] = [new QueueBehindOthers(), fatal];

    // Act: the stalled ticket is passed over after its time (5 s), so the budget must outlast it.
    const outcome = retryOnStaleTip(
      { ...fast, maxElapsedMs: 20_000 },
      async () => {
        const failure = failures.shift();
        if (failure) throw failure;
        return 'landed';
      },
      undefined,
      queue.join,
    );

    // Assess
    await expect(outcome).rejects.toBe(fatal);
    expect(queue.line).toEqual(['t1']);
  }, 15_000);
});
