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
}

/** A recorded version of a session, as the change stream reports it. */
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
 * The event as JSON text of at most `limitBytes`: whole when it fits, else without its
 * states (`truncated: true`). States may be 256 KiB each, beyond what EventBridge (256 KB
 * an entry) or an API Gateway WebSocket message (128 KB) carries.
 */
export function serializeWithin(event: StateChangedEvent, limitBytes: number): string {
  const whole = JSON.stringify(event);
  if (Buffer.byteLength(whole, 'utf8') <= limitBytes) return whole;
  return JSON.stringify({ ...event, next: null, prev: null, agent: null, truncated: true });
}
