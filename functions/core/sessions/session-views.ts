import type { Json, JsonObject } from '../json/json.js';
import type { Caller, Schema } from '../model/fields.js';
import { NO_LIFETIME, type Retention } from '../model/lifetime.js';
import type { NodeNotes, NodeRecord, SessionMeta, SessionScope, Tip, VersionCause, VersionRecord } from '../model/model.js';
import { pointerOf } from '../model/tree.js';
import { visibleState } from '../write/write-target.js';

/**
 * What the session routes answer (API.md sections 2–5), built from stored records. With typed
 * fields, every state in them is the caller's view.
 */

/** A session as lists show it (`GET /v1/sessions`): its item, without what only its tip says. */
export interface SessionSummaryView {
  sessionId: string;
  agentId: string | null;
  userId: string | null;
  createdAt: string;
  updatedAt: string;
  metadata: JsonObject | null;
  /** Idle expiry in seconds (API.md section 12); null: none. */
  ttlSeconds: number | null;
  /** When the session expires unless written again; null: never. */
  expiresAt: string | null;
  retention: Retention | null;
}

export interface SessionView extends SessionSummaryView {
  head: string;
  version: number;
}

/**
 * A session item as a list entry. `expiresAtMs` is when the session expires, known exactly
 * from its tip where one was read, else what its item says.
 */
export function sessionSummaryView(meta: SessionMeta, expiresAtMs: number | null | undefined = meta.expiresAtMs): SessionSummaryView {
  const lifetime = meta.lifetime ?? NO_LIFETIME;
  return {
    sessionId: meta.sessionId,
    agentId: meta.agentId,
    userId: meta.userId,
    createdAt: meta.createdAt,
    updatedAt: meta.updatedAt,
    metadata: meta.metadata,
    ttlSeconds: lifetime.ttlSeconds,
    expiresAt: expiresAtMs === null || expiresAtMs === undefined ? null : new Date(expiresAtMs).toISOString(),
    retention: lifetime.retention,
  };
}

/** A session as `GET /v1/sessions/{sid}` answers: its item, with its tip's head, version and lifetime. */
export function sessionView(meta: SessionMeta, tip: Tip): SessionView {
  // The tip carries the session's lifetime once anything is in its log; before, the item says it exactly.
  const fromTip = tip.lifetime !== undefined;
  const summary = sessionSummaryView(fromTip ? { ...meta, lifetime: tip.lifetime } : meta, fromTip ? tip.expiresAtMs : meta.expiresAtMs);
  return { ...summary, head: tip.head, version: tip.version };
}

export interface StateView {
  sessionId: string;
  node: string;
  version: number;
  state: Json;
  agent: Json;
  /** When the version read was recorded; null for version 0. */
  updatedAt: string | null;
  /** With `?notes=true`: the node's notes (docs/api.md, "a note beside a node"). */
  notes?: NodeNotes;
  /** With `?notes=true`, when more notes are left than the answer carries: where `GET …/notes` goes on. */
  notesNext?: string;
}

export interface WriteResult {
  sessionId: string;
  node: string;
  version: number;
  prevVersion: number;
  state: Json;
  changed: boolean;
}

export interface NodeView {
  id: string;
  parentId: string | null;
  depth: number;
  role: string | null;
  stateVersion: number;
  createdAt: string;
}

/** A node as the tree lists it: no `createdAt`; `preview` only when asked for. */
export type TreeNodeView = Omit<NodeView, 'createdAt'> & { preview?: string | null };

export interface VersionView {
  version: number;
  node: string;
  prevVersion: number;
  cause: VersionCause;
  author: string | null;
  decisionId?: string;
  createdAt: string;
  state: Json;
  agent: Json;
}

export function emptyState(scope: SessionScope, node: string): StateView {
  return { sessionId: scope.sessionId, node, version: 0, state: null, agent: null, updatedAt: null };
}

export function stateView(
  scope: SessionScope,
  node: string,
  record: VersionRecord | null,
  schema: Schema | null,
  caller: Caller,
): StateView {
  const state = record?.state ?? null;
  return {
    sessionId: scope.sessionId,
    node,
    version: record?.version ?? 0,
    state: visibleState(schema, caller, state),
    agent: record?.agent ?? null,
    updatedAt: record?.createdAt ?? null,
  };
}

export function nodeView(node: NodeRecord, tip: Pick<Tip, 'head' | 'headVersion'>): NodeView {
  return {
    id: node.id,
    parentId: node.parentId,
    depth: node.depth,
    role: node.role,
    stateVersion: pointerOf(node, tip),
    createdAt: node.createdAt,
  };
}

/** A version as the caller may see it: with typed fields, only the fields it may read. */
export function versionView(record: VersionRecord, schema: Schema | null = null, caller: Caller = null): VersionView {
  return {
    version: record.version,
    node: record.node,
    prevVersion: record.prevVersion,
    cause: record.cause,
    author: record.author,
    ...(record.decisionId ? { decisionId: record.decisionId } : {}),
    createdAt: record.createdAt,
    state: visibleState(schema, caller, record.state),
    agent: record.agent,
  };
}
