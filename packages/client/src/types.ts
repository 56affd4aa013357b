/**
 * The wire types of the agentstate HTTP API v1 (docs/api.md), written out so that the client
 * needs nothing from the server's code. Every request and response of every route is here.
 */

/** A JSON value, as it travels on the wire. */
export type Json = null | boolean | number | string | Json[] | { [key: string]: Json };
/** A JSON object. */
export type JsonObject = { [key: string]: Json };

/* ------------------------------------------------------------------ lists */

/** Query of a paginated list (`limit` 1–500, default 50; `cursor` from the previous `next`). */
export interface PageQuery {
  limit?: number;
  cursor?: string;
}

/** Query of `GET /v1/sessions`: a page, optionally only ids that start with `prefix`. */
export interface SessionListQuery extends PageQuery {
  /** Pages may then hold fewer than `limit` sessions, even none, while `next` is present. */
  prefix?: string;
  /** Only this user's sessions. One filter at a time: `userId`, `agentId` or `metadata`. */
  userId?: string;
  /** Only this agent's sessions. */
  agentId?: string;
  /**
   * Only sessions whose metadata holds this string at this top-level key (`{channel: "web"}`
   * sends `?metadata.channel=web`); one key.
   */
  metadata?: Record<string, string>;
}

/* ------------------------------------------------------------------ health */

/** `GET /health` */
export interface Health {
  ok: boolean;
}

/* ------------------------------------------------------------------ sessions */

/** `POST /v1/sessions` body; every member optional. */
export interface CreateSessionRequest {
  /** Generated (UUIDv7) when absent. */
  sessionId?: string;
  agentId?: string | null;
  userId?: string | null;
  /** Free-form JSON object, at most 16 KiB. */
  metadata?: JsonObject | null;
}

/** `POST /v1/sessions/{sid}/copy`: the path root → `node` (default: the head), or the whole tree. */
export interface CopySessionRequest {
  /** The copy's id; generated when absent. `409 session_exists` when taken. */
  sessionId?: string;
  /** The copy holds the path root → node and its head is node. */
  node?: string;
  /** The copy holds every node, with the source's head (not with `node`). */
  tree?: boolean;
  /** The copy's metadata; the source's when absent. */
  metadata?: JsonObject | null;
}

/** `GET /v1/sessions/{sid}`, `POST /v1/sessions` (201). */
export interface Session {
  sessionId: string;
  agentId: string | null;
  userId: string | null;
  metadata: JsonObject | null;
  createdAt: string;
  /** Last activity; may trail the latest state write by a moment. */
  updatedAt: string;
  /** The current head node (`root` for a new session). */
  head: string;
  /** The latest recorded version (0: none); always exact. */
  version: number;
  /** Idle expiry in seconds: the session expires this long after its last write (null: none). */
  ttlSeconds: number | null;
  /** When the session expires unless written again (null: never). */
  expiresAt: string | null;
  /** Which versions the session keeps (null: every one). */
  retention: Retention | null;
}

/** Which versions a session keeps: the newest `keepVersions`, and those younger than `keepDays`. */
export interface Retention {
  keepVersions?: number;
  keepDays?: number;
}

/** `PATCH /v1/sessions/{sid}`: each field given changes; `null` removes a setting (the session then keeps it forever). */
export interface UpdateSessionRequest {
  /** Merge-patched into the session's metadata (RFC 7396). */
  metadata?: JsonObject | null;
  /**
   * The session's user (`null`: none): whose profile it reads and writes, whose erasure erases it,
   * which `?userId=` list shows it. Only a key not limited to agents may send it (`403` otherwise).
   */
  userId?: string | null;
  /** The session's agent (`null`: none). Only a key not limited to agents may send it (`403` otherwise). */
  agentId?: string | null;
  ttlSeconds?: number | null;
  expiresAt?: string | null;
  retention?: Retention | null;
}

/** An entry of `GET /v1/sessions`: no `head` or `version` (read the session for those). */
export type SessionSummary = Omit<Session, 'head' | 'version'>;

/** `GET /v1/sessions` */
export interface SessionList {
  sessions: SessionSummary[];
  /** Present while there may be more; pass back as `cursor`. */
  next?: string;
}

/* ------------------------------------------------------------------ message tree */

