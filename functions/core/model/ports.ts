import type { Json, JsonObject } from '../json/json.js';
import type { Lifetime, LifetimeSettings } from './lifetime.js';
import type { PathRead } from './message-path.js';
import type {
  AgentRecord,
  ClosingTip,
  DecisionLease,
  DecisionRecord,
  DecisionSummary,
  DocumentRecord,
  DocumentRef,
  DoneDecision,
  NodeRecord,
  NotesRead,
  NotesWindow,
  Page,
  SessionMeta,
  SessionScope,
  Tip,
  VersionRecord,
} from './model.js';

/**
 * What a `PATCH /v1/sessions/{sid}` changes of the session item (each field given is set; the
 * user and agent are also carried on the tip: TipChange `sessionUserId`, `sessionAgentId`), and
 * what the session is listed under before and after it: the change moves the session's entries
 * in the filtered lists in its own transaction (API.md section 2: in every list it belongs to,
 * and in no other, once the request has answered).
 */
export interface SessionSettings {
  readonly metadata?: JsonObject | null;
  readonly userId?: string | null;
  readonly agentId?: string | null;
  readonly lists: { readonly before: ListedAs; readonly after: ListedAs };
}

/** What a session is listed under besides the tenant's list: its user, its agent, its metadata's strings. */
export type ListedAs = Pick<SessionMeta, 'userId' | 'agentId' | 'metadata'>;

/**
 * One change of a session, applied atomically and only if the tip is still the one read. The
 * store claims the next place in the session's log with one conditional write holding the
 * change (a version, new nodes, a head move, a decision's lease or its end); documents, and a
 * session's first write, make it a transaction.
 */
export interface TipChange {
  /** The tip the change was computed from; the write is conditional on it. */
  readonly basedOn: Tip;
  /** A version to record; absent for a change of the head, the nodes or the lease alone. */
  readonly version?: VersionRecord;
  /**
   * The version the written node pointed at before (`version.prevVersion`), as it was read:
   * the store continues its lineage from there.
   */
  readonly prior?: VersionRecord | null;
  /**
   * Where the head is after the change and what it points at; a head moved to a node that
   * exists carries that node's `place` (NodeRecord.place).
   */
  readonly head: { readonly id: string; readonly version: number; readonly depth: number; readonly place?: unknown };
  /** A node other than the head that the change points at a new version (a write off the head). */
  readonly repoint?: { readonly id: string; readonly version: number };
  /** New message nodes: one chain, its first node under `parent`; each id must be new. */
  readonly newNodes: ReadonlyArray<NodeRecord>;
  /** The node the chain of `newNodes` hangs under, as read (the head, or a node a client named). */
  readonly parent?: NodeRecord;
  /**
   * Create the session item when missing and move its `updatedAt` to this time. A change that
   * is otherwise a single item moves it after the write, best effort, or leaves it to the
   * change hook (versions).
   */
  readonly touchSessionAt?: string;
  /** Whether the session may not exist yet: then the session item is written with the change. */
  readonly mayCreateSession: boolean;
  /**
   * The change was computed without reading the session item, as for a session that has none
   * (an append's first change of a life, session-tree-service.ts `appendMessages`): the
   * transaction then holds only while there is no session item, and the store throws
   * `SessionItemFound`, writing nothing, when there is one. Only with `mayCreateSession`.
   */
  readonly sessionAbsent?: boolean;
  /**
   * When the session item's activity last moved, as read before a first change (its
   * `updatedAt`): a first change within the activity interval of it (a session made a moment
   * ago by `POST /v1/sessions`) moves nothing, and carries that time on.
   */
  readonly sessionTouchedAt?: string;
  /** The session's agent, to carry on the tip; the tip read's when absent. */
  readonly sessionAgentId?: string | null;
  /** The session's user, to carry on the tip; the tip read's when absent. */
  readonly sessionUserId?: string | null;
  /**
   * Whether the session is in a list besides the tenant's (its user's, agent's, a metadata
   * string's), as read before its first write: that write moves those entries too. Unknown
   * when absent (the store then reads the session).
   */
  readonly sessionListed?: boolean;
  /**
   * The session's lifetime (API.md section 12) from this change on: set by `PATCH`, and by the
   * first change of a life (its session item's, when there is one). Absent: the tip's; on a
   * first change, the deployment's defaults.
   */
  readonly lifetime?: Lifetime;
  /**
   * A change of the session's settings (`PATCH /v1/sessions/{sid}`): recorded in the log, so
   * that it counts as a write for an idle expiry, with the session item's metadata, user, agent
   * and lifetime in the same transaction. The session item must exist.
   */
  readonly settings?: SessionSettings;
  /** A decision completed by this change: its record is kept with it and its lease ends. */
  readonly decision?: DecisionCompletion;
  /**
   * The answer of the request this change is, kept in the change itself under its
   * `Idempotency-Key` claim (API.md section 1): a retry finds it there, so the key costs no
   * write of its own. Absent without a key, or when the answer is too large to keep here.
   */
  readonly kept?: KeptAnswer;
  /** Takes the session's decision lease (a change of nothing else). */
  readonly takeLease?: DecisionLease;
  /** Ends the lease this holder has, recording nothing else (a decision that failed). */
  readonly releaseLease?: string;
  /**
   * A WebSocket client follows the session until this time (epoch seconds): a change of
   * nothing else, which every later change carries on (`Tip.followersUntil`).
   */
  readonly follow?: number;
  /** Run, profile and shared documents written in the same step (commits). */
  readonly documents?: ReadonlyArray<DocumentWrite>;
  /**
   * Opens the session a copy wrote (SessionScope.copy, session-copy.ts): the first change
   * without the copy's mark, with the session item put in its lists in the same transaction.
   * From it on, everyone reads the whole copy. The copy's last append when it can be (its
   * nodes' index is then owed by the session's next write, as any append's), else a change of
   * nothing else after the copy's last step (session-store.ts, `openCopy`).
   */
  readonly opensCopy?: true;
  /**
   * The writer lost a race for the log's next place before this change (retry.ts): the tip
   * then tells the writers that come next that others are waiting, so that they queue too.
   */
  readonly contended?: boolean;
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
  /** The lease the decision holds, which the change ends. */
  readonly leaseToken: string;
  /** Whether a later request may replay the decision by its id (the caller named it). */
  readonly remember: boolean;
}

