import { AgentStateError } from '../kernel/errors.js';
import { countMetric } from '../kernel/metrics.js';
import type { Tip } from '../model/model.js';
import { type QueueTicket, StaleTipError } from '../model/ports.js';

export interface RetryPolicy {
  /** Give up after this many attempts. */
  maxAttempts: number;
  /** Or once this much time has passed since the first attempt. */
  maxElapsedMs: number;
  /** Upper bound of the first backoff after a brief race; it doubles per attempt up to `maxDelayMs`. */
  baseDelayMs: number;
  maxDelayMs: number;
  /**
   * On a crowded session, the window of the first wait: the k-th wait is random within
   * `queueWindowMs / k`, but never narrower than `queueMinMs`.
   */
  queueWindowMs: number;
  queueMinMs: number;
  /**
   * Whether a lost race counts as `VersionRacesRetried` (metrics.ts): a write's race for a
   * version slot does; an agent registration's race for the registry's version is no such race.
   */
  countsVersionRaces: boolean;
}

/**
 * Under heavy contention each round lets one writer through, so a writer may lose many rounds
 * in a row; the time budget, not the count, is the real bound. 15 s stays inside the handlers'
 * 20 s Lambda timeout, so a loser still gets a clear 409 rather than a timeout. The queue's
 * window was chosen by measurement (docs/benchmarks.md, concurrency): 20 blind writers on one
 * session, where exponential backoff alone gave a p99 of 1.7–4.4 s.
 */
const defaults: RetryPolicy = {
  maxAttempts: 250,
  maxElapsedMs: 15_000,
  baseDelayMs: 2,
  maxDelayMs: 100,
  queueWindowMs: 400,
  queueMinMs: 20,
  countsVersionRaces: true,
};

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** What an attempt knows of the ones before it. */
export interface AttemptContext {
  /** 1 for the first attempt. */
  attempt: number;
  /** Whether an earlier attempt lost a race for the session's log (not only waited its turn). */
  raced: boolean;
  /** Whether this attempt waited its turn in the target's queue (`join`). */
  queued?: boolean;
}

/**
 * Thrown by a first attempt that finds other writers waiting for the same session (its tip was
 * made, a moment ago, by a writer that had lost a race first): it waits its turn like them
 * instead of going straight in, which is what let a writer that had just won win again and
 * again while the others backed off (the capture effect that made contention's p99 seconds).
 */
export class QueueBehindOthers extends Error {
  constructor() {
    super('other writers are waiting for this session');
    this.name = 'QueueBehindOthers';
  }
}

/** How long a change made after a lost race says that others may still be waiting. */
const CONTENDED_FOR_MS = 1_000;

/** Whether a first attempt that read `tip` should queue behind writers still waiting for the session. */
export function othersWaiting(tip: Pick<Tip, 'contendedAt'>, context: AttemptContext, now: Date): boolean {
  if (context.attempt > 1 || tip.contendedAt === undefined) return false;
  // Either way: a writer whose clock runs a little behind the one that made the change queues
  // too, and a change stamped far off (a test's clock) says nothing.
  return Math.abs(now.getTime() - Date.parse(tip.contendedAt)) < CONTENDED_FOR_MS;
}

/**
 * Runs `attempt` until it no longer loses a race. A write that lost (its tip moved) is safe to
 * repeat because it wrote nothing; each repeat re-reads, so the update lands on fresh state.
 * Waits are random ("full jitter") so that many writers on one session spread out instead of
 * colliding again in lockstep; on a crowded session they narrow with each turn waited (the
 * longest waiting go first), and a first attempt that finds others waiting queues behind them
 * (`QueueBehindOthers`), so that no writer is passed over again and again.
 *
 * With `join` (the target's queue, ports.ts `WriteQueue`), a writer that lost a race or found
 * others waiting takes a ticket instead and attempts again only when no live ticket is ahead of
 * its own: the writers of a crowded target go one after another, each in about one attempt,
 * instead of all racing for every place and paying for every lost race (issue 33).
 */
