import { encodeStoredJson, type JsonObject } from '../../core/json/json.js';
import type { SessionMeta, SessionScope } from '../../core/model/model.js';
import { parseJsonText, stringOrNull } from '../table/item-codecs.js';
import * as keys from '../table/keys.js';
import { tableKeys } from '../table/table.js';
import type { Item } from '../table/table-client.js';

// The session: S#<tenant>#<session> / S (also in the activity index). Imported as a namespace
// (item-codecs.ts): `sessionItem.encode`.

export const key = (scope: SessionScope): Item => ({ pk: keys.session(scope), sk: keys.sessionSort });

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
  };
}

export function decode(item: Item): SessionMeta {
  return {
    sessionId: String(item.sessionId),
    agentId: stringOrNull(item.agentId),
    userId: stringOrNull(item.userId),
    metadata: parseJsonText(item.metadata) as JsonObject | null,
    createdAt: String(item.createdAt),
    updatedAt: String(item.updatedAt),
  };
}