/**
 * What claiming an `Idempotency-Key` found: the key was free (the request runs), or another
 * request holds it — still running, done with the answer to replay, or `unfinished`: its
 * holder neither answered nor let go in time (it died, or its answer could not be kept), so
 * whether it wrote is unknown and the key is never run again until it expires.
 */
export type IdempotencyClaim =
  | { readonly outcome: 'claimed'; readonly claim: ClaimId }
  | {
      readonly outcome: 'in_progress' | 'unfinished';
      readonly fingerprint: string;
      /** Epoch ms until which the holder counts as running; past it the claim is `unfinished`. */
      readonly lockedUntil: number;
      /** The holder's claim, by which a change that kept its answer is found (absent on claims made before it). */
      readonly claim?: ClaimId;
    }
  | { readonly outcome: 'done'; readonly fingerprint: string; readonly response: StoredResponse };

export interface StoredResponse {
  statusCode: number;
  headers: Record<string, string>;
  body: string;
}

/** One claim of an `Idempotency-Key`: its own id (a key claimed again after expiry has another) and when it was made. */
export interface ClaimId {
  readonly id: string;
  /** Epoch ms of the claim: the change that kept its answer was made after it. */
  readonly since: number;
}

/** A request's answer kept in the change it made, under its claim's id. */
export interface KeptAnswer {
  readonly claimId: string;
  readonly response: StoredResponse;
}

/**
 * How a write's service hands its result's answer to the change that records it: null when
 * the request has no `Idempotency-Key` or the answer is too large to keep in the change (then
 * it is kept apart, as before).
 */
export type AnswerKeeper<R> = (result: R) => KeptAnswer | null;

/** A page of a tenant's sessions, most recently active first. */
export interface SessionListOptions {
  limit: number;
  cursor?: string;
  /** Only sessions whose id starts with this; the page may then hold fewer than `limit`. */
  prefix?: string;
  /** Only the sessions of one list: a user's, an agent's, or those with one metadata string. */
  filter?: SessionFilter;
}

