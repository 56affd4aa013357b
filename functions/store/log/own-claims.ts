import type { NodeRecord, SessionScope, Tip } from '../../core/model/model.js';
import * as keys from '../table/keys.js';

/**
 * What a claim of this process tells a note (session-log.ts, `readTipWithNodes` with
 * `ownClaim`): the tip its change made, and the nodes it knew to be in the session then (the
 * parent its new nodes hang under, and those nodes).
 */
export interface ClaimSeen {
  tip: Tip;
  nodes: Map<string, NodeRecord>;
}

/**
 * How long an append of this process counts as under way for a note waiting on it (its tip
 * read started, its claim not yet sent): an append that stopped before its claim (a `412`, a
 * node not found) is forgotten after this.
 */
const APPEND_UNDER_WAY_MS = 1_000;
/** How long a note waits for the claim of an append under way before it reads the tip itself. */
const CLAIM_WAIT_MS = 200;
/** Sessions with appends under way that this process keeps track of (the oldest are dropped). */
const SESSIONS_KEPT = 1_000;

/**
 * The claims this process sends, as the tip read of a note beside them.
 *
 * A note is a blind put after a read of the tip and its node: the read says, at a moment after
 * the note's request arrived, that the session is there in its life and holds the node. A claim
 * of the log's next place that this process sends after the note arrived says as much when it
 * lands: the place is free only if no delete's fence (nor any other change) took it since the
 * tip its writer read, and that writer read the parent its new nodes go under in that tip. So a
 * note that finds an append of its session under way in this process (LangGraph's saver sends
 * a step's writes beside the next checkpoint's `put`) waits for that append's claim and, when
 * it lands and knows the node, puts beside it without a read of its own: one DynamoDB request
 * instead of two. A claim sent before the note arrived does not count (a delete could have
 * landed between it and the note); a claim that fails, or none within `CLAIM_WAIT_MS`, and the
 * note reads the tip as before. What a read would have left open stays as it was: a delete that
 * lands after the read (here, the claim) and before the note's put leaves the note in the old
 * life, where no reader looks (docs/architecture.md, "Notes beside nodes").
 */
export class OwnClaims {
  /** Per session, when each append of this process still to send its claim started its tip read. */
  private readonly appending = new Map<string, number[]>();
  /** Per session, the notes waiting for the next claim this process sends. */
  private readonly waiting = new Map<string, Set<(seen: ClaimSeen | undefined) => void>>();

  constructor(private readonly now: () => number) {}

  /** An append of the session starts its tip read. */
  appendStarts(scope: SessionScope): void {
    const key = keys.session(scope);
    const started = this.underWay(key);
    started.push(this.now());
    this.appending.delete(key);
    this.appending.set(key, started);
    // Sessions whose appends stopped before their claims are dropped, the oldest first.
    if (this.appending.size > SESSIONS_KEPT) this.appending.delete(this.appending.keys().next().value as string);
  }

  /**
   * What the next claim of the session this process sends tells, when an append of it is
   * under way here; `undefined` when none is, or that claim fails or does not come in time.
   */
  async nextClaim(scope: SessionScope): Promise<ClaimSeen | undefined> {
    const key = keys.session(scope);
    // Requests that arrived together (a step's writes and the next checkpoint) have each started
    // their reads by the next turn of the event loop.
    await new Promise((resolve) => setImmediate(resolve));
    if (this.underWay(key).length === 0) return undefined;
    return new Promise<ClaimSeen | undefined>((resolve) => {
      const waiters = this.waiting.get(key) ?? new Set();
      this.waiting.set(key, waiters);
      const done = (seen: ClaimSeen | undefined) => {
        clearTimeout(timer);
        resolve(seen);
      };
      const timer = setTimeout(() => {
        waiters.delete(done);
        if (waiters.size === 0 && this.waiting.get(key) === waiters) this.waiting.delete(key);
        resolve(undefined);
      }, CLAIM_WAIT_MS);
      timer.unref?.();
      waiters.add(done);
    });
  }

  /**
   * A claim of the session is about to be sent: the notes waiting now are answered by it
   * (`settle`, with what it tells once it has landed, or `undefined`); later ones wait for the next.
   */
  claimSent(scope: SessionScope, append: boolean): (seen: ClaimSeen | undefined) => void {
    const key = keys.session(scope);
    if (append) {
      const started = this.underWay(key);
      started.shift();
      if (started.length > 0) this.appending.set(key, started);
      else this.appending.delete(key);
    }
    const waiters = this.waiting.get(key);
    this.waiting.delete(key);
    return (seen) => {
      for (const waiter of waiters ?? []) waiter(seen);
    };
  }

  /** The appends of the session still under way (those older than `APPEND_UNDER_WAY_MS` dropped). */
  private underWay(key: string): number[] {
    const since = this.now() - APPEND_UNDER_WAY_MS;
    const started = (this.appending.get(key) ?? []).filter((at) => at >= since);
    if (started.length === 0) this.appending.delete(key);
    return started;
  }
}
