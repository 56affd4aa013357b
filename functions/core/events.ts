import { AgentStateError } from './errors.js';
import { type Schema, viewOf } from './fields.js';
import { type Json, stringifyJson } from './json.js';
import type { DocumentKind, VersionRecord } from './model.js';

/**
 * Change events (API.md section 9): every recorded version produces one `state.changed`
 * event. The event is built from the version as it was recorded, so it is the same on every
 * redelivery, and its `id` is what receivers deduplicate by. Commits' documents add their own
 * events (`DocumentChangedEvent`, below).
 */

export const STATE_CHANGED = 'state.changed';

export interface StateChangedEvent {
  /** `<sessionId>:<version>`: stable across redeliveries. */
  id: string;
  type: typeof STATE_CHANGED;
  sessionId: string;
  node: string;
  version: number;
  prevVersion: number;
  cause: VersionRecord['cause'];
  author: string | null;
  decisionId: string | null;
  /** The state recorded by this version. */
  next: Json;
  /** The state of `prevVersion`; null for prevVersion 0 (and when that version is gone). */
  prev: Json;
  agent: Json;
  /** When the version was recorded. */
  occurredAt: string;
  /**
   * Present (true) only on channels with a message size limit (EventBridge, WebSocket) when
   * the full event does not fit: `next`, `prev` and `agent` are then null, and the version is
   * one `GET /v1/sessions/{sid}/versions/{version}` away.
   */
  truncated?: true;
  /**
   * Present only on an event filtered for an agent (a webhook or WebSocket subscription with
   * `agentId`) when a stored value no longer fits its declared type: `next` and `prev` are
   * then null, and `viewError` says why, as a read of that state would (`409 conflict`).
   */
  viewError?: ViewError;
}

/** Why an agent's view of an event's states could not be made. */
export interface ViewError {
  /** The error code a read of that state answers with (`conflict`). */
  code: string;
  /** The fields that do not fit, `[{field, problem}]`; empty when the state is not an object of fields. */
  fields: unknown[];
}

/**
 * A recorded version of a session, as the change stream reports it. `version.sessionAgentId`
 * is the session's agent when the version was recorded (absent or null: none), which decides
 * the typed fields an agent-filtered event is cut to.
 */
export interface RecordedVersion {
  tenant: string;
  sessionId: string;
  version: Omit<VersionRecord, 'lineage'>;
  /**
   * True when the write that recorded the version also moved the session's activity
   * (`updatedAt`, the list order); otherwise the change hook moves it.
   */
  activityMoved?: boolean;
}

export function eventId(sessionId: string, version: number): string {
  return `${sessionId}:${version}`;
}

/**
 * The run, profile and shared documents of commits (API.md section 8) have versions of their
 * own, and each recorded one produces one event of its scope's type. They are not thread
 * versions, so they are not `state.changed`: a receiver that folds a session's versions can
 * tell them apart by `type` alone.
 */
const DOCUMENT_CHANGED = {
  run: 'run.changed',
  profile: 'profile.changed',
  shared: 'shared.changed',
} as const satisfies Record<DocumentKind, string>;

export interface DocumentChangedEvent {
  /**
   * `run/<sessionId>/<runId>/<version>`, `profile/<userId>/<version>` or `shared/<version>`:
   * stable across redeliveries, and never equal to a thread event's `<sessionId>:<version>`
   * (identifiers cannot contain `/`).
   */
  id: string;
  type: (typeof DOCUMENT_CHANGED)[DocumentKind];
  scope: DocumentKind;
  /**
   * The session whose commit made the change. A profile or shared event goes where that
   * session's events go (webhooks registered for it, its WebSocket followers), and to every
   * webhook of the tenant registered without a session.
   */
  sessionId: string;
  /** The run (`run` scope). */
  runId?: string;
  /** The user whose profile changed (`profile` scope). */
  userId?: string;
  /** The document's own version: 1, 2, 3, … (a run that expired starts again at 1). */
  version: number;
  /** `version - 1`; 0 for a document's first version. */
  prevVersion: number;
  cause: 'commit';
  /** The agent the commit acted as, or null. */
  author: string | null;
  next: Json;
  /** The document before this version; null for its first. */
  prev: Json;
  occurredAt: string;
  /** As on `state.changed`: set where a size limit dropped `next` and `prev`. */
  truncated?: true;
}

