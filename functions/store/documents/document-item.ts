import { encodeStoredJson } from '../../core/json/json.js';
import type { DocumentKind, DocumentRecord, DocumentRef } from '../../core/model/model.js';
import { parseJsonText, stringOrNull } from '../table/item-codecs.js';
import { DOCUMENT_ITEM_KIND } from '../table/item-kinds.js';
import * as keys from '../table/keys.js';
import { tableKeys } from '../table/table.js';
import type { Item } from '../table/table-client.js';

// Commit documents: R#<run> in the session, P#<tenant>#<user> / P, A#<tenant> / G. Imported as
// a namespace (item-codecs.ts): `documentItem.decode`.

/** Whose commit wrote a document version: its change event's session and author. */
interface DocumentOrigin {
  sessionId: string | null;
  author: string | null;
}

export function key(ref: DocumentRef): Item {
  switch (ref.kind) {
    case 'run':
      return { pk: keys.session(ref.scope), sk: keys.run(ref.id) };
    case 'profile':
      return { pk: keys.profile(ref.tenant, ref.id), sk: keys.profileSort };
    case 'shared':
      return { pk: keys.shared(ref.tenant), sk: keys.sharedSort };
  }
}

/** The document an item's key names, or null when the key is not one of `kind`'s. */
export function refOf(kind: DocumentKind, item: Item): DocumentRef | null {
  const pk = String(item.pk ?? '');
  const sk = String(item.sk ?? '');
  switch (kind) {
    case 'run': {
      const partition = /^S#([^#]+)#([^#]+)$/.exec(pk);
      const id = sk.startsWith(keys.run('')) ? sk.slice(keys.run('').length) : '';
      return partition && id ? { kind, scope: { tenant: partition[1] as string, sessionId: partition[2] as string }, id } : null;
    }
    case 'profile': {
      const partition = /^P#([^#]+)#([^#]+)$/.exec(pk);
      return partition && sk === keys.profileSort ? { kind, tenant: partition[1] as string, id: partition[2] as string } : null;
    }
    case 'shared': {
      const partition = /^A#([^#]+)$/.exec(pk);
      return partition && sk === keys.sharedSort ? { kind, tenant: partition[1] as string } : null;
    }
  }
}

export function encode(ref: DocumentRef, record: DocumentRecord, origin: DocumentOrigin, expiresAt?: number): Item {
  return {
    ...key(ref),
    kind: DOCUMENT_ITEM_KIND[record.kind],
    version: record.version,
    state: encodeStoredJson(record.state),
    updatedAt: record.updatedAt,
    // For the change event: whose commit this was (stream-images.ts reads them back).
    sessionId: origin.sessionId ?? undefined,
    author: origin.author,
    ...(expiresAt === undefined ? {} : { [tableKeys.timeToLive]: expiresAt }),
  };
}

export function decode(ref: DocumentRef, item: Item): DocumentRecord {
  return {
    kind: ref.kind,
    id: ref.kind === 'shared' ? 'shared' : ref.id,
    version: Number(item.version),
    state: parseJsonText(item.state),
    updatedAt: stringOrNull(item.updatedAt),
  };
}

export const originOf = (item: Item): DocumentOrigin => ({ sessionId: stringOrNull(item.sessionId), author: stringOrNull(item.author) });
