import type { DocumentKind } from '../core/model.js';

/**
 * The `kind` attribute: what an item is, where its key alone does not say. A session's `V#`
 * slots hold three kinds of item, and the change stream (stream-images.ts) tells versions and
 * documents from everything else by this attribute alone. Every reader and writer of it
 * names the kind through these constants, never through the letters themselves.
 */
export const KIND_ATTRIBUTE = 'kind';

/** The kinds of item a `V#<slot>` sort key can hold (item-codecs.ts has their shapes). */
export const SLOT_ITEM_KIND = {
  /** A recorded version: its state, its place in the tree, and where the head was. */
  version: 'v',
  /** A head marker in the top slot: the head moved since the latest version; the next version overwrites it. */
  marker: 'm',
  /** A delete's tombstone in the top slot: the session is closed while its items are erased. */
  tombstone: 'x',
} as const;

/** The kinds of a memory item (`M#<tenant>#<namespace>` / `K#<key>`, memory-codecs.ts). */
export const MEMORY_ITEM_KIND = {
  /** An item: its value, version and times (live unless its `expiresAt` has passed). */
  item: 'mem',
  /** What a delete leaves for a moment: no value, expired at once, so TTL removes it; its stream record is the delete's event. */
  deleted: 'mem:deleted',
} as const;

/** The kind of each commit document's item (`R#<run>`, `P`, `G`). */
export const DOCUMENT_ITEM_KIND = {
  run: 'doc:run',
  profile: 'doc:profile',
  shared: 'doc:shared',
} as const satisfies Record<DocumentKind, string>;

const documentKinds = new Map<string, DocumentKind>(
  (Object.entries(DOCUMENT_ITEM_KIND) as Array<[DocumentKind, string]>).map(([kind, itemKind]) => [itemKind, kind]),
);

/** The document kind an item's `kind` attribute names, or null when it is not a document. */
export function documentKindOf(itemKind: unknown): DocumentKind | null {
  return typeof itemKind === 'string' ? (documentKinds.get(itemKind) ?? null) : null;
}