/** A message: any JSON object with a non-empty string `role`; `id` optional (generated). */
export interface Message {
  role: string;
  id?: string;
  content?: Json;
  [member: string]: Json | undefined;
}

/** A message as stored: `id` and `parentId` set by the service. */
export interface StoredMessage extends Message {
  id: string;
  parentId: string;
}

/** `POST /v1/sessions/{sid}/messages` body. */
export interface AppendMessagesRequest {
  /** 1–50 messages, appended in order as one chain. */
  messages: Message[];
  /** The node to append under; default: the head. */
  parentId?: string;
  /** A JSON Merge Patch of the new head's state, written with the messages (not with `replaceState`). */
  state?: Json;
  /** The new head's whole state, written with the messages (not with `state`). */
  replaceState?: Json;
}

/** A node of the message tree (the API's node object). */
export interface MessageNode {
  id: string;
  /** Null only for `root`. */
  parentId: string | null;
  depth: number;
  /** The message's `role`; null for `root`. */
  role: string | null;
  /** The version the node points at. */
  stateVersion: number;
  createdAt: string;
}

/** `POST /v1/sessions/{sid}/messages` (201). */
export interface AppendMessagesResult {
  /** Every message of the request, existing ones included, in order. */
  nodes: MessageNode[];
  head: string;
  /** With `state` or `replaceState`: the version the new head points at. */
  version?: number;
  /** With `state` or `replaceState`: the new head's state. */
  state?: Json;
  /** With `state` or `replaceState`: whether a version was recorded. */
  changed?: boolean;
}

/** `GET /v1/sessions/{sid}/messages?node=` */
export interface MessagePath {
  /** Root → node, oldest first, root excluded. */
  messages: StoredMessage[];
  /** Node ids from `root` to the node, both included; with `last`, the ids of `messages` (`root` first when nothing is omitted). */
  ancestry: string[];
  /** With `last`: how many messages of the path come before `messages`. */
  omitted?: number;
}

/** A node of `GET /v1/sessions/{sid}/tree` (no `createdAt`, no message body). */
export type TreeNode = Omit<MessageNode, 'createdAt'> & {
  /** With `preview: true`: a one-line snippet of the message (≤ 120 characters); null for `root`. */
  preview?: string | null;
};

/** Query of `GET /v1/sessions/{sid}/tree`. */
export interface TreeQuery {
  /** Adds each node's `preview`. */
  preview?: boolean;
  /** Adds every node's notes (`notes`, by node id). */
  notes?: boolean;
}

/** Query of `GET /v1/sessions/{sid}/nodes`. */
export interface NodesQuery {
  /** 1–500 (the server's default: 50). */
  limit?: number;
  /** Only nodes whose ids sort before this id (the first page; not with `cursor`). */
  before?: string;
  /** The `next` of the page before. */
  cursor?: string;
}

/** `GET /v1/sessions/{sid}/nodes`: one page of message nodes by id, from the last. */
export interface NodePage {
  head: string;
  /** The session's newest version when the page was read. */
  version: number;
  /** By id, from the last (`root` is not one). */
  nodes: MessageNode[];
  /** Present while more nodes are left: pass it as `cursor`. */
  next?: string;
}

/** A node's notes (`PUT /v1/sessions/{sid}/nodes/{nid}/notes/{key}`): key → value. */
export type NodeNotes = Record<string, Json>;

/** `PUT /v1/sessions/{sid}/nodes/{nid}/notes/{key}` (200). */
export interface NoteResult {
  sessionId: string;
  node: string;
  key: string;
}

/** `GET /v1/sessions/{sid}/tree` */
export interface Tree {
  head: string;
  /** Ordered by depth, then creation time, then id (`root` first). */
  nodes: TreeNode[];
  /**
   * Set by the server when more nodes are left than one answer holds (about 45,000; docs/api.md,
   * "the whole tree"). This client's `tree.get` reads the rest before it answers, so what it
   * returns holds every node and no `next`.
   */
  next?: string;
  /** With `notes: true`: the notes of each node that has any, by node id. */
  notes?: Record<string, NodeNotes>;
  /**
   * Set by the server when more notes are left than one answer holds (docs/api.md, "notes in
   * parts"). This client's methods read the rest (`tree.notes`) before they answer, so what they
   * return holds every note and no `notesNext`.
   */
  notesNext?: string;
}

