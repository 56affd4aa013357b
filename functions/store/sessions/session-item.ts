import { randomBytes } from 'node:crypto';
import { encodeStoredJson, type JsonObject } from '../../core/json/json.js';
import { expiryOf, type Lifetime, lifetimeOf, type StoredLifetime, storedLifetime } from '../../core/model/lifetime.js';
import type { SessionMeta, SessionScope } from '../../core/model/model.js';
import { parseJsonText, stringOrNull } from '../table/item-codecs.js';
import * as keys from '../table/keys.js';
import { tableKeys } from '../table/table.js';
import type { Item } from '../table/table-client.js';

// The session: S#<tenant>#<session> / S (also in the activity index), and its metadata beside
// it, S#<tenant>#<session> / SM. Imported as a namespace (item-codecs.ts): `sessionItem.encode`.
//
// The session item is what moves with the session's activity (its `updatedAt` and list keys,
// at most once every 20 s: session-log.ts `moveActivity`), and what a first change's
// transaction upserts; a write is billed by the whole item, so the item holds only what is
// small: ids, times, the lifetime. The metadata (up to 16 KiB) is an item of its own, written
// when the session is made and by a `PATCH` that changes it, so that no move of the activity
// pays for it. The session item names the metadata item it goes with (`METADATA_STAMP_ATTRIBUTE`),
// both written in one transaction: a read that sees the two from different transactions (a
// Query or a BatchGet is not isolated across items) knows it, and reads again
// (session-read.ts). A session item written before the split carries its `metadata` inline
// (null or text): it reads as it did, until a `PATCH` of its metadata moves it out.

export const key = (scope: SessionScope): Item => ({ pk: keys.session(scope), sk: keys.sessionSort });
/** The key of the session's metadata item (`SM`, right after the session item: keys.ts `sessionMetadataSort`). */
export const metadataKey = (scope: SessionScope): Item => ({ pk: keys.session(scope), sk: keys.sessionMetadataSort });

/**
 * On the session item and on its metadata item, the same value when they go together: the
 * session has metadata (absent: none, or an item from before the split, which carries it
 * inline), and which write of it the session item was written with.
 */
export const METADATA_STAMP_ATTRIBUTE = 'mv';

/** A new stamp for a write of the metadata (`METADATA_STAMP_ATTRIBUTE`). */
export function newMetadataStamp(): string {
  return randomBytes(9).toString('base64url');
}

/** The metadata item of a session whose metadata is `metadata`, under `stamp`. */
export function encodeMetadata(scope: SessionScope, metadata: JsonObject, stamp: string): Item {
  return { ...metadataKey(scope), metadata: encodeStoredJson(metadata), [METADATA_STAMP_ATTRIBUTE]: stamp };
}

/** Whether the session item carries its metadata itself (written before the metadata had an item of its own). */
function hasInlineMetadata(item: Item): boolean {
  return item.metadata !== undefined;
}

/** Whether the session item says its session has metadata in an item of its own. */
export function hasMetadataItem(item: Item): boolean {
  return !hasInlineMetadata(item) && typeof item[METADATA_STAMP_ATTRIBUTE] === 'string';
}

/**
 * Whether `metadataItem` (absent: not found) is not the one the session item was written with:
 * the two were read from different writes (a Query or a BatchGet reads each item as it is
 * when it gets to it), and the reader reads again.
 */
export function isTorn(item: Item, metadataItem: Item | undefined): boolean {
  return hasMetadataItem(item) && metadataItem?.[METADATA_STAMP_ATTRIBUTE] !== item[METADATA_STAMP_ATTRIBUTE];
}

/**
 * The attribute that says when the session item says the session expires (epoch ms): exact
 * while the log is empty, otherwise from its activity (which may trail the last write by up
 * to the activity interval). Writes compare it; lists leave out what it says has expired.
 */
export const EXPIRES_ATTRIBUTE = 'xa';

/**
 * When a `PATCH` last set the session's user (ISO; absent: it has had its user since it was
 * made). A user's erasure takes what was the user's when it began (erasure-close.ts): a session
 * given to the user later is, like one made later, not the erasure's.
 */
export const USER_SINCE_ATTRIBUTE = 'userAt';

/**
 * The copy that made the session item and has not opened it yet (session-copy.ts,
 * SessionScope.copy): such an item reads as no session to anyone but that copy, no list shows
 * it (session-list.ts skips it where the index names it), and it carries a TTL
 * (`UNOPENED_TTL_SECONDS`) until the copy's last change opens it.
 */
