import type { SessionScope } from '../../core/model/model.js';

/**
 * Key shapes of the single table. Identifiers never contain `#` (API.md section 1), so `#`
 * separates key parts unambiguously, and the tenant prefix in every partition key keeps
 * tenants apart by construction.
 *
 *   pk                          sk               item
 *   S#<tenant>#<session>        S                the session (also in the activity index)
 *   S#<tenant>#<session>        SM               the session's metadata, when it has any (session-item.ts):
 *                                                beside the session item, which it would make dearer to move
 *   S#<tenant>#<session>        V#<life>#<base>#<seq>   one change of the session's log (log-items.ts):
 *                                                a version, an append, a head switch, a decision's
 *                                                lease or its end, a delete's fence; <base> is the
 *                                                latest version before it, <seq> counts the changes
 *                                                since that version (version k is the last change
 *                                                under V#<life>#<k-1>#)
 *   S#<tenant>#<session>        N#<node>#<life>  a message node's index: where its message is
 *   S#<tenant>#<session>        N#<node>#<life>#p  the version the node points at, when it moved
 *   S#<tenant>#<session>        D#<decision>#<life>  a decision's outcome (replayed for its id)
 *   S#<tenant>#<session>        W#<node>#<life>#<key>  a note kept beside a node (node-notes.ts)
 *   S#<tenant>#<session>        R#<run>          a run document (commits; TTL after its last write)
 *   S#<tenant>#<session>        L#u, L#a, L#m#<digest of a key>  the session's entry in its user's,
 *                                                its agent's and each metadata string's list (list-entries.ts)
 *   S#<tenant>#<session>,       Q#<ms>#<id>      a writer's ticket in the queue of the writers waiting
 *   P#<tenant>#<user>, A#<tenant>                for the session's log, or for that document (TTL, write-queue.ts)
 *   P#<tenant>#<user>           P                a user's profile document, shared by their sessions
 *   A#<tenant>                  A#<agent>        an agent of the registry
 *   A#<tenant>                  G                the tenant's shared document (beside the agents, so
 *                                                that a decision reads both in one Query)
 *   A#<tenant>                  V                the registry's version: moved on by each registration
 *                                                the registry's rules concern (agent-store.ts)
 *   I#<tenant>#<key>            I                an Idempotency-Key record
 *   H#<tenant>                  H#<webhook>      a webhook (change events, webhook-store.ts)
 *   H#<tenant>                  HP               the places of the tenant's webhooks: each one's id
 *                                                and when its place was taken (webhook-store.ts)
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
 *   E#<tenant>#<erasure>        E                the erasure of a user (erasure-store.ts)
 *   E#<tenant>#<erasure>        S#<session>      a session it closed and has yet to erase
 *   E#<tenant>#<erasure>        N#<path>         a memory namespace it closed items in, until their past is erased
 *   E#<tenant>#user#<user>      U                the user's erasure that is running, which a
 *                                                `DELETE` of the same user joins (erasure-store.ts)
 *   (index) T#<tenant>#<shard>  <updatedAt>#<session>   the sessions list, in ACTIVITY_SHARDS partitions
 *   (index) T#<tenant>#<list>#<shard>  <updatedAt>#<session>   a filtered list: <list> is u:<user>,
 *                                                a:<agent> or m:<digest of a metadata key and value>
 *   (index) KEYS                <createdAt>#<keyId>   every API key, for the admin CLI
 *   (index) PD#<shard>          <due ms>         a session whose history is due for a retention run
 *                                                (its marker `U~prune`, in PRUNE_DUE_SHARDS partitions),
 *                                                a delete's closing fence, or an erasure whose runs stopped (`E`)
 */