/** One filter of the sessions list (API.md section 2): by user, by agent, or by one top-level metadata string. */
export type SessionFilter = { userId: string } | { agentId: string } | { metadata: { key: string; value: string } };

/**
 * How many of the log's newest changes a tip read brings along for a path read at the head:
 * `true`, the 48 newest (a short path whole, a long one's end); `'page'`, as many as one page
 * of a Query holds (up to 1 MB of the log), for a decision that shows its worker the whole
 * path, so that a path whose part of the log fits in a page needs no read after the tip.
 */
export type RecentChanges = boolean | 'page';

/**
 * A tip read (with or without the log's newest changes, `recent`) from a replica: eventually
 * consistent, so half the read units. `true`: the tip may be older than the log's newest change,
 * so only a caller whose next step is a conditional write at the place after that tip may ask
 * (a decision's lease, a state write's change, which then fail if it was), and only an answer
 * that write confirms may be given from it. `'checked'` (with `recent` only): beside a consistent read of the
 * newest change's key alone (the units of that one item), which the replica's answer must reach
 * (a read no write confirms: what the client wrote before is in it). Either way, an answer that
 * is not one unbroken run of the log, that found nothing, or whose newest change is a delete's
 * fence, is read again consistently.
 */
export type FromReplica = true | 'checked';

/**
 * The persistence port of the session core: sessions, their message nodes, versions and tip.
 * The DynamoDB adapter (functions/store) is the only implementation the service ships with; it
 * alone knows keys, conditions and exceptions.
 */
export interface SessionStore {
  /**
   * The tip of a session; with `withState`, the latest version's state and agent too. With
   * `recent`, the store also keeps the newest changes of the log it read with the tip, so that
   * a path read at the head (`readPath`) needs no further read when the path is short.
   * `fromReplica` reads the tip (and those changes) from a replica (`FromReplica`). With
   * `sessionItem` (a consistent read of the tip alone), the same read also tells a session that
   * does not exist from one made and never written: an empty tip is then `absent` when neither
   * the log nor the session item is there (a read of the same item, the same units).
   */
  readTip(
    scope: SessionScope,
    options: { withState: boolean; recent?: RecentChanges; fromReplica?: FromReplica; sessionItem?: boolean },
  ): Promise<Tip>;
  /**
   * The tip and those of `nodeIds` that exist in the session's current life, each as of the tip
   * or later. With `expectNew` (the ids of messages about to be appended), the nodes are read
   * beside the tip, one round: an absent one is taken as absent. `expectHead` (the parent an
   * append names) is not read when the tip says it is the head (the tip's `headNode` is it),
   * and is read after the tip when it is not. With `ownClaim` (a note, which needs no state),
   * a claim of the log's next place that this process sends after the call, and that lands,
   * may stand for the read when its change knows the nodes (an append under way: its parent
   * and its new nodes). `sessionItem` as for `readTip`.
   */
  readTipWithNodes(
    scope: SessionScope,
    nodeIds: readonly string[],
    options: {
      withState: boolean;
      recent?: RecentChanges;
      fromReplica?: FromReplica;
      expectNew?: boolean;
      expectHead?: string;
      ownClaim?: boolean;
      sessionItem?: boolean;
    },
  ): Promise<{ tip: Tip; nodes: Map<string, NodeRecord> }>;
  getMeta(scope: SessionScope): Promise<SessionMeta | null>;
  /**
   * Puts the session item, refusing an id in use (`session_exists`), with its lifetime: the
   * deployment's defaults under `agentLifetime` (API.md section 12); resolves with what it put.
   * Throws StaleTipError while a delete of the same id is still erasing it; finishes a delete
   * that stopped halfway, and erases a session of that id that expired.
   */
  createSession(scope: SessionScope, meta: SessionMeta, agentLifetime?: LifetimeSettings): Promise<SessionMeta>;
  listSessions(tenant: string, options: SessionListOptions): Promise<Page<SessionMeta>>;
  /**
   * Deletes the session: from its answer it reads as unknown and is in no list; its items are
   * erased by then, or, past what fits in `remainingMs` (the request's time left), by the change
   * hook afterwards. False when it had none.
   */
  deleteSession(scope: SessionScope, remainingMs?: number): Promise<boolean>;
  /**
   * For a write that found the session closing: finishes the delete if it was abandoned (its
   * function died halfway), so that the write's retry starts a new session; a delete still in
   * progress is left to finish. Either way the write then retries.
   */
  settleClosing(scope: SessionScope, tip: ClosingTip): Promise<void>;