export const COPY_ATTRIBUTE = 'cp';

/**
 * How long an unopened copy's session item lives: far longer than a copy may run (a request's
 * limit). If the copy stopped (its function timed out), TTL removes the item and the change
 * hook erases what the copy wrote (session-delete.ts, the sweep).
 */
const UNOPENED_TTL_SECONDS = 60 * 60;

/** Whether a session item is that of a copy not opened yet that `scope` is not (`COPY_ATTRIBUTE`). */
export function isOthersUnopened(item: Item, scope: SessionScope): boolean {
  const copy = item[COPY_ATTRIBUTE];
  return typeof copy === 'string' && copy !== scope.copy;
}

/**
 * The session item of a copy not opened yet: marked with the copy, removed by TTL unless the
 * copy opens it. It has its place in the tenant's list all the same (as its entries in the
 * filtered lists, session-store.ts `createSession`): no list shows it, but an erasure, which walks
 * those lists, finds it and closes it like any session (docs/architecture.md, Copying a session).
 */
export function encodeUnopened(scope: SessionScope & { copy: string }, meta: SessionMeta, nowSeconds: number, stamp?: string): Item {
  return { ...encode(scope, meta, stamp), [COPY_ATTRIBUTE]: scope.copy, [tableKeys.timeToLive]: nowSeconds + UNOPENED_TTL_SECONDS };
}

/**
 * How long after it the table's TTL removes the session item: longer than its activity can
 * trail the last write (the change hook moves it a moment after), so that TTL never removes
 * the item of a live session. Its removal is what makes the change hook erase the rest of an
 * expired session that nobody wrote again (API.md section 12: gone within 48 h).
 */
const TTL_MARGIN_SECONDS = 60 * 60;

/** The attributes that carry a session's lifetime, as of a write at `atMs`: none when it has none. */
export function lifetimeAttributes(lifetime: Lifetime | undefined, atMs: number): Item {
  const stored = lifetime ? storedLifetime(lifetime) : undefined;
  if (!lifetime || !stored) return {};
  const expires = expiryOf(lifetime, atMs);
  return {
    lt: encodeStoredJson(stored),
    ...(expires === null ? {} : { [EXPIRES_ATTRIBUTE]: expires, [tableKeys.timeToLive]: Math.ceil(expires / 1000) + TTL_MARGIN_SECONDS }),
  };
}

/**
 * The session item of a session made now; `stamp`: that of its metadata item, which the caller
 * writes with it (`encodeMetadata`) when `meta.metadata` is not null.
 */
export function encode(scope: SessionScope, meta: SessionMeta, stamp?: string): Item {
  return {
    ...key(scope),
    [tableKeys.sessionsIndex.partitionKey]: keys.tenantSessions(scope.tenant, keys.activityShard(scope.sessionId)),
    [tableKeys.sessionsIndex.sortKey]: keys.activity(meta.updatedAt, meta.sessionId),
    sessionId: meta.sessionId,
    agentId: meta.agentId,
    userId: meta.userId,
    ...(meta.metadata === null || stamp === undefined ? {} : { [METADATA_STAMP_ATTRIBUTE]: stamp }),
    createdAt: meta.createdAt,
    updatedAt: meta.updatedAt,
    ...lifetimeAttributes(meta.lifetime, Date.parse(meta.updatedAt)),
  };
}

/**
 * The session its item says, with the metadata its metadata item holds (`metadataItem`: as read
 * beside it; absent when it has none, or was not read), or the item itself when it carries it
 * inline.
 */
export function decode(item: Item, metadataItem?: Item): SessionMeta {
  const stored = parseJsonText(item.lt) as StoredLifetime | null;
  const metadata = hasInlineMetadata(item) ? item.metadata : hasMetadataItem(item) ? metadataItem?.metadata : null;
  return {
    sessionId: String(item.sessionId),
    agentId: stringOrNull(item.agentId),
    userId: stringOrNull(item.userId),
    metadata: parseJsonText(metadata ?? null) as JsonObject | null,
    createdAt: String(item.createdAt),
    updatedAt: String(item.updatedAt),
    ...(stored ? { lifetime: lifetimeOf(stored) } : {}),
    ...(typeof item[EXPIRES_ATTRIBUTE] === 'number' ? { expiresAtMs: item[EXPIRES_ATTRIBUTE] } : {}),
  };
}