// Each key shape is an export of its own, and this module is imported whole as a namespace
// (`import * as keys from './keys.js'`, then `keys.session(scope)`): esbuild then bundles only
// the shapes a function uses, which it cannot do for the entries of one object.
export const session = (scope: SessionScope) => `S#${scope.tenant}#${scope.sessionId}`;
/** The session a session partition's key names (ids hold no `#`); null for any other key. */
export function sessionScopeOf(pk: string): SessionScope | null {
  const [kind, tenant, sessionId, ...rest] = pk.split('#');
  return kind === 'S' && tenant && sessionId && rest.length === 0 ? { tenant, sessionId } : null;
}
export const sessionSort = 'S';
/**
 * The session's metadata (session-item.ts): right after `S`, nothing of the session's sorts
 * between the two (every other sort key starts with another letter, or with `S#`, which no
 * session partition holds), so one Query `BETWEEN S AND SM` reads the session whole.
 */
export const sessionMetadataSort = 'SM';
/** A change of the log: in life `incarnation`, the `seq`-th after version `base`. */
export const logEntry = (entry: LogPosition) =>
  `V#${pad(entry.incarnation, INCARNATION_DIGITS)}#${pad(entry.base, BASE_DIGITS)}#${pad(entry.seq, SEQ_DIGITS)}`;
export const logPrefix = 'V#';
/** Every change of the log sorts below this key (`$` follows `#`), and no key is it. */
export const logRangeEnd = 'V$';
/** The changes after version `base` and before the next version (the last of them is version base + 1). */
export const basePrefix = (incarnation: number, base: number) => `V#${pad(incarnation, INCARNATION_DIGITS)}#${pad(base, BASE_DIGITS)}#`;
/** The changes of one life of the log. */
export const lifePrefix = (incarnation: number) => `V#${pad(incarnation, INCARNATION_DIGITS)}#`;
/** Every change of one life sorts below this key (a range read to the end of the life's log). */
export const logEndOf = (incarnation: number) => `${lifePrefix(incarnation)}~`;
/** A node's index in one life of the session (the newest life sorts last among a node's keys). */
export const nodeIndex = (nodeId: string, incarnation: number) => `N#${nodeId}#${pad(incarnation, INCARNATION_DIGITS)}`;
/** The version a node points at, once it moved from the one its index says. */
export const nodePointer = (nodeId: string, incarnation: number) => `N#${nodeId}#${pad(incarnation, INCARNATION_DIGITS)}#p`;
/** Every key of one node, in every life. */
export const nodeKeys = (nodeId: string) => `N#${nodeId}#`;
export const nodePrefix = 'N#';
/** Every `N#` key sorts below this one (`$` follows `#`), and no key is it. */
export const nodeRangeEnd = 'N$';
/** A note kept beside a node, in one life of the session (node-notes.ts). */
export const note = (nodeId: string, incarnation: number, key: string) => `W#${nodeId}#${pad(incarnation, INCARNATION_DIGITS)}#${key}`;
/** Every note of one node, in every life. */
export const noteKeys = (nodeId: string) => `W#${nodeId}#`;
/** Every note of the session. */
export const notePrefix = 'W#';
export const decision = (decisionId: string, incarnation: number) => `D#${decisionId}#${pad(incarnation, INCARNATION_DIGITS)}`;
export const decisionKeys = (decisionId: string) => `D#${decisionId}#`;
export const run = (runId: string) => `R#${runId}`;
/** A writer's ticket in a queue (write-queue.ts): tickets sort by when they were taken. */
export const queueTicket = (takenAtMs: number, id: string) => `Q#${pad(takenAtMs, TICKET_TIME_DIGITS)}#${id}`;
export const queuePrefix = 'Q#';
/** When a ticket was taken (epoch ms), from its sort key. */
export const ticketTakenAt = (sk: string) => Number(sk.slice(queuePrefix.length, queuePrefix.length + TICKET_TIME_DIGITS));
export const profile = (tenant: string, userId: string) => `P#${tenant}#${userId}`;
export const profileSort = 'P';
export const shared = (tenant: string) => `A#${tenant}`;
export const sharedSort = 'G';
export const agents = (tenant: string) => `A#${tenant}`;
export const agent = (agentId: string) => `A#${agentId}`;
export const agentPrefix = 'A#';
/** The registry's version (agent-store.ts), after the agents and the shared document. */
export const registryVersionSort = 'V';
export const idempotency = (tenant: string, key: string) => `I#${tenant}#${key}`;
export const idempotencySort = 'I';
/**
 * The activity index's partitions of one tenant: a session's entry is in one of them, chosen by
 * its id, so that the writes of a tenant's conversations spread over all of them (API.md
 * section 14: no key that every conversation shares takes a cost per turn) and a list reads
 * them all side by side, one round, and merges (session-store.ts `listSessions`).
 */
