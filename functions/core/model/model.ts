import type { Json, JsonObject } from '../json/json.js';
import type { PatchOperation } from '../json/json-patch.js';
import type { StateFields } from './fields.js';
import type { Lifetime, LifetimeSettings } from './lifetime.js';

/** Which session a request addresses; the tenant always comes from the API key. */
export interface SessionScope {
  readonly tenant: string;
  readonly sessionId: string;
  /**
   * The copy that writes the session, while it is not opened yet (session-copy.ts): its own
   * reads and writes see what it wrote, everyone else's see an unknown session.
   */
  readonly copy?: string;
}

export interface SessionMeta {
  sessionId: string;
  agentId: string | null;
  userId: string | null;
  metadata: JsonObject | null;
  createdAt: string;
  updatedAt: string;
  /**
   * The session's lifetime settings (API.md section 12), resolved when it started and changed
   * by `PATCH`; absent: none.
   */
  lifetime?: Lifetime;
  /**
   * When the session item says the session expires (epoch ms): exact while nothing is in its
   * log (the tip says it otherwise), else from its activity, which may trail the last write.
   */
  expiresAtMs?: number | null;
}

/**
 * A message node as stored. `stateVersion` is authoritative for every node except the
 * current head, whose pointer lives on the session tip (see `Tip`).
 */
export interface NodeRecord {
  id: string;
  parentId: string | null;
  depth: number;
  role: string | null;
  /** The message exactly as the client sent it, with `id` and `parentId` filled in; null when not read. */
  message: JsonObject | null;
  stateVersion: number;
  createdAt: string;
  /** A one-line snippet of the message (`messagePreview`), kept where the node is indexed. */
  preview?: string | null;
  /**
   * Where the store keeps the node, as the store wrote it: opaque to the core, which hands it
   * back with a change that builds on the node (a message appended under it).
   */
  readonly place?: unknown;
}

export const VERSION_CAUSES = ['patch', 'replace', 'decide', 'commit'] as const;
export type VersionCause = (typeof VERSION_CAUSES)[number];

export interface VersionRecord {
  version: number;
  node: string;
  prevVersion: number;
  cause: VersionCause;
  author: string | null;
  decisionId: string | null;
  createdAt: string;
  state: Json;
  agent: Json;
  /** The versions before this one in its node lineage, nearest first, at most `LINEAGE_WINDOW`. */
  lineage: number[];
  /**
   * Where the store found this version and the ones of its lineage window: opaque to the core,
   * which carries them from a version to the next, so that a lineage reads in one batch.
   */
  readonly place?: unknown;
  /** The session's agent when this version was recorded (carried on every tip item). */
  sessionAgentId?: string | null;
  /** For `cause: "commit"`: the batch of commands that made this version. */
  commands?: Json[] | null;
  /** Bytes of the UTF-8 JSON text of `state` (read from the store, where it is known without reading the state). */
  stateBytes?: number;
  /**
   * The store's own detail, opaque to the core: how it keeps this version's state when that
   * is large (absent when it is inline), for a version computed from this one.
   */
  stored?: unknown;
  /**
   * For a version about to be recorded: `stored` of the version it was computed from, so that
   * the store can keep only what changed (and need not put again what that one has).
   */
  base?: unknown;
  /** True when a reader asked not to read a state kept in pieces: `state` is then null. */
  stateUnread?: true;
  /**
   * What this version changed, for its change event when its state is too large to travel:
   * the merge patch and the JSON Patch operations turning the state before it into its state
   * (either absent when it cannot be made, or when it is too large to keep). Read back from
   * the store; a version about to be recorded has `workOutChange` instead.
   */
  change?: RecordedChange | null;
  /**
   * For a version about to be recorded: works out its `change` from the state it was computed
   * from. The store calls it only for a version that keeps its change (a large state).
   */
  workOutChange?: () => Promise<RecordedChange>;
}

/** A version's change, as its version item keeps it (see `VersionRecord.change`). */
export interface RecordedChange {
  patch?: Json;
  jsonPatch?: PatchOperation[];
}

