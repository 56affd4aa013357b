import { encodedSize, type Json, stringifyJson } from '../json/json.js';
import type { PatchOperation } from '../json/json-patch.js';
import { mergePatchBetween } from '../json/merge-patch.js';
import { AgentStateError } from '../kernel/errors.js';
import { type Schema, viewOf } from '../model/fields.js';
import type { Lifetime } from '../model/lifetime.js';
import type { DocumentKind, VersionRecord } from '../model/model.js';
import type { MemoryChangedEvent } from './memory-changed.js';

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
  /** The state recorded by this version; left out when `truncated` (and for a `mode: "patch"` subscriber). */
  next?: Json;
  /** The state of `prevVersion` (null for prevVersion 0, and when that version is gone); left out as `next` is. */
  prev?: Json;
  /**
   * The RFC 7396 merge patch turning `prev` into `next`. Left out when it alone is larger than
   * `EVENT_STATES_LIMIT_BYTES`, or when no merge patch can do it (`next` holds a null member a
   * patch would have to set: a merge patch's null removes a member).
   */
  patch?: Json;
  /**
   * The same change as RFC 6902 operations, on the events of large states only (an append
   * to an array is one `add`, where the merge patch would resend the array). Left out like
   * `patch`.
   */
  jsonPatch?: PatchOperation[];
  /** The agent config; left out only when the event would not fit a channel otherwise. */
  agent?: Json;
  /** When the version was recorded. */
  occurredAt: string;
  /**
   * True when the event leaves out what it would otherwise carry: `next` and `prev` together
   * are over `EVENT_STATES_LIMIT_BYTES` (or, rarely, the event would not fit a channel even
   * so). The version is one `GET /v1/sessions/{sid}/versions/{version}` away.
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
  /** Which life of the session id (`Tip.incarnation`): versions restart at 1 in each. */
  incarnation?: number;
  version: Omit<VersionRecord, 'lineage' | 'place'>;
  /** The session's lifetime as the version carries it: its item's expiry moves with its activity. */
  lifetime?: Lifetime;
  /**
   * True when the session's activity (`updatedAt`, the list order) is due to move to this
   * version: the write stamped it so, at most once an interval (store/log/log-writer.ts
   * `ACTIVITY_EVERY_MS`), and the change hook moves it. False for every other version.
   */
  activityDue?: boolean;
  /**
   * True when the session may have WebSocket followers (a follow's mark was on its log when
   * the version was made: `Tip.followersUntil`); absent, nobody followed it, and the change
   * hook does not look for followers.
   */
  followed?: boolean;
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
  /** As on `state.changed`: left out when `truncated`. */
  next?: Json;
  /** The document before this version; null for its first. Left out as `next` is. */
  prev?: Json;
  /** As on `state.changed`: the merge patch turning `prev` into `next`. */
  patch?: Json;
  occurredAt: string;
  /** As on `state.changed`. */
  truncated?: true;
}

export const SESSION_EXPIRED = 'session.expired';

/**
 * A session expired (API.md section 12), sent when its expiry is carried out: by the first
 * write after it, or by the sweep of a session nobody wrote again (within 48 h). By then the
 * session has read as unknown since `expiredAt`.
 */
export interface SessionExpiredEvent {
  /** `expired/<sessionId>/<life>`: stable across redeliveries, never a thread's or a document's event id. */
  id: string;
  type: typeof SESSION_EXPIRED;
  sessionId: string;
  /** The last version of the life that expired (0: none was recorded). */
  version: number;
  /** The session's agent and user when it expired. */
  agentId: string | null;
  userId: string | null;
  /** The moment the session expired. */
  expiredAt: string;
  /** When the expiry was carried out. */
  occurredAt: string;
}

export const USER_ERASED = 'user.erased';

/**
 * A user's erasure is done (API.md section 12): their sessions, profile and memory items are
 * no longer stored. Of no one session (`sessionId` is empty): it goes to the tenant's webhooks
 * registered without a session, and to the event bus.
 */
export interface UserErasedEvent {
  /** `erased/<erasureId>`: stable across redeliveries. */
  id: string;
  type: typeof USER_ERASED;
  sessionId: '';
  erasureId: string;
  userId: string;
  /** What it erased, as `GET /v1/erasures/{erasureId}` counts it. */
  sessions: number;
  memoryItems: number;
  documents: number;
  /** When the erasure was done. */
  occurredAt: string;
}

