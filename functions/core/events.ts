import { AgentStateError } from './errors.js';
import { viewOf, type Schema } from './fields.js';
import type { Json } from './json.js';
import type { VersionRecord } from './model.js';

/**
 * Change events (API.md section 9): every recorded version produces one `state.changed`
 * event. The event is built from the version as it was recorded, so it is the same on every
 * redelivery, and its `id` is what receivers deduplicate by.
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
}

export function eventId(sessionId: string, version: number): string {
  return `${sessionId}:${version}`;
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
export function serializeWithin(event: StateChangedEvent, limitBytes: number): string {
  const whole = JSON.stringify(event);
  if (Buffer.byteLength(whole, 'utf8') <= limitBytes) return whole;
  return JSON.stringify({ ...event, next: null, prev: null, agent: null, truncated: true });
}