/** Documents of the non-thread commit scopes (API.md section 8). */
export type DocumentKind = 'run' | 'profile' | 'shared';

/** A run, profile or shared document: its latest state and its own version counter. */
export interface DocumentRecord {
  kind: DocumentKind;
  /** The run id, the user id, or `shared`. */
  id: string;
  version: number;
  state: Json;
  updatedAt: string | null;
}

/**
 * Which document a read addresses. A run belongs to a session, so it is named with its
 * session's scope; a profile belongs to a user of the tenant; the tenant has one shared
 * document.
 */
export type DocumentRef =
  | { readonly kind: 'run'; readonly scope: SessionScope; readonly id: string }
  | { readonly kind: 'profile'; readonly tenant: string; readonly id: string }
  | { readonly kind: 'shared'; readonly tenant: string };

/**
 * The session tip: the newest change in the session's log. Every change of versions, of the
 * head or of the decision lease claims the log's next place with a conditional write, so the
 * tip is also the session's lock.
 *
 * The newest change is a recorded version, or another change (an append, a head switch, a
 * decision's lease), or the fence of a delete that is erasing the session. Each carries where
 * the head is and which version it points at, so the state at the head is one read away. The
 * variants are exclusive; `kind` tells them apart, and a `switch` over it is checked by the
 * compiler.
 */
export type Tip = EmptyTip | VersionTip | EntryTip | ClosingTip;

/** A decision's hold on its session (API.md section 6): one decision at a time. */
export interface DecisionLease {
  /** The decision's own token: only its commit or its release ends the lease. */
  holder: string;
  /** Epoch ms after which the lease counts as gone (its holder died). */
  untilMs: number;
}

/** What every tip tells, whatever its change was. */
interface TipHead {
  /**
   * Which life of the session id this is: 0 until the session is deleted, then one more for
   * each life after a delete. Versions restart at 1 in each.
   */
  incarnation: number;
  /** The latest recorded version of the session (0: nothing written). */
  version: number;
  head: string;
  headVersion: number;
  headDepth: number;
  /** When a write last moved the session item's `updatedAt` forward itself; the change hook moves it after the others. */
  touchedAt: string | null;
  /** The session's agent (whose hierarchy may declare typed fields), carried on every tip. */
  agentId: string | null;
  /** The session's user (whose profile decisions and commits read), carried on every tip. */
  userId: string | null;
  /** The session's lifetime settings, carried on every change (absent: none, or nothing in the log yet). */
  lifetime?: Lifetime;
  /** When the session expires unless written again (epoch ms); absent or null: never, or not known from the log. */
  expiresAtMs?: number | null;
  /** The recorded version the tip is, when the read asked for its state (version tips only). */
  latest: VersionRecord | null;
  /** The lease of a decision in progress, or null. */
  lease: DecisionLease | null;
  /**
   * Until when (epoch seconds) the session may have WebSocket followers: a subscription puts
   * this on the log before it answers, every change carries it on, and a delete's fence takes it
   * into the next life. Absent or past: nobody follows, so the change hook looks for no one.
   */
  followersUntil?: number;
  /** The head as a node, enough to append under it (no message). */
  headNode: NodeRecord;
  /** The nodes the newest change made (found here by id until they are indexed), in order. */
  recentNodes: readonly NodeRecord[];
  /** A decision the newest change completed (its answer to replay for its id), or null. */
  recentDecision: DoneDecision | null;
  /** When the newest change was made, if its writer had lost a race for its place first (others may still be waiting). */
  contendedAt?: string;
  /**
   * Read from a replica (`FromReplica`) and kept as it answered: the log may have newer changes.
   * Only a put at the place after it confirms it; an answer without one is read again consistently.
   */
  replica?: true;
  /** The store's own reading of the newest change: opaque, handed back with a change based on it. */
  readonly log?: unknown;
}