export const ACTIVITY_SHARDS = 16;
export const tenantSessions = (tenant: string, shard: number) => `T#${tenant}#${String(shard).padStart(2, '0')}`;
/**
 * A filtered list's partitions (`list`: `u:<user>`, `a:<agent>`, `m:<digest>`), cut like the
 * tenant's: every session of one agent, or with one metadata value, may be every conversation
 * of the tenant. Ids hold no `#` and the shard is two digits, so no list's key is another's.
 */
export const listSessions = (tenant: string, list: string, shard: number) => `T#${tenant}#${list}#${String(shard).padStart(2, '0')}`;
/** The sort key of a session's entry in its user's list, its agent's, and a metadata key's (by the key's digest). */
export const userEntry = 'L#u';
export const agentEntry = 'L#a';
export const metadataEntry = (keyDigest: string) => `L#m#${keyDigest}`;
/** Every entry of a session in its metadata strings' lists. */
export const metadataEntryPrefix = 'L#m#';
/** The activity partition of a session: FNV-1a of its id, so the same id always lands in the same one. */
export function activityShard(sessionId: string): number {
  return fnv1a(sessionId) % ACTIVITY_SHARDS;
}
function fnv1a(text: string): number {
  let hash = 0x811c9dc5;
  for (let index = 0; index < text.length; index++) {
    hash ^= text.charCodeAt(index);
    hash = Math.imul(hash, 0x01000193) >>> 0;
  }
  return hash;
}
/**
 * The retention index's partitions (store/log/prune-due.ts): a session's entry is in the one its
 * tenant and id hash to. The entries of every tenant share them: a session's is written at most
 * twice per prune interval (a run, and a write that found it was not its turn), never per turn,
 * and spread over all of them (API.md section 14); the scheduled sweep reads each once a minute.
 */
export const PRUNE_DUE_SHARDS = 32;
export const pruneDue = (shard: number) => `PD#${String(shard).padStart(2, '0')}`;
/** When the entry is due (epoch ms, so that the index sorts by it). */
export const pruneDueAt = (dueMs: number) => pad(Math.max(0, Math.round(dueMs)), TICKET_TIME_DIGITS);
/**
 * When an entry whose last `failures` runs in a row failed is due again (streams/prune-sweep.ts
 * backs them off): the count rides after the time in the sort key, which still sorts by the time,
 * so that the keys-only index hands it to the sweep with no read. Any other write of the entry's
 * due time (a run's, a claim's, a write's mark) starts the count over.
 */
export const pruneDueRetry = (dueMs: number, failures: number) => `${pruneDueAt(dueMs)}#${failures}`;
/** When an entry of the retention index is due (epoch ms), with or without its count of failures. */
export function pruneDueTime(dsk: string): number {
  return Number(dsk.split('#')[0]);
}
/** How many runs in a row failed for an entry of the retention index (`pruneDueRetry`); 0 for a plain due time. */
export function pruneDueFailures(dsk: string): number {
  const failures = Number(dsk.split('#')[1]);
  return Number.isSafeInteger(failures) && failures > 0 ? failures : 0;
}
export function pruneDueShard(scope: SessionScope): number {
  return fnv1a(`${scope.tenant}#${scope.sessionId}`) % PRUNE_DUE_SHARDS;
}
export const webhooks = (tenant: string) => `H#${tenant}`;
export const webhook = (webhookId: string) => `H#${webhookId}`;
export const webhookPrefix = 'H#';
/** Outside `webhookPrefix`, so that no list of webhooks reads it. */
export const webhookPlaces = 'HP';
export const deadLetters = (tenant: string, webhookId: string) => `X#${tenant}#${webhookId}`;
// Session, then version: the order a replay delivers them in, and a redelivered event
// lands on its own earlier dead letter instead of adding a second one.
// A document event's (`document`: run#<run>, profile#<user>, shared) sorts after the thread's.
export const deadLetter = (sessionId: string, version: number, document?: string) =>
  `D#${sessionId}#${document === undefined ? '' : `${document}#`}${String(version).padStart(12, '0')}`;