/** Every event the change hook sends. */
export type ChangeEvent = StateChangedEvent | DocumentChangedEvent;

/** A recorded version of a run, profile or shared document, as the change stream reports it. */
export interface RecordedDocument {
  tenant: string;
  document: {
    kind: DocumentKind;
    /** The run id, the user id, or `shared`. */
    id: string;
    /** The session whose commit wrote it. */
    sessionId: string;
    version: number;
    state: Json;
    /** The state of `version - 1` (the stream's old image); null for version 1. */
    prevState: Json;
    author: string | null;
    createdAt: string;
  };
}

/** What the change stream reports: a thread version or a document version. */
export type RecordedChange = RecordedVersion | RecordedDocument;

export function isRecordedDocument(change: RecordedChange): change is RecordedDocument {
  return 'document' in change;
}

function documentEventId(kind: DocumentKind, id: string, sessionId: string, version: number): string {
  switch (kind) {
    case 'run':
      return `run/${sessionId}/${id}/${version}`;
    case 'profile':
      return `profile/${id}/${version}`;
    case 'shared':
      return `shared/${version}`;
  }
}

export function buildDocumentChangedEvent(recorded: RecordedDocument): DocumentChangedEvent {
  const { kind, id, sessionId, version, state, prevState, author, createdAt } = recorded.document;
  return {
    id: documentEventId(kind, id, sessionId, version),
    type: DOCUMENT_CHANGED[kind],
    scope: kind,
    sessionId,
    ...(kind === 'run' ? { runId: id } : {}),
    ...(kind === 'profile' ? { userId: id } : {}),
    version,
    prevVersion: version - 1,
    cause: 'commit',
    author,
    next: state,
    prev: version === 1 ? null : prevState,
    occurredAt: createdAt,
  };
}

/** The event of one recorded version; `prev` is the state of its `prevVersion`. */
export function buildStateChangedEvent(recorded: RecordedVersion, prev: Json): StateChangedEvent {
  const { sessionId, version: v } = recorded;
  return {
    id: eventId(sessionId, v.version),
    type: STATE_CHANGED,
    sessionId,
    node: v.node,
    version: v.version,
    prevVersion: v.prevVersion,
    cause: v.cause,
    author: v.author,
    decisionId: v.decisionId,
    next: v.state,
    prev: v.prevVersion === 0 ? null : prev,
    agent: v.agent,
    occurredAt: v.createdAt,
  };
}

/**
 * The event as `agentId` may see it (API.md section 7: an agent's view of events shows only
 * its fields). `schema` is that of the session's hierarchy when the version was recorded:
 * with one, `next` and `prev` are cut to the fields `agentId` may read (`viewOf`); without one
 * (no typed fields), or without an agent, the event is whole. `agent` (the config) is never cut.
 * A state that no longer fits its declared types cannot be cut; the event still goes out,
 * with `next` and `prev` null and `viewError` saying why, rather than being dropped or sent
 * whole.
 */
export function eventForAgent(event: StateChangedEvent, schema: Schema | null, agentId: string | null): StateChangedEvent {
  if (agentId === null || schema === null) return event;
  try {
    return { ...event, next: viewOf(schema, agentId, event.next), prev: viewOf(schema, agentId, event.prev) };
  } catch (error) {
    if (!(error instanceof AgentStateError)) throw error;
    const fields = error.extras.fields;
    return { ...event, next: null, prev: null, viewError: { code: error.code, fields: Array.isArray(fields) ? fields : [] } };
  }
}

/**
 * The event as JSON text of at most `limitBytes`: whole when it fits, else without its
 * states (`truncated: true`). States may be 256 KiB each, beyond what EventBridge (256 KB
 * an entry) or an API Gateway WebSocket message (128 KB) carries.
 */
export function serializeWithin(event: ChangeEvent, limitBytes: number): string {
  const whole = stringifyJson(event);
  if (Buffer.byteLength(whole, 'utf8') <= limitBytes) return whole;
  return stringifyJson(
    event.type === STATE_CHANGED
      ? { ...event, next: null, prev: null, agent: null, truncated: true }
      : { ...event, next: null, prev: null, truncated: true },
  );
}