  /**
   * Retention (API.md section 12): marks the session's history due for a run now, so that what a
   * new retention setting left outside its windows is pruned within the prune interval, without
   * another write (the change hook only sees versions; a settings change is none).
   */
  markPruneDue(scope: SessionScope): Promise<void>;

  /** The tip and every node of the session's current life, without messages (with their previews). */
  readTree(scope: SessionScope): Promise<{ tip: Tip; nodes: NodeRecord[] }>;
  /**
   * The tip and a page of the message nodes of the session's current life by id, from the last,
   * whose ids sort before `before` (all when undefined): at most `limit` (`root` is not one), and
   * whether more follow. It reads about what it returns, not the whole index.
   */
  readNodePage(scope: SessionScope, page: { before?: string; limit: number }): Promise<{ tip: Tip; nodes: NodeRecord[]; more: boolean }>;
  /** Puts a note beside a node of life `incarnation` (a blind put: the log is not touched). */
  putNote(scope: SessionScope, note: { incarnation: number; nodeId: string; key: string; value: Json }): Promise<void>;
  /**
   * The notes of one node, or of every node, in every life of the session (note-pages.ts keeps
   * one), in their order from `window.after` on, until they pass `window.bytes`.
   */
  readNotes(scope: SessionScope, nodeId: string | undefined, window: NotesWindow): Promise<NotesRead>;
  /** The notes of the named nodes, in every life, as `readNotes`; what it reads is bounded by the nodes named. */
  readNotesOf(scope: SessionScope, nodeIds: readonly string[], window: NotesWindow): Promise<NotesRead>;
  /**
   * The path root→`target` (a node read with `tip`, or the tip's head node), oldest first; with
   * `last`, only its last `last` messages, and how many before them were left out.
   */
  readPath(scope: SessionScope, tip: Tip, target: NodeRecord, options?: { last?: number }): Promise<PathRead>;

  /** A recorded version of the session's life that `tip` belongs to (the current one when absent). */
  getVersion(scope: SessionScope, version: number, tip?: Tip): Promise<VersionRecord | null>;
  /**
   * The versions of `from`'s lineage after it (its `prevVersion`, that one's, …), at most
   * `limit`, without those retention pruned; `prunedBefore`: the version listed (or `from`) just
   * above the first that is missing. It ends before the version whose state would pass
   * `bytes.left` (`filled`), unless it would list none and `bytes.atLeastOne`.
   */
  getLineage(
    scope: SessionScope,
    from: VersionRecord,
    limit: number,
    bytes: { left: number; atLeastOne: boolean },
  ): Promise<{ versions: VersionRecord[]; prunedBefore?: number; filled?: boolean }>;
  /**
   * Recorded versions, newest first, without those retention pruned (`prunedBefore`: the version
   * listed just above the newest missing one). A page may hold fewer than `limit` items: it
   * ends before a version whose state would take it past `bytes` (at least one version).
   * `incarnation`: the life of the session the page read (absent when the log held nothing).
   */
  listVersions(
    scope: SessionScope,
    options: { limit: number; cursor?: string; bytes: number },
  ): Promise<Page<VersionRecord> & { prunedBefore?: number; incarnation?: number }>;
  /** The decisions of the session's current life, newest first. A page may hold fewer than `limit` items. */
  listDecisions(scope: SessionScope, options: { limit: number; cursor?: string }): Promise<Page<DecisionSummary>>;

  /**
   * Applies the change atomically and resolves with the tip it made; throws `StaleTipError`
   * when the tip moved meanwhile (carrying the newer tip when the failed write saw it).
   */
  commit(scope: SessionScope, change: TipChange): Promise<Tip>;
}