/** Query of `GET /v1/sessions/{sid}/notes`: the notes of some nodes, or of all, in parts. */
export interface NotesQuery {
  /** Up to 200 node ids; default: every node. */
  nodes?: readonly string[];
  /** A read's `notesNext`, or the previous part's `next`. */
  cursor?: string;
}

/** `GET /v1/sessions/{sid}/notes`: one part, by node id then key, in that order. */
export interface NotePage {
  notes: Record<string, NodeNotes>;
  next?: string;
}

/** `PUT /v1/sessions/{sid}/head` (200). */
export interface HeadResult {
  head: string;
}

/* ------------------------------------------------------------------ state and versions */

/** `GET /v1/sessions/{sid}/state` query: at most one of the two. */
export interface StateQuery {
  /** Read at this node; default: the head. */
  node?: string;
  /** Read this historical version (time travel). */
  version?: number;
  /** Adds the node's notes (`notes`); not with `version`. */
  notes?: boolean;
}

/** `GET /v1/sessions/{sid}/state` (`ETag: "<version>"`). */
export interface StateView<S = Json> {
  sessionId: string;
  /** The node read; with `version`, the node that version is anchored at. */
  node: string;
  /** 0 when nothing was written there. */
  version: number;
  /** `null` at version 0. */
  state: S | null;
  agent: Json;
  /** When that version was recorded; null for version 0. */
  updatedAt: string | null;
  /** With `notes: true`: the node's notes. */
  notes?: NodeNotes /**
   * Set by the server when more notes are left than one answer holds (docs/api.md, "notes in
   * parts"). This client's methods read the rest (`tree.notes`) before they answer, so what they
   * return holds every note and no `notesNext`.
   */;
  notesNext?: string;
}

/** `PATCH` / `PUT /v1/sessions/{sid}/state` (200, `ETag`). */
export interface WriteResult<S = Json> {
  sessionId: string;
  /** The node written at. */
  node: string;
  /** The new version; when unchanged, the version the node points at. */
  version: number;
  /** The version the node pointed at before; equal to `version` when unchanged. */
  prevVersion: number;
  /** The full state after the write. */
  state: S;
  /** False when the write changed nothing (no version recorded). */
  changed: boolean;
}

export type VersionCause = 'patch' | 'replace' | 'decide' | 'commit';

/** One recorded version: `GET /v1/sessions/{sid}/versions/{v}`. */
export interface Version<S = Json> {
  version: number;
  /** The node the write was made at. */
  node: string;
  /** The version that node pointed at before (0: none). */
  prevVersion: number;
  cause: VersionCause;
  /** The request's `X-Agent-Id`, or null. */
  author: string | null;
  /** Present only for versions recorded by a decision. */
  decisionId?: string;
  createdAt: string;
  /** The full state of this version. */
  state: S;
  agent: Json;
}

/** `GET /v1/sessions/{sid}/versions` query. */
export interface VersionsQuery extends PageQuery {
  /** Only the lineage of this node's current state. */
  node?: string;
  /**
   * Up to 200 node ids: the page also carries their notes (`notes`), read in the same request.
   * Not with `node`.
   */
  notesOf?: readonly string[];
}

/** `GET /v1/sessions/{sid}/versions`, newest first. */
export interface VersionList<S = Json> {
  versions: Version<S>[];
  next?: string;
  /**
   * Present when the session's retention pruned history (docs/api.md section 12): versions
   * older than `before` may be missing from this list; those a node points at are still in it.
   */
  pruned?: { before: number };
  /** With `notesOf`: the notes of each named node that has any, by node id. */
  notes?: Record<string, NodeNotes> /**
   * Set by the server when more notes are left than one answer holds (docs/api.md, "notes in
   * parts"). This client's methods read the rest (`tree.notes`) before they answer, so what they
   * return holds every note and no `notesNext`.
   */;
  notesNext?: string;
}

/* ------------------------------------------------------------------ agents */

/** `private` (the declaring agent only), `public` (the whole hierarchy), or a list. */
export type FieldScope = 'private' | 'public' | { agents: string[] };

