import type { AllowedAgents } from '../agents/acting-agent.js';
import { AgentStateError } from '../kernel/errors.js';

/**
 * The erasure of a user (API.md section 12): every session whose `userId` is the user, the
 * user's `profile` document, and the memory items under `users/<userId>`, history included.
 *
 * Two steps. The `DELETE` itself closes everything the user has, so that none of it is
 * readable from its `202`: each session gets a delete's fence (reads answer as for an unknown
 * session, and a write that read it earlier fails its claim), the profile is deleted, each
 * memory item becomes a delete's tombstone. Then the change hook, on the erasure's own stream
 * record, erases what the fences and tombstones stand over: the sessions' items, the memory
 * items' replaced versions and tombstones, and looks once more for a session of the user that
 * the list index did not show yet. Each step can run again: a crash is resumed by the
 * stream's retry, and finds the rest by what is still there.
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

/** The store of erasures (store/erasure/erasure-store.ts). */
export interface ErasureStore {
  /** Closes everything of the user, records the erasure, and hands it to the change hook. */
  start(tenant: string, userId: string): Promise<ErasureRecord>;
  get(tenant: string, erasureId: string): Promise<ErasureRecord | null>;
}

/** The namespace under which a user's memory items are theirs: `users/<userId>` and below it. */
export function userNamespace(userId: string): string[] {
  return ['users', userId];
}

export class ErasureService {
  constructor(private readonly store: ErasureStore) {}

  /**
   * `DELETE /v1/users/{userId}`. Every call starts an erasure of its own, so a repeated one
   * erases what was written for the user since the first. A user nobody has is erased all the
   * same, with zero counts: the answer does not tell whether the user existed.
   */
  erase(tenant: string, userId: string, allowed: AllowedAgents): Promise<ErasureRecord> {
    requireUnlimited(allowed);
    return this.store.start(tenant, userId);
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