/** A session with nothing written in this life: the head is the root, at version 0. */
export interface EmptyTip extends TipHead {
  kind: 'empty';
  latest: null;
  /**
   * Read with `sessionItem` (ports.ts): the log holds nothing and the session item is not there
   * either, so the session does not exist and nothing of it (a note, say) can be read.
   */
  absent?: true;
}

/** The newest change recorded a version: the latest one. */
export interface VersionTip extends TipHead {
  kind: 'version';
}

/** The newest change recorded no version: an append, a head switch, a decision's lease or its release. */
export interface EntryTip extends TipHead {
  kind: 'entry';
  latest: null;
}

/**
 * The session is being deleted: the newest change is the delete's fence, the session reads as
 * unknown (head at the root, version 0), and no write may be based on this tip (it is retried
 * until the delete is done, and then starts the session's next life).
 */
export interface ClosingTip extends TipHead {
  kind: 'closing';
  /** When the delete closed the session (ISO time); null when the fence does not say. */
  since: string | null;
  /**
   * Set when the session is closed because it expired (API.md section 12): the moment it did.
   * No delete has begun yet; the next write carries one out (session-delete.ts) and starts
   * the session's next life.
   */
  expiredAt?: string;
  /**
   * Set when the session is a copy not opened yet (another request's, session-copy.ts): it
   * reads as unknown, and once nothing of the copy was written for longer than a request runs
   * (`since`: its newest change), the next write erases it as a delete that stopped halfway.
   */
  unopened?: true;
  latest: null;
}

export const LINEAGE_WINDOW = 32;

/** A node's notes (docs/api.md, "a note beside a node"): key → value. */
export type NodeNotes = Record<string, Json>;

/** The answer of a note's put. */
export interface NoteResult {
  sessionId: string;
  node: string;
  key: string;
}

/** Where a note is among the session's notes (node, life, key: their order in the table). */
export interface NotePosition {
  nodeId: string;
  incarnation: number;
  key: string;
}

/** A note as the store reads it: its node, the session's life it was put in, its key and value. */
export interface NoteRecord extends NotePosition {
  value: Json;
  /** Bytes of its value as JSON text. */
  bytes: number;
}

/**
 * Notes as a store read them, in their order (`NotePosition`), from a position on: `cut` when the
 * read stopped, holding more than it was asked for, before the end of what it reads.
 */
export interface NotesRead {
  records: NoteRecord[];
  cut: boolean;
}

/** What a notes read starts after, and the bytes it stops after (it reads at least that much, or to the end). */
export interface NotesWindow {
  after?: NotePosition;
  bytes: number;
}

/**
 * What one note may hold: 256 KiB of UTF-8 JSON, as a message (one item of at most 400 KB in
 * DynamoDB, with its key).
 */
export const NOTE_LIMIT_BYTES = 256 * 1024;

/** The state limit of API.md section 4: 4 MiB of UTF-8 JSON. */
export const STATE_LIMIT_BYTES = 4 * 1024 * 1024;

/**
 * The largest body of a route that carries a state (state writes, commits, decisions): the
 * state limit and 1 MiB more for the JSON around it (whitespace, the commands or the trigger).
 * In AWS a body must also fit Lambda's 6 MB invocation payload, as JSON text inside the event.
 */
export const STATE_BODY_LIMIT_BYTES = STATE_LIMIT_BYTES + 1024 * 1024;

/**
 * The limit of a commit's run, profile and shared documents: each is one item written whole
 * in the commit's transaction (DynamoDB: 400 KB an item), so they stay at 256 KiB.
 */
export const DOCUMENT_LIMIT_BYTES = 256 * 1024;

export interface Page<T> {
  items: T[];
  /** Opaque cursor for the next page; absent on the last page. */
  next?: string;
}

/**
 * How much of the conversation an agent's worker is shown in a DecisionRequest: the whole path
 * root→head, or its last N messages (decide then reads only those).
 */
export type WorkerMessages = 'all' | { last: number };

/** The most messages `{"last": N}` may ask for; more is what "all" is for. */
export const MAX_LAST_MESSAGES = 10_000;