/**
 * What a decision asks of the session store: the tip, the session item, a path, a version and
 * the commit. The other methods (creating, listing and deleting sessions, the whole tree, the
 * version history) are the session groups' and commits' alone (store/sessions/session-store.ts).
 */
export type SessionLog = Pick<SessionStore, 'readTip' | 'readTipWithNodes' | 'getMeta' | 'readPath' | 'getVersion' | 'commit'>;

/** The run, profile and shared documents of commits (API.md section 8). */
export interface DocumentStore {
  getDocument(ref: DocumentRef): Promise<DocumentRecord | null>;
  /**
   * A profile as a keyed write reads it (`getDocument`'s record, null when none), with its
   * fence: an opaque token that every `PATCH` giving one of the user's sessions to another
   * user, the user's erasure and every whole put of the profile change, and that concurrent
   * keyed writes never change (`KeyedDocumentWrite.fence`).
   */
  readProfile(ref: DocumentRef & { kind: 'profile' }): Promise<{ document: DocumentRecord | null; fence: string | null }>;
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
    /**
     * The user whose profile is among `documents`: written only while the session is still that
     * user's (a `PATCH` that gave it to another user since it was read makes it `StaleTipError`).
     */
    profileOf?: string,
  ): Promise<void>;
  /**
   * Writes the shared document (or a profile) key by key, without a condition on its version:
   * a blind commit's documents-only change (commit-service.ts). The store numbers the version
   * in the same write, so concurrent writers never lose a race to each other; only a writer
   * whose keys someone else reshaped meanwhile (a key made, removed or replaced between its
   * read and its write, under a commutative merge) throws `StaleTipError`, and so does one
   * that would take the document past its size limit only through others' concurrent writes.
   * Resolves with the version written, its state the whole document after it. A profile's
   * write lands only while its fence is still the one `readProfile` returned (`StaleTipError`
   * otherwise).
   */
  writeDocument(ref: DocumentRef & { kind: 'profile' | 'shared' }, write: KeyedDocumentWrite): Promise<DocumentRecord>;
}

/** What a documents-only commit does to one document, key by key (commands.ts `foldCommands`). */
export interface KeyedDocumentWrite {
  /** The document as read before the change (null: none), as `getDocument` returned it. */
  readonly before: DocumentRecord | null;
  /** Each key's change. */
  readonly changes: ReadonlyMap<string, KeyChange>;
  /** The whole document after the change, computed from `before`: what a key replaced whole is set to. */
  readonly next: JsonObject;
  readonly sessionId: string;
  /**
   * When the session's activity last moved, as the commit read it (its tip's, or its item's
   * while nothing is in its log): the write says whether a move is due, and the change hook
   * makes it (the write itself touches no session item).
   */
  readonly sessionTouchedAt: string | null;
  /** The agent the commit acted as (its change event's `author`), or null. */
  readonly author: string | null;
  readonly at: string;
  /** A profile's fence as `readProfile` returned it (null: none): the write lands only while it is unchanged. */
  readonly fence?: string | null;
}

/** What a batch does to one key: replace it, remove it, or merge an object into it (commutative). */
export type KeyChange = { kind: 'set'; value: Json } | { kind: 'remove' } | { kind: 'merge'; patch: JsonObject };

export interface IdempotencyStore {
  /** Claims `key` for a request with `fingerprint`, unless another request holds it. */
  claim(tenant: string, key: string, fingerprint: string, lockMs: number): Promise<IdempotencyClaim>;
  complete(tenant: string, key: string, fingerprint: string, response: StoredResponse): Promise<void>;
  release(tenant: string, key: string, fingerprint: string): Promise<void>;
  /** The answer a change of `session` kept under `claim` (TipChange.kept); null when no change has it. */
  recover(scope: SessionScope, claim: ClaimId): Promise<StoredResponse | null>;
}

/**
 * What blind writers of one target wait in (issue 33): the session's log, or one document. A
 * write that lost a race, or found others waiting, takes a ticket and goes when no live ticket
 * taken before its own is left, so that writers take turns instead of racing again and again.
 * An order to go in, not a lock: every write stays conditional on what it read, and a writer
 * that goes out of turn (a ticket's holder stopped) loses at most a race.
 */
