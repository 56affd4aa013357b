import type { SessionScope } from '../core/model.js';

/**
 * Key shapes of the single table. Identifiers never contain `#` (API.md section 1), so `#`
 * separates key parts unambiguously, and the tenant prefix in every partition key keeps
 * tenants apart by construction.
 *
 *   pk                          sk               item
 *   S#<tenant>#<session>        S                the session (also in the activity index)
 *   S#<tenant>#<session>        N#<node>         a message node
 *   S#<tenant>#<session>        V#<000000000042> version 42, or a head marker in the top slot
 *   S#<tenant>#<session>        D#<decision>     a decision's outcome (replayed for its id)
 *   S#<tenant>#<session>        L                the session's decision lease
 *   A#<tenant>                  A#<agent>        an agent of the registry
 *   I#<tenant>#<key>            I                an Idempotency-Key record
 *   K#<sha256 of an API key>    K                an API key (see api-keys.ts)
 *   (index) T#<tenant>          <updatedAt>#<session>
 *   (index) KEYS                <createdAt>#<keyId>   every API key, for the admin CLI
 */
export const keys = {
  session: (scope: SessionScope) => `S#${scope.tenant}#${scope.sessionId}`,
  sessionSort: 'S',
  node: (nodeId: string) => `N#${nodeId}`,
  nodePrefix: 'N#',
  slot: (slot: number) => `V#${String(slot).padStart(12, '0')}`,
  slotPrefix: 'V#',
  decision: (decisionId: string) => `D#${decisionId}`,
  lease: 'L',
  agents: (tenant: string) => `A#${tenant}`,
  agent: (agentId: string) => `A#${agentId}`,
  agentPrefix: 'A#',
  idempotency: (tenant: string, key: string) => `I#${tenant}#${key}`,
  idempotencySort: 'I',
  tenantSessions: (tenant: string) => `T#${tenant}`,
  activity: (updatedAt: string, sessionId: string) => `${updatedAt}#${sessionId}`,
} as const;

/** The slot number in a `V#…` sort key. */
export function slotOf(sortKey: string): number {
  return Number(sortKey.slice(keys.slotPrefix.length));
}
