import { AgentStateError } from '../kernel/errors.js';
import type { Lifetime } from '../model/lifetime.js';
import type { DecisionLease, DoneDecision, SessionScope, Tip } from '../model/model.js';
import { type SessionStore, StaleTipError } from '../model/ports.js';

/** How long a lease outlives its worker's timeout, to cover the reads and the commit. */
const LEASE_MARGIN_MS = 10_000;
/** Commits (and lease claims) that lose a race to unrelated writes are retried this often before giving up. */
export const COMMIT_ATTEMPTS = 5;

/**
 * A session's decision lease (API.md section 6: one decision at a time per session). Taking it
 * is a change of the log that every later change carries until the decision's commit ends it;
 * a decision that writes nothing (its worker failed) ends it with a change of its own.
 */
export class DecisionLeases {
  constructor(
    private readonly store: Pick<SessionStore, 'commit' | 'readTip'>,
    private readonly now: () => Date,
  ) {}

  /** A lease for `holder` that outlives a worker call of `timeoutMs` by the margin the rest needs. */
  leaseFor(holder: string, timeoutMs: number): DecisionLease {
    return { holder, untilMs: this.now().getTime() + timeoutMs + LEASE_MARGIN_MS };
  }

  /**
   * Takes the lease at the tip `first`. Another decision's lease that still holds is
   * `409 decision_in_progress`; a twin request with the same id that finished while this one
   * raced it is replayed.
   */
  async take(
    scope: SessionScope,
    first: Tip,
    lease: DecisionLease,
    decision: {
      decisionId: string;
      session: { agentId: string | null; userId: string | null; lifetime?: Lifetime };
      /** How many times to try; after the last, a lost race throws its StaleTipError (after one: a tip read from a replica, read again whole). */
      attempts?: number;
    },
  ): Promise<{ tip: Tip } | { replay: DoneDecision }> {
    const { decisionId, session } = decision;
    const attempts = decision.attempts ?? COMMIT_ATTEMPTS;
    let tip = first;
    for (let attempt = 1; ; attempt++) {
      const held = tip.lease;
      if (held && held.holder !== lease.holder && held.untilMs > this.now().getTime()) {
        throw new AgentStateError('decision_in_progress', `another decision is running in session ${scope.sessionId}`, {
          sessionId: scope.sessionId,
        });
      }
      if (tip.recentDecision?.decisionId === decisionId) return { replay: tip.recentDecision };
      try {
        const leased = await this.store.commit(scope, {
          basedOn: tip,
          head: { id: tip.head, version: tip.headVersion, depth: tip.headDepth },
          newNodes: [],
          takeLease: lease,
          mayCreateSession: false,
          sessionAgentId: session.agentId,
          sessionUserId: session.userId,
          ...(session.lifetime ? { lifetime: session.lifetime } : {}),
        });
        return { tip: leased };
      } catch (error) {
        if (!(error instanceof StaleTipError) || attempt >= attempts) throw error;
        tip = error.newer ?? (await this.store.readTip(scope, { withState: true }));
      }
    }
  }

  /** Ends a lease whose decision wrote nothing (its worker failed): a change of the log that drops it. */
  async release(scope: SessionScope, leased: Tip, holder: string): Promise<void> {
    let tip = leased;
    for (let attempt = 1; attempt <= COMMIT_ATTEMPTS; attempt++) {
      if (tip.lease?.holder !== holder) return;
      try {
        await this.store.commit(scope, {
          basedOn: tip,
          head: { id: tip.head, version: tip.headVersion, depth: tip.headDepth },
          newNodes: [],
          releaseLease: holder,
          mayCreateSession: false,
        });
        return;
      } catch (error) {
        if (!(error instanceof StaleTipError)) throw error;
        tip = error.newer ?? (await this.store.readTip(scope, { withState: false }));
      }
    }
  }
}