/** A typed state field (docs/api.md section 6). */
export interface FieldDeclaration {
  type: 'string' | 'number' | 'boolean' | 'date' | 'json';
  description?: string;
  updateRules?: string;
  /** @default 'private' */
  read?: FieldScope;
  /** @default 'private' */
  write?: FieldScope;
  /** Stored values that no longer fit a changed type read as absent. */
  migrate?: 'clear';
}

/** `PUT /v1/agents/{agentId}` body; the whole agent is replaced. */
export interface PutAgentRequest {
  /** The agent above this one; must exist. */
  parentId?: string | null;
  worker?: {
    /** `https://…`; locally also `http://` to loopback and `module:<path>`; `lambda:<arn>`. */
    url: string;
    /** Signs every request to the worker (`X-AgentState-Signature`). */
    secret?: string | null;
    /** 1–25000, default 10000. */
    timeoutMs?: number | null;
    /** How much of the conversation a decision shows the worker: `"all"` (default) or its last N messages. */
    messages?: 'all' | { last: number } | null;
  } | null;
  /** The config a session of this agent starts with (≤ 64 KiB). */
  config?: Json;
  stateFields?: Record<string, FieldDeclaration> | null;
  /**
   * `{"shared": "write"}`: a key limited to this agent may write the tenant's `shared` document.
   * Only a key that is not limited may grant it; a limited key's registration keeps what was there.
   */
  documents?: { shared?: 'write' } | null;
  /**
   * Tried in order at each decision of this agent's sessions: the first whose `when` matches the
   * state (as this agent may read it) hands the decision to `to`, an agent below this one.
   */
  routes?: AgentRoute[] | null;
  /** What the agent's new sessions live by: an idle expiry and a retention, over the deployment's defaults. */
  lifetime?: AgentLifetime | null;
}

/** An agent's `lifetime` (docs/api.md §12): `null` in a field says "none" over the deployment's default. */
export interface AgentLifetime {
  ttlSeconds?: number | null;
  retention?: Retention | null;
}

/** One hop of a decision from one agent to another: a route that matched (its index), or a worker's handoff. */
export type RoutingHop =
  | { from: string; to: string; via: 'route'; index: number }
  | { from: string; to: string; via: 'handoff'; reason: string | null };

/** A decision as `GET /v1/sessions/{sid}/decisions` lists it: who decided, and how it got there. */
export interface DecisionSummary {
  decisionId: string;
  /** The agent whose worker decided. */
  agentId: string | null;
  /** The agent the decision started at, when routes or handoffs gave it to another; else null. */
  routedFrom: string | null;
  routing: RoutingHop[];
  /** The version the decision left the state at. */
  version: number;
  createdAt: string;
}

/** `GET /v1/sessions/{sid}/decisions`, newest first. */
export interface DecisionList {
  decisions: DecisionSummary[];
  next?: string;
}

/** A route of an agent: a filter over the state's top-level fields, and the agent it hands decisions to. */
export interface AgentRoute {
  /** Section 10's filter operators, plus `{"$exists": true | false}`. */
  when: JsonObject;
  to: string;
}

/** An agent as the API returns it: never the secret, only whether one is set. */
export interface Agent {
  agentId: string;
  parentId: string | null;
  /** `messages` is there when the worker is shown only the last messages of the path. */
  worker: { url: string; timeoutMs: number | null; hasSecret: boolean; messages?: { last: number } } | null;
  config: Json;
  /** As declared, with `read` and `write` filled in. */
  stateFields: Record<string, FieldDeclaration> | null;
  /** The agent's grants on the tenant's documents; null when none. */
  documents: { shared?: 'write' } | null;
  /** Present only when the agent declares routes. */
  routes?: AgentRoute[];
  /** What the agent's new sessions live by; null when nothing. */
  lifetime: AgentLifetime | null;
  createdAt: string;
  updatedAt: string;
}

/** `GET /v1/agents`, ordered by id. */
export interface AgentList {
  agents: Agent[];
  next?: string;
}

/* ------------------------------------------------------------------ decide */

/** The trigger of a decision: passed to the worker verbatim. */
export interface Trigger {
  type: string;
  /** For `type: "client.messages"`: appended to the tree first (1–50). */
  messages?: Message[];
  [member: string]: unknown;
}