export interface WriteQueue {
  join(target: QueueTarget): Promise<QueueTicket>;
}

/** The target a queue orders writers for. */
export type QueueTarget = { readonly session: SessionScope } | { readonly document: DocumentRef };

export interface QueueTicket {
  /** The live tickets taken before this one, oldest first (their ids). */
  ahead(): Promise<string[]>;
  /** Gives the ticket back (its write is done, or gave up). */
  leave(): Promise<void>;
}

/** The tip changed between the read and the write: re-read and try again. */
export class StaleTipError extends Error {
  constructor(
    message = 'the session changed since it was read',
    /** The change that took the place, read back from the failed write: a newer tip to retry on. */
    readonly newer?: Tip,
  ) {
    super(message);
    this.name = 'StaleTipError';
  }
}

/**
 * A change made as for a session without its item (`TipChange.sessionAbsent`) found the item
 * there: nothing was written, and the change is computed again from the item. Not a lost race
 * (the log did not move), so it is no StaleTipError.
 */
export class SessionItemFound extends Error {
  constructor(
    /** The session as its item refused the change, when the refusal told all of it (else it is read). */
    readonly meta?: SessionMeta | null,
  ) {
    super('the session item exists: the change is computed again from it');
    this.name = 'SessionItemFound';
  }
}

/**
 * What a registration writes under (`AgentStore.putAgent`): the agent as it was read (absent, or
 * present with `parentAsRead`), and for one that the registry's rules concern, the version of
 * the registry read before everything the rules were checked against.
 */
export interface AgentPutConditions {
  existed: boolean;
  parentAsRead: string | null;
  registryVersion?: number;
}

/** A registration whose write found what it was checked against changed since it was read: read again and retry. */
export class RegistryChangedError extends Error {
  constructor() {
    super('the agents changed since they were read');
    this.name = 'RegistryChangedError';
  }
}

export interface AgentStore {
  /**
   * Creates or replaces an agent; true when it was created. Only while the agent is as absent
   * or present as read, with that parent; with `registryVersion`, only while the registry's
   * version is still that one, which the write then moves on by one. Else `RegistryChangedError`,
   * nothing written.
   */
  putAgent(tenant: string, agent: AgentRecord, conditions: AgentPutConditions): Promise<boolean>;
  getAgent(tenant: string, agentId: string): Promise<AgentRecord | null>;
  /**
   * The version of the tenant's registry (0 before any change the rules concern), read
   * consistently: every registration that the registry's rules concern moves it on by one.
   */
  registryVersion(tenant: string): Promise<number>;
  /** `consistent`: with every write that landed before the read (a registration's checks). */
  listAgents(tenant: string, options: { limit: number; cursor?: string; consistent?: boolean }): Promise<Page<AgentRecord>>;
  /**
   * Every agent of the tenant and its shared document (null when none), read together: a
   * decision needs both, and the store keeps them side by side so that they are one request.
   */
  /**
   * `missing`: an agent the request names that the copy this instance holds lacks (a cached
   * registry, kernel/tenant-cache.ts): read again, once a second at most for that agent.
   */
  readTenant(tenant: string, options?: { missing?: string }): Promise<{ agents: AgentRecord[]; shared: DocumentRecord | null }>;
}

/**
 * Decision records kept for replays (API.md section 6). The lease and a decision's outcome
 * travel in the session's log (`TipChange.takeLease`, `decision`); this is where a finished
 * decision is found by its id once newer changes follow it, and where failed attempts count.
 */
export interface DecisionStore {
  /** The record of a decision id, of whichever life of the session it was in (`incarnation`). */
  getDecision(scope: SessionScope, decisionId: string): Promise<DecisionRecord | null>;
  recordFailedAttempt(scope: SessionScope, decisionId: string, incarnation: number): Promise<void>;
}

/** The decision lease was lost (it expired and another decision took it). */
export class LeaseLostError extends Error {
  constructor() {
    super('the decision lease expired before the decision was recorded');
    this.name = 'LeaseLostError';
  }
}
