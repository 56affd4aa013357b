import {
  decodeStoredJson,
  encodeStoredJson,
  isJsonObject,
  type Json,
  type JsonObject,
  setOwn,
  stringifyJson,
} from '../../core/json/json.js';
import type { DocumentKind, DocumentRecord, DocumentRef } from '../../core/model/model.js';
import { parseJsonText, stringOrNull } from '../table/item-codecs.js';
import { DOCUMENT_ITEM_KIND } from '../table/item-kinds.js';
import * as keys from '../table/keys.js';
import { tableKeys } from '../table/table.js';
import type { Item } from '../table/table-client.js';

// Commit documents: R#<run> in the session, P#<tenant>#<user> / P, A#<tenant> / G. Imported as
// a namespace (item-codecs.ts): `documentItem.decode`.
//
// Each top-level key of a document is an attribute of its own, `d:<key>`, so that a commit can
// write one key, or one member of an object under a key, with a map-path `UpdateItem` without
// reading what others wrote (document-store.ts, `writeDocument`):
//   - an object whose members can be map keys: a map, each member's value its JSON text;
//   - any other value (and an object with a member named "" or "__proto__"): its JSON text.
// `bytes` bounds the document's JSON size from above (see `slotBytes`). An item written before
// this layout holds the whole document as one JSON text in `state` (`LEGACY_STATE`); it still
// reads, and the next commit that writes it rewrites it whole in this layout.

/** Whose commit wrote a document version: its change event's session and author. */
interface DocumentOrigin {
  sessionId: string | null;
  author: string | null;
}

/** The attribute of a top-level key. */
const SLOT_PREFIX = 'd:';
/** The attribute bounding the document's JSON size: never less than the sum of its keys' `slotBytes`. */
export const BYTES_ATTRIBUTE = 'bytes';
/**
 * Set to the version's `updatedAt` by a blind documents-only commit that found its session's
 * activity due to move (stream-images.ts tells the change hook); absent otherwise.
 */
export const ACTIVITY_DUE = 'ad';
/** Where an item written before the per-key layout keeps its whole document. */
export const LEGACY_STATE = 'state';
/**
 * A profile's fence: a random token that every `PATCH` giving one of the user's sessions to
 * another user, the user's erasure and every whole put of the profile set anew, and that keyed
 * writes leave alone and are conditional on (document-store.ts `writeDocument`). A `PATCH` of a
 * user with no profile leaves an item holding only the fence; an erasure leaves one too (its
 * tombstone, gone when the erasure is done). Neither is a document: both read as none.
 */
export const FENCE_ATTRIBUTE = 'fence';

/** Whether an item holds a document version, not only a profile's fence. */
export const holdsDocument = (item: Item): boolean => item.version !== undefined;

export const slotAttribute = (key: string): string => `${SLOT_PREFIX}${key}`;

/** Whether an object is kept as a map of its members (a member's name must be a usable map key). */
export function isMapped(value: Json | undefined): value is JsonObject {
  return isJsonObject(value) && Object.keys(value).every((name) => name !== '' && name !== '__proto__');
}

/** How a top-level value is stored: a map of its members' JSON texts, or its JSON text. */
export function encodeSlot(value: Json): string | Record<string, string> {
  if (!isMapped(value)) return encodeStoredJson(value);
  const members: Record<string, string> = {};
  for (const [name, member] of Object.entries(value)) members[name] = encodeStoredJson(member);
  return members;
}

/** The JSON text of one member of an object kept as a map. */
export const encodeMember = (value: Json): string => encodeStoredJson(value);

function decodeSlot(stored: unknown): Json {
  if (typeof stored === 'string') return decodeStoredJson(stored);
  const value: JsonObject = {};
  if (typeof stored !== 'object' || stored === null) return value;
  for (const name of Object.keys(stored).sort()) setOwn(value, name, decodeStoredJson(String((stored as Record<string, unknown>)[name])));
  return value;
}

const utf8 = (text: string) => Buffer.byteLength(text, 'utf8');

/**
 * What a top-level key adds to the document's JSON: `"key":value,`. A document's JSON is at
 * most 2 bytes more than the sum over its keys (`{` and `}`, less the last comma), so keeping
 * that sum under the limit less 2 keeps the document under the limit.
 */
export const slotBytes = (key: string, value: Json): number => utf8(stringifyJson(key)) + utf8(stringifyJson(value)) + 2;

/** What one member of an object adds to its JSON (the same shape as a key). */
export function memberBytes(member: string, value: Json): number {
  return slotBytes(member, value);
}

/** The exact sum of `slotBytes` over a document's keys. */
function documentBytes(state: Json): number {
  if (!isJsonObject(state)) return 0;
  let bytes = 0;
  for (const [key, value] of Object.entries(state)) bytes += slotBytes(key, value);
  return bytes;
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

/** A whole document version as one item (a put: a run, a commit that moves the thread too, a guarded commit). */
export function encode(ref: DocumentRef, record: DocumentRecord, origin: DocumentOrigin, expiresAt?: number): Item {
  const item: Item = {
    ...key(ref),
    kind: DOCUMENT_ITEM_KIND[record.kind],
    version: record.version,
    [BYTES_ATTRIBUTE]: documentBytes(record.state),
    updatedAt: record.updatedAt,
    // For the change event: whose commit this was (stream-images.ts reads them back).
    sessionId: origin.sessionId ?? undefined,
    author: origin.author,
    ...(expiresAt === undefined ? {} : { [tableKeys.timeToLive]: expiresAt }),
  };
  if (isJsonObject(record.state)) for (const [name, value] of Object.entries(record.state)) item[slotAttribute(name)] = encodeSlot(value);
  return item;
}

export function decode(ref: DocumentRef, item: Item): DocumentRecord {
  return {
    kind: ref.kind,
    id: ref.kind === 'shared' ? 'shared' : ref.id,
    version: Number(item.version),
    state: LEGACY_STATE in item ? parseJsonText(item[LEGACY_STATE]) : stateOf(item),
    updatedAt: stringOrNull(item.updatedAt),
  };
}

/** The document an item in the per-key layout holds: its keys in order. */
function stateOf(item: Item): JsonObject {
  const state: JsonObject = {};
  for (const name of Object.keys(item).sort()) {
    if (name.startsWith(SLOT_PREFIX)) setOwn(state, name.slice(SLOT_PREFIX.length), decodeSlot(item[name]));
  }
  return state;
}

export const originOf = (item: Item): DocumentOrigin => ({ sessionId: stringOrNull(item.sessionId), author: stringOrNull(item.author) });