/** `POST /v1/sessions/{sid}/decide` body. */
export interface DecideRequest {
  trigger: Trigger;
  /** Makes the decision idempotent; generated when absent. */
  decisionId?: string;
  /** Default: the session's agent. */
  agentId?: string;
  turnId?: string;
  /** Where the trigger's messages go (a fork); default: the head. */
  parentId?: string;
  /** Passed to the worker; the decision itself when the agent has no worker. */
  proposed?: JsonObject;
  /** Typed fields seeded into the state the worker sees, this request only. */
  stateOverlay?: JsonObject;
}

/** `POST /v1/sessions/{sid}/decide` (200). */
export interface DecideResult<S = Json> {
  decisionId: string;
  /** The worker's answer as it gave it. */
  decision: JsonObject;
  state: S;
  agent: Json;
  version: number;
  changed: boolean;
  head: string;
}

/** What agentstate sends a worker for one decision (snake_case). */
export interface DecisionRequest<S = Json> {
  session_id: string;
  decision_id: string;
  /** The deciding agent: the session's (or the request's), or the one routes or handoffs led to. */
  agent_id: string | null;
  /** The agent the decision started at, when another decides; else null. */
  routed_from: string | null;
  /** The hops that led to `agent_id`, in order; empty when the agent it started at decides. */
  routing: RoutingHop[];
  turn_id: string | null;
  trigger: Trigger;
  proposed: JsonObject;
  /** The state at the decision's node (only the fields the agent may read). */
  state: S;
  /** The agent config at the decision's node. */
  agent: Json;
  /** The path root → node; with the agent's `worker.messages` at `{last: N}`, its last N messages. */
  messages: StoredMessage[];
  /** The ids of the path's nodes from `root`; only those of `messages` when the path was cut. */
  ancestry: string[];
  /**
   * With `worker.messages` at `{last: N}`: how many messages of the path came before
   * `messages` (0 when it is the whole path). Absent when the worker is shown every message.
   */
  messages_omitted?: number;
  /** Tries of this decision id so far, this one included. */
  attempts: number;
  /** The version the state was read at. */
  version: number;
  head: string;
  /** The session user's profile document; null when none. */
  profile: Json;
  /** The tenant's shared document; null when none. */
  shared: Json;
}

/**
 * What a worker answers; every member optional. `state`: a value overwrites (`{}` clears),
 * omitted or null keeps. `agent`: replaces the config. `messages`: appended under the node.
 */
export interface DecisionResponse<S = Json> {
  state?: S | null;
  agent?: Json;
  messages?: Message[];
  [member: string]: unknown;
}

/**
 * What a worker answers instead of a decision to pass the same decision to another agent of the
 * session's hierarchy (API.md section 13): nothing else may come with it; 3 hops in all, no loops.
 */
export interface DecisionHandoff {
  handoff: { agentId: string; reason?: string };
}

/* ------------------------------------------------------------------ commits */

export type CommandScope = 'thread' | 'run' | 'profile' | 'shared';
export type MergePolicy = 'disjoint' | 'commutative' | 'exclusive';

/** One keyed command of a commit: a `set` or a `remove`. */
export type Command =
  | { key: string; scope: CommandScope; merge: MergePolicy; set: Json; remove?: never }
  | { key: string; scope: CommandScope; merge: MergePolicy; remove: true; set?: never };

/** `POST /v1/sessions/{sid}/commits` body. */
export interface CommitRequest {
  /** 1–100 commands, applied atomically. */
  commands: Command[];
  /** Required when a command has `scope: "run"`. */
  runId?: string;
  /** The thread state at the node must be at this version, else `412 version_mismatch`. */
  expectedVersion?: number;
}

/** A run, profile or shared document. */
export interface DocumentView {
  /** The document's own version; 0 when never written. */
  version: number;
  state: Json;
  updatedAt: string | null;
}

/** `POST /v1/sessions/{sid}/commits` (200, `ETag` = the thread version). */
export interface CommitResult<S = Json> {
  sessionId: string;
  node: string;
  /** The thread's version after the commit (unchanged when no thread key changed). */
  version: number;
  state: S;
  changed: boolean;
  run?: DocumentView & { runId: string };
  profile?: DocumentView & { userId: string };
  shared?: DocumentView;
}

