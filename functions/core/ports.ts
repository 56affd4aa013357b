import type {
  AgentRecord,
  ClosingTip,
  DecisionRecord,
  DocumentRecord,
  DocumentRef,
  DoneDecision,
  NodeRecord,
  Page,
  SessionMeta,
  SessionScope,
  Tip,
  VersionRecord,
} from './model.js';

/**
 * One change of a session, applied atomically and only if the tip is still the one read.
 * The store writes the next tip item (a version, or a head marker when `version` is absent)
 * and, in the same step, the other items listed here.
 */
export interface TipChange {
  /** The tip the change was computed from; the write is conditional on it. */
  readonly basedOn: Tip;
  /** A version to record in the next slot; absent for a head move alone. */
  readonly version?: VersionRecord;
  /** Where the head is after the change and what it points at. */
  readonly head: { readonly id: string; readonly version: number; readonly depth: number };
  /** Nodes whose stored pointer must change (a node the head leaves, a node written off-head). */
  readonly nodePointers: ReadonlyArray<{ readonly id: string; readonly version: number }>;
  /** New message nodes; each must not exist yet. */
  readonly newNodes: ReadonlyArray<NodeRecord>;
  /**
   * Create the session item when missing and move its `updatedAt` to this time. When the
   * change is otherwise a single item, the store may do this after it, best effort.
   */
  readonly touchSessionAt?: string;
  /** Whether the session may not exist yet: then the session item is written with the change. */
  readonly mayCreateSession: boolean;
  /** The session's agent, to carry on the tip; the tip read's when absent. */
  readonly sessionAgentId?: string | null;
  /** A decision completed by this change: its record is written and its lease released with it. */
  readonly decision?: DecisionCompletion;
  /** Run, profile and shared documents written in the same step (commits). */
  readonly documents?: ReadonlyArray<DocumentWrite>;
}

/** A document write, conditional on the version it was computed from (0: not there yet). */
export interface DocumentWrite {
  readonly record: DocumentRecord;
  readonly basedOnVersion: number;
  /** The agent the commit acted as (its change event's `author`), or null. */
  readonly author: string | null;
  /** Runs expire this long after their last write. */
  readonly ttlSeconds?: number;
}

export interface DecisionCompletion {
  readonly record: DoneDecision;
  /** The lease the decision holds; the change fails if the lease was lost meanwhile. */
  readonly leaseToken: string;
}

/**
 * What claiming an `Idempotency-Key` found: the key was free (the request runs), or another
 * request holds it — still running, or done with the answer to replay.
 */
export type IdempotencyClaim =
  | { readonly outcome: 'claimed' }
  | {
      readonly outcome: 'in_progress';
      readonly fingerprint: string;
      /** Epoch ms after which the holder counts as dead and the key may be claimed again. */
      readonly lockedUntil: number;
    }
  | { readonly outcome: 'done'; readonly fingerprint: string; readonly response: StoredResponse };

export interface StoredResponse {
  statusCode: number;
  headers: Record<string, string>;
  body: string;
}

/** A page of a tenant's sessions, most recently active first. */
export interface SessionListOptions {
  limit: number;
  cursor?: string;
  /** Only sessions whose id starts with this; the page may then hold fewer than `limit`. */
  prefix?: string;
}

/**
 * The persistence port of the session core: sessions, their message nodes, versions and tip.
 * The DynamoDB adapter (functions/store) is the only implementation the service ships with; it
 * alone knows keys, conditions and exceptions.
 */
export interface SessionStore {
  /** The tip of a session; with `withState`, the latest version's state and agent too. */
  readTip(scope: SessionScope, options: { withState: boolean }): Promise<Tip>;
  getMeta(scope: SessionScope): Promise<SessionMeta | null>;
  /**
   * Puts the session item, refusing an id in use (`session_exists`). Throws StaleTipError while
   * a delete of the same id is still erasing it; finishes a delete that stopped halfway.
   */
  createSession(scope: SessionScope, meta: SessionMeta): Promise<void>;
  listSessions(tenant: string, options: SessionListOptions): Promise<Page<SessionMeta>>;
  /** Erases every item of the session; false when it had none. */
  deleteSession(scope: SessionScope): Promise<boolean>;
  /**
   * For a write that found the session closing: finishes the delete if it was abandoned (its
   * function died halfway), so that the write's retry starts a new session; a delete still in
   * progress is left to finish. Either way the write then retries.
   */
  settleClosing(scope: SessionScope, tip: ClosingTip): Promise<void>;