export async function retryOnStaleTip<T>(
  policy: Partial<RetryPolicy>,
  attempt: (context: AttemptContext) => Promise<T>,
  isAlsoRetryable: (error: unknown) => boolean = () => false,
  join?: () => Promise<QueueTicket>,
): Promise<T> {
  const { maxAttempts, maxElapsedMs, baseDelayMs, maxDelayMs, queueWindowMs, queueMinMs, countsVersionRaces } = { ...defaults, ...policy };
  // Wall time, not a service's injected clock: the budget bounds real sleeps inside a real
  // Lambda timeout, and a test's frozen clock must not make it endless.
  const started = Date.now();
  let raced = false;
  let turnsWaited = 0;
  let ticket: QueueTicket | undefined;
  let turn: Turn | undefined;
  let landed = false;
  try {
    for (let attemptNumber = 1; ; attemptNumber++) {
      // A writer whose turn has not come a moment before the budget ends answers then: an
      // attempt begun at its very end would make the answer later than the budget says
      // (test/faults/dynamodb-restart.test.ts saw 15.1 s answers against its 15 s bound).
      const turnDeadline = started + maxElapsedMs - Math.min(LAST_TURN_MS, maxElapsedMs / 10);
      if (ticket && turn && !(await turn.wait(ticket, turnDeadline))) throw tooFast(attemptNumber - 1);
      try {
        const result = await attempt({ attempt: attemptNumber, raced, ...(ticket ? { queued: true } : {}) });
        landed = true;
        return result;
      } catch (error) {
        const retryable = error instanceof StaleTipError || error instanceof QueueBehindOthers || isAlsoRetryable(error);
        if (!retryable) throw error;
        if (attemptNumber >= maxAttempts || Date.now() - started >= maxElapsedMs) throw tooFast(attemptNumber, error);
        if (error instanceof StaleTipError) {
          raced = true;
          if (countsVersionRaces) countMetric('VersionRacesRetried');
        }
        if (join && !ticket && (error instanceof StaleTipError || error instanceof QueueBehindOthers)) {
          ticket = await join();
          turn = new Turn();
          continue;
        }
        // Two regimes. A race lost to a writer that won at its first try is a brief one: retry
        // at once, backing off exponentially (full jitter). Once the session is crowded (the
        // winner had lost races itself, or others are waiting), wait in a wide window that
        // narrows with each turn waited, so that the writers waiting longest go first. A writer
        // whose turn it is in the queue lost to one outside it (an append, a decision): it is
        // still first, so it retries at once.
        const crowded =
          !ticket && (error instanceof QueueBehindOthers || (error instanceof StaleTipError && error.newer?.contendedAt !== undefined));
        if (crowded) turnsWaited++;
        const delay = crowded
          ? Math.random() * Math.max(queueMinMs, queueWindowMs / turnsWaited)
          : Math.random() * Math.min(maxDelayMs, baseDelayMs * 2 ** (attemptNumber - 1));
        await sleep(delay);
      }
    }
  } finally {
    // Best effort: a ticket left behind is passed over by the others and removed by its TTL. A
    // write that failed answers without waiting for it (with the database down, the delete
    // would hold the answer for its whole timeout).
    const leaving = ticket?.leave().catch(() => undefined);
    if (landed) await leaving;
  }
}

function tooFast(attempts: number, cause?: unknown): AgentStateError {
  return new AgentStateError(
    'conflict',
    'the session is changing too fast to apply this write; try again',
    { attempts },
    cause === undefined ? undefined : { cause },
  );
}

/**
 * A writer with n tickets ahead looks again when about half of them should be gone, so a long
 * line costs each writer a few small reads rather than one per turn of the others (100 writers
 * each looking every few ms kept the server busier than the writes they waited for). How long a
 * turn takes is learnt from the line itself, and capped: a writer that sleeps through its turn
 * holds up every writer behind it (an uncapped estimate, inflated while writers outside the line
 * held it up, let 100 writers crawl at one every 300 ms where a write takes 20).
 */
const FIRST_TURN_MS = 40;
/** What a turn begun just before the budget ends may take: a writer still waiting then answers 409. */
const LAST_TURN_MS = 1_000;
const MIN_TURN_MS = 5;
const NEXT_LOOK_MS = 8;
const MAX_TURN_MS = 100;
const MAX_LOOK_MS = 1_000;
/**
 * A ticket first in line for longer than this belongs to a writer that stopped (or stalls):
 * the others pass it over. Going out of turn costs at most a lost race, never a lost write.
 */
const STALLED_MS = 5_000;

/** One writer's wait for its turn: which ticket it saw first in line, since when, and how fast the line moves. */
class Turn {
  private first: { id: string; since: number } | undefined;
  private readonly passed = new Set<string>();
  private seen: { at: number; ahead: number } | undefined;
  private turnMs = FIRST_TURN_MS;

  /** Resolves with true when no live ticket is ahead of `ticket`, with false at `deadline`. */
  async wait(ticket: QueueTicket, deadline: number): Promise<boolean> {
    for (;;) {
      const ahead = (await ticket.ahead()).filter((id) => !this.passed.has(id));
      const now = Date.now();
      const front = ahead[0];
      if (front === undefined) return true;
      if (now >= deadline) return false;
      if (this.first?.id !== front) this.first = { id: front, since: now };
      else if (now - this.first.since > STALLED_MS) {
        this.passed.add(front);
        continue;
      }
      // How long a turn takes, from the line's last move seen (a line that stood still while
      // others outside it wrote says nothing of its pace); never more than a write may take when
      // all goes well, so that no writer sleeps through its turn.
      if (this.seen && this.seen.ahead > ahead.length) {
        this.turnMs = Math.min(MAX_TURN_MS, Math.max(MIN_TURN_MS, (now - this.seen.at) / (this.seen.ahead - ahead.length)));
      }
      if (!this.seen || this.seen.ahead !== ahead.length) this.seen = { at: now, ahead: ahead.length };
      // Next in line: look often (a turn slept through is a turn every writer behind waits too).
      // Further back: come back when about half of those ahead should be gone.
      const look = ahead.length === 1 ? NEXT_LOOK_MS : Math.min(MAX_LOOK_MS, ((ahead.length - 1) * this.turnMs) / 2);
      await sleep(Math.min(deadline - now, look * (0.9 + Math.random() / 5)));
    }
  }
}