/** `GET /v1/sessions/{sid}/runs/{runId}/state` */
export interface RunDocument extends DocumentView {
  sessionId: string;
  runId: string;
}

/** `GET /v1/profiles/{userId}/state` */
export interface ProfileDocument extends DocumentView {
  userId: string;
}

/* ------------------------------------------------------------------ change events */

/** A change event (API.md section 9): one per recorded version, same `id` on redelivery. */
/** One RFC 6902 operation (`PATCH` with `application/json-patch+json`, and large states' events). */
export type JsonPatchOperation =
  | { op: 'add' | 'replace' | 'test'; path: string; value: Json }
  | { op: 'remove'; path: string }
  | { op: 'move' | 'copy'; path: string; from: string };

export interface StateChangedEvent<S = Json> {
  /** `<sessionId>:<version>` */
  id: string;
  type: 'state.changed';
  sessionId: string;
  node: string;
  version: number;
  prevVersion: number;
  cause: VersionCause;
  author: string | null;
  decisionId: string | null;
  /** The state recorded by this version; left out when `truncated` and for a `mode: "patch"` subscription. */
  next?: S | null;
  /** The state of `prevVersion` (null for prevVersion 0); left out as `next` is. */
  prev?: S | null;
  /** The RFC 7396 merge patch turning `prev` into `next`; left out when over 64 KiB or when no merge patch can. */
  patch?: Json;
  /** The agent config; left out only when the event would not fit a channel otherwise. */
  agent?: Json;
  occurredAt: string;
  /** Set when `next` and `prev` together pass 64 KiB (or the event would not fit a channel): they are left out. */
  truncated?: true;
  /** On events of large states: the same change as RFC 6902 operations; left out like `patch`. */
  jsonPatch?: JsonPatchOperation[];
  /**
   * Only on an event sent as an agent (a webhook or subscription with `agentId`) when a stored
   * state no longer fits its declared types: `next` and `prev` are then null. `code` is what a
   * read of that state answers (`conflict`); `fields` lists `{field, problem}` (empty when the
   * state is not an object of fields).
   */
  viewError?: { code: string; fields: unknown[] };
}

/**
 * The event of a commit's run, profile or shared document version (`run.changed`,
 * `profile.changed`, `shared.changed`). It goes where the events of the session that made
 * the commit go.
 */
export interface DocumentChangedEvent<S = Json> {
  /** `run/<sessionId>/<runId>/<version>`, `profile/<userId>/<version>` or `shared/<version>` */
  id: string;
  type: 'run.changed' | 'profile.changed' | 'shared.changed';
  scope: 'run' | 'profile' | 'shared';
  /** The session whose commit made the change. */
  sessionId: string;
  runId?: string;
  userId?: string;
  /** The document's own version. */
  version: number;
  prevVersion: number;
  cause: 'commit';
  author: string | null;
  next?: S | null;
  prev?: S | null;
  patch?: Json;
  occurredAt: string;
  truncated?: true;
}

/**
 * `memory.changed` (docs/api.md §7c): one per put or delete of a memory item. It goes to
 * webhooks registered without a session, WebSocket connections following the namespace (or
 * one above it), and the event bus.
 */
export interface MemoryChangedEvent<V = JsonObject> {
  /** `memory:<namespace path>/<key>:<createdAt ms>:<version>` */
  id: string;
  type: 'memory.changed';
  namespace: string[];
  key: string;
  /** The item's version after the change; a delete's is the one after the last put. */
  version: number;
  prevVersion: number;
  cause: 'put' | 'delete';
  author: string | null;
  /** The value after the change (null for a delete); left out when `truncated` and in `mode: "patch"`. */
  next?: V | null;
  /** The value of `prevVersion` (null for a new item); left out as `next` is. */
  prev?: V | null;
  /** The RFC 7396 merge patch turning `prev` into `next` (null for a delete). */
  patch?: Json;
  /** When this item (this life of the key) was created. */
  createdAt: string;
  expiresAt?: string;
  occurredAt: string;
  truncated?: true;
}

/**
 * A session expired (docs/api.md §12): sent when its expiry is carried out, by the first write
 * after it or by the sweep of a session nobody wrote again (within 48 h). The session has read as
 * unknown since `expiredAt`.
 */
