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
 *   S#<tenant>#<session>        R#<run>          a run document (commits; TTL after its last write)
 *   P#<tenant>#<user>           P                a user's profile document, shared by their sessions
 *   G#<tenant>                  G                the tenant's shared document
 *   A#<tenant>                  A#<agent>        an agent of the registry
 *   I#<tenant>#<key>            I                an Idempotency-Key record
 *   H#<tenant>                  H#<webhook>      a webhook (change events, webhook-store.ts)
 *   X#<tenant>#<webhook>        D#<session>#<000000000042>  a dead letter: an event the
 *                                                webhook did not take (TTL 14 days); a
 *                                                document event's is D#<session>#<document>#<0…42>
 *   C#<connection>              C                a WebSocket connection: its tenant and the
 *                                                sessions it follows (TTL, live-store.ts)
 *   W#<tenant>#<session>        C#<connection>   a connection following the session (TTL)
 *   WM#<tenant>#<namespace>     C#<connection>   a connection following a memory namespace (TTL)
 *   K#<sha256 of an API key>    K                an API key (see api-keys.ts)
 *   M#<tenant>#<namespace path> K#<key>          a memory item (memory-store.ts; also in the
 *                                                memory index, by `mu`)
 *   MN#<tenant>                 <namespace path>/  a namespace that holds memory items
 *   MH#<tenant>#<path>#<key>    <createdAt>#<000000000042>  a version a memory item replaced (TTL)
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
  run: (runId: string) => `R#${runId}`,
  profile: (tenant: string, userId: string) => `P#${tenant}#${userId}`,
  profileSort: 'P',
  shared: (tenant: string) => `G#${tenant}`,
  sharedSort: 'G',
  lease: 'L',
  agents: (tenant: string) => `A#${tenant}`,
  agent: (agentId: string) => `A#${agentId}`,
  agentPrefix: 'A#',
  idempotency: (tenant: string, key: string) => `I#${tenant}#${key}`,
  idempotencySort: 'I',
  tenantSessions: (tenant: string) => `T#${tenant}`,
  webhooks: (tenant: string) => `H#${tenant}`,
  webhook: (webhookId: string) => `H#${webhookId}`,
  webhookPrefix: 'H#',
  deadLetters: (tenant: string, webhookId: string) => `X#${tenant}#${webhookId}`,
  // Session, then version: the order a replay delivers them in, and a redelivered event
  // lands on its own earlier dead letter instead of adding a second one.
  // A document event's (`document`: run#<run>, profile#<user>, shared) sorts after the thread's.
  deadLetter: (sessionId: string, version: number, document?: string) =>
    `D#${sessionId}#${document === undefined ? '' : `${document}#`}${String(version).padStart(12, '0')}`,
  deadLetterPrefix: 'D#',
  connection: (connectionId: string) => `C#${connectionId}`,
  connectionSort: 'C',
  subscribers: (scope: SessionScope) => `W#${scope.tenant}#${scope.sessionId}`,
  subscriber: (connectionId: string) => `C#${connectionId}`,
  subscriberPrefix: 'C#',
  activity: (updatedAt: string, sessionId: string) => `${updatedAt}#${sessionId}`,
  // Memory (API.md section 10): a namespace's ids are joined by `/`, which no id contains.
  memoryNamespace: (tenant: string, namespace: readonly string[]) => `M#${tenant}#${namespace.join('/')}`,
  memoryNamespacePrefix: 'M#',
  memoryKey: (key: string) => `K#${key}`,
  memoryKeyPrefix: 'K#',
  /** The memory index's sort key: newest first by `updatedAt`, the key breaking ties. */
  memoryRecency: (updatedAt: string, key: string) => `${updatedAt}#${key}`,
  memoryNamespaces: (tenant: string) => `MN#${tenant}`,
  /** Connections following a memory namespace and what lies under it (live-store.ts). */
  namespaceFollowers: (tenant: string, namespace: readonly string[]) => `WM#${tenant}#${namespace.join('/')}`,
  memoryHistory: (tenant: string, namespace: readonly string[], key: string) => `MH#${tenant}#${namespace.join('/')}#${key}`,
  memoryHistoryVersion: (createdAt: string, version: number) => `${createdAt}#${String(version).padStart(12, '0')}`,
} as const;

/** The slot number in a `V#…` sort key. */
export function slotOf(sortKey: string): number {
  return Number(sortKey.slice(keys.slotPrefix.length));
}
