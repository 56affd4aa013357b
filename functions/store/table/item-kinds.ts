import type { DocumentKind } from '../../core/model/model.js';

/**
 * The `kind` attribute: what an item is, where its key alone does not say. A session's `V#`
 * slots hold three kinds of item, and the change stream (stream-images.ts) tells versions and
 * documents from everything else by this attribute alone. Every reader and writer of it
 * names the kind through these constants, never through the letters themselves.
 */
export const KIND_ATTRIBUTE = 'kind';

/**
 * The kinds of change a session's log holds (`V#…` sort keys; log-items.ts has their shapes).
 * Only a version becomes a change event, so the stream filter lets through the `v` INSERTs.
 */
export const LOG_ITEM_KIND = {
  /** A recorded version (and, for a decision, the nodes of its messages). */
  version: 'v',
  /** New message nodes without a version: an append, or a decision that changed no state. */
  nodes: 'a',
  /** The head switched to another node. */
  head: 'm',
  /** A decision took the session's lease. */
  lease: 'l',
  /** A decision ended its lease and changed nothing (its worker failed, or its answer was empty). */
  release: 'r',
  /** The session's settings changed (`PATCH /v1/sessions/{sid}`: its lifetime, its metadata). */
  settings: 's',
  /**
   * A WebSocket client followed the session (functions/ws): the change carries until when it may
   * have followers (`Carried.f`), so that every change after it tells the change hook to look.
   */
  follow: 'f',
  /** A delete's fence, and the tombstone every erased change becomes. */
  tombstone: 'x',
} as const;

/** The `cause` of the fence of a delete that carried out an expiry: its stream record is the `session.expired` event. */
export const FENCE_CAUSE_EXPIRED = 'expired';

/**
 * A closing fence whose erase was handed to the change hook (session-delete.ts): its eraser ran
 * out of time and set `FENCE_HANDED_OFF_ATTRIBUTE` to `FENCE_HANDED_OFF`; that change's stream
 * record brings the hook, which goes on with the erase.
 */
export const FENCE_HANDED_OFF_ATTRIBUTE = 'eh';
export const FENCE_HANDED_OFF = 'hook';
/**
 * Attributes of a closing fence (session-delete.ts): the eraser that holds it (a name), until
 * when (epoch ms), and whether the closed fence takes a TTL (the life of a copy never opened).
 */
export const FENCE_HOLDER = 'ew';
export const FENCE_HELD_UNTIL = 'eu';
export const FENCE_COPY_LIFE = 'ec';
/**
 * The user's erasure that closed the session (session-delete.ts `closeOnly`), while its fence is
 * closing: whoever else finishes that erase (the retention sweep) marks the erasure's record of
 * the session erased, as the erasure's own run would.
 */
export const FENCE_ERASURE = 'er';

/** The kinds of a memory item (`M#<tenant>#<namespace>` / `K#<key>`, memory-codecs.ts). */
export const MEMORY_ITEM_KIND = {
  /** An item: its value, version and times (live unless its `expiresAt` has passed). */
  item: 'mem',
  /** What a delete leaves for a moment: no value, expired at once, so TTL removes it; its stream record is the delete's event. */
  deleted: 'mem:deleted',
} as const;

/** The kind of an erasure's item (`E#<tenant>#<erasure>` / `E`): its stream record drives the erasure (erasure-store.ts). */
export const ERASURE_ITEM_KIND = 'erasure';

/** The kind of each commit document's item (`R#<run>`, `P`, `G`). */
export const DOCUMENT_ITEM_KIND = {
  run: 'doc:run',
  profile: 'doc:profile',
  shared: 'doc:shared',
} as const satisfies Record<DocumentKind, string>;

/**
 * The document kind an item's `kind` attribute names, or null when it is not a document. (A
 * lookup of three, with no table built at module load: only the stream parser asks.)
 */
export function documentKindOf(itemKind: unknown): DocumentKind | null {
  const found = (Object.entries(DOCUMENT_ITEM_KIND) as Array<[DocumentKind, string]>).find(([, kind]) => kind === itemKind);
  return found ? found[0] : null;
}