export interface SessionExpiredEvent {
  /** `expired/<sessionId>/<life>`. */
  id: string;
  type: 'session.expired';
  sessionId: string;
  /** The last version of the life that expired (0: none). */
  version: number;
  agentId: string | null;
  userId: string | null;
  expiredAt: string;
  occurredAt: string;
}

/**
 * A user's erasure is done (docs/api.md §12): their sessions, profile and memory items are no
 * longer stored. Of no one session (`sessionId` is empty): sent to webhooks registered without
 * a session and to the event bus.
 */
export interface UserErasedEvent {
  /** `erased/<erasureId>`. */
  id: string;
  type: 'user.erased';
  sessionId: '';
  erasureId: string;
  userId: string;
  sessions: number;
  memoryItems: number;
  documents: number;
  occurredAt: string;
}

/** Every event a webhook, the WebSocket or the event bus carries. */
export type ChangeEvent = StateChangedEvent | DocumentChangedEvent | SessionExpiredEvent | UserErasedEvent | MemoryChangedEvent;

/** `DELETE /v1/users/{userId}` (202). */
export interface ErasureStarted {
  erasureId: string;
}

/** `GET /v1/erasures/{erasureId}`: how far an erasure got, and the counts of what it erased. */
export interface Erasure {
  erasureId: string;
  status: 'running' | 'done';
  sessions: number;
  memoryItems: number;
  /** The user's profile: 1 when there was one. */
  documents: number;
  createdAt: string;
  finishedAt?: string;
}

/** `POST /v1/webhooks` body. */
export interface CreateWebhookRequest {
  /** `https://…` (locally also `http://` to loopback). */
  url: string;
  /** Signs deliveries (`X-AgentState-Signature`). */
  secret?: string | null;
  /** Only this session's events; default every session of the tenant. */
  sessionId?: string | null;
  /**
   * Events as this agent may see them (only its readable typed fields); absent or null: whole
   * events. Required for a key limited to agents, and one of its agents.
   */
  agentId?: string | null;
}

/** A webhook; never the secret. */
export interface Webhook {
  id: string;
  url: string;
  sessionId: string | null;
  /** Present only for a webhook registered with an agent. */
  agentId?: string;
  hasSecret: boolean;
  createdAt: string;
}

/** `GET /v1/webhooks` */
export interface WebhookList {
  webhooks: Webhook[];
  next?: string;
}

/** An event a webhook did not take, kept until replayed. */
export interface DeadLetter {
  eventId: string;
  sessionId: string;
  version: number;
  attempts: number;
  lastError: string;
  firstFailedAt: string;
  lastFailedAt: string;
  /** The event as it was delivered (as the webhook's agent saw it, when it has one). */
  event: ChangeEvent;
}

/** `GET /v1/webhooks/{id}/dead-letters` */
export interface DeadLetterList {
  deadLetters: DeadLetter[];
  next?: string;
}

/** `POST /v1/webhooks/{id}/dead-letters/replay` (200). */
export interface ReplayResult {
  delivered: number;
  failed: { eventId: string; error: string } | null;
  remaining: boolean;
}

/* ------------------------------------------------------------------ memory items */

/** A memory item (docs/api.md §7c). `V`: its value (raw JSON here; decoded on `client.memory()`). */
export interface MemoryItem<V = JsonObject> {
  /** 1–8 ids, `["users", "u1", "facts"]`. */
  namespace: string[];
  key: string;
  /** A JSON object of up to 256 KiB encoded. */
  value: V;
  /** 1, 2, 3, … per write; a deleted or expired item starts again at 1. */
  version: number;
  createdAt: string;
  updatedAt: string;
  /** Only for an item put with `ttlSeconds`. */
  expiresAt?: string;
  /** The item's embedding as stored (32-bit floats), only with `includeEmbedding`. */
  embedding?: number[];
  /** In a search with `vector`: the cosine of the item's embedding and the vector (1 = same direction). */
  score?: number;
}

/** `PUT /v1/memory/{namespace…}/{key}` body. */
export interface PutMemoryRequest {
  value: JsonObject;
  /** The item expires this many seconds after the put (1 s – 10 years); absent: never. */
  ttlSeconds?: number;
  /**
   * Your own embedding of the item, 1–4,096 finite numbers (not all zero), for searches with
   * `vector`; the items of one namespace share their dimensions. Not part of the value.
   */
  embedding?: number[];
}

