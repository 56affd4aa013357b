import type { AllowedAgents } from '../agents/acting-agent.js';
import { AgentStateError } from '../kernel/errors.js';

/**
 * The erasure of a user (API.md section 12): every session whose `userId` is the user, the
 * user's `profile` document, and the memory items under `users/<userId>`, history included.
 *
 * Two steps, both the change hook's, so that the request's work does not grow with what the
 * user has. First it closes everything the user has, so that none of it is readable: each
 * session gets a delete's fence (reads answer as for an unknown session, and a write that
 * read it earlier fails its claim), each memory item becomes a delete's tombstone, the profile
 * is deleted; in steps of bounded size, each recorded on the erasure, so that a hook that dies
 * goes on from the last. The `DELETE` answers `202` once that is done (it waits a bounded
 * time; past it, `409` and the work goes on: sent again, it joins the same erasure). Then the
 * hook erases what the fences and tombstones stand over, and looks once more for a session of
 * the user that the list index did not show yet. Each step can run again: a crash is resumed
 * by the stream's retry, and finds the rest by what is still there.
 */

export type ErasureStatus = 'running' | 'done';

/** `GET /v1/erasures/{erasureId}`: how far it got, and what it erased. */
export interface ErasureRecord {
  erasureId: string;
  status: ErasureStatus;
  /** Sessions erased (or being erased, while `running`). */
  sessions: number;
  /** Memory items erased. */
  memoryItems: number;
  /** Documents erased: the user's profile, 1 when there was one. */
  documents: number;
  createdAt: string;
  /** When it was done. */
  finishedAt?: string;
}

/** A `DELETE`'s erasure: the user's one not done yet, and whether everything of the user is unreadable. */
export interface ErasureStart {
  erasureId: string;
  closed: boolean;
}

/** The store of erasures (store/erasure/erasure-store.ts). */
export interface ErasureStore {
  /** Starts the erasure of the user (or joins the one not done yet) and waits, a bounded time, until it has closed everything. */
  start(tenant: string, userId: string): Promise<ErasureStart>;
  get(tenant: string, erasureId: string): Promise<ErasureRecord | null>;
}

/** The namespace under which a user's memory items are theirs: `users/<userId>` and below it. */
export function userNamespace(userId: string): string[] {
  return ['users', userId];
}

export class ErasureService {
  constructor(private readonly store: ErasureStore) {}

  /**
   * `DELETE /v1/users/{userId}`: the erasure's id once everything of the user is unreadable.
   * A call while an erasure of the user is not done joins it (one erasure, counted once); one
   * after it is done starts another, which erases what was written for the user since. A user
   * nobody has is erased all the same, with zero counts: the answer does not tell whether the
   * user existed. A user with more than the wait lets the change hook close answers `409`
   * with the erasure's id; the erasure goes on, and the call sent again joins it.
   */
  async erase(tenant: string, userId: string, allowed: AllowedAgents): Promise<string> {
    requireUnlimited(allowed);
    const { erasureId, closed } = await this.store.start(tenant, userId);
    if (!closed) {
      throw new AgentStateError(
        'conflict',
        'the erasure is still closing what the user has; it goes on, and this request sent again answers once it is done',
        {
          erasureId,
        },
      );
    }
    return erasureId;
  }

  async get(tenant: string, erasureId: string, allowed: AllowedAgents): Promise<ErasureRecord> {
    requireUnlimited(allowed);
    const found = await this.store.get(tenant, erasureId);
    if (!found) throw new AgentStateError('not_found', `erasure ${erasureId} does not exist`, { erasureId });
    return found;
  }
}

/** Erasing a user reaches past every agent's conversations: a key limited to agents may not (`403`). */
function requireUnlimited(allowed: AllowedAgents): void {
  if (allowed) throw new AgentStateError('forbidden', 'only a key that is not limited to agents may erase users', { agents: allowed });
}
