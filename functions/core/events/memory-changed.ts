import type { Json, JsonObject } from '../json/json.js';
import type { RecordedMemoryChange } from '../memory/memory-changes.js';

/**
 * `memory.changed` events (API.md section 10): every put and every delete of a memory item,
 * built from the stream record alone (its new and old images: no read), delivered to the
 * tenant's webhooks and the event bus with the guarantees of state events — at least once, in
 * version order per item, the same `id` on every redelivery, a delivery that keeps failing a
 * dead letter of its webhook. An expiry is no event: it was known from `expiresAt` in advance.
 */

export const MEMORY_CHANGED = 'memory.changed';

export interface MemoryChangedEvent {
  /**
   * `memory:<namespace path>/<key>:<createdAt ms>:<version>`: stable across redeliveries, and
   * never reused by a later item of the same key (which has another `createdAt`).
   */
  id: string;
  type: typeof MEMORY_CHANGED;
  namespace: string[];
  key: string;
  /** The item's version after the change; a delete is the version after the last put. */
  version: number;
  prevVersion: number;
  cause: 'put' | 'delete';
  /** The acting agent (`X-Agent-Id`), or null. */
  author: string | null;
  /** The value after the change; null for a delete. Left out when `truncated` (and for a `mode: "patch"` subscriber). */
  next?: JsonObject | null;
  /** The value of `prevVersion`; null for a new item. Left out as `next` is. */
  prev?: JsonObject | null;
  /** As on `state.changed`: the RFC 7396 merge patch turning `prev` into `next` (null for a delete). */
  patch?: Json;
  /** When this item (this life of the key) was created. */
  createdAt: string;
  /** The item's expiry, when it has one. */
  expiresAt?: string;
  occurredAt: string;
  /** As on `state.changed`: `next` and `prev` together are over 64 KiB, and left out. */
  truncated?: true;
}

/** The event of a recorded memory change; null for a TTL removal (no event). */
export function buildMemoryChangedEvent(change: RecordedMemoryChange): MemoryChangedEvent | null {
  const item = change.kind === 'put' ? change.next : change.kind === 'delete' ? change.old : null;
  if (!item) return null;
  const isDelete = change.kind === 'delete';
  const version = isDelete ? item.version + 1 : item.version;
  const old = change.old;
  const prev = isDelete ? old : old && old.createdAt === item.createdAt && old.version === item.version - 1 ? old : null;
  return {
    id: `memory:${[...item.namespace, item.key].join('/')}:${Date.parse(item.createdAt)}:${version}`,
    type: MEMORY_CHANGED,
    namespace: item.namespace,
    key: item.key,
    version,
    prevVersion: prev ? prev.version : 0,
    cause: isDelete ? 'delete' : 'put',
    author: change.author,
    next: isDelete ? null : item.value,
    prev: prev ? prev.value : null,
    createdAt: item.createdAt,
    ...(item.expiresAt === undefined || isDelete ? {} : { expiresAt: item.expiresAt }),
    occurredAt: change.occurredAt,
  };
}