/** Every event of a session the change hook sends (and of an erasure). */
export type ChangeEvent = StateChangedEvent | DocumentChangedEvent | SessionExpiredEvent | UserErasedEvent;

/** Every event that goes out on a channel: a session's, or a memory item's (memory-changed.ts). */
export type WireEvent = ChangeEvent | MemoryChangedEvent;

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
  /**
   * A blind documents-only commit wrote this version with no session item in its write, and
   * found the session's activity due to move (at most once an interval): the change hook moves
   * it, as for a version that says so (`RecordedVersion.activityDue`).
   */
  activityDue?: boolean;
}

/** The expiry of a session carried out (the fence its delete put, store/events/stream-images.ts). */
export interface RecordedExpiry {
  tenant: string;
  sessionId: string;
  expiry: { incarnation: number; version: number; agentId: string | null; userId: string | null; expiredAt: string; occurredAt: string };
}

/** A user's erasure done (its item set `done`, store/events/stream-images.ts). */
export interface RecordedErasure {
  tenant: string;
  erasure: Omit<UserErasedEvent, 'id' | 'type' | 'sessionId'>;
}

/** What the change stream reports: a thread version, a document version, a session's expiry, or an erasure done. */
export type RecordedChange = RecordedVersion | RecordedDocument | RecordedExpiry | RecordedErasure;

export function isRecordedDocument(change: RecordedChange): change is RecordedDocument {
  return 'document' in change;
}

export function isRecordedExpiry(change: RecordedChange): change is RecordedExpiry {
  return 'expiry' in change;
}

export function isRecordedErasure(change: RecordedChange): change is RecordedErasure {
  return 'erasure' in change;
}

export function buildUserErasedEvent(recorded: RecordedErasure): UserErasedEvent {
  return { id: `erased/${recorded.erasure.erasureId}`, type: USER_ERASED, sessionId: '', ...recorded.erasure };
}

