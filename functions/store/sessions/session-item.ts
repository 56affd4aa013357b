import { encodeStoredJson, type JsonObject } from '../../core/json/json.js';
import { expiryOf, type Lifetime, lifetimeOf, type StoredLifetime, storedLifetime } from '../../core/model/lifetime.js';
import type { SessionMeta, SessionScope } from '../../core/model/model.js';
import { parseJsonText, stringOrNull } from '../table/item-codecs.js';
import * as keys from '../table/keys.js';
import { tableKeys } from '../table/table.js';
import type { Item } from '../table/table-client.js';

// The session: S#<tenant>#<session> / S (also in the activity index). Imported as a namespace
// (item-codecs.ts): `sessionItem.encode`.

export const key = (scope: SessionScope): Item => ({ pk: keys.session(scope), sk: keys.sessionSort });

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
export function encodeUnopened(scope: SessionScope & { copy: string }, meta: SessionMeta, nowSeconds: number): Item {
  return { ...encode(scope, meta), [COPY_ATTRIBUTE]: scope.copy, [tableKeys.timeToLive]: nowSeconds + UNOPENED_TTL_SECONDS };
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

export function encode(scope: SessionScope, meta: SessionMeta): Item {
  return {
    ...key(scope),
    [tableKeys.sessionsIndex.partitionKey]: keys.tenantSessions(scope.tenant, keys.activityShard(scope.sessionId)),
    [tableKeys.sessionsIndex.sortKey]: keys.activity(meta.updatedAt, meta.sessionId),
    sessionId: meta.sessionId,
    agentId: meta.agentId,
    userId: meta.userId,
    metadata: meta.metadata === null ? null : encodeStoredJson(meta.metadata),
    createdAt: meta.createdAt,
    updatedAt: meta.updatedAt,
    ...lifetimeAttributes(meta.lifetime, Date.parse(meta.updatedAt)),
  };
}

export function decode(item: Item): SessionMeta {
  const stored = parseJsonText(item.lt) as StoredLifetime | null;
  return {
    sessionId: String(item.sessionId),
    agentId: stringOrNull(item.agentId),
    userId: stringOrNull(item.userId),
    metadata: parseJsonText(item.metadata) as JsonObject | null,
    createdAt: String(item.createdAt),
    updatedAt: String(item.updatedAt),
    ...(stored ? { lifetime: lifetimeOf(stored) } : {}),
    ...(typeof item[EXPIRES_ATTRIBUTE] === 'number' ? { expiresAtMs: item[EXPIRES_ATTRIBUTE] } : {}),
  };
}