/** A filter operand set on one top-level field (docs/api.md §7c). */
export interface MemoryOperators<T = Json> {
  $eq?: T;
  $ne?: T;
  $gt?: T;
  $gte?: T;
  $lt?: T;
  $lte?: T;
  /** At most 100 values. */
  $in?: T[];
}

/** `POST /v1/memory/search` body. */
export interface MemorySearchRequest {
  /** 0–8 ids, matched id by id; default `[]` (every namespace the key may read). */
  namespacePrefix?: string[];
  /** Top-level fields, each a value (equality) or operators; all must match. */
  filter?: Record<string, Json | MemoryOperators>;
  /** 1–500, default 50. */
  limit?: number;
  /** Not with `vector`. */
  cursor?: string;
  /**
   * Ranks the items whose embedding has this many numbers by cosine similarity, highest first,
   * each with `score`; items without one are left out. One page: the best `limit`, no `next`.
   */
  vector?: number[];
  /** Each item with its `embedding`. */
  includeEmbedding?: boolean;
}

/** `POST /v1/memory/search` answer: newest first, or by `score` with `vector`. */
export interface MemorySearchResult<V = JsonObject> {
  items: MemoryItem<V>[];
  next?: string;
}

/** `GET /v1/memory?prefix=&maxDepth=` query. */
export interface NamespaceListQuery extends PageQuery {
  /** 0–8 ids; default every namespace. */
  prefix?: string[];
  /** 1–8: cut each namespace to this many ids (each cut listed once). */
  maxDepth?: number;
}

/** `GET /v1/memory` answer, in path order. */
export interface NamespaceList {
  namespaces: string[][];
  next?: string;
}

/** `GET /v1/memory/versions?namespace=&key=` answer: the item, then the versions it replaced. */
export interface MemoryVersionList<V = JsonObject> {
  versions: MemoryItem<V>[];
  next?: string;
}

/** Preconditions of a memory put or delete. */
export interface MemoryWriteOptions {
  /** `If-Match`: only if the item is at this version (`'*'`: exists), else `412 version_mismatch`. */
  ifMatch?: number | '*';
  /** `If-None-Match: *` (put only): only if no item exists (create only). */
  ifNoneMatch?: '*';
}

/* ------------------------------------------------------------------ errors */

/** Every error code the API answers (docs/api.md section 9, API.md section 10). */
export type ErrorCode =
  | 'invalid_json'
  | 'invalid_request'
  | 'invalid_id'
  | 'unauthorized'
  | 'forbidden'
  | 'field_forbidden'
  | 'not_found'
  | 'session_not_found'
  | 'node_not_found'
  | 'version_not_found'
  | 'agent_not_found'
  | 'session_exists'
  | 'node_exists'
  | 'decision_in_progress'
  | 'exclusive_conflict'
  | 'patch_conflict'
  | 'conflict'
  | 'version_pruned'
  | 'version_mismatch'
  | 'state_too_large'
  | 'payload_too_large'
  | 'unsupported_media_type'
  | 'validation_failed'
  | 'unknown_field'
  | 'idempotency_key_reused'
  | 'throttled'
  | 'internal'
  | 'worker_failed'
  | 'unavailable'
  | 'worker_timeout';

/** Codes the client itself raises, when no (usable) answer came from the server. */
export type ClientErrorCode =
  /** The request could not be sent or its answer not read (after retries). */
  | 'network_error'
  /** No answer within the request's `timeoutMs` (after retries). */
  | 'timeout'
  /** A value cannot be encoded or decoded by the codec (`CodecError`). */
  | 'codec_error'
  /** A typed key's stored or given value does not match its schema (`SchemaMismatchError`). */
  | 'schema_mismatch'
  /** The live connection failed for good (e.g. its key was refused). */
  | 'live_error'
  /** An error answer that is not a problem document (e.g. from a proxy). */
  | 'http_error';

/** An RFC 9457 problem document as the API answers it. */
export interface Problem {
  type: string;
  title: string;
  status: number;
  code: ErrorCode | (string & {});
  detail: string;
  [member: string]: unknown;
}