export function buildSessionExpiredEvent(recorded: RecordedExpiry): SessionExpiredEvent {
  const { expiry } = recorded;
  return {
    id: `expired/${recorded.sessionId}/${expiry.incarnation}`,
    type: SESSION_EXPIRED,
    sessionId: recorded.sessionId,
    version: expiry.version,
    agentId: expiry.agentId,
    userId: expiry.userId,
    expiredAt: expiry.expiredAt,
    occurredAt: expiry.occurredAt,
  };
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

/**
 * The event of a version whose state, or the state before it, is kept in pieces (larger than
 * an event may carry): `truncated`, without `next` and `prev`, with the change its version
 * recorded (`patch`, `jsonPatch`). The change hook reads no large state to make it.
 */
export function buildDeltaEvent(recorded: RecordedVersion): StateChangedEvent {
  const { next: _next, prev: _prev, ...event } = buildStateChangedEvent(recorded, null);
  const change = recorded.version.change;
  return {
    ...event,
    truncated: true,
    ...(change?.patch === undefined ? {} : { patch: change.patch }),
    ...(change?.jsonPatch === undefined ? {} : { jsonPatch: change.jsonPatch }),
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
  // A large state's recorded change may name fields the agent cannot read: it reads the
  // version through the API, cut to its view, instead.
  if (isDeltaEvent(event)) {
    const { patch: _patch, jsonPatch: _jsonPatch, ...rest } = event;
    return rest;
  }
  try {
    return { ...event, next: viewOf(schema, agentId, event.next ?? null), prev: viewOf(schema, agentId, event.prev ?? null) };
  } catch (error) {
    if (!(error instanceof AgentStateError)) throw error;
    const fields = error.extras.fields;
    return { ...event, next: null, prev: null, viewError: { code: error.code, fields: Array.isArray(fields) ? fields : [] } };
  }
}

// ---- what an event carries on the wire ------------------------------------------------------

/**
 * `next` and `prev` together may be this large in an event; beyond it they are left out and
 * the event says `truncated: true` (API.md section 9). With the patch (at most as large) and
 * an agent config (at most 64 KiB), an event stays well inside every channel: an EventBridge
 * entry and an SQS message (256 KB), a dead-letter item (400 KB), a webhook body.
 */
export const EVENT_STATES_LIMIT_BYTES = 64 * 1024;

/**
 * The most a webhook body (and so its dead letter) may be: an event past it goes without its
 * states, then without its agent config (`serializeWithin`). A dead letter item holds the body
 * and a little more, inside DynamoDB's 400 KB.
 */
export const WEBHOOK_BODY_LIMIT_BYTES = 256 * 1024;

/** Puts events on the event bus; resolves with the indexes of the entries that failed. */
export type EventPublisher = (events: ReadonlyArray<{ tenant: string; event: WireEvent }>) => Promise<number[]>;

/**
 * How a receiver asked for events: `full` carries `next` and `prev` when they fit; `patch`
 * (a WebSocket subscription with `"mode": "patch"`) never does, and relies on `patch`.
 */
export type EventMode = 'full' | 'patch';
export const EVENT_MODES: readonly EventMode[] = ['full', 'patch'];

const fitted = new WeakMap<WireEvent, Exclude<WireEvent, SessionExpiredEvent | UserErasedEvent>>();

/**
 * The event as it goes out: with its `patch`, and without `next` and `prev` when together
 * they pass `EVENT_STATES_LIMIT_BYTES` (`truncated: true`). Computed once per event object
 * (an agent's view is an object of its own, and gets a patch of its own view).
 */
function fitEvent(
  event: Exclude<WireEvent, SessionExpiredEvent | UserErasedEvent>,
): Exclude<WireEvent, SessionExpiredEvent | UserErasedEvent> {
  const known = fitted.get(event);
  if (known) return known;
  // A large state's event is shaped already: its change, no states.
  if (isDeltaEvent(event)) return event;
  const next = event.next ?? null;
  const prev = event.prev ?? null;
  const { next: _next, prev: _prev, ...rest } = event;
  const patch = mergePatchBetween(prev, next);
  const withPatch = patch !== undefined && encodedSize(patch) <= EVENT_STATES_LIMIT_BYTES ? { patch } : {};
  const statesFit = encodedSize(next) + encodedSize(prev) <= EVENT_STATES_LIMIT_BYTES;
  const result = (statesFit ? { ...rest, next, prev, ...withPatch } : { ...rest, ...withPatch, truncated: true }) as typeof event;
  fitted.set(event, result);
  return result;
}

/**
 * The event as JSON text for a channel of at most `limitBytes` (an EventBridge entry, a
 * WebSocket message), in `mode`. First the event as `fitEvent` shapes it (without `next` and
 * `prev` in patch mode); if that is still too large for the channel, without `next` and
 * `prev`, then without the agent config, then without the patch: never dropped, at worst an
 * event that names its version (`truncated: true`).
 */
export function serializeWithin(event: WireEvent, limitBytes: number, mode: EventMode = 'full'): string {
  // An expiry or an erasure carries no state: it is small, and goes as it is.
  if (event.type === SESSION_EXPIRED || event.type === USER_ERASED) return stringifyJson(event) ?? '';
  const shaped = fitEvent(event);
  const { next: _next, prev: _prev, ...lean } = shaped;
  const marked = mode === 'patch' && !('patch' in lean) ? { ...lean, truncated: true } : lean;
  const candidates: unknown[] = [
    mode === 'full' ? shaped : marked,
    { ...lean, truncated: true },
    withoutMembers(lean, ['agent']),
    withoutMembers(lean, ['agent', 'jsonPatch']),
    withoutMembers(lean, ['agent', 'jsonPatch', 'patch']),
  ];
  let text = '';
  for (const candidate of candidates) {
    text = stringifyJson(candidate);
    if (Buffer.byteLength(text, 'utf8') <= limitBytes) return text;
  }
  return text;
}

/** An event built by `buildDeltaEvent`: truncated from the start, never carrying states. */
function isDeltaEvent(event: WireEvent): boolean {
  return event.type === STATE_CHANGED && event.truncated === true && !('next' in event) && !('prev' in event);
}

function withoutMembers(event: object, names: readonly string[]): object {
  const copy: Record<string, unknown> = { ...event, truncated: true };
  for (const name of names) delete copy[name];
  return copy;
}