export const deadLetterPrefix = 'D#';
export const connection = (connectionId: string) => `C#${connectionId}`;
export const connectionSort = 'C';
export const subscribers = (scope: SessionScope) => `W#${scope.tenant}#${scope.sessionId}`;
export const subscriber = (connectionId: string) => `C#${connectionId}`;
export const subscriberPrefix = 'C#';
export const activity = (updatedAt: string, sessionId: string) => `${updatedAt}#${sessionId}`;
// Memory (API.md section 10): a namespace's ids are joined by `/`, which no id contains.
export const memoryNamespace = (tenant: string, namespace: readonly string[]) => `M#${tenant}#${namespace.join('/')}`;
export const memoryKey = (key: string) => `K#${key}`;
export const memoryKeyPrefix = 'K#';
/** The memory index's sort key: newest first by `updatedAt`, the key breaking ties. */
export const memoryRecency = (updatedAt: string, key: string) => `${updatedAt}#${key}`;
export const memoryNamespaces = (tenant: string) => `MN#${tenant}`;
/** Connections following a memory namespace and what lies under it (live-store.ts). */
export const namespaceFollowers = (tenant: string, namespace: readonly string[]) => `WM#${tenant}#${namespace.join('/')}`;
export const memoryHistory = (tenant: string, namespace: readonly string[], key: string) => `MH#${tenant}#${namespace.join('/')}#${key}`;
export const erasure = (tenant: string, erasureId: string) => `E#${tenant}#${erasureId}`;
export const erasureSort = 'E';
/** The erasure whose item (`E`) an erasure partition's key names; null for any other key (a user's `U` item's has a part more). */
export function erasureOf(pk: string, sk: string): { tenant: string; erasureId: string } | null {
  const [kind, tenant, erasureId, ...rest] = pk.split('#');
  return kind === 'E' && tenant && erasureId && rest.length === 0 && sk === erasureSort ? { tenant, erasureId } : null;
}
/** The retention index's partition of an erasure's entry (store/erasure/erasure-store.ts), by its tenant and id. */
export function erasureDueShard(tenant: string, erasureId: string): number {
  return fnv1a(`${tenant}#${erasureId}`) % PRUNE_DUE_SHARDS;
}
export const erasedSession = (sessionId: string) => `S#${sessionId}`;
export const erasedSessionPrefix = 'S#';
export const erasedNamespace = (namespace: readonly string[]) => `N#${namespace.join('/')}`;
export const erasedNamespacePrefix = 'N#';
/** The erasure of `userId` running (no erasure id has a `#`, so it is no erasure's partition). */
export const userErasure = (tenant: string, userId: string) => `E#${tenant}#user#${userId}`;
export const userErasureSort = 'U';
export const memoryHistoryVersion = (createdAt: string, version: number) => `${createdAt}#${String(version).padStart(12, '0')}`;

/** Where a change sits in a session's log (see `logEntry`). */
export interface LogPosition {
  readonly incarnation: number;
  readonly base: number;
  readonly seq: number;
}

const INCARNATION_DIGITS = 6;
const BASE_DIGITS = 12;
const SEQ_DIGITS = 8;
const TICKET_TIME_DIGITS = 13;

function pad(value: number, digits: number): string {
  return String(value).padStart(digits, '0');
}

const LOG_ENTRY = /^V#(\d+)#(\d+)#(\d+)$/;

/** The position a `V#…` sort key names, or null when it is not one. */
export function logPositionOf(sortKey: string): LogPosition | null {
  const match = LOG_ENTRY.exec(sortKey);
  return match ? { incarnation: Number(match[1]), base: Number(match[2]), seq: Number(match[3]) } : null;
}

/** The life a `N#<node>#<life>…` or `D#<decision>#<life>` sort key belongs to. */
export function incarnationOf(sortKey: string): number {
  const match = /#(\d+)(?:#p)?$/.exec(sortKey);
  return match ? Number(match[1]) : -1;
}