  getNode(scope: SessionScope, nodeId: string): Promise<NodeRecord | null>;
  /** The nodes that exist among `nodeIds`, with their messages. */
  getNodes(scope: SessionScope, nodeIds: readonly string[]): Promise<Map<string, NodeRecord>>;
  /** Every node of the session; without message bodies unless `withMessages`. */
  listNodes(scope: SessionScope, options?: { withMessages?: boolean }): Promise<NodeRecord[]>;

  getVersion(scope: SessionScope, version: number): Promise<VersionRecord | null>;
  getVersions(scope: SessionScope, versions: readonly number[]): Promise<Map<number, VersionRecord>>;
  /** Recorded versions, newest first. A page may hold fewer than `limit` items. */
  listVersions(scope: SessionScope, options: { limit: number; cursor?: string }): Promise<Page<VersionRecord>>;

  /** Applies the change atomically; throws `StaleTipError` when the tip moved meanwhile. */
  commit(scope: SessionScope, change: TipChange): Promise<void>;
}

/** The run, profile and shared documents of commits (API.md section 8). */
export interface DocumentStore {
  getDocument(ref: DocumentRef): Promise<DocumentRecord | null>;
  /**
   * Writes documents atomically, each conditional on its version; with `guard`, also only if
   * the session's tip is still that one. Throws `StaleTipError` when anything moved.
   */
  commitDocuments(
    scope: SessionScope,
    documents: ReadonlyArray<DocumentWrite>,
    guard: Tip | null,
    /** Create the session item when missing (a first write) and move its activity to this time. */
    touchSessionAt?: string,
  ): Promise<void>;
}

export interface IdempotencyStore {
  /** Claims `key` for a request with `fingerprint`, unless another request holds it. */
  claim(tenant: string, key: string, fingerprint: string, lockMs: number): Promise<IdempotencyClaim>;
  complete(tenant: string, key: string, fingerprint: string, response: StoredResponse): Promise<void>;
  release(tenant: string, key: string, fingerprint: string): Promise<void>;
}

/** The tip changed between the read and the write: re-read and try again. */
export class StaleTipError extends Error {
  constructor(message = 'the session changed since it was read') {
    super(message);
    this.name = 'StaleTipError';
  }
}

/** A new node's id already exists (a race with another append). */
export class NodeTakenError extends Error {
  constructor(readonly nodeId: string) {
    super(`node ${nodeId} already exists`);
    this.name = 'NodeTakenError';
  }
}

export interface AgentStore {
  /** Creates or replaces an agent; true when it was created. */
  putAgent(tenant: string, agent: AgentRecord): Promise<boolean>;
  getAgent(tenant: string, agentId: string): Promise<AgentRecord | null>;
  listAgents(tenant: string, options: { limit: number; cursor?: string }): Promise<Page<AgentRecord>>;
}

export interface DecisionStore {
  getDecision(scope: SessionScope, decisionId: string): Promise<DecisionRecord | null>;
  /** Takes the session's decision lease until `untilMs` unless a live holder has it. */
  acquireLease(scope: SessionScope, token: string, untilMs: number): Promise<boolean>;
  releaseLease(scope: SessionScope, token: string): Promise<void>;
  recordFailedAttempt(scope: SessionScope, decisionId: string): Promise<void>;
  /** Records a decision that changed nothing in the session and releases its lease. */
  completeDecision(scope: SessionScope, completion: DecisionCompletion): Promise<void>;
}

/** The decision lease was lost (it expired and another decision took it). */
export class LeaseLostError extends Error {
  constructor() {
    super('the decision lease expired before the decision was recorded');
    this.name = 'LeaseLostError';
  }
}