/** How an agent's worker is reached (API.md section 7). The secret never leaves the service. */
export interface WorkerRecord {
  url: string;
  secret: string | null;
  timeoutMs: number | null;
  /** How much of the path the worker is shown; absent: all of it. */
  messages?: { last: number };
}

/** A route of an agent's registration (API.md section 13): when the state matches `when`, `to` decides. */
export interface AgentRoute {
  /** A filter over the state's top-level fields, as the routing agent may read them. */
  when: JsonObject;
  /** An agent below the routing agent. */
  to: string;
}

/** A decision as `GET /v1/sessions/{sid}/decisions` lists it (API.md section 13). */
export interface DecisionSummary {
  decisionId: string;
  /** The agent whose worker decided (or, without a worker, whose `proposed` was taken). */
  agentId: string | null;
  /** The agent the decision started at, when routes or handoffs gave it to another; else null. */
  routedFrom: string | null;
  routing: RoutingHop[];
  /** The version the decision left the state at (its own, or the one it found when it changed nothing). */
  version: number;
  createdAt: string;
}

/** One hop of a decision from one agent to another: a route that matched, or a worker's handoff. */
export type RoutingHop =
  | { from: string; to: string; via: 'route'; index: number }
  | { from: string; to: string; via: 'handoff'; reason: string | null };

export interface AgentRecord {
  agentId: string;
  parentId: string | null;
  worker: WorkerRecord | null;
  /** Typed fields this agent declares; null when none. */
  stateFields: StateFields | null;
  /** Routes tried at each decision of its sessions; absent or null when none. */
  routes?: AgentRoute[] | null;
  /** The config a session starts with, until a version records another. */
  config: Json;
  /**
   * What the agent may do to the tenant's documents beyond its sessions: `{shared: "write"}`
   * lets a key limited to it write the `shared` document (API.md section 7). Only a key that
   * is not limited may set it. Null (or absent, as stored before it existed): nothing more.
   */
  documents?: AgentDocuments | null;
  /** What its new sessions live by (API.md section 12), over the deployment's defaults; absent or null: nothing. */
  lifetime?: AgentLifetime | null;
  createdAt: string;
  updatedAt: string;
}

/** An agent registration's `lifetime`: an idle expiry and a retention for its new sessions (no absolute time). */
export type AgentLifetime = Pick<LifetimeSettings, 'ttlSeconds' | 'retention'>;

/** An agent's grants on the tenant's documents (`AgentRecord.documents`). */
export interface AgentDocuments {
  shared?: 'write';
}

/**
 * What `decide` remembers of a decision id: failed attempts (run it again), or the answer to
 * replay for a decision that is done.
 */
export type DecisionRecord = FailedDecision | DoneDecision;

export interface FailedDecision {
  decisionId: string;
  status: 'failed';
  attempts: number;
  /** The life of the session it belongs to (`Tip.incarnation`). */
  incarnation?: number;
}

export interface DoneDecision {
  decisionId: string;
  status: 'done';
  attempts: number;
  /** The response body, less state and agent when those are in a version. */
  outcome: DecisionOutcome;
  /** The life of the session it belongs to (`Tip.incarnation`). */
  incarnation?: number;
}

export interface DecisionOutcome {
  /** The worker's answer; without its `state` when `decisionStateInVersion` (the version holds it). */
  decision: JsonObject;
  /** The answer's state is left out of `decision` and replayed from `version`, as the agent sees it. */
  decisionStateInVersion?: true;
  version: number;
  changed: boolean;
  head: string;
  /** State and agent of the answer when no version holds them (version 0). */
  state?: Json;
  agent?: Json;
  /**
   * The deciding agent, whose view `state` is: a replay goes only to a request deciding as it.
   * Absent in records made before it was kept (a week at most).
   */
  agentId?: string | null;
  /**
   * The agent whose worker decided when routes or handoffs passed the decision on (absent when
   * `agentId` decided), and the hops that led there.
   */
  decidedBy?: string | null;
  routing?: RoutingHop[];
}
